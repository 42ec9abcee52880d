"""Who fixes a blocker: each blocker kind belongs to one owner group, the policy names the owners.

`owners: {product: "@app-team", gold_set: "@labelers", ...}` in the policy; a blocker is routed to
the owner of its kind's group (`KIND_GROUP`), in result.json (`owner_group`, `owner`), the report,
the comment and the terminal. The mapping says where the fix most often lies, not who is to blame:
a false pass on a frozen, labelled answer is the judge's or the label's (never the product's: the
answer did not change), a product lane's failure rate the product's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gate.model.result import Blocker

OWNER_GROUPS: tuple[str, ...] = ("product", "gold_set", "rubric", "evaluator", "provider", "gate_policy")

KIND_GROUP: dict[str, str] = {
    # A false pass or false fail on a frozen, labelled answer: the answer did not change, so the
    # judge disagrees with people; the judge is wrong, or the label is (the evaluator group checks).
    "false_pass_limit": "evaluator",
    "false_fail_limit": "evaluator",
    "check_failed": "product",
    # A product lane (its own answers, the calibrated judge): the rate, its interval, the base, the responses.
    "failure_rate_exceeded": "product",
    "failure_rate_inconclusive": "product",
    "regressed": "product",
    "regression_unchecked": "product",
    "missing_response": "product",
    "failure_confirmed": "product",
    "audit_required": "product",
    # The labelled cases, their evidence, partitions and card: the people who keep the gold set.
    "input_contract": "gold_set",
    "unknown_slice": "gold_set",
    "partition_leak": "gold_set",
    "control_missing": "gold_set",
    "missing_evidence": "gold_set",
    "label_conflict": "gold_set",
    # The criterion cannot decide the case: whoever owns the rubric (the prompt's definition).
    "abstention": "rubric",
    "pair_violated": "rubric",
    # The judge misbehaves on cases with known answers.
    "control_failed": "evaluator",
    "unstable_verdict": "evaluator",
    "judge_uncalibrated": "evaluator",
    "judge_unfit": "evaluator",
    "calibration_expired": "evaluator",
    "calibration_not_transferable": "evaluator",
    "labels_disagree": "evaluator",  # people's audit labels of a product slice: the rubric's boundary is unclear
    # The judge's model retires: whoever keeps the judge moves it to a successor.
    "judge_retiring": "evaluator",
    "judge_retired": "evaluator",
    # The model provider did not deliver judgments.
    "evaluator_errors": "provider",
    "missing_credentials": "provider",
    "batch_pending": "provider",
    "batch_failed": "provider",
    # The gate's own configuration: limits, lanes, overrides, certification, shards, checks' code.
    "budget_exhausted": "gate_policy",
    "unrun_cases": "gate_policy",
    "stale_records": "gate_policy",
    "no_cases": "gate_policy",
    "expired_override": "gate_policy",
    "held_out_spent": "gate_policy",
    "missing_shard": "gate_policy",
    "check_error": "gate_policy",
    "internal_error": "gate_policy",
    "worker_records_unreadable": "gate_policy",
}


def route(blocker: Mapping[str, Any], owners: Mapping[str, str | None]) -> dict[str, Any]:
    """The blocker with `owner_group` and `owner` (None when the policy names nobody for the group)."""
    group = KIND_GROUP.get(str(blocker.get("kind")))
    return {**blocker, "owner_group": group, "owner": owners.get(group) if group else None}


def owner_text(blocker: Blocker) -> str | None:
    """ "@labelers (gold set)" for a routed blocker, "unassigned (gold set)" without an owner; None if not routed."""
    if not blocker.routed:
        return None
    group = (blocker.owner_group or "unknown").replace("_", " ")
    return f"{blocker.owner or 'unassigned'} ({group})"
