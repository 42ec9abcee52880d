"""`stop_when_decided`: is `quality_failed` already certain, whatever is still to come?

The question is asked with the decision's own rules, never a second decider: every judgment still
to come is taken to come back the way its human label says (the most favourable completion: no
false pass, no false fail, no failed control), and the ordinary evidence, rules and overrides
decide that what-if. When even it is `quality_failed`, no remaining outcome can change the
verdict, and the judgments never sent are `not_needed`: neither unrun nor incomplete.

Pure. The runner asks `hopeless` after a judgment that disagrees with its label (one that agrees
cannot make the most favourable completion worse), and `decide` asks `settle` of the records, so
`gate decide` on a stopped run's records gives the run's result.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

from gate.decide.evidence import Evidence, prepare_evidence
from gate.decide.product import ProductEvidence
from gate.decide.product import settled as product_settled
from gate.decide.rules import apply_rules
from gate.model.overrides import apply_overrides
from gate.model.policy import LoadedPolicy
from gate.model.records import Record
from gate.model.states import Finding, State
from gate.plan.selection import Plan

WHAT_IF_REASON = "what-if: as the human label says (stop_when_decided)"


def stops_when_decided(loaded: LoadedPolicy, plan: Plan) -> bool:
    lane = loaded.policy.lanes.get(plan.lane)
    return bool(lane is not None and lane.stop_when_decided)


def at_label(plan: Plan, records: Sequence[Record]) -> list[Record]:
    """A verdict at its human label for every judgment of the plan that has no ok or error record yet."""
    done = {(r.case_id, r.repeat_index) for r in records if r.status in ("ok", "error")}
    return [
        Record(
            case_id=c.case_id,
            slice=c.slice,
            partition=c.partition,
            control_role=c.expected_control_role,
            human_label=c.human_label,
            judge_label=c.human_label,
            judge_reason=WHAT_IF_REASON,
            status="ok",
            repeat_index=i,
            cache="hit",  # never paid, never written: it only stands in for an answer to come
        )
        for c in plan.scheduled
        for i in range(plan.repeats)
        if (c.case_id, i) not in done and c.labelled  # a product lane's answer has no label to favour
    ]


def hopeless(
    loaded: LoadedPolicy,
    plan: Plan,
    findings: Sequence[Finding],
    records: Sequence[Record],
    today: dt.date,
    *,
    fingerprint: str = "",
    product: ProductEvidence | None = None,
) -> bool:
    """Whether the most favourable completion of `records` is still `quality_failed`; on a product
    lane also whether every slice is already decided by the answers judged (gate/decide/product.py)."""
    what_if = prepare_evidence(
        loaded, plan, findings, [*records, *at_label(plan, records)], fingerprint=fingerprint, boundary=0.0, notes=()
    )
    applied = apply_overrides([*what_if.findings, *apply_rules(what_if)], loaded.policy.overrides, today)
    if any(b.state is State.QUALITY_FAILED for b in applied.blockers):
        return True
    return product is not None and product_settled(what_if, product)


def settle(
    ev: Evidence,
    loaded: LoadedPolicy,
    records: Sequence[Record],
    today: dt.date,
    fingerprint: str,
    product: ProductEvidence | None = None,
) -> Evidence:
    """On a `stop_when_decided` lane whose verdict is already `quality_failed`: the cases never sent
    are `not_needed`, and the evidence says when the run stopped. Otherwise `ev` unchanged."""
    # A product lane's case with no answer was never sendable: it stays unrun (`missing_response`).
    never_sent = {
        o.case.case_id
        for o in ev.outcomes
        if o.bucket == "unrun" and not o.called_model and o.case.case_id not in ev.plan.unanswered
    }
    if not never_sent or ev.blocked or not stops_when_decided(loaded, ev.plan):
        return ev
    if not hopeless(loaded, ev.plan, ev.findings, records, today, fingerprint=fingerprint, product=product):
        return ev
    outcomes = tuple(
        dataclasses.replace(o, bucket="not_needed", outcome="not_needed") if o.case.case_id in never_sent else o
        for o in ev.outcomes
    )
    total = len(ev.plan.scheduled) * ev.plan.repeats
    judged = sum(1 for r in ev.best.values() if r.status in ("ok", "error"))
    note = f"stopped after {judged} of {total} judgments: no remaining outcome could change the verdict"
    return dataclasses.replace(ev, outcomes=outcomes, notes=(*ev.notes, note))


def stopped_early(ev: Evidence) -> dict[str, object] | None:
    """result.json's `stopped_early` section, when the lane stopped once the verdict was decided."""
    not_needed = [o.case.case_id for o in ev.outcomes if o.bucket == "not_needed"]
    if not not_needed:
        return None
    judged = sum(1 for r in ev.best.values() if r.status in ("ok", "error"))
    return {"judged": judged, "scheduled": len(ev.plan.scheduled) * ev.plan.repeats, "not_needed": not_needed}
