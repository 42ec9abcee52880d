"""A product slice decided with people's labels on this run's own answers (the audit).

Pure: it reads the slice's judged answers (`SliceAnswers`), the labels people gave them
(`AuditEvidence`, read from the ledger by gate/review/audit_labels.py) and the calibration's counts, and
returns the slice's `audit` row, the findings that replace the calibration estimate's when the audit
decides, and the zero-tolerance and transport findings. The statistics are gate/estimate/audit_rate.py's.

The sample is the run's audit plan (gate/decide/product/audit_plan.py), fixed before anyone labelled:
inside it an item without a final pass or fail counts against the verdict, and a label beyond it is
listed and never used, so labelling until it passes buys nothing. The rule is fixed before the data:
a slice with a final label on an item of its plan is decided by the audit estimate; any other by the
calibration estimate. Never the better of the two. Both are shown. Labels on the judged-fail answers
alone still count for zero tolerance (`max_failures`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gate.decide.product.audit_plan import AuditPlan
from gate.estimate import audit_rate as ar
from gate.estimate import audit_sizing as ep
from gate.estimate import failure_rate as fr
from gate.model.states import (
    AUDIT_REQUIRED,
    CALIBRATION_NOT_TRANSFERABLE,
    FAILURE_CONFIRMED,
    FAILURE_RATE_EXCEEDED,
    FAILURE_RATE_INCONCLUSIVE,
    LABELS_DISAGREE,
    Finding,
    State,
)
from gate.model.wording import agree, listed, plural
from gate.review.agreement import alpha, alpha_interval
from gate.review.audit_labels import AuditEvidence, LabelKey
from gate.review.queue import ABSTAIN

if TYPE_CHECKING:
    from gate.decide.product.answers import JudgeCounts, SliceAnswers


@dataclass(frozen=True)
class AuditedSlice:
    row: dict[str, Any] | None  # product.slices.<slice>.audit; None without usable labels
    decides: bool
    findings: tuple[Finding, ...]
    zero: dict[str, Any] | None
    used: frozenset[LabelKey]  # the labels on items of this run's audit plan, settled or not


def _labels_of(answers: SliceAnswers, audit: AuditEvidence) -> tuple[dict[str, ar.Final], dict[str, LabelKey]]:
    """People's settled labels on the slice's answers this run judged, by case id, and each answer's
    label identity: a label counts only on the very item people saw (this case's question and evidence
    text, the answer judged) under the rubric the policy gates with."""
    out: dict[str, ar.Final] = {}
    keys: dict[str, LabelKey] = {}
    for o in answers.judged:
        if o.response_sha256 is None:
            continue
        key = audit.key_of(o.case, o.response_sha256)
        found = audit.labels.get(key)
        if found is None:
            continue
        keys[o.case.case_id] = key
        if found.final is not None:
            out[o.case.case_id] = found.final
    return out, keys


def _sample_dict(s: ar.StratumSample) -> dict[str, int]:
    return {
        "population": s.population,
        "audited": s.size,
        "people_fail": s.fails,
        "people_pass": s.passes,
        "open": s.open,
    }


def _figures(rate: ar.AuditRate, limit: float, confidence: float) -> str:
    """The audit's figures in one clause. A plan that labels none of a stratum (one sized to show a slice
    exceeded reads only answers the judge failed) gives a bound, not an estimate."""
    fs, ps = rate.fail_sample, rate.pass_sample
    est = (
        f"estimated failure rate {fr.percent(rate.estimate)}"
        if rate.estimate is not None
        else f"failure rate at least {fr.percent(rate.low)}"
    )
    passed = (
        f"{ps.fails} of {ps.size} it passed ({ps.population} in all)"
        if ps.size or not ps.population
        else f"none of the {ps.population} it passed are in the plan"
    )
    open_ = fs.open + ps.open
    return (
        f"audit: {est} ({fr.span(rate.low, rate.high)}), limit {fr.percent(limit)}; people failed {fs.fails} of "
        f"{fs.size} audited answers the judge failed ({fs.population} in all) and {passed}"
        f"{f'; {open_} drawn answers without a final label count against the verdict' if open_ else ''}"
        f" (at {confidence:g} confidence each side)"
    )


def usable(fail_order: Sequence[str], pass_order: Sequence[str], labels: Mapping[str, ar.Final]) -> bool:
    """Whether the audit decides the slice: a final label on a planned answer of each stratum the plan
    draws from (a stratum without one leaves its share anywhere in [0, 1], which decides nothing; so
    labelling only the answers the judge failed, as zero tolerance asks, leaves the verdict to
    calibration). Fixed before the labels are read, never the better of the two estimates;
    `require_audit` is what makes the audit decide whether people labelled or not."""
    strata = [planned for planned in (fail_order, pass_order) if planned]
    return bool(strata) and all(any(c in labels for c in planned) for planned in strata)


def planned_sample(population: int, planned: Sequence[str], labels: Mapping[str, ar.Final]) -> ar.StratumSample:
    """A stratum's sample as the plan fixed it: every planned answer, labelled or not (an answer without
    a final pass or fail is `open`: a failure for the upper bound, a pass for the lower)."""
    return ar.StratumSample(
        population=population,
        size=len(planned),
        fails=sum(1 for c in planned if labels.get(c) == "fail"),
        passes=sum(1 for c in planned if labels.get(c) == "pass"),
        case_ids=tuple(planned),
    )


def audit_slice(
    name: str,
    answers: SliceAnswers,
    limit: float,
    max_failures: int | None,
    confidence: float,
    counts: JudgeCounts | None,
    audit: AuditEvidence | None,
    command: str,
    min_alpha: float = 0.667,
    plan: AuditPlan | None = None,
) -> AuditedSlice:
    """The slice's audit: its row, whether it decides the slice, and its findings. `min_alpha`: the
    policy's `review.min_alpha`; labels people agree on less do not decide the slice's failure rate. Only
    where the audit would decide it: labels of the judged-fail answers alone (zero tolerance's) decide no
    rate, and with nearly every one `fail` a single difference puts alpha at 0; zero tolerance reads each
    answer's final label, a difference settled by an adjudicator. `plan`: the run's audit plan of the
    slice (None: records without an order seed, so no plan; only zero tolerance reads labels then, on
    the answers the judge failed)."""
    labels, keys = _labels_of(answers, audit) if audit is not None else ({}, {})
    failing = answers.failing
    passing = tuple(o.case.case_id for o in answers.judged if o.verdict == "pass")
    fail_order = list(plan.judged_fail.case_ids) if plan is not None else list(failing)
    pass_order = list(plan.judged_pass.case_ids) if plan is not None else []
    in_draw = {c: labels[c] for c in (*fail_order, *pass_order) if c in labels}
    used = frozenset(keys[c] for c in (*fail_order, *pass_order) if c in keys)
    # The failure rate reads the plan's own sample (a zero-tolerance slice labels every judged-fail answer).
    rated_fail = list(plan.judged_fail.rated) if plan is not None else []
    rated_pass = list(plan.judged_pass.rated) if plan is not None else []
    rated = [keys[c] for c in (*rated_fail, *rated_pass) if c in keys]
    agreement = _agreement(name, rated, audit, min_alpha) if audit is not None else None
    findings: list[Finding] = []
    # Answers sent that came back with no verdict hold zero tolerance open with a blocker of its own (the
    # lane may tolerate evaluator errors; this slice may not); answers not run yet have their own blockers.
    unchecked = answers.no_verdict
    zero = (
        _zero(name, failing, passing, in_draw, max_failures, command, unchecked) if max_failures is not None else None
    )
    if zero is not None:
        findings += zero[1]
    # The sample is the plan, fixed before anyone labelled: the population is the run's.
    fs = planned_sample(len(failing), rated_fail, in_draw)
    ps = planned_sample(len(passing), rated_pass, in_draw)
    if plan is None or not usable(rated_fail, rated_pass, in_draw) or not answers.judged:
        return AuditedSlice(None, False, tuple(findings), zero[0] if zero else None, used)
    disagree = agreement is not None and agreement.finding is not None
    fail_labels = [in_draw.get(c) for c in rated_fail]
    pass_labels = [in_draw.get(c) for c in rated_pass]
    rate = ep.plan_rate(plan.sizing, fail_labels, pass_labels, rated_fail, rated_pass)
    verdict = ep.plan_verdict(plan.sizing, fail_labels, pass_labels)
    row: dict[str, Any] = {
        "estimate": rate.estimate,
        "low": rate.low,
        "high": rate.high,
        "verdict": verdict,
        "method": rate.method,
        "judged_fail": _sample_dict(fs),
        "judged_pass": _sample_dict(ps),
        "confirmed_fail": [c for c in fs.case_ids if in_draw.get(c) == "fail"],
        "missed_fail": [c for c in ps.case_ids if in_draw.get(c) == "fail"],
        "cleared_fail": [c for c in fs.case_ids if in_draw.get(c) == "pass"],
        "transport": None,
        "decide_hint": None,
        "alpha": agreement.alpha if agreement is not None else None,
        "alpha_interval": list(agreement.interval) if agreement is not None and agreement.interval else None,
        "labels_disagree": disagree,
    }
    if disagree:  # shown beside the calibration estimate, deciding nothing
        assert agreement is not None and agreement.finding is not None
        return AuditedSlice(row, False, (agreement.finding, *findings), zero[0] if zero else None, used)
    findings += _verdict_findings(name, answers, rate, verdict, limit, confidence, plan, row, command)
    if counts is not None:
        findings += _transport(name, fs, ps, counts, confidence, row)
    return AuditedSlice(row, True, tuple(findings), zero[0] if zero else None, used)


@dataclass(frozen=True)
class Agreement:
    alpha: float | None  # None: undefined (no item labelled twice, or every label the same)
    interval: tuple[float, float] | None  # its bootstrap 95% interval
    items: int  # the items labelled by two people or more (abstentions aside): what alpha rests on
    finding: Finding | None  # labels_disagree when alpha is below review.min_alpha


def _agreement(name: str, drawn: Sequence[LabelKey], audit: AuditEvidence, min_alpha: float) -> Agreement:
    """How far the people who labelled the slice's drawn answers agree: Krippendorff's alpha over their
    own labels (an abstention is no value, as `gate review status` counts it)."""
    units = {key.item_id: {r: v for r, v in audit.labels[key].reviewers.items() if v != ABSTAIN} for key in drawn}
    a = alpha(units)
    if a is None:
        return Agreement(None, None, 0, None)
    interval = alpha_interval(units)
    items = sum(1 for by in units.values() if len(by) >= 2)
    if a >= min_alpha:
        return Agreement(a, interval, items, None)
    shown = f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval is not None else ""
    message = (
        f"slice {name}: the people who labelled its audited answers agree too little for their labels to decide "
        f"it: Krippendorff's alpha {a:.3f}{shown} (bootstrap 95%, over {plural(items, 'item')} labelled twice or "
        f"more), below review.min_alpha {min_alpha:g}; the calibration estimate decides the slice, people's audit "
        "is shown beside it; fix: see where the reviewers differ (`gate review status` of the audit queue), "
        "sharpen the rubric there, and have the answers labelled again"
    )
    return Agreement(a, interval, items, Finding(State.REVIEW_REQUIRED, LABELS_DISAGREE, message, slice=name))


def _verdict_findings(
    name: str,
    answers: SliceAnswers,
    rate: ar.AuditRate,
    verdict: ar.AuditVerdict,
    limit: float,
    confidence: float,
    plan: AuditPlan | None,
    row: dict[str, Any],
    command: str,
) -> list[Finding]:
    figures = _figures(rate, limit, confidence)
    if verdict == "exceeded":
        message = f"slice {name}: the application's answers fail too often, by people's audit of this run: {figures}"
        confirmed = tuple(row["confirmed_fail"]) + tuple(row["missed_fail"])
        return [Finding(State.QUALITY_FAILED, FAILURE_RATE_EXCEEDED, message, confirmed or answers.failing, name)]
    if verdict == "passed" or answers.unjudged:
        return []
    hint = audit_hint(rate=rate, plan=plan, command=command)
    row["decide_hint"] = hint
    message = f"slice {name}: the limit lies inside the audit's interval, so it decides neither way: {figures}; {hint}"
    return [Finding(State.REVIEW_REQUIRED, FAILURE_RATE_INCONCLUSIVE, message, answers.failing, name)]


def audit_hint(*, rate: ar.AuditRate, plan: AuditPlan | None, command: str) -> str:
    """What would decide the slice now that people's labels on its plan are in: the planned answers
    still without a final label, or (the plan all labelled) nothing more of this run: labels beyond
    the plan are never used, so no hint ever asks for more of them."""
    fs, ps = rate.fail_sample, rate.pass_sample
    open_ = fs.open + ps.open
    if open_:
        of = f" of the {plural(plan.items, 'item')} of this run's audit plan" if plan is not None else ""
        return (
            f"{plural(open_, 'planned answer')}{of} {agree(open_, 'has', 'have')} no final label yet and "
            f"{agree(open_, 'counts', 'count')} against the verdict: have people label {agree(open_, 'it', 'them')} "
            f"(`{command}`, then `gate review serve`), and the plan decides it then if it can"
        )
    return (
        "every answer of this run's audit plan has its final label, and the limit still lies inside the "
        "interval: no more labels of this run decide it (a label beyond the plan is never used); a run of "
        "more answers draws a plan of its own"
    )


def audit_route(plan: AuditPlan | None, command: str) -> tuple[int, str] | None:
    """The audit as a route to a verdict before anyone labels: this run's audit plan, its items and
    labels counted apart; None when there is no plan to label (no seed, or no plan of this run can
    decide the limit: the plan says so itself)."""
    if plan is None or plan.undecidable is not None or plan.items == 0:
        return None
    return plan.items, f"people labelling this run's audit plan, {plan.words()} (`{command}`), {plan.power_words()}"


def _transport(
    name: str, fs: ar.StratumSample, ps: ar.StratumSample, counts: JudgeCounts, confidence: float, row: dict[str, Any]
) -> list[Finding]:
    t = ar.transport(
        fail_sample=fs,
        pass_sample=ps,
        true_fail=counts.true_fail,
        false_pass=counts.false_pass,
        true_pass=counts.true_pass,
        false_fail=counts.false_fail,
        confidence=confidence,
    )
    if t is None:
        return []
    row["transport"] = {
        "carries_over": t.carries_over,
        "predicted_odds_ratio": [_finite(v) for v in t.predicted],
        "seen_odds_ratio": [_finite(v) for v in t.seen],
        "run_se": t.run_se,
        "run_sp": t.run_sp,
    }
    if t.carries_over:
        return []
    se = counts.true_fail / (counts.true_fail + counts.false_pass)
    sp = counts.true_pass / (counts.true_pass + counts.false_fail)
    on_run = (
        f"on this run's answers people's audit implies it catches about {fr.percent(t.run_se)} of failing answers and "
        f"passes {fr.percent(t.run_sp)} of good ones"
        if t.run_se is not None and t.run_sp is not None
        else "on this run's answers people's audit disagrees with it"
    )
    message = (
        f"slice {name}: the judge's calibration does not describe it on this run's answers: calibration measured "
        f"Se {fr.percent(se)} and Sp {fr.percent(sp)}, {on_run} (the odds ratio of a judged-fail answer failing "
        f"{_ratio_text(t.seen)} against calibration's {_ratio_text(t.predicted)}, an exact test at "
        f"{1 - confidence:.3g}); the audit estimate decides the slice, but a run without an audit would rest on "
        "figures that no longer hold; fix: label new answers of this slice into calibration and run `gate "
        "calibrate` again, or find what changed in the answers"
    )
    return [Finding(State.REVIEW_REQUIRED, CALIBRATION_NOT_TRANSFERABLE, message, slice=name)]


def _finite(v: float) -> float | None:
    return None if math.isinf(v) else v


def _ratio_text(r: tuple[float, float]) -> str:
    def one(v: float) -> str:
        return "unbounded" if math.isinf(v) else f"{v:,.3g}"

    return f"{one(r[0])}-{one(r[1])}"


def _zero(
    name: str,
    failing: Sequence[str],
    passing: Sequence[str],
    labels: Mapping[str, ar.Final],
    max_failures: int,
    command: str,
    unjudged: Sequence[str] = (),
) -> tuple[dict[str, Any], list[Finding]]:
    z = ar.zero_tolerance(failing, labels, max_failures, passing, unjudged)
    row = {
        "max_failures": max_failures,
        "verdict": z.verdict,
        "confirmed": list(z.confirmed),
        "missed": list(z.missed),
        "cleared": list(z.cleared),
        "unaudited": list(z.unaudited),
        "unjudged": list(z.unjudged),
    }
    if z.verdict == "failure_confirmed":
        n = len(z.failures)
        how = f"{len(z.confirmed)} the judge failed, {len(z.missed)} it passed"
        message = (
            f"slice {name}: people confirmed {plural(n, 'answer')} as failing ({how}: "
            f"{listed(z.failures)}), more than `max_failures: {max_failures}` allows"
        )
        return row, [Finding(State.QUALITY_FAILED, FAILURE_CONFIRMED, message, z.failures, name)]
    if z.verdict == "audit_required":
        parts = []
        if z.unaudited:
            n = len(z.unaudited)
            parts.append(
                f"{plural(n, 'answer')} the judge failed {agree(n, 'has', 'have')} no final label from people yet "
                f"({listed(z.unaudited)}); fix: have people label them: `{command}`, then `gate review serve`, and "
                "decide again with --audit LEDGER"
            )
        if z.unjudged:
            n = len(z.unjudged)
            parts.append(
                f"{plural(n, 'answer')} {agree(n, 'has', 'have')} no verdict from the judge ({listed(z.unjudged)}: an "
                "evaluator error or a tie between repeats), so nobody has checked "
                f"{agree(n, 'it', 'them')}; fix: judge {agree(n, 'it', 'them')} (run the lane again with --resume)"
            )
        message = f"slice {name} allows at most {plural(max_failures, 'failure')} people confirm, and " + "; and ".join(
            parts
        )
        return row, [Finding(State.REVIEW_REQUIRED, AUDIT_REQUIRED, message, (*z.unaudited, *z.unjudged), name)]
    return row, []


def unused_note(
    audit: AuditEvidence,
    used: frozenset[LabelKey],
    judged: frozenset[tuple[str, str]],
    items: frozenset[LabelKey] = frozenset(),
) -> list[str]:
    """The ledger's labels the decision did not use, listed, never used: beyond the run's audit plan (on
    an item of this run the plan did not draw), on another item of an answer this run judged (another
    question, evidence text or rubric than the run's), and on answers this run did not judge.
    `judged`: (case id, response sha256) of this run's answers; `items`: their label identities."""
    beyond: list[str] = []
    other_item: list[str] = []
    elsewhere: list[str] = []
    for key, label in audit.labels.items():
        if key not in used:
            shown = label.case_id or key.item_id[:12]
            if key in items:
                beyond.append(shown)
            else:
                (other_item if (label.case_id or "", label.response_sha256) in judged else elsewhere).append(shown)
    notes = []
    if beyond:
        n = len(beyond)
        notes.append(
            f"{plural(n, 'label')} of {audit.source} {agree(n, 'is', 'are')} on answers of this run beyond its audit "
            f"plan ({listed(sorted(beyond), 5)}): the plan was fixed before anyone labelled, and the audit reads "
            f"exactly its sample, so {agree(n, 'it is', 'they are')} listed and never used"
        )
    if other_item:
        n = len(other_item)
        notes.append(
            f"{plural(n, 'label')} of {audit.source} {agree(n, 'is', 'are')} on an answer this run judged, but shown "
            f"under another question, evidence text or rubric than this run's ({listed(sorted(other_item), 5)}): "
            f"people did not see this run's item, so {agree(n, 'it is', 'they are')} never used"
        )
    if elsewhere:
        n = len(elsewhere)
        notes.append(
            f"{plural(n, 'label')} of {audit.source} {agree(n, 'is', 'are')} on answers this run did not judge "
            f"({listed(sorted(elsewhere), 5)}); {agree(n, 'it was', 'they were')} not used"
        )
    if (other_item or elsewhere) and not used:
        # A ledger the policy names for every release holds no label of a new release's answers yet.
        notes.insert(
            0,
            f"no label of {audit.source} is on an item of this run's audit plan, so the audit decides nothing here (a "
            "ledger of an earlier release, or of other evidence?); people label this run's answers from "
            "`gate review queue --from` this run's output directory",
        )
    return notes
