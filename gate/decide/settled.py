"""`stop_when_decided`: is `quality_failed` already certain, whatever is still to come?

The question is asked with the decision's own rules, never a second decider, and it is the same
question the final decision answers: take every case never sent as `not_needed` (it adds nothing:
no false pass, no false fail, no failed control, no half of a pair), and let the ordinary rules and
overrides decide that evidence. A `quality_failed` blocker there rests only on judgments already
made in full (a false pass beyond its slice's limit, a failed control, a pair whose two members
were both judged), so no remaining outcome can lift it: a case still to come may also error or
abstain, so a pair with an unjudged member decides nothing yet (a what-if that took it at its
label once reported a pair violation that the final decision could not see, and passed).

The runner gives each judgment to a `Settling` and asks it `hopeless` after one that disagrees with
its label (one that agrees cannot add a quality blocker), and `decide` asks `settle` of the records, which marks the cases
never sent `not_needed` only when that same question says `quality_failed`: the stop and the
final decision agree by construction, and `gate decide` on a stopped run's records gives the
run's result. On a product lane the run also stops once every slice is decided by the answers
judged, each at the look that decided it (gate/decide/product/stop.py, replayed over that same
evidence by gate/decide/product/verdict.py's `settled`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from gate.decide.evidence import Evidence, Gathering
from gate.decide.product.verdict import ProductEvidence
from gate.decide.product.verdict import settled as product_settled
from gate.decide.rules import apply_rules
from gate.model.overrides import apply_overrides
from gate.model.policy import LoadedPolicy
from gate.model.records import Record
from gate.model.states import Finding, State
from gate.plan.selection import Plan


def stops_when_decided(loaded: LoadedPolicy, plan: Plan) -> bool:
    lane = loaded.policy.lanes.get(plan.lane)
    return bool(lane is not None and lane.stop_when_decided)


def never_sent(ev: Evidence) -> set[str]:
    """The cases no judgment of which was sent (unrun, no model call): what a stop leaves `not_needed`.
    A product lane's case with no answer was never sendable: it stays unrun (`missing_response`)."""
    return {
        o.case.case_id
        for o in ev.outcomes
        if o.bucket == "unrun" and not o.called_model and o.case.case_id not in ev.plan.unanswered
    }


def as_not_needed(ev: Evidence) -> Evidence:
    """`ev` with every case never sent `not_needed`, and a note saying when the run stopped."""
    unsent = never_sent(ev)
    outcomes = tuple(
        dataclasses.replace(o, bucket="not_needed", outcome="not_needed") if o.case.case_id in unsent else o
        for o in ev.outcomes
    )
    total = len(ev.plan.scheduled) * ev.plan.repeats
    note = f"stopped after {judged(ev)} of {total} judgments: no remaining outcome could change the verdict"
    return dataclasses.replace(ev, outcomes=outcomes, notes=(*ev.notes, note))


def decided(ev: Evidence, loaded: LoadedPolicy, today: dt.date, product: ProductEvidence | None) -> bool:
    """Whether the rules and overrides over `ev` (its unsent cases `not_needed`) say `quality_failed`;
    on a product lane also whether every slice is decided by the answers judged."""
    applied = apply_overrides([*ev.findings, *apply_rules(ev)], loaded.policy.overrides, today)
    if any(b.state is State.QUALITY_FAILED for b in applied.blockers):
        return True
    return product is not None and product_settled(ev, product)


class Settling:
    """`stop_when_decided`'s question asked while the run is under way: whether `quality_failed` is
    certain from the records so far (on a product lane: or every slice is decided), whatever the
    judgments still to come say. The records are gathered as they come (`add`: each vetted once and
    kept as the decision keeps it, `gate.decide.evidence.Gathering`), never held: a lane that stops
    when decided holds what its decision will, not every record it judged."""

    def __init__(
        self,
        loaded: LoadedPolicy,
        plan: Plan,
        findings: Sequence[Finding],
        today: dt.date,
        *,
        fingerprint: str = "",
        product: ProductEvidence | None = None,
    ) -> None:
        self.loaded, self.findings, self.today, self.product = loaded, tuple(findings), today, product
        self.gathering = Gathering(loaded, plan, fingerprint)

    def add(self, record: Record) -> None:
        self.gathering.add(record)

    def hopeless(self) -> bool:
        ev = self.gathering.evidence(self.findings, boundary=0.0, notes=())
        return not ev.blocked and decided(as_not_needed(ev), self.loaded, self.today, self.product)


def settle(ev: Evidence, loaded: LoadedPolicy, today: dt.date, product: ProductEvidence | None = None) -> Evidence:
    """On a `stop_when_decided` lane whose verdict is already `quality_failed`: the cases never sent
    are `not_needed`, and the evidence says when the run stopped. Otherwise `ev` unchanged (a case
    never sent for another reason stays unrun, so the decision never passes what was not judged)."""
    if ev.blocked or not never_sent(ev) or not stops_when_decided(loaded, ev.plan):
        return ev
    settled = as_not_needed(ev)
    return settled if decided(settled, loaded, today, product) else ev


def judged(ev: Evidence) -> int:
    return sum(1 for r in ev.best.values() if r.status in ("ok", "error"))


def stopped_early(ev: Evidence) -> dict[str, object] | None:
    """result.json's `stopped_early` section, when the lane stopped once the verdict was decided."""
    not_needed = [o.case.case_id for o in ev.outcomes if o.bucket == "not_needed"]
    if not not_needed:
        return None
    return {"judged": judged(ev), "scheduled": len(ev.plan.scheduled) * ev.plan.repeats, "not_needed": not_needed}
