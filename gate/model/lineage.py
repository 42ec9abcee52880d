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
    responses_sha256: str = ""  # a product lane's --responses file; "" (and not written) on other lanes

    def to_dict(self) -> dict[str, str]:
        out = dict(self.__dict__)
        if not self.responses_sha256:
            del out["responses_sha256"]
        return out
