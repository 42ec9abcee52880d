"""What `gate run --dry-run` prints: the plan, its estimated cost against the boundary, the order,
and the state the run already has before any call.

Its decision is not made here: `gate run` assembles it from the run's own evidence with no records
(gate.commands.assemble), so the dry run's blockers are the run's before any call; this prints them.
Two of them say only that nothing is judged yet (`UNTIL_JUDGED`): the run's judgments settle those.
Every other one holds whatever the judge says, so the run can end no better than their state: the
dry run exits with that state's code (gate.model.states.exit_state), as the run would at best."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO

from gate.judge.cost import boundary, judgment_typical, judgment_upper_bound, max_cost_notes
from gate.measure.trend_lane import trend_cases
from gate.model.escape import log_text
from gate.model.policy import LoadedPolicy
from gate.model.states import CONTROL_ERROR, Finding, State, blocking_findings, overall_state
from gate.model.trend_rubric import load_trend
from gate.model.wording import plural
from gate.plan.selection import Plan
from gate.validate.context import describe_locations

# What a decision over no judgment says only because nothing is judged yet (its cases unrun, its
# controls without a verdict): the run's judgments settle both.
UNTIL_JUDGED = frozenset({"unrun_cases", CONTROL_ERROR})


def before_any_call(blockers: Sequence[Finding]) -> list[Finding]:
    """The blockers of the dry run's decision that the run has whatever the judge says."""
    return [f for f in blockers if f.kind not in UNTIL_JUDGED]


def state_before_any_call(blockers: Sequence[Finding]) -> State:
    """The best state the run can still end in: that of the blockers it has before any call."""
    return overall_state([f.state for f in before_any_call(blockers)])


def outcome_line(blockers: Sequence[Finding], code: int) -> str:
    """The dry run's last line: what the run already is before any call, and the exit code."""
    before = before_any_call(blockers)
    state = state_before_any_call(blockers)
    if state is State.PASSED:
        return f"before any call: nothing holds the run back; the judge's verdicts decide it (exit {code})\n"
    kinds = ", ".join(dict.fromkeys(f.kind for f in before if f.state is state))
    return (
        f"before any call: {state.value} ({kinds}); whatever the judge says the run can end no better (exit {code})\n"
    )


def print_plan(
    loaded: LoadedPolicy,
    plan: Plan,
    blockers: Sequence[Finding],  # the decision's, before any call
    max_cost: float | None,
    out: IO[str],
    has_key: bool = True,
) -> None:
    ev = loaded.policy.evaluator
    cur = ev.price.currency if ev.price else "USD"
    scheduled = plan.scheduled
    # "At most" is the worst case: every judgment uses all of its `max_attempts` requests.
    per_judgment = plan.repeats * ev.retries.max_attempts
    upper = sum(judgment_upper_bound(loaded, c) for c in scheduled) * per_judgment
    typical = sum(judgment_typical(loaded, c) for c in scheduled) * plan.repeats
    limit = boundary(loaded, max_cost)
    out.write(f"Plan for lane {plan.lane!r} of policy {loaded.policy.policy_id} ({loaded.policy.policy_version})\n")
    out.write(
        f"  eligible: {len(plan.eligible)} cases ({sum(1 for c in plan.eligible if c.is_control)} controls first), "
        f"withheld: {len(plan.withheld)}, judgments: {len(scheduled) * plan.repeats} "
        f"({plan.repeats} per case), model {ev.model}\n"
    )
    out.write(
        f"  estimated cost: ~{typical:.4f} {cur} typical, at most {upper:.4f} {cur} (every judgment using all "
        f"{ev.retries.max_attempts} attempts); boundary {limit:g} {cur}\n"
    )
    if loaded.policy.lanes[plan.lane].stop_when_decided:  # the judgments above are the most it sends
        out.write(
            "  stop_when_decided: once no remaining outcome can change a quality_failed verdict, scheduling "
            "stops and the cases left are not needed (paid: fewer)\n"
        )
    for note in max_cost_notes(loaded, max_cost):  # a higher --max-cost is said here too, never ignored
        out.write(f"  {note}\n")
    if upper > limit:
        fit, acc = 0, 0.0
        for c in scheduled:
            acc += judgment_upper_bound(loaded, c) * per_judgment
            if acc > limit:
                break
            fit += 1
        out.write(f"  the worst case does not fit: at least the first {fit} cases fit under the boundary\n")
    trend_loaded = load_trend(loaded)
    if trend_loaded is not None:
        graded = trend_cases(plan)
        t_typical = sum(judgment_typical(trend_loaded, c) for c in graded)
        t_upper = sum(judgment_upper_bound(trend_loaded, c) for c in graded) * ev.retries.max_attempts
        out.write(
            f"  then the trend: {len(graded)} judgments, ~{t_typical:.4f} {cur} typical, at most {t_upper:.4f} {cur}, "
            "under the same boundary (verdicts are paid first)\n"
        )
    blocking = blocking_findings(blockers)
    if blocking:
        out.write(f"  deterministic checks block ({plural(len(blocking), 'finding')}): no model call would be made\n")
    elif not has_key:
        out.write(f"  no API key in ${ev.api_key_env}: a real run would call nobody and end missing_credentials\n")
    for f in before_any_call(blockers):  # known before any call; the run would judge, but could not pass
        if f not in blocking:
            cases = f" [cases: {describe_locations(list(f.case_ids))}]" if f.case_ids else ""  # as validate names them
            out.write(f"  cannot pass ({f.kind}, {f.state.value}): {log_text(f.message + cases)}\n")
    out.write("  order:\n")
    held = {c.case_id for c in plan.withheld}
    for i, c in enumerate(plan.eligible, start=1):
        tag = (c.expected_control_role and f"control:{c.expected_control_role}") or c.partition
        note = "  (withheld: no reference)" if c.case_id in held else ""
        out.write(f"    {i:4d}. {c.case_id}  [{c.slice}, {tag}]{note}\n")
