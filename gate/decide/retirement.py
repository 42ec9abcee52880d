"""The judge's model retires: the blockers its shutdown date raises (gate/model/retirement.py). Pure.

- `judge_retiring` (review_required, owner evaluator): a release lane (`Lane.is_release`) within the
  policy's `retirement_blocks_within_days` of the shutdown date its lineage names, on the day decided.
- `judge_retired` (evaluation_incomplete): judgments never sent because the model had shut down
  (`model_retired`), or answered 404 `model_not_found` by the provider, after which the run stops
  sending. One blocker names the retirement and every case it left unjudged, instead of an error
  per case; the completeness rules (gate/decide/rules.py) leave those cases to it.
"""

from __future__ import annotations

import datetime as dt

from gate.decide.evidence import Evidence, Judged
from gate.model.lineage import Lineage
from gate.model.policy import Evaluator, Lane
from gate.model.retirement import MIGRATION, Retirement, days_text, recorded
from gate.model.states import JUDGE_RETIRED, JUDGE_RETIRING, Finding, State
from gate.model.wording import agree, plural

RETIRED_KINDS = frozenset({"model_retired", "model_not_found"})
MIGRATE_FIX = f"move the judge to a successor with evidence (`{MIGRATION}`, docs/PROVIDERS.md)"


def refused_records(ev: Evidence) -> list[Judged]:
    """The judgments the judge's retirement refused (never sent, or 404 model_not_found)."""
    return [r for r in ev.fresh if r.error_kind in RETIRED_KINDS]


def retired_case_ids(ev: Evidence) -> set[str]:
    """Every case the retirement left unjudged: each case without a verdict that a refused judgment
    names (an earlier run's error or interruption of it cannot be retried with this model: a run
    resumed after the shutdown), and, since the run stops sending at the first refusal, every case
    not judged at all."""
    refused = {r.case_id for r in refused_records(ev)}
    if not refused:
        return set()
    return {
        o.case.case_id
        for o in ev.outcomes
        if o.bucket == "unrun"
        or (o.bucket == "errored" and (o.case.case_id in refused or o.error_kind in RETIRED_KINDS))
    }


def lineage_retirement(lineage: Lineage) -> Retirement | None:
    """The shutdown date a run's lineage names (None: nobody said one)."""
    return recorded(lineage.evaluator_model, lineage.judge_shutdown_date, lineage.judge_shutdown_source)


def retired_message(model: str, detail: str, n_cases: int) -> str:
    """The one message of a run whose judge's model has shut down: what, how many cases, the fix."""
    return (
        f"the judge's model {model} {detail}; {plural(n_cases, 'case')} {agree(n_cases, 'was', 'were')} not judged, "
        f"and none can be with it; fix: {MIGRATE_FIX}, then run again"
    )


def shut_down_detail(retirement: Retirement) -> str:
    """`shut down on 2027-01-14 (the provider's date): nothing was sent`."""
    when = retirement.date.isoformat() if retirement.date is not None else "an unknown date"
    return f"shut down on {when} ({retirement.said()}): nothing was sent to it"


def judge_retired(ev: Evidence) -> tuple[Finding, ...]:
    """One `judge_retired` blocker for every case the retirement left unjudged; the shutdown date is the
    one the refused judgments recorded."""
    unjudged = retired_case_ids(ev)
    if not unjudged:
        return ()
    model = ev.policy.evaluator.model
    ids = [o.case.case_id for o in ev.outcomes if o.case.case_id in unjudged]
    refused = refused_records(ev)
    retirement = recorded(model, refused[0].judge_shutdown_date, refused[0].judge_shutdown_source)
    if any(r.error_kind == "model_retired" for r in refused):
        detail = shut_down_detail(retirement) if retirement is not None else "had shut down: nothing was sent to it"
    else:
        said = (
            f"; it shut the model down on {retirement.date.isoformat()} ({retirement.said()})"
            if retirement is not None and retirement.date is not None
            else ": it retired the model, the name is wrong, or the key has no access to it"
        )
        detail = (
            f"is not served: the provider answered 404 model_not_found{said}; the run stopped sending at that answer"
        )
    return (Finding(State.EVALUATION_INCOMPLETE, JUDGE_RETIRED, retired_message(model, detail, len(ids)), tuple(ids)),)


def judge_retiring(ev: Evidence, lineage: Lineage, today: dt.date) -> tuple[Finding, ...]:
    """`judge_retiring` on a release lane within `retirement_blocks_within_days` of the shutdown date the
    lineage names (none when the retirement already refused the judgments: `judge_retired` says it)."""
    retirement = lineage_retirement(lineage)
    lane = ev.policy.lanes.get(ev.plan.lane)
    if retirement is None or lane is None or retired_case_ids(ev):
        return ()
    found = retiring_finding(retirement, lane, ev.policy.evaluator, today)
    return (found,) if found is not None else ()


def retiring_finding(retirement: Retirement, lane: Lane, evaluator: Evaluator, today: dt.date) -> Finding | None:
    """The `judge_retiring` blocker of a release lane whose judge's model shuts down within the policy's
    `retirement_blocks_within_days` of `today` (or has), else None: the run's and `gate validate --lane`'s."""
    left = retirement.days_left(today)
    if not lane.is_release or retirement.date is None or left is None or left > evaluator.retirement_blocks_within_days:
        return None
    verb = "shuts" if left > 0 else "shut"
    message = (
        f"the judge's model {evaluator.model} {verb} down on {retirement.date.isoformat()} ({retirement.said()}, "
        f"{days_text(left)}); a release lane blocks from {plural(evaluator.retirement_blocks_within_days, 'day')} "
        "before (evaluator.retirement_blocks_within_days): its calibration and certification end with the model; "
        f"fix: move the judge with evidence (`{MIGRATION}`, docs/PROVIDERS.md)"
    )
    return Finding(State.REVIEW_REQUIRED, JUDGE_RETIRING, message)
