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
    # The judge model's shutdown date (or "none") and who said it (gate/model/retirement.py); "" (and not
    # written) when nobody says.
    judge_shutdown_date: str = ""
    judge_shutdown_source: str = ""

    def to_dict(self) -> dict[str, str]:
        out = dict(self.__dict__)
        for optional in ("responses_sha256", "judge_shutdown_date", "judge_shutdown_source"):
            if not out[optional]:
                del out[optional]
        return out
