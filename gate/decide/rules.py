"""The decision's rules: small pure functions from the evidence to the blockers it raises.

Each rule reads a frozen `Evidence` (gate/decide/evidence.py) and returns its findings; `RULES` runs them
in the order their blockers appear in result.json. Overrides are not a rule: `gate.decide.core`
applies them once, to everything the rules found (gate/model/overrides.py is the one place that waives).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from gate.decide.evidence import CaseOutcome, Evidence
from gate.decide.retirement import judge_retired, retired_case_ids
from gate.model.states import CONTROL_ERROR, NOT_JUDGED_YET, Finding, State
from gate.model.wording import agree, plural

Rule = Callable[[Evidence], tuple[Finding, ...]]


def _finding(
    state: State, kind: str, message: str, ids: Iterable[str], slice_: str | None = None, **extra: Any
) -> Finding:
    return Finding(state, kind, message, case_ids=tuple(ids), slice=slice_, extra=extra)


# --- quality: controls, pairs, slice limits ------------------------------------------------------


def control_failures(ev: Evidence) -> list[dict[str, Any]]:
    """Controls whose verdict differs from their label (or that were judged when they must be withheld).

    Controls are evaluator checks, not slice tallies.
    """
    failures: list[dict[str, Any]] = []
    for o in ev.outcomes:
        role = o.case.expected_control_role
        if role is None:
            continue
        if role == "missing_evidence":
            if o.called_model:
                failures.append(
                    {"case_id": o.case.case_id, "role": role, "expected": "withheld", "got": o.verdict or "model call"}
                )
            continue
        if o.bucket == "completed" and o.verdict != o.case.human_label:
            failures.append({"case_id": o.case.case_id, "role": role, "expected": o.case.human_label, "got": o.verdict})
    return failures


def controls(ev: Evidence) -> tuple[Finding, ...]:
    failures = control_failures(ev)
    if not failures:
        return ()
    detail = "; ".join(f"{f['case_id']} ({f['role']}): expected {f['expected']}, got {f['got']}" for f in failures)
    return (
        _finding(
            State.QUALITY_FAILED,
            "control_failed",
            f"controls did not separate, so no other verdict counts: {detail}",
            [f["case_id"] for f in failures],
        ),
    )


def unjudged_controls(ev: Evidence) -> list[CaseOutcome]:
    """Controls with no verdict to hold against their label: errored (an evaluator error, an answer
    that could not be read), withheld or not run. A control that did not separate is never ok."""
    return [
        o
        for o in ev.outcomes
        if o.case.expected_control_role not in (None, "missing_evidence") and o.bucket != "completed"
    ]


def control_errors(ev: Evidence) -> tuple[Finding, ...]:
    """Blocker `control_error` for each unjudged control no other blocker explains (no key,
    stale records, a missing shard, deterministic checks that stopped the run)."""
    ids = _control_error_ids(ev)
    if not ids:
        return ()
    detail = "; ".join(
        f"{o.case.case_id} ({o.case.expected_control_role}): "
        + (f"{o.error_kind or 'error'}" if o.bucket == "errored" else o.bucket)
        for o in ev.outcomes
        if o.case.case_id in ids
    )
    message = (
        f"{plural(len(ids), 'control')} {agree(len(ids), 'has', 'have')} no verdict, so the controls did not separate and no other verdict counts: "
        f"{detail}; an evaluator error on a control is never absorbed by max_evaluator_errors; fix: see why each "
        "failed (the case rows' error_message), then run again"
    )
    return (_finding(State.EVALUATION_INCOMPLETE, CONTROL_ERROR, message, ids),)


def _control_error_ids(ev: Evidence) -> list[str]:
    if ev.blocked:
        return []
    named = {*_keyless(ev), *_stale_unrun(ev), *_explained(ev), *retired_case_ids(ev)}
    # A control left unrun because another control (or a pair) failed first is `unrun_cases`' to name.
    stopped = bool(control_failures(ev) or pairs(ev))
    return [
        o.case.case_id
        for o in unjudged_controls(ev)
        # not_needed: never sent once a control failed or errored (gate.decide.control_stop); no error of its own
        if o.case.case_id not in named and not (stopped and o.bucket == "unrun") and o.bucket != "not_needed"
    ]


def pairs(ev: Evidence) -> tuple[Finding, ...]:
    """Invariant pairs' verdicts must match, flip pairs' must differ (pairs judged in full only)."""
    members_of: dict[str, list[CaseOutcome]] = defaultdict(list)
    for o in ev.outcomes:
        if o.case.pair is not None:
            members_of[o.case.pair.id].append(o)
    found: list[Finding] = []
    for pair_id, members in sorted(members_of.items()):
        if len(members) != 2 or any(m.bucket != "completed" or m.verdict is None for m in members):
            continue
        a, b = members
        kind = a.case.pair.kind if a.case.pair else "invariant"
        same = a.verdict == b.verdict
        if (kind == "invariant" and not same) or (kind == "flip" and same):
            want = "the same verdict" if kind == "invariant" else "different verdicts"
            message = (
                f"{kind} pair {pair_id}: {a.case.case_id} got {a.verdict} and {b.case.case_id} got {b.verdict}; "
                f"the pair must get {want}"
            )
            found.append(_finding(State.QUALITY_FAILED, "pair_violated", message, [a.case.case_id, b.case.case_id]))
    return tuple(found)


_LIMIT_CHECKS = (
    ("false_pass", "false_pass_limit", "max_false_passes", "the judge passed answers people failed"),
    ("false_fail", "false_fail_limit", "max_false_fails", "the judge failed answers people passed"),
)


def slice_limits(ev: Evidence) -> tuple[Finding, ...]:
    """A slice with more false passes (or false fails) than its limit; controls never count."""
    found: list[Finding] = []
    for name, limit in sorted(ev.policy.slices.items()):
        for outcome, limit_kind, field_name, meaning in _LIMIT_CHECKS:
            allowed: int | None = getattr(limit, field_name)
            if allowed is None:
                continue
            ids = [
                o.case.case_id
                for o in ev.outcomes
                if not o.case.is_control and o.case.slice == name and o.outcome == outcome
            ]
            if len(ids) > allowed:
                label = outcome.replace("_", " ")  # "false pass" or "false fail"
                if len(ids) != 1:
                    label += "es" if label.endswith("pass") else "s"
                msg = f"slice {name}: {len(ids)} {label}, limit {allowed}: {meaning}"
                # `limit`: an override waiving some of these cases blocks nothing once the rest fit.
                found.append(_finding(State.QUALITY_FAILED, limit_kind, msg, ids, name, limit=allowed))
    return tuple(found)


# --- review routes: a person decides -------------------------------------------------------------


def unstable_verdicts(ev: Evidence) -> tuple[Finding, ...]:
    unstable = [o.case.case_id for o in ev.outcomes if o.unstable]
    if not unstable:
        return ()
    message = (
        f"the judge disagreed with itself (across {plural(ev.plan.repeats, 'repeat')}, or between records of one "
        f"judgment) on {plural(len(unstable), 'case')}; a person decides"
    )
    return (_finding(State.REVIEW_REQUIRED, "unstable_verdict", message, unstable),)


def abstentions(ev: Evidence) -> tuple[Finding, ...]:
    abstained = [o.case.case_id for o in ev.outcomes if o.verdict == "review_required" and not o.unstable]
    if not abstained:
        return ()
    message = "the judge abstained (review_required) on these cases"
    return (_finding(State.REVIEW_REQUIRED, "abstention", message, abstained),)


def label_conflicts(ev: Evidence) -> tuple[Finding, ...]:
    conflicts = [o.case.case_id for o in ev.outcomes if o.case.human_label == "review_required"]
    if not conflicts:
        return ()
    message = "reviewers did not settle the human label (review_required); adjudicate before they can gate"
    return (_finding(State.REVIEW_REQUIRED, "label_conflict", message, conflicts),)


# --- completeness: what was not judged, and why ---------------------------------------------------


def evaluator_errors(ev: Evidence) -> tuple[Finding, ...]:
    """More errors than `max_evaluator_errors` allows; a control's never counts (it is `control_error`),
    nor a refusal of a retired judge's model (`judge_retired` names them)."""
    retired = retired_case_ids(ev)
    errored = [
        o for o in ev.outcomes if o.bucket == "errored" and not o.case.is_control and o.case.case_id not in retired
    ]
    allowed = ev.policy.limits.max_evaluator_errors
    if len(errored) <= allowed:
        return ()
    kinds = Counter(o.error_kind or "unknown" for o in errored)
    message = (
        f"{plural(len(errored), 'evaluator error')}, limit {allowed} "
        f"({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items()))}); errors are neither pass nor fail"
    )
    return (_finding(State.EVALUATION_INCOMPLETE, "evaluator_errors", message, [o.case.case_id for o in errored]),)


