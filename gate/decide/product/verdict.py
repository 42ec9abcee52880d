"""A product lane's decision: per slice, the failure rate the calibrated judge implies, against its limit.

Pure: it reads the frozen `Evidence` (the application's answers, judged) and a `ProductEvidence`
(the judge's counts per slice from calibration.json, the base run's verdicts), and returns the
findings and result.json's `product` section; the state and the exit code follow from the
findings, as for every rule. The statistics are gate/estimate/failure_rate.py's.

Per slice: `n` answers judged (completed, with a pass or fail verdict; errors, abstentions and
unjudged answers are never counted), `k` of them judged fail. The verdict is `passed` (the upper
bound within `max_failure_rate`), `exceeded` (the lower bound above it: `failure_rate_exceeded`,
quality_failed), `inconclusive` (`failure_rate_inconclusive`, review_required, saying what would
decide it), `judge_unfit` (the judge may not tell a failing answer from a good one:
review_required), or `incomplete`: answers of the slice not judged (unrun, missing responses: their
own blockers say so), or no figures for the judge that decided (its calibration blocker says so).
An `exceeded` slice stands even when some answers are unjudged: what was judged already fails it.
On a lane that stops once decided (`sequential`), a slice's verdict and interval are those of the
look that decided it, found by replaying the answers in the order they were recorded through
gate/decide/product/stop.py (`stop_check`), the check the run's stop asked: answers judged after
that look are counted in `n` and never un-decide it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gate.decide.evidence import CaseOutcome, Evidence
from gate.decide.product.answers import JudgeCounts, SliceAnswers, answers_by_slice
from gate.decide.product.audit import audit_route, audit_slice, unused_note
from gate.decide.product.audit_plan import AuditPlan, plan_slice, refuse_other_queue
from gate.decide.product.stop import Look, ProductStopCheck
from gate.estimate import failure_rate as fr
from gate.model.policy import Policy
from gate.model.states import (
    AUDIT_REQUIRED,
    FAILURE_RATE_EXCEEDED,
    FAILURE_RATE_INCONCLUSIVE,
    LABELS_DISAGREE,
    REGRESSED,
    REGRESSION_UNCHECKED,
    Finding,
    State,
)
from gate.model.wording import agree, plural
from gate.plan.selection import Plan
from gate.review.audit_labels import AuditEvidence, LabelKey

JUDGE_UNFIT = "judge_unfit"


@dataclass(frozen=True)
class BaseVerdicts:
    """The base branch's product run (`--base-result`): each answer's verdict, or why there is none."""

    verdicts: Mapping[str, str] = field(default_factory=dict)  # case id -> "pass" | "fail"
    problem: str | None = None  # the base could not be compared (a note; under fail_on_regression a blocker)


@dataclass(frozen=True)
class ProductEvidence:
    """What a product lane's decision needs beyond the records."""

    confidence: float
    sequential: bool  # the lane stops once decided: the bounds hold at every look
    fail_on_regression: bool
    calibrated: bool  # the figures were measured on the judge that decided (else no verdict)
    judges: Mapping[str, JudgeCounts]  # per slice; a slice without figures cannot be decided
    base: BaseVerdicts | None = None
    audit: AuditEvidence | None = None  # people's labels on this run's answers (--audit)
    # How people get this run's audit queue (said when a slice needs people's labels).
    queue_command: str = "gate review queue --policy POLICY --from OUT --out audit-queue.jsonl"
    require_audit: bool = False  # the lane's `require_audit`: no slice passes without labels of its plan
    calibration_sha256: str | None = None  # the calibration file's bytes the figures were read from


@dataclass(frozen=True)
class ProductDecision:
    findings: tuple[Finding, ...]
    section: dict[str, Any]  # result.json's `product`
    notes: tuple[str, ...] = ()


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def _rate_dict(r: fr.Rate) -> dict[str, Any]:
    return {"value": r.value, "low": r.low, "high": r.high, "x": r.x, "n": r.n}


def _judge_text(judge: fr.JudgeAccuracy) -> str:
    return (
        f"the judge catches {_pct(judge.se.value)} of failing answers ({judge.se.x}/{judge.se.n} labelled) and "
        f"passes {_pct(judge.sp.value)} of good ones ({judge.sp.x}/{judge.sp.n})"
    )


