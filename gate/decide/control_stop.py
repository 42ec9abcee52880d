"""A lane stops once a control has failed or ended in an evaluator error: no other verdict could
count then, so nothing else is scheduled, and what was never sent for that reason is `not_needed`
(neither `unrun` nor `control_error`: it has no error, and it was not wanted). So is a case cut
between its repeats by the stop: some judged, the rest never sent (no record), none in error. Pure; the runner
stops on the same condition (gate.run.runner), so `gate decide` on the records agrees with the
run. `--resume` judges the `not_needed` cases like any case without a record.
"""

from __future__ import annotations

import dataclasses

from gate.decide.evidence import Evidence
from gate.decide.retirement import RETIRED_KINDS
from gate.decide.rules import control_failures
from gate.decide.settled import never_sent
from gate.model.wording import agree, plural


def controls_stopped(ev: Evidence) -> str | None:
    """Why no other verdict could count: a control failed, or one ended in an evaluator error."""
    if control_failures(ev):
        return "a control failed"
    # A judge's model the provider no longer serves stops the run on its own (`judge_retired` names it all).
    errored = [
        o
        for o in ev.outcomes
        if o.case.expected_control_role is not None and o.bucket == "errored" and o.error_kind not in RETIRED_KINDS
    ]
    return "a control ended in an evaluator error" if errored else None


def cut_short(ev: Evidence) -> set[str]:
    """The cases some repeats of which were judged and the rest never sent: every record they have
    is a verdict (an error or a cancelled attempt names its kind), and there are too few of them."""
    return {
        o.case.case_id
        for o in ev.outcomes
        if o.bucket == "unrun" and o.called_model and o.error_kind is None and o.case.case_id not in ev.plan.unanswered
    }


def settle_after_controls(ev: Evidence) -> Evidence:
    """`ev` with the cases never sent `not_needed` once the controls cannot separate; else unchanged."""
    if ev.blocked:
        return ev
    why = controls_stopped(ev)
    unsent = never_sent(ev) | cut_short(ev) if why is not None else set()
    if not unsent:
        return ev
    outcomes = tuple(
        dataclasses.replace(o, bucket="not_needed", outcome="not_needed") if o.case.case_id in unsent else o
        for o in ev.outcomes
    )
    are = agree(len(unsent), "is", "are")
    note = f"scheduling stopped once {why}: {plural(len(unsent), 'case')} never sent {are} not needed (no verdict could count)"
    return dataclasses.replace(ev, outcomes=outcomes, notes=(*ev.notes, note))