def _unrun(ev: Evidence) -> list[CaseOutcome]:
    return [o for o in ev.outcomes if o.bucket == "unrun"]


def _explained(ev: Evidence) -> set[str]:
    """Cases a finding already names as not judged (a shard missing from a merge, a provider batch not
    collected yet or that failed): not listed twice."""
    return {i for f in ev.findings if f.kind in NOT_JUDGED_YET for i in f.case_ids}


def _stale_unrun(ev: Evidence) -> list[str]:
    explained = _explained(ev)
    return [
        o.case.case_id
        for o in _unrun(ev)
        if o.case.case_id in ev.stale and not o.error_kind and o.case.case_id not in explained
    ]


def _keyless(ev: Evidence) -> list[str]:
    """Cases never sent because the evaluator's API key is missing."""
    return [o.case.case_id for o in _unrun(ev) if o.error_kind == "auth" and not o.called_model]


def _unnamed_unrun(ev: Evidence) -> list[CaseOutcome]:
    """Unrun cases that no credentials, stale-records, missing-shard or retired-judge finding names already."""
    named = {*_keyless(ev), *_stale_unrun(ev), *_explained(ev), *retired_case_ids(ev)}
    return [o for o in _unrun(ev) if o.case.case_id not in named]


def _budget_hit(ev: Evidence) -> bool:
    """The boundary left cases unjudged. A budget stop that --resume has since completed is no blocker."""
    unrun = {o.case.case_id for o in _unrun(ev)}
    return any(o.error_kind == "budget" for o in _unrun(ev)) or any(
        r.error_kind == "budget" and r.case_id in unrun for r in ev.fresh
    )