def _judge_of(counts: JudgeCounts, confidence: float) -> fr.JudgeAccuracy:
    return fr.judge_accuracy(
        true_fail=counts.true_fail,
        false_pass=counts.false_pass,
        true_pass=counts.true_pass,
        false_fail=counts.false_fail,
        confidence=confidence,
    )


def _no_figures(name: str) -> Finding:
    message = (
        f"slice {name}: calibration.json has no figures for this slice, so how often the judge misses a failing "
        f"answer here is unknown and its failure rate cannot be estimated; fix: add labelled {name} cases to "
        "the calibration partition (failing and passing ones), run the calibration lane and `gate calibrate`"
    )
    return Finding(State.REVIEW_REQUIRED, JUDGE_UNFIT, message, slice=name)


def _audit_labels_on(pe: ProductEvidence, answers: SliceAnswers) -> bool:
    """Does people's audit hold a label on one of the slice's answers, judged or not?"""
    if pe.audit is None:
        return False
    audit = pe.audit
    shown = [(o.case, o.response_sha256) for o in answers.judged]
    shown += [(o.case, o.case.response_sha256) for o in answers.waiting]
    return any(
        sha is not None and (found := audit.label_on(case, sha)) is not None and found.final is not None
        for case, sha in shown
    )


def _slice(
    name: str,
    answers: SliceAnswers,
    limit: float,
    pe: ProductEvidence,
    look: Look | None = None,
    plan: AuditPlan | None = None,
) -> tuple[dict[str, Any], list[Finding]]:
    """One slice's row of `product.slices` and its findings. `look`: the look that decided the slice
    on a lane that stops once decided (its verdict and interval are the slice's); `plan`: the run's
    audit plan of the slice (what people would label)."""
    k, n = len(answers.failing), len(answers.judged)
    counts = pe.judges.get(name) if pe.calibrated else None
    row: dict[str, Any] = {
        "n": n,
        "judged_fail": k,
        "estimate": None,
        "low": None,
        "high": None,
        "max_failure_rate": limit,
        "verdict": "incomplete",
        "failing_cases": list(answers.failing),
        "decide_hint": None,
        "judge": None,
        "base": None,
        "audit_plan": plan.to_dict() if plan is not None else None,
    }
    if counts is None:
        # Uncalibrated: judge_uncalibrated (or the calibration's own blocker) says why. Without figures
        # only people's audit can decide the slice: while answers it labelled wait to be judged (a dry
        # run: all of them) that is still open, and the blockers that say why they wait decide.
        if not pe.calibrated or (answers.unjudged and _audit_labels_on(pe, answers)):
            return row, []
        return row, [_no_figures(name)]
    judge = _judge_of(counts, pe.confidence)
    row["judge"] = {"se": _rate_dict(judge.se), "sp": _rate_dict(judge.sp)}
    if n == 0:
        return row, []
    if look is not None:
        rate, verdict = look.rate, look.verdict
        row["decided_at"] = {"n": look.n, "judged_fail": look.judged_fail}
        counted = (
            f"{look.judged_fail} of the first {look.n} answers judged fail when it was decided ({k} of {n} in all)"
        )
    else:
        rate = fr.failure_rate(judged_fail=k, n=n, judge=judge, confidence=pe.confidence, sequential=pe.sequential)
        verdict = fr.slice_verdict(rate, limit)
        counted = f"{k} of {n} answers judged fail"
    row.update(estimate=rate.estimate, low=rate.low, high=rate.high)
    figures = (
        # The interval as every other line of the message writes it (fr.span: its ends rounded outwards).
        f"estimated failure rate {fr.percent(rate.estimate)} ({fr.span(rate.low, rate.high)} at "
        f"{pe.confidence:g} confidence each side), limit {fr.percent(limit)}; {counted}, and {_judge_text(judge)}"
    )
    if verdict == "exceeded":
        row["verdict"] = "exceeded"
        message = f"slice {name}: the application's answers fail too often: {figures}"
        return row, [Finding(State.QUALITY_FAILED, FAILURE_RATE_EXCEEDED, message, answers.failing, name)]
    if answers.unjudged:
        return row, []  # not every answer was judged: the blockers that say why decide; no verdict here
    return _open_or_passed(name, answers, row, verdict, judge, limit, pe, figures, plan)


