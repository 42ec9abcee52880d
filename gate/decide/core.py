"""The decision: a pure function from policy, plan, findings and records to a result.

No I/O, no clock (today is an argument), no model. `gate run` and `gate decide` both end here,
so re-applying a policy to recorded runs gives the same result the run gave.

A short pipeline: `prepare_evidence` (gate/decide/evidence.py) vets the records and classifies each case;
the rules (gate/decide/rules.py) turn that frozen evidence into findings; `apply_overrides` waives what
active overrides name, once; `_assemble_result` builds result.json.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gate.decide.bill import Bill
from gate.decide.control_stop import settle_after_controls
from gate.decide.evidence import CaseOutcome, Evidence, prepare_evidence
from gate.decide.product.verdict import ProductEvidence, decide_product
from gate.decide.retirement import judge_retiring, lineage_retirement
from gate.decide.rules import apply_rules, control_failures, unjudged_controls
from gate.decide.settled import settle, stopped_early
from gate.judge.cost import boundary
from gate.model.lineage import Lineage
from gate.model.overrides import apply_overrides
from gate.model.owners import route
from gate.model.policy import LoadedPolicy, Owners
from gate.model.records import Record
from gate.model.result import CaseRow, Result
from gate.model.states import Finding, State, overall_state
from gate.model.strata import weigh
from gate.plan.selection import Plan

RESULT_SCHEMA_VERSION = 1


def cost_summary(records: Iterable[Record], currency: str) -> dict[str, Any]:
    """result.json's `cost` of `records` (gate.decide.bill adds them up one at a time)."""
    bill = Bill()
    for r in records:
        bill.add(r)
    return bill.summary(currency)


