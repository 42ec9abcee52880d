"""A run's lineage: the hashes and versions result.json names, computed once per run.

`gate.model.result.RunLineage` is the same data as read back from a file (older files lack
fields); this is what a run computes, with every field known.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lineage:
    policy_sha256: str
    dataset_sha256: str
    prompt_sha256: str
    metric_version: str
    evaluator_model: str
    ragas_version: str
    gate_version: str
    metric_definition_sha256: str = ""  # gate.model.fingerprint.metric_definition_sha256
    config_fingerprint: str = ""  # gate.model.fingerprint of the judge this policy makes now
    dataset_card_sha256: str = ""  # gate.model.dataset_card; "" when the policy names no card

    def to_dict(self) -> dict[str, str]:
        return dict(self.__dict__)