def _open_or_passed(
    name: str,
    answers: SliceAnswers,
    row: dict[str, Any],
    verdict: fr.Verdict,
    judge: fr.JudgeAccuracy,
    limit: float,
    pe: ProductEvidence,
    figures: str,
    plan: AuditPlan | None,
) -> tuple[dict[str, Any], list[Finding]]:
    """A slice every answer of which was judged, and that no look found exceeded."""
    if verdict == "judge_unfit":
        row["verdict"] = "judge_unfit"
        message = (
            f"slice {name}: the judge may not tell a failing answer from a good one here ({_judge_text(judge)}; "
            f"the lower bounds {_pct(judge.se.low)} + {_pct(judge.sp.low)} do not exceed 100%), so its verdicts "
            f"say nothing about the failure rate; fix: improve the judge, or add labelled {name} cases and calibrate"
        )
        return row, [Finding(State.REVIEW_REQUIRED, JUDGE_UNFIT, message, slice=name)]
    if verdict == "passed":
        row["verdict"] = "passed"
        return row, []
    k, n = len(answers.failing), len(answers.judged)
    hint = fr.what_would_decide(
        judged_fail=k, n=n, judge=judge, confidence=pe.confidence, max_failure_rate=limit, sequential=pe.sequential
    )
    text = audit_first(hint, plan, pe)
    row.update(verdict="inconclusive", decide_hint=text)
    message = (
        f"slice {name}: the limit lies inside the interval, so the evidence decides neither way: {figures}. {text}"
    )
    return row, [Finding(State.REVIEW_REQUIRED, FAILURE_RATE_INCONCLUSIVE, message, answers.failing, name)]


def audit_first(hint: fr.WhatWouldDecide, plan: AuditPlan | None, pe: ProductEvidence) -> str:
    """What would decide a slice the calibration estimate leaves open, the cheapest route first: people
    labelling this run's audit plan (sized by the audit estimate's own functions, people failing its
    answers as calibration's Se and Sp predict), or more labelled answers in calibration, or more answers."""
    if plan is not None and plan.undecidable is not None and not pe.sequential:
        return f"{hint.text} People's audit cannot decide it either: {plan.undecidable}."
    # On a lane that stops once decided the audit cannot pass a slice its interval left open.
    audit = None if pe.sequential else audit_route(plan, pe.queue_command)
    if audit is None:
        return hint.text
    items, route = audit
    calibration = [m for m in (hint.more_labelled_fails, hint.more_labelled_passes) if m is not None]
    # An item costs people's time, an answer a judgment: answers are the cheaper route up to ten per item.
    if (calibration and min(calibration) < items) or (
        hint.more_answers is not None and hint.more_answers <= 10 * items
    ):
        return f"{hint.text} Or {route}."
    return f"Cheapest: {route}. Otherwise: {hint.text}"


def _base(
    name: str, answers: SliceAnswers, base: BaseVerdicts, pe: ProductEvidence
) -> tuple[dict[str, Any], list[Finding]]:
    """The slice's answers paired with the base run's verdicts of the same cases."""
    table = {"both_pass": 0, "both_fail": 0, "pass_to_fail": 0, "fail_to_pass": 0}
    turned: list[str] = []
    for o in sorted(answers.judged, key=lambda o: o.case.case_id):
        before = base.verdicts.get(o.case.case_id)
        if before not in ("pass", "fail"):
            continue
        key = {
            ("pass", "pass"): "both_pass",
            ("fail", "fail"): "both_fail",
            ("pass", "fail"): "pass_to_fail",
            ("fail", "pass"): "fail_to_pass",
        }[(before, o.verdict or "")]
        table[key] += 1
        if key == "pass_to_fail":
            turned.append(o.case.case_id)
    b, c = table["pass_to_fail"], table["fail_to_pass"]
    p = fr.mcnemar_exact(b, c)
    regressed = p < 1 - pe.confidence and b > c
    row = {**table, "p_value": p, "regressed": regressed, "turned_fail": turned}
    if not (regressed and pe.fail_on_regression):
        return row, []
    message = (
        f"slice {name}: {plural(b, 'answer')} the base run passed {agree(b, 'is', 'are')} judged fail now, against {c} that turned the other "
        f"way (exact McNemar p = {p:.3g}, below {1 - pe.confidence:.3g}): the change made the application worse "
        f"here; first: {', '.join(turned[:5])}"
    )
    return row, [Finding(State.QUALITY_FAILED, REGRESSED, message, tuple(turned), name)]


