"""Overrides: which blockers a reviewed override may waive, and the one function
that applies them to the finished blockers of a decision.

An override waives a quality blocker only (a limit, a pair, a label conflict, an abstention, an
unstable verdict, missing evidence routed to review), and only for the case ids it names. It can
never waive evaluator errors, unrun cases, the budget, credentials, a failed control or a validator
blocker: those say the evidence is incomplete or the gate cannot be trusted, which no approval
changes. Anything else in an override is a policy error (exit 2). An expired override waives
nothing and is itself a `review_required` blocker.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from gate.model.states import Finding, State
from gate.model.strict import Strict
from gate.model.wording import plural


class Override(Strict):
    id: str = Field(min_length=1)
    # The cases it waives; or, for a product lane's slice verdict, the slice (`slice: NAME`): one of the two.
    case_ids: list[str] = Field(default_factory=list)
    slice: str | None = Field(default=None, min_length=1)
    blocker: str = Field(min_length=1)
    approver: str = Field(min_length=1)
    reason: str = Field(min_length=1)
    evidence: str = Field(min_length=1)
    expires: dt.date
    follow_up: str = Field(min_length=1)

    @model_validator(mode="after")
    def _cases_or_slice(self) -> Override:
        if bool(self.case_ids) == (self.slice is not None):
            raise ValueError(
                f"override {self.id} must name either `case_ids` (the cases it waives) or `slice` (a product lane's "
                "slice whose verdict a person decides), not both and not neither; fix: keep one"
            )
        return self

    @property
    def scope(self) -> str:
        """What it waives, in words: the case ids, or the slice."""
        return f"slice {self.slice}" if self.slice is not None else ", ".join(self.case_ids)


WAIVABLE: tuple[str, ...] = (
    "false_pass_limit",
    "false_fail_limit",
    "pair_violated",
    "label_conflict",
    "abstention",
    "unstable_verdict",
    "missing_evidence",
)
# Short names people write, for the blocker kinds they waive.
ALIASES = {"false_pass": "false_pass_limit", "false_fail": "false_fail_limit"}
# Blocker kinds that exist but that no override may waive (named as such in the error).
NOT_WAIVABLE = frozenset(
    {
        "input_contract",
        "unknown_slice",
        "partition_leak",
        "control_missing",
        "control_failed",
        "evaluator_errors",
        "budget_exhausted",
        "missing_credentials",
        "unrun_cases",
        "stale_records",
        "no_cases",
        "expired_override",
        "internal_error",
        "worker_records_unreadable",
        "held_out_spent",
        "missing_shard",
        "batch_pending",
        "batch_failed",
        "check_failed",
        "check_error",
        "judge_uncalibrated",
        "judge_unfit",
        "calibration_expired",
        # A retiring judge is moved (or the reviewed policy's `retirement_blocks_within_days` changed), not waived.
        "judge_retiring",
        "judge_retired",
        # A product lane's statistical verdicts concern a slice's rate, not cases an override could name.
        "failure_rate_exceeded",
        "failure_rate_inconclusive",
        "regressed",
        "failure_confirmed",
        "audit_required",
        "calibration_not_transferable",
        "labels_disagree",
        "regression_unchecked",
        "missing_response",
    }
)
_FIX = f"fix: name one of {', '.join(WAIVABLE)} (or remove the override)"
# What a person may decide for a product lane's slice (`slice: NAME`): a verdict the evidence left open. Never a
# verdict the evidence settled against the slice: failure_rate_exceeded, failure_confirmed, regressed.
SLICE_WAIVABLE: tuple[str, ...] = ("failure_rate_inconclusive", "judge_unfit", "audit_required")
SLICE_NEVER = ("failure_rate_exceeded", "failure_confirmed", "regressed")
_SLICE_FIX = f"fix: name one of {', '.join(SLICE_WAIVABLE)} (or remove the override)"


def kind_of(o: Override) -> str:
    return ALIASES.get(o.blocker, o.blocker)


def kind_problems(overrides: Sequence[Override], missing_evidence: str) -> list[str]:
    """What is wrong with the overrides' `blocker` fields (checked when the policy loads)."""
    problems: list[str] = []
    for i, o in enumerate(overrides):
        where = f"`overrides.{i}.blocker` (override {o.id})"
        kind = kind_of(o)
        if o.slice is not None:
            if kind in SLICE_NEVER:
                problems.append(
                    f"{where}: {o.blocker} cannot be waived for a slice: the evidence decided the slice fails, which no "
                    f"approval changes (a person may decide only what the evidence left open); {_SLICE_FIX}"
                )
            elif kind not in SLICE_WAIVABLE:
                problems.append(
                    f"{where}: {o.blocker} is not a slice's verdict an override with `slice` may waive; {_SLICE_FIX}"
                )
            continue
        if kind in SLICE_WAIVABLE:
            problems.append(
                f"{where}: {o.blocker} is a product slice's verdict, waived for a slice, not for cases; fix: replace "
                "`case_ids` with `slice: NAME`"
            )
            continue
        if kind in NOT_WAIVABLE:
            problems.append(
                f"{where}: {o.blocker} cannot be waived: an override waives quality blockers only, never "
                f"evaluator errors, unrun cases, budget, credentials, control failures or validator blockers; {_FIX}"
            )
        elif kind not in WAIVABLE:
            problems.append(f"{where}: unknown blocker kind {o.blocker!r}; {_FIX}")
        elif kind == "missing_evidence" and missing_evidence != "review":
            problems.append(
                f"{where}: under `missing_evidence: block` missing evidence is a quality_failed input problem that "
                "no override waives; fix: add the reference, or set `missing_evidence: review` to route it to a person"
            )
    return problems


