"""The four gate states, their exit codes, and the finding every check produces.

A finding is the unit of "something blocks": validators return them, the decision turns them
into the blockers of result.json. It carries its own state so that every blocker is listed under
its state whatever the overall outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class State(StrEnum):
    PASSED = "passed"
    QUALITY_FAILED = "quality_failed"
    EVALUATION_INCOMPLETE = "evaluation_incomplete"
    REVIEW_REQUIRED = "review_required"

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES[self]

    @property
    def conclusion(self) -> str:
        """The GitHub check-run conclusion for this state."""
        return _CONCLUSIONS[self]

    @property
    def rank(self) -> int:
        """Higher wins: quality_failed > evaluation_incomplete > review_required > passed."""
        return _RANK[self]


_EXIT_CODES = {
    State.PASSED: 0,
    State.QUALITY_FAILED: 1,
    State.EVALUATION_INCOMPLETE: 3,
    State.REVIEW_REQUIRED: 4,
}
_CONCLUSIONS = {
    State.PASSED: "success",
    State.QUALITY_FAILED: "failure",
    State.EVALUATION_INCOMPLETE: "cancelled",
    State.REVIEW_REQUIRED: "action_required",
}
_RANK = {
    State.PASSED: 0,
    State.REVIEW_REQUIRED: 1,
    State.EVALUATION_INCOMPLETE: 2,
    State.QUALITY_FAILED: 3,
}

USAGE_ERROR_EXIT = 2
_STATE_OF_EXIT = {code: state for state, code in _EXIT_CODES.items()}

# Blocker kinds of evaluation_incomplete: an output other than result.json could not be
# written; a control errored, could not be read, or was not run.
OUTPUT_WRITE_FAILED = "output_write_failed"
CONTROL_ERROR = "control_error"

# Finding kinds that stop the run before any model call, with `missing_evidence`
# under `missing_evidence: block` (its quality_failed form; routed to review it blocks nothing).
DETERMINISTIC_BLOCKERS = frozenset(
    {"input_contract", "unknown_slice", "partition_leak", "control_missing", "held_out_spent"}
)

# Findings known before any model call that do not stop it: the lane runs and reports its
# verdict, but a judge that was never measured, measured unfit or too long ago cannot make it pass.
JUDGE_CALIBRATION_BLOCKERS = frozenset({"judge_uncalibrated", "judge_unfit", "calibration_expired"})

# The judge's model retires (gate/model/retirement.py): a release lane within
# `evaluator.retirement_blocks_within_days` of its shutdown date (review_required, owner evaluator); a
# run on or after that date, or one the provider answered 404 model_not_found, judged nothing with it
# (evaluation_incomplete): one blocker names the retirement and every case it left unjudged.
JUDGE_RETIRING = "judge_retiring"
JUDGE_RETIRED = "judge_retired"

# Findings that name cases not judged yet, for a reason of their own (`evaluation_incomplete`):
# a shard missing from a merge; a provider batch still running (`batch_pending`) or one that
# failed before answering (`batch_failed`). The `unrun_cases` blocker does not list them again.
# A product lane's case with no line in --responses is one more of them.
MISSING_RESPONSE = "missing_response"
NOT_JUDGED_YET = frozenset({"missing_shard", "batch_pending", "batch_failed", MISSING_RESPONSE})

# A product lane's verdicts, per slice (gate/decide/product/verdict.py): the judge-corrected failure rate is
# above its limit (quality_failed, owner product), or the limit lies inside its interval
# (review_required); `regressed`: significantly more answers turned pass -> fail than back since the
# base run (quality_failed, with `fail_on_regression`). A slice whose judge cannot tell a failing
# answer from a good one is `judge_unfit` (review_required), the calibration's kind.
# `regression_unchecked`: the lane sets `fail_on_regression` but no slice could be compared with a
# base run (none given, or one of another lane, policy or set of questions): review_required.
FAILURE_RATE_EXCEEDED = "failure_rate_exceeded"
FAILURE_RATE_INCONCLUSIVE = "failure_rate_inconclusive"
REGRESSED = "regressed"
REGRESSION_UNCHECKED = "regression_unchecked"
# People's audit of a product run (gate/decide/product/audit.py): a zero-tolerance slice (`max_failures`) with more
# failures people confirmed (quality_failed, owner product), or with answers the judge failed that
# people have not labelled yet (review_required); a judge whose calibration does not describe it on
# this run's answers (review_required, owner evaluator).
FAILURE_CONFIRMED = "failure_confirmed"
AUDIT_REQUIRED = "audit_required"
CALIBRATION_NOT_TRANSFERABLE = "calibration_not_transferable"
# A slice whose audit labels people agree on too little (Krippendorff's alpha below `review.min_alpha`):
# the audit does not decide it (review_required, owner evaluator).
LABELS_DISAGREE = "labels_disagree"
PRODUCT_BLOCKERS = frozenset(
    {
        FAILURE_RATE_EXCEEDED,
        FAILURE_RATE_INCONCLUSIVE,
        REGRESSED,
        REGRESSION_UNCHECKED,
        MISSING_RESPONSE,
        FAILURE_CONFIRMED,
        AUDIT_REQUIRED,
        CALIBRATION_NOT_TRANSFERABLE,
        LABELS_DISAGREE,
    }
)


def exit_state(run_exit: int | None, result_state: State | None) -> tuple[State | None, int]:
    """The one exit decision: the most severe of how the run ended and what its result says.

    `run_exit`: the process's code (None when there was no process, e.g. `gate publish`);
    `result_state`: the state result.json holds (None without one). A usage error without a
    result stays exit 2 (no state); any code that is not a state's (a crash, a signal's 128+N)
    counts as evaluation_incomplete. A result never lowers a run's exit, nor a run its result's.
    """
    if result_state is None and run_exit in (None, USAGE_ERROR_EXIT):
        return None, USAGE_ERROR_EXIT
    states = [] if result_state is None else [result_state]
    if run_exit is not None:
        states.append(_STATE_OF_EXIT.get(run_exit, State.EVALUATION_INCOMPLETE))
    state = overall_state(states)
    return state, state.exit_code


def overall_state(states: list[State]) -> State:
    """The state that wins under the states' precedence; `passed` when nothing blocks."""
    return max(states, key=lambda s: s.rank, default=State.PASSED)


@dataclass(frozen=True)
class Finding:
    """One blocker: which state it pushes to, what kind it is, which cases it concerns."""

    state: State
    kind: str
    message: str
    case_ids: tuple[str, ...] = ()
    slice: str | None = None
    # Where in the inputs it was found ("cases/x.jsonl:12"); shown to people, not part of result.json's contract.
    location: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "state": self.state.value,
            "kind": self.kind,
            "slice": self.slice,
            "case_ids": list(self.case_ids),
            "message": self.message,
        }
        if self.location:
            out["location"] = self.location
        if self.extra:
            out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        known = {"state", "kind", "slice", "case_ids", "message", "location"}
        return cls(
            state=State(data["state"]),
            kind=str(data["kind"]),
            message=str(data.get("message", "")),
            case_ids=tuple(data.get("case_ids") or ()),
            slice=data.get("slice"),
            location=data.get("location"),
            extra={k: v for k, v in data.items() if k not in known},
        )


def blocking_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The deterministic findings that stop the run before any model call: no case is judged.

    The one definition: `gate run` (and its dry run), `gate decide` and `gate merge` all ask it.
    """
    return [
        f
        for f in findings
        if f.kind in DETERMINISTIC_BLOCKERS or (f.kind == "missing_evidence" and f.state is State.QUALITY_FAILED)
    ]