def decide_product(ev: Evidence, pe: ProductEvidence) -> ProductDecision:
    """The product lane's findings and result.json's `product` section."""
    slices: dict[str, Any] = {}
    notes: list[str] = []
    why_not = _why_not_compared(ev, pe)
    unchecked = _unchecked(ev, pe, why_not)
    findings: list[Finding] = [] if unchecked is None else [unchecked]
    if why_not is not None and pe.base is not None and unchecked is None:
        notes.append(f"--base-result: {why_not}; no slice is compared with the base")
    used: set[LabelKey] = set()
    looks = stop_check(ev, pe) if pe.sequential else None
    by_slice = answers_by_slice(ev)
    plans = _plans(ev, pe, by_slice)
    for name, answers in by_slice.items():
        limit = ev.policy.slices[name].max_failure_rate if name in ev.policy.slices else None
        if limit is None:
            continue  # an unknown slice: its validator blocks
        plan = plans.get(name)
        row, found = _slice(name, answers, limit, pe, looks.look(name) if looks is not None else None, plan)
        row, found, slice_used = _audited(
            name, answers, limit, ev.policy.slices[name].max_failures, pe, row, found, ev.policy.review.min_alpha, plan
        )
        if pe.require_audit or ev.policy.slices[name].require_audit:
            found += _required(name, row, found, plan, pe)
        used |= slice_used
        if pe.base is not None and why_not is None:
            row["base"], regressed = _base(name, answers, pe.base, pe)
            found += regressed
        slices[name] = row
        findings += found
    section: dict[str, Any] = {
        "confidence": pe.confidence,
        "method": _method(pe),
        "sequential": pe.sequential,
        "order_seed": ev.plan.order_seed,
        "slices": slices,
    }
    if pe.audit is not None:
        section["audit"] = pe.audit.source
        section["audit_ledger"] = [
            {"file": f.path, "lines": f.lines, "last_line_sha256": f.last_line_sha256} for f in pe.audit.files
        ]
        answered = [(o.case, o.response_sha256) for a in by_slice.values() for o in a.judged if o.response_sha256]
        judged = frozenset((case.case_id, sha) for case, sha in answered)
        items = frozenset(pe.audit.key_of(case, sha) for case, sha in answered)
        notes += [*pe.audit.notes, *unused_note(pe.audit, frozenset(used), judged, items)]
    return ProductDecision(tuple(findings), section, tuple(notes))


def _why_not_compared(ev: Evidence, pe: ProductEvidence) -> str | None:
    """Why no slice can be compared with the base run (None: it can, or no base was asked for)."""
    if pe.base is None:
        return None
    if pe.base.problem:
        return pe.base.problem
    if not any(o.case.case_id in pe.base.verdicts for o in ev.outcomes if not o.case.is_control):
        return "the base run judged none of this lane's questions (a run on other inputs)"
    return None


def _unchecked(ev: Evidence, pe: ProductEvidence, why_not: str | None) -> Finding | None:
    """Under `fail_on_regression`, a run that could not look for a regression says so: it cannot pass."""
    if not pe.fail_on_regression:
        return None
    if pe.base is None:
        why_not = "no --base-result was given"
    elif why_not is None:
        return None
    else:
        why_not = f"--base-result: {why_not}"
    message = (
        f"lane {ev.plan.lane} sets fail_on_regression, but no slice was compared with the base run ({why_not}), "
        "so a regression would go unseen; fix: pass the base branch's run of this lane (its --out) with "
        "--base-result (the Action's base-result input)"
    )
    return Finding(State.REVIEW_REQUIRED, REGRESSION_UNCHECKED, message)