def case_problems(overrides: Sequence[Override], known: set[str]) -> list[str]:
    """The overrides' case ids the dataset does not have, one problem per override: a typo would
    waive nothing, silently."""
    problems = []
    for i, o in enumerate(overrides):
        unknown = [c for c in o.case_ids if c not in known]
        if unknown:
            problems.append(
                f"`overrides.{i}.case_ids` (override {o.id}): {', '.join(unknown)} "
                f"{'is' if len(unknown) == 1 else 'are'} not a case of the dataset; fix: correct the id or remove it"
            )
    return problems


def slice_problems(overrides: Sequence[Override], slices: set[str]) -> list[str]:
    """The overrides' slices the policy does not define (a typo would waive nothing, silently)."""
    return [
        f"`overrides.{i}.slice` (override {o.id}): {o.slice} is not a slice of the policy; fix: correct it to one of "
        f"{', '.join(sorted(slices))}"
        for i, o in enumerate(overrides)
        if o.slice is not None and o.slice not in slices
    ]


def is_waivable(f: Finding) -> bool:
    if f.kind == "missing_evidence":
        return f.state is State.REVIEW_REQUIRED  # routed to review; `block` is an input problem
    return f.kind in WAIVABLE


def waived_case_ids(overrides: Iterable[Override], kind: str, today: dt.date) -> set[str]:
    """Case ids an active override waives for `kind` (what `gate run` consults mid-run)."""
    return {c for o in overrides if o.expires >= today and kind_of(o) == kind for c in o.case_ids}


@dataclass(frozen=True)
class Applied:
    blockers: list[Finding]
    waived: list[dict[str, Any]]


def apply_overrides(
    blockers: Sequence[Finding],
    overrides: Sequence[Override],
    today: dt.date,
    slice_verdicts: Sequence[Finding] = (),
) -> Applied:
    """The blockers left once the active overrides waive what they name, plus the waivers made.

    A limit blocker (`extra["limit"]`) still blocks while more cases than the limit count; any
    other blocker while one of its cases is not waived. Expired overrides add `expired_override`.
    An override with `slice` reaches only `slice_verdicts`, the product decision's own findings
    (the very objects among `blockers`): never the calibration requirement's `judge_unfit` of the
    same name, nor any metric lane's finding.
    """
    active = [o for o in overrides if o.expires >= today]
    own = {id(f) for f in slice_verdicts}
    kept: list[Finding] = []
    waived: list[dict[str, Any]] = []
    for f in blockers:
        by_slice = [o for o in active if o.slice is not None and o.slice == f.slice and kind_of(o) == f.kind]
        if by_slice and f.kind in SLICE_WAIVABLE and id(f) in own:
            waived += [_waiver(o, f.kind, list(f.case_ids)) for o in by_slice]
            continue
        matching = [o for o in active if o.slice is None and kind_of(o) == f.kind and set(o.case_ids) & set(f.case_ids)]
        if not matching or not is_waivable(f):
            kept.append(f)
            continue
        off = {c for o in matching for c in o.case_ids} & set(f.case_ids)
        waived += [_waiver(o, f.kind, sorted(set(o.case_ids) & off)) for o in matching]
        counted = [c for c in f.case_ids if c not in off]
        limit = f.extra.get("limit")
        still_blocks = len(counted) > limit if isinstance(limit, int) else bool(counted)
        if still_blocks:
            by = ", ".join(o.id for o in matching)
            note = f" ({plural(len(off), 'case')} waived by {by}; {len(counted)} still count)"
            kept.append(dataclasses.replace(f, case_ids=tuple(counted), message=f.message + note))
    for o in overrides:
        if o.expires < today:
            kept.append(
                Finding(
                    State.REVIEW_REQUIRED,
                    "expired_override",
                    f"override {o.id} ({o.blocker} for {o.scope}, approved by {o.approver}) expired "
                    f"on {o.expires.isoformat()} and waives nothing; fix: renew it with a new review or remove it",
                    case_ids=tuple(o.case_ids),
                )
            )
    return Applied(kept, waived)


def _waiver(o: Override, kind: str, case_ids: list[str]) -> dict[str, Any]:
    return {
        "override": o.id,
        "kind": kind,
        "case_ids": case_ids,
        **({"slice": o.slice} if o.slice is not None else {}),
        "approver": o.approver,
        "reason": o.reason,
        "evidence": o.evidence,
        "expires": o.expires.isoformat(),
        "follow_up": o.follow_up,
    }