def add_costs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two bills (`cost_summary`s) as one: every count and amount summed, `by_slice` per slice."""
    out = dict(a)
    for key, value in b.items():
        if key == "by_slice":
            slices = dict(a.get("by_slice", {}))
            for name, amount in value.items():
                slices[name] = slices.get(name, 0.0) + amount
            out["by_slice"] = dict(sorted(slices.items()))
        elif key != "currency" and isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = a.get(key, 0) + value
    return out


@dataclass
class Decision:
    state: State
    blockers: list[Finding]
    waived: list[dict[str, Any]]
    outcomes: list[CaseOutcome]
    result: Result | None  # None only for a dry run that decides nothing (the drift lane's plan)


def decide(
    loaded: LoadedPolicy,
    plan: Plan,
    findings: Sequence[Finding],
    records: Iterable[Record],
    lineage: Lineage,
    today: dt.date,
    *,
    max_cost: float | None = None,
    notes: Sequence[str] = (),
    product: ProductEvidence | None = None,
) -> Decision:
    """The inputs' findings and every rule's, less what active overrides waive, decide the state.

    `product`: a product lane's judge figures and base (gate/decide/product/verdict.py), whose per-slice
    findings join the rules' and whose section joins result.json. `records` are read once, one at a
    time (a run's records file is never held whole)."""
    ev = prepare_evidence(
        loaded,
        plan,
        findings,
        records,
        fingerprint=lineage.config_fingerprint,
        boundary=boundary(loaded, max_cost),
        notes=notes,
    )
    # A stop_when_decided lane whose verdict was already certain: the cases never sent are not_needed.
    ev = settle(ev, loaded, today, product)
    # A failed or errored control stopped scheduling: what was never sent is not_needed, not unrun.
    ev = settle_after_controls(ev)
    judged = decide_product(ev, product) if product is not None else None
    if judged is not None and judged.notes:
        ev = dataclasses.replace(ev, notes=(*ev.notes, *judged.notes))
    slice_verdicts = judged.findings if judged is not None else ()
    rules = [*apply_rules(ev), *judge_retiring(ev, lineage, today), *slice_verdicts]
    # Overrides apply once, to the finished blockers (gate.model.overrides is the one place that waives); one
    # naming a slice reaches the product decision's own verdicts only.
    applied = apply_overrides([*ev.findings, *rules], loaded.policy.overrides, today, slice_verdicts)
    blockers = [b for b in applied.blockers if b.state is not State.PASSED]
    state = overall_state([b.state for b in blockers])
    result = _assemble_result(ev, lineage, today, state, blockers, applied.waived)
    if judged is not None:
        result = result.with_(product=judged.section)
    retirement = _retirement_section(ev, lineage, today)
    if retirement is not None:
        result = result.with_(judge_retirement=retirement)
    return Decision(state=state, blockers=blockers, waived=applied.waived, outcomes=list(ev.outcomes), result=result)


def _retirement_section(ev: Evidence, lineage: Lineage, today: dt.date) -> dict[str, Any] | None:
    """result.json's `judge_retirement`: the shutdown date the lineage names, the days left on `today`,
    and the policy's thresholds; None when nobody named a date (the result is then as before)."""
    retirement = lineage_retirement(lineage)
    if retirement is None:
        return None
    ev_settings = ev.policy.evaluator
    lane = ev.policy.lanes.get(ev.plan.lane)
    return {
        "model": retirement.model,
        "shutdown_date": retirement.date.isoformat() if retirement.date is not None else None,
        "source": retirement.source,
        "days_left": retirement.days_left(today),
        "notice_days": ev_settings.retirement_notice_days,
        "blocks_within_days": ev_settings.retirement_blocks_within_days,
        "release_lane": lane is not None and lane.is_release,
    }


def slice_tallies(ev: Evidence) -> dict[str, dict[str, int | None]]:
    """Per slice (the policy's and any a case names): outcomes of non-control cases, and the limits
    the policy applied to it (`gate compare` marks critical slices from them)."""
    policy = ev.policy
    slices: dict[str, dict[str, int]] = {}
    for name in sorted({*policy.slices, *(o.case.slice for o in ev.outcomes if not o.case.is_control)}):
        slices[name] = {
            k: 0 for k in ("true_pass", "true_fail", "false_pass", "false_fail", "errors", "review", "unrun")
        }
    for o in ev.outcomes:
        if o.case.is_control:
            continue
        tally = slices[o.case.slice]
        if o.outcome in ("true_pass", "true_fail", "false_pass", "false_fail"):
            tally[o.outcome] += 1
        elif o.bucket == "errored":
            tally["errors"] += 1
        elif o.bucket == "unrun":
            tally["unrun"] += 1
        if o.needs_review or (o.bucket == "withheld" and policy.missing_evidence == "review"):
            tally["review"] += 1
    out: dict[str, dict[str, int | None]] = {name: dict(tally) for name, tally in slices.items()}
    for name, limit in policy.slices.items():
        out[name].update(max_false_passes=limit.max_false_passes, max_false_fails=limit.max_false_fails)
    return out


def case_counts(ev: Evidence) -> dict[str, int]:
    outcomes = ev.outcomes
    routed = ev.policy.missing_evidence == "review"
    not_needed = sum(1 for o in outcomes if o.bucket == "not_needed")
    return {
        "eligible": len(outcomes),
        "completed": sum(1 for o in outcomes if o.bucket == "completed"),
        "errored": sum(1 for o in outcomes if o.bucket == "errored"),
        "withheld": sum(1 for o in outcomes if o.bucket == "withheld"),
        "unrun": sum(1 for o in outcomes if o.bucket == "unrun"),
        "cached": sum(1 for r in ev.best.values() if r.cache == "hit"),
        "review": sum(
            1 for o in outcomes if o.needs_review or (o.bucket == "withheld" and routed and not o.case.is_control)
        ),
        **({"not_needed": not_needed} if not_needed else {}),
    }


def _assemble_result(
    ev: Evidence,
    lineage: Lineage,
    today: dt.date,
    state: State,
    blockers: Sequence[Finding],
    waived: list[dict[str, Any]],
) -> Result:
    """result.json from the evidence and the blockers left after overrides."""
    policy, outcomes = ev.policy, ev.outcomes
    failed_controls = control_failures(ev)
    price = policy.evaluator.price
    result: dict[str, Any] = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "policy_id": policy.policy_id,
        "policy_version": policy.policy_version,
        "lane": ev.plan.lane,
        "state": state.value,
        "exit_code": state.exit_code,
        "blockers": [_routed(b.to_dict(), policy.owners) for b in blockers],
        "counts": case_counts(ev),
        "unrun_case_ids": [o.case.case_id for o in outcomes if o.bucket == "unrun"],
        "slices": slice_tallies(ev),
        # ok only when every control was judged and matched its label
        "controls": {"ok": not failed_controls and not unjudged_controls(ev), "failures": failed_controls},
        "cost": ev.bill.summary(price.currency if price else "USD"),
        "lineage": lineage.to_dict(),
        "waived": waived,
        "overrides": [{**o.model_dump(mode="json"), "expired": o.expires < today} for o in policy.overrides],
        "limits": {
            "max_total_cost": ev.boundary,
            "max_evaluator_errors": policy.limits.max_evaluator_errors,
        },
        "notes": list(ev.notes),
        "cases": CaseRow.rows(o.to_dict() for o in outcomes),
    }
    stopped = stopped_early(ev)
    if stopped is not None:
        result["stopped_early"] = stopped
    if policy.strata:
        result["strata"] = weigh(
            {name: s.prevalence for name, s in policy.strata.items()},
            (
                (o.case.stratum, o.outcome if o.bucket == "completed" else None)
                for o in outcomes
                if not o.case.is_control
            ),
        ).to_dict()
    return Result.model_validate(result)


def _routed(blocker: dict[str, Any], owners: Owners | None) -> dict[str, Any]:
    """With `owners` in the policy, the blocker names its owner group and owner (gate/model/owners.py)."""
    return blocker if owners is None else route(blocker, owners.model_dump())