# The calibration estimate's verdict findings, which the audit's replace when the audit decides.
_RATE_KINDS = frozenset({FAILURE_RATE_EXCEEDED, FAILURE_RATE_INCONCLUSIVE, JUDGE_UNFIT})
# How far a verdict holds a slice back: on a lane that stops once decided the audit may only raise it.
_SEVERITY = {"passed": 0, "inconclusive": 1, "judge_unfit": 1, "incomplete": 1, "exceeded": 2}


def _audited(
    name: str,
    answers: SliceAnswers,
    limit: float,
    max_failures: int | None,
    pe: ProductEvidence,
    row: dict[str, Any],
    found: list[Finding],
    min_alpha: float,
    plan: AuditPlan | None,
) -> tuple[dict[str, Any], list[Finding], frozenset[LabelKey]]:
    """The slice with people's audit: with usable labels the audit estimate decides it (its row
    beside the calibration estimate's); a zero-tolerance slice needs every judged-fail answer audited."""
    if pe.audit is None and max_failures is None:
        return row, found, frozenset()
    counts = pe.judges.get(name) if pe.calibrated else None
    a = audit_slice(
        name, answers, limit, max_failures, pe.confidence, counts, pe.audit, pe.queue_command, min_alpha, plan
    )
    row = {**row, "decided_by": "calibration", "audit": a.row, "zero_tolerance": a.zero}
    if not a.decides or a.row is None:
        return row, [*found, *a.findings], a.used
    if pe.sequential and _SEVERITY[a.row["verdict"]] < _SEVERITY[row["verdict"]]:
        # The lane stopped once decided: how many answers were judged hung on the judge's verdicts, and
        # the audit's tests count on a number fixed in advance. So here the audit may hold a slice
        # back, never let one through that the sequential interval did not pass.
        return row, [*found, *(f for f in a.findings if f.kind not in _RATE_KINDS)], a.used
    kept = [f for f in found if f.kind not in _RATE_KINDS]
    verdict = a.row["verdict"]
    if verdict != "exceeded" and answers.unjudged:
        verdict = "incomplete"
    row.update(decided_by="audit", verdict=verdict, calibration_verdict=row["verdict"])
    return row, [*kept, *a.findings], a.used


def _required(
    name: str, row: dict[str, Any], found: list[Finding], plan: AuditPlan | None, pe: ProductEvidence
) -> list[Finding]:
    """`require_audit`: a slice no label of its plan decides cannot pass, whatever the calibration
    estimate says (a judge that errs more on this run than on calibration's answers would pass it
    alone). None when people's labels decide it, when it fails anyway, or when their labels are
    there but disagree (labels_disagree says so)."""
    if row.get("decided_by") == "audit" or row["verdict"] == "exceeded":
        return []
    if any(f.kind in (LABELS_DISAGREE, AUDIT_REQUIRED) and f.slice == name for f in found):
        return []
    row["audit_required"] = True
    if plan is None:
        why = "and the records carry no order seed, so the run fixed no audit plan: run the lane again"
    elif plan.undecidable is not None:
        why = f"and no audit of this run can decide it: {plan.undecidable}; so this run cannot pass it"
    else:
        why = (
            f"and no label of this run's audit plan decides it yet: have people label the plan, {plan.words()} "
            f"(`{pe.queue_command}`, then `gate review serve`), and decide again with --audit LEDGER"
        )
    message = (
        f"slice {name} requires people's audit (`require_audit`), {why}; the calibration estimate alone "
        f"({row['verdict']}) does not pass it"
    )
    ids = tuple(sorted(plan.case_ids)) if plan is not None else ()
    return [Finding(State.REVIEW_REQUIRED, AUDIT_REQUIRED, message, ids, name)]