def stale_records(ev: Evidence) -> tuple[Finding, ...]:
    stale_unrun = _stale_unrun(ev)
    if not stale_unrun:
        return ()
    message = (
        f"{plural(len(stale_unrun), 'case')} {agree(len(stale_unrun), 'has', 'have')} records only from another configuration ({ev.stale[stale_unrun[0]]}); they "
        "are not evidence for this policy; fix: run `gate run` again (the cache serves whatever still matches)"
    )
    return (_finding(State.EVALUATION_INCOMPLETE, "stale_records", message, stale_unrun),)


def no_cases(ev: Evidence) -> tuple[Finding, ...]:
    if any(not o.case.is_control for o in ev.outcomes):
        return ()
    lane = ev.policy.lanes[ev.plan.lane]
    message = (
        f"lane {ev.plan.lane} selects no case outside the controls (partitions {', '.join(lane.partitions)}): a gate "
        "with nothing to judge cannot pass; fix: add cases to those partitions or correct the lane"
    )
    return (_finding(State.EVALUATION_INCOMPLETE, "no_cases", message, []),)


def key_fix(env: str) -> str:
    """How to provide the judge's key, on a laptop and in GitHub Actions."""
    return (
        f"on your machine, export {env}=...; in GitHub Actions, set that secret and pass it in the step's "
        f"env ({env}: ${{{{ secrets.{env} }}}})"
    )


def missing_credentials(ev: Evidence) -> tuple[Finding, ...]:
    no_key = _keyless(ev)
    if not no_key:
        return ()
    message = f"no API key in ${ev.policy.evaluator.api_key_env}, so no case was judged; fix: {key_fix(ev.policy.evaluator.api_key_env)}"
    return (_finding(State.EVALUATION_INCOMPLETE, "missing_credentials", message, no_key),)


def budget_exhausted(ev: Evidence) -> tuple[Finding, ...]:
    """The cost boundary stopped scheduling: every case not judged (and not named elsewhere) is listed."""
    if not _budget_hit(ev):
        return ()
    not_run = [o.case.case_id for o in _unnamed_unrun(ev)]
    stopped = next((r for r in ev.fresh if r.error_kind == "budget"), None)
    detail = stopped.error_message if stopped is not None and stopped.error_message else None
    first = f"; the first that did not fit: {stopped.case_id}" if stopped is not None else ""
    message = (
        f"the cost boundary ({ev.boundary:g}) stopped scheduling; {plural(len(not_run), 'case')} {agree(len(not_run), 'was', 'were')} not judged{first}"
        + (f" ({detail})" if detail else "")
    )
    return (_finding(State.EVALUATION_INCOMPLETE, "budget_exhausted", message, not_run),)


def unrun_cases(ev: Evidence) -> tuple[Finding, ...]:
    """Eligible cases without a complete judgment that no other finding explains (the budget does, when hit)."""
    rest = [] if _budget_hit(ev) else _unnamed_unrun(ev)
    if not rest:
        return ()
    why = "deterministic checks blocked, so no model call was made" if ev.blocked else None
    if why is None and (control_failures(ev) or pairs(ev)):
        why = "not scheduled after a control or pair failed"
    if why is None and any(o.error_kind == "cancelled" for o in rest):
        why = "the run was interrupted before they were judged"
    have = agree(len(rest), "has", "have")
    message = f"{plural(len(rest), 'eligible case')} {have} no complete judgment" + (f": {why}" if why else "")
    return (_finding(State.EVALUATION_INCOMPLETE, "unrun_cases", message, [o.case.case_id for o in rest]),)


RULES: tuple[Rule, ...] = (
    controls,
    control_errors,
    pairs,
    slice_limits,
    unstable_verdicts,
    abstentions,
    label_conflicts,
    evaluator_errors,
    stale_records,
    no_cases,
    judge_retired,
    missing_credentials,
    budget_exhausted,
    unrun_cases,
)


def apply_rules(ev: Evidence) -> list[Finding]:
    """Every rule's findings, in the order of `RULES`."""
    return [f for rule in RULES for f in rule(ev)]