def _plans(ev: Evidence, pe: ProductEvidence, by_slice: Mapping[str, SliceAnswers]) -> dict[str, AuditPlan]:
    """Each slice's audit plan, from the run's order seed and its judged answers (none when the records
    carry no seed: no plan was fixed). A queue given with the audit must be exactly these plans."""
    seed = ev.plan.order_seed
    if seed is None:
        return {}
    plans: dict[str, AuditPlan] = {}
    for name, answers in by_slice.items():
        limit = ev.policy.slices[name].max_failure_rate if name in ev.policy.slices else None
        if limit is None:
            continue
        plans[name] = plan_slice(
            seed,
            name,
            answers,
            counts=pe.judges.get(name) if pe.calibrated else None,
            limit=limit,
            confidence=pe.confidence,
            max_failures=ev.policy.slices[name].max_failures,
            reviewers=ev.policy.review.reviewers_per_item,
            sized_at=ev.policy.slices[name].audit_sized_at,
        )
    if pe.audit is not None and pe.audit.queue is not None:
        # A slice with answers still unjudged has no final plan: a queue made then leaves it out.
        final = {name: plan for name, plan in plans.items() if not by_slice[name].unjudged}
        refuse_other_queue(pe.audit.queue, seed, final)
    return plans


def _method(pe: ProductEvidence) -> str:
    return fr.METHOD_SEQUENTIAL if pe.sequential else fr.METHOD


def new_stop_check(policy: Policy, plan: Plan, pe: ProductEvidence) -> ProductStopCheck:
    """The incremental check of a product lane that stops once decided, before any answer: the
    slices the lane holds answers of, their limits, the judge's figures there, and the order the
    lane sends its answers in (the looks follow it)."""
    limits = {name: s.max_failure_rate for name, s in policy.slices.items() if s.max_failure_rate is not None}
    judges = {name: _judge_of(c, pe.confidence) for name, c in pe.judges.items()} if pe.calibrated else {}
    slices = {c.slice for c in plan.eligible if not c.is_control}
    order = [c.case_id for c in plan.scheduled if not c.is_control]
    zero = {name for name, s in policy.slices.items() if s.max_failures is not None}
    whole = Counter(
        s for _, s in {(c.case_id, c.slice) for c in plan.scheduled if c.slice in zero and not c.is_control}
    )
    return ProductStopCheck(slices, limits, judges, pe.confidence, order, whole)


def _came_back(ev: Evidence) -> list[tuple[CaseOutcome, bool | None]]:
    """The answers that came back, in plan order, each judged fail (True), pass (False) or without a
    verdict (None: an error, a tie between repeats). A case never sent that comes before one that
    was (the lane sends in plan order) had no answer to send: it is passed over like one without a
    verdict, so `gate decide` without --responses looks where the run did."""
    answers = [o for o in ev.outcomes if not o.case.is_control]
    sent = [i for i, o in enumerate(answers) if o.called_model or o.bucket in ("completed", "errored")]
    last = sent[-1] if sent else -1
    out: list[tuple[CaseOutcome, bool | None]] = []
    for i, o in enumerate(answers):
        if o.bucket == "completed":
            out.append((o, o.verdict == "fail" if o.verdict in ("pass", "fail") else None))
        elif o.bucket == "errored" or (i < last and o.bucket == "unrun" and not o.called_model and _unsendable(ev, o)):
            out.append((o, None))
    return out


def _unsendable(ev: Evidence, o: CaseOutcome) -> bool:
    """The decision was given no answer for the case (`gate decide` without --responses) and no
    record of any kind names it: the run never scheduled it. With the answers given, a case without
    one is left out of the order already, and a missing record of an answer is never passed over."""
    unanswered = not (o.case.response or "").strip()
    return unanswered and all((o.case.case_id, i) not in ev.best for i in range(ev.plan.repeats))


def stop_check(ev: Evidence, pe: ProductEvidence) -> ProductStopCheck:
    """The stop check over the answers `ev` holds, in the order the lane sends them: the look that
    decided each slice is the look the run stopped at."""
    check = new_stop_check(ev.policy, ev.plan, pe)
    for o, judged_fail in _came_back(ev):
        check.add(o.case.case_id, o.case.slice, judged_fail)
    return check


def settled(ev: Evidence, pe: ProductEvidence) -> bool:
    """Whether the lane is decided by the answers judged so far (stop_when_decided): one slice
    `exceeded`, or every slice `passed`, each at the look that decided it (gate/decide/product/stop.py).
    The bounds hold at every look, so asking after each answer does not inflate the error; the
    answers never sent are then `not_needed`."""
    return stop_check(ev, pe).decided
