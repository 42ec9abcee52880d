"""The audit estimate: a slice's failure rate from people's labels on this run's own answers.

The judge splits a slice's `n` answers in two strata: the `K` it failed and the `n - K` it passed.
People label a random sample of each (the prefix of each stratum's seeded draw order). With
`pi = K/n`, `q_F` the share of audited judged-fail answers people failed and `q_P` the share of
audited judged-pass answers people failed, the slice's failure rate is

    p = pi * q_F + (1 - pi) * q_P

which needs no assumption that the judge errs on these answers as it did on calibration's: the
labels are on the answers themselves. Each side of its interval is an exact test
(gate/estimate/audit_bounds.py): `passed` by one test of `r_F + q_P` over the whole `1 - confidence`,
`exceeded` by the larger of an exact test of `pi * q_F` (at 80% of it) and the box of three
Clopper-Pearson bounds over `pi`, `q_F` and `q_P` (at 20%; it alone reads the failures among the
answers the judge passed). The verdict runs the tests at the limit; the bounds are their edges, for display.

Inside a stratum's sample an answer without a final pass or fail (unlabelled, abstained, awaiting
adjudication) counts as a failure for `high` and as a pass for `low`: skipping the hard answers
never helps the verdict either way.

Also here: the zero-tolerance count (`max_failures`) and the transport test (does calibration's
`Se` and `Sp` describe the judge on this run's answers?). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gate.estimate import audit_bounds
from gate.estimate.failure_rate import Rate, _cp_edges, _smallest, box_share, percent, span

METHOD = audit_bounds.METHOD
# The lower bound's split of 1 - confidence: most to the exact test, which decides `exceeded` with the
# fewest confirmed failures; the rest to the box, which alone reads failures the judge passed.
EXACT_SHARE = 0.8
# Final labels of an audited answer, as the decision reads them: people failed it, passed it, or
# there is no final pass/fail yet (abstained, awaiting adjudication, or unlabelled).
Final = Literal["fail", "pass", "open"]
AuditVerdict = Literal["passed", "exceeded", "inconclusive"]
MAX_MORE_AUDITED = 20_000
QUEUE_PASS_SAMPLE = 100  # judged-pass answers `gate review queue` draws per slice without --sample  # past this many audited answers, auditing is no practical route


@dataclass(frozen=True)
class StratumSample:
    """One stratum's audited prefix: `size` answers, `fails` people failed, `passes` people passed;
    the rest of the prefix (`open`) has no final pass or fail yet."""

    population: int
    size: int
    fails: int
    passes: int
    case_ids: tuple[str, ...]  # the prefix, in draw order

    @property
    def open(self) -> int:
        return self.size - self.fails - self.passes


def stratum_sample(order: Sequence[str], labels: Mapping[str, Final], population: int | None = None) -> StratumSample:
    """The prefix of `order` (a stratum's draw order) up to its last answer with a final label
    (pass, fail, or an abstention people settled on), with its counts. A prefix of a random order
    is a simple random sample of the stratum; what lies past it was never looked at. `population`:
    the stratum's size when `order` is only the start of its draw (a queue's sample)."""
    end = 0
    for i, case_id in enumerate(order):
        if case_id in labels:
            end = i + 1
    prefix = tuple(order[:end])
    fails = sum(1 for c in prefix if labels.get(c) == "fail")
    passes = sum(1 for c in prefix if labels.get(c) == "pass")
    size = len(order) if population is None else population
    return StratumSample(population=size, size=end, fails=fails, passes=passes, case_ids=prefix)


@dataclass(frozen=True)
class AuditRate:
    """A slice's failure rate from the audit, its box interval, and what it was computed from."""

    estimate: float | None  # None while a stratum that has answers has no final label yet
    low: float
    high: float
    judged_fail: int  # K
    n: int
    pi: Rate  # K/n with its bounds
    q_fail: Rate  # people's fail share among audited judged-fail answers (x: the low count)
    q_pass: Rate  # ... among audited judged-pass answers
    fail_sample: StratumSample
    pass_sample: StratumSample
    confidence: float
    method: str = METHOD


def _q(sample: StratumSample, alpha: float) -> Rate:
    """The stratum's people-fail share: low from the count with open answers passed, high with
    them failed; [0, 1] when nothing is audited."""
    a = sample.size
    if a == 0:
        return Rate(value=0.0, low=0.0, high=1.0, x=0, n=0)
    low = _cp_edges(sample.fails, a, alpha)[0]
    high = _cp_edges(sample.fails + sample.open, a, alpha)[1]
    labelled = sample.fails + sample.passes
    value = sample.fails / labelled if labelled else 0.0
    return Rate(value=value, low=low, high=high, x=sample.fails, n=a)


def _mix(pi_low: float, pi_high: float, q_f: float, q_p: float, up: bool) -> float:
    ends = (pi_low * q_f + (1 - pi_low) * q_p, pi_high * q_f + (1 - pi_high) * q_p)
    return min(1.0, max(ends)) if up else max(0.0, min(ends))


def _high_counts(fs: StratumSample, ps: StratumSample) -> tuple[int, int, int, int] | None:
    """What the upper bound reads (gate/estimate/audit_bounds.py): every judged-fail answer people did not
    pass, audited or not, counts as failing, and so do the judged-pass sample's unsettled answers.
    None: a judged-pass stratum with no audited answer bounds nothing."""
    n = fs.population + ps.population
    if n == 0 or (ps.population > 0 and ps.size == 0):
        return None
    return fs.fails + fs.open + (fs.population - fs.size), n, ps.fails + ps.open, ps.size


def _high(fs: StratumSample, ps: StratumSample, confidence: float) -> float:
    counts = _high_counts(fs, ps)
    return 1.0 if counts is None else audit_bounds.audit_high(*counts, 1.0 - confidence)


def sample_verdict(fs: StratumSample, ps: StratumSample, limit: float, confidence: float) -> AuditVerdict:
    """The verdict at the limit: each exact test run at the limit itself (the bounds are its display)."""
    alpha = 1.0 - confidence
    counts = _high_counts(fs, ps)
    if counts is not None and audit_bounds.high_pvalue(*counts, limit) <= alpha:
        return "passed"
    n, share = fs.population + ps.population, alpha * EXACT_SHARE
    if n and fs.size and audit_bounds.low_pvalue(fs.population, n, fs.fails, fs.size, limit, share) <= share:
        return "exceeded"
    return "exceeded" if _box_low(fs, ps, alpha - share) > limit else "inconclusive"


def _box_low(fs: StratumSample, ps: StratumSample, alpha: float) -> float:
    """The box's lower bound at `alpha`: pi, q_F and q_P each at a third of it. It reads the failures
    people find among the answers the judge passed, which the exact test leaves out."""
    k, n = fs.population, fs.population + ps.population
    if n == 0:
        return 0.0
    pi_low, pi_high = _cp_edges(k, n, alpha / 3)
    return _mix(pi_low, pi_high, _q(fs, alpha / 3).low, _q(ps, alpha / 3).low, up=False)


def _low(fs: StratumSample, ps: StratumSample, confidence: float) -> float:
    """The lower bound: the larger of the exact test's (the judged-fail answers people failed, at
    EXACT_SHARE of 1 - confidence) and the box's (at the rest), so the larger misses at most
    1 - confidence (union bound). Unsettled answers count as passing."""
    alpha = 1.0 - confidence
    share, n = alpha * EXACT_SHARE, fs.population + ps.population
    exact = audit_bounds.audit_low(fs.population, n, fs.fails, fs.size, share) if n and fs.size else 0.0
    return max(exact, _box_low(fs, ps, alpha - share))


def audit_rate(*, fail_sample: StratumSample, pass_sample: StratumSample, confidence: float) -> AuditRate:
    """The slice's failure rate from its two audited strata (their populations are K and n - K)."""
    alpha = box_share(confidence)
    k, n = fail_sample.population, fail_sample.population + pass_sample.population
    if n == 0:
        pi = Rate(value=0.0, low=0.0, high=1.0, x=0, n=0)
    else:
        low, high = _cp_edges(k, n, alpha)
        pi = Rate(value=k / n, low=low, high=high, x=k, n=n)
    q_f, q_p = _q(fail_sample, alpha), _q(pass_sample, alpha)
    estimate: float | None = None
    settled_f = fail_sample.population == 0 or fail_sample.fails + fail_sample.passes > 0
    settled_p = pass_sample.population == 0 or pass_sample.fails + pass_sample.passes > 0
    if n and settled_f and settled_p:
        estimate = pi.value * q_f.value + (1 - pi.value) * q_p.value
    return AuditRate(
        estimate=estimate,
        low=_low(fail_sample, pass_sample, confidence),
        high=_high(fail_sample, pass_sample, confidence),
        judged_fail=k,
        n=n,
        pi=pi,
        q_fail=q_f,
        q_pass=q_p,
        fail_sample=fail_sample,
        pass_sample=pass_sample,
        confidence=confidence,
    )


def audit_verdict(rate: AuditRate, max_failure_rate: float) -> AuditVerdict:
    """passed when the exact test puts the rate within the limit, exceeded when above it."""
    return sample_verdict(rate.fail_sample, rate.pass_sample, max_failure_rate, rate.confidence)


# --- zero tolerance ---


@dataclass(frozen=True)
class ZeroTolerance:
    """`max_failures: N`: every answer the judge failed must be audited, and at most N failing answers
    confirmed by people, whichever way the judge went (one the judge passed and people failed counts)."""

    confirmed: tuple[str, ...]  # judged fail, and people failed it
    cleared: tuple[str, ...]  # judged fail, and people passed it
    unaudited: tuple[str, ...]  # judged fail, no final pass or fail from people yet
    max_failures: int
    missed: tuple[str, ...] = ()  # judged pass, and people failed it (found in the audit's draw)
    # Sent, and no verdict from the judge (an evaluator error, a tie): nobody has checked these, so
    # the slice cannot pass while they stand, whatever errors the lane otherwise tolerates.
    unjudged: tuple[str, ...] = ()

    @property
    def failures(self) -> tuple[str, ...]:
        """Every answer people confirmed as failing."""
        return self.confirmed + self.missed

    @property
    def verdict(self) -> Literal["failure_confirmed", "audit_required", "passed"]:
        if len(self.failures) > self.max_failures:
            return "failure_confirmed"
        return "audit_required" if self.unaudited or self.unjudged else "passed"


def zero_tolerance(
    judged_fail: Sequence[str],
    labels: Mapping[str, Final],
    max_failures: int,
    judged_pass: Sequence[str] = (),
    unjudged: Sequence[str] = (),
) -> ZeroTolerance:
    return ZeroTolerance(
        confirmed=tuple(c for c in judged_fail if labels.get(c) == "fail"),
        cleared=tuple(c for c in judged_fail if labels.get(c) == "pass"),
        unaudited=tuple(c for c in judged_fail if labels.get(c) not in ("fail", "pass")),
        max_failures=max_failures,
        missed=tuple(c for c in judged_pass if labels.get(c) == "fail"),
        unjudged=tuple(unjudged),
    )


# --- does calibration carry over to this run's answers? ---


@dataclass(frozen=True)
class Transport:
    """Does calibration's Se and Sp describe the judge on this run? The test compares the judge's
    diagnostic odds ratio, `Se·Sp / ((1 − Se)(1 − Sp))`, which calibration measures directly and which
    the audit measures as `odds(q_F) / odds(q_P)`: the two are equal whatever the failure rate when the
    judge errs on these answers as it did on calibration's. Each is a range; `carries_over` is False
    when the ranges lie wholly apart. `run_se`/`run_sp`: the judge's accuracy the audit implies."""

    predicted: tuple[float, float]  # the odds ratio calibration's Se and Sp allow
    seen: tuple[float, float]  # the odds ratio the audit allows
    carries_over: bool
    run_se: float | None
    run_sp: float | None
    # What calibration predicts for q_F and q_P at the failure rates the audit allows, and what it saw.
    predicted_fail: tuple[float, float] = (0.0, 1.0)
    seen_fail: tuple[float, float] = (0.0, 1.0)
    predicted_pass: tuple[float, float] = (0.0, 1.0)
    seen_pass: tuple[float, float] = (0.0, 1.0)


def _odds(q: float) -> float:
    return math.inf if q >= 1.0 else q / (1.0 - q)


def _ratio(num: float, den: float) -> float:
    if den == 0.0:
        return math.inf if num > 0 else 1.0
    return num / den


# The test spends 1 - confidence over ten one-sided bounds: both sides of Se, Sp, pi, q_F and q_P.
TRANSPORT_BOUNDS = 10


def transport(
    *,
    fail_sample: StratumSample,
    pass_sample: StratumSample,
    true_fail: int,
    false_pass: int,
    true_pass: int,
    false_fail: int,
    confidence: float,
) -> Transport | None:
    """An exact test, at 1 - confidence, of whether calibration's Se and Sp describe the judge on this
    run. Clopper-Pearson bounds of Se and Sp (calibration) and of pi, q_F and q_P (the audit; open
    answers widen them) bound two things both ways: the judge's odds ratio, and q_F and q_P themselves
    (under the hypothesis each is a monotone function of the failure rate, Se and Sp: PPV and the
    false-omission rate). Each of the ten bounds misses with probability at most (1 - confidence) / 10
    and neither comparison can find ranges apart unless one does, so when the calibration does carry
    over the test flags it with probability at most 1 - confidence. None without audited answers in
    both strata (a stratum with no answers counts as audited) or without both kinds of calibration labels."""
    fail_ok = fail_sample.size > 0 or fail_sample.population == 0
    pass_ok = pass_sample.size > 0 or pass_sample.population == 0
    if fail_sample.size + pass_sample.size == 0 or not (fail_ok and pass_ok):
        return None
    if not (true_fail + false_pass) or not (true_pass + false_fail):
        return None
    alpha = (1.0 - confidence) / TRANSPORT_BOUNDS
    se_lo, se_hi = _cp_edges(true_fail, true_fail + false_pass, alpha)
    sp_lo, sp_hi = _cp_edges(true_pass, true_pass + false_fail, alpha)
    qf, qp = _q(fail_sample, alpha), _q(pass_sample, alpha)
    # The odds ratio rises with Se and Sp, with q_F, and falls with q_P.
    predicted = (
        _ratio(se_lo * sp_lo, (1 - se_lo) * (1 - sp_lo)),
        _ratio(se_hi * sp_hi, (1 - se_hi) * (1 - sp_hi)),
    )
    seen = (_ratio(_odds(qf.low), _odds(qp.high)), _ratio(_odds(qf.high), _odds(qp.low)))
    apart = predicted[1] < seen[0] or seen[1] < predicted[0]
    k, n = fail_sample.population, fail_sample.population + pass_sample.population
    pi_lo, pi_hi = _cp_edges(k, n, alpha)
    p_lo = _mix(pi_lo, pi_hi, qf.low, qp.low, up=False)
    p_hi = _mix(pi_lo, pi_hi, qf.high, qp.high, up=True)
    # PPV rises with p, Se and Sp; the false-omission rate rises with p and falls with Se and Sp.
    predicted_fail = (_ppv(p_lo, se_lo, sp_lo), _ppv(p_hi, se_hi, sp_hi))
    predicted_pass = (_for(p_lo, se_hi, sp_hi), _for(p_hi, se_lo, sp_lo))
    seen_fail, seen_pass = (qf.low, qf.high), (qp.low, qp.high)
    if fail_sample.size:
        apart = apart or _apart(predicted_fail, seen_fail)
    if pass_sample.size:
        apart = apart or _apart(predicted_pass, seen_pass)
    # Se and Sp themselves, as the audit measures them on this run, from the same bounds (no level spent
    # again): the odds ratio alone hides a drop in Se behind the width Sp's bounds give it.
    run_se_range, run_sp_range = _run_accuracy(pi_lo, pi_hi, qf, qp)
    apart = apart or _apart((se_lo, se_hi), run_se_range) or _apart((sp_lo, sp_hi), run_sp_range)
    rate = audit_rate(fail_sample=fail_sample, pass_sample=pass_sample, confidence=confidence)
    run_se = run_sp = None
    if rate.estimate is not None and 0.0 < rate.estimate < 1.0:
        pi = rate.pi.value
        run_se = min(1.0, pi * rate.q_fail.value / rate.estimate)
        run_sp = min(1.0, (1 - pi) * (1 - rate.q_pass.value) / (1 - rate.estimate))
    return Transport(predicted, seen, not apart, run_se, run_sp, predicted_fail, seen_fail, predicted_pass, seen_pass)


def _share(part: float, rest: float) -> float | None:
    """part / (part + rest); None where both are 0 (the audit says nothing there)."""
    return part / (part + rest) if part + rest > 0 else None


def _run_accuracy(pi_lo: float, pi_hi: float, qf: Rate, qp: Rate) -> tuple[tuple[float, float], tuple[float, float]]:
    """The ranges of Se = pi*q_F / (pi*q_F + (1 - pi)*q_P) and Sp = (1 - pi)(1 - q_P) / ((1 - pi)(1 - q_P)
    + pi*(1 - q_F)) the audit's bounds allow: Se rises with pi and q_F and falls with q_P; Sp falls with
    pi and q_P and rises with q_F. An end the bounds leave undefined is the widest (0 or 1)."""
    se_lo = _share(pi_lo * qf.low, (1 - pi_lo) * qp.high)
    se_hi = _share(pi_hi * qf.high, (1 - pi_hi) * qp.low)
    sp_lo = _share((1 - pi_hi) * (1 - qp.high), pi_hi * (1 - qf.low))
    sp_hi = _share((1 - pi_lo) * (1 - qp.low), pi_lo * (1 - qf.high))
    return (
        (0.0 if se_lo is None else se_lo, 1.0 if se_hi is None else se_hi),
        (0.0 if sp_lo is None else sp_lo, 1.0 if sp_hi is None else sp_hi),
    )


def _apart(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[1] < b[0] or b[1] < a[0]


def _ppv(p: float, se: float, sp: float) -> float:
    """P(people fail | judge failed) when the rate is p and the judge has Se and Sp."""
    den = se * p + (1 - sp) * (1 - p)
    return se * p / den if den > 0 else 0.0


def _for(p: float, se: float, sp: float) -> float:
    """P(people fail | judge passed)."""
    den = (1 - se) * p + sp * (1 - p)
    return (1 - se) * p / den if den > 0 else 1.0


# --- what would decide an inconclusive slice by audit ---


def _projected(population: int, size: int, share: float) -> StratumSample:
    fails = round(share * size)
    return StratumSample(population=population, size=size, fails=fails, passes=size - fails, case_ids=())


def _fail_sizes(judged_fail: int, audited_fail: int) -> list[int]:
    """The judged-fail sample sizes worth trying: every size up to 60, then a geometric grid, and all."""
    low = max(1, audited_fail)
    sizes = set(range(low, min(judged_fail, 60) + 1)) | {judged_fail}
    size = 60.0
    while size < judged_fail:
        size *= 1.15
        sizes.add(min(judged_fail, max(low, round(size))))
    return sorted(x for x in sizes if x >= low)


def audits_to_decide(
    *,
    judged_fail: int,
    n: int,
    q_fail: float,
    q_pass: float,
    confidence: float,
    max_failure_rate: float,
    audited_fail: int = 0,
) -> tuple[int, int] | None:
    """The fewest audited answers that would decide the slice: a sample of the answers the judge failed
    and one of those it passed (at least one of each stratum that has answers, as the decision needs),
    people failing them at the shares `q_fail` and `q_pass` (projected, as what_would_decide projects
    answers), the smallest total first. Counted by the exact tests `audit_verdict` runs (gate/decide/
    audit_bounds.py). None: no number up to the strata's sizes (or MAX_MORE_AUDITED) decides it."""
    passes = n - judged_fail
    alpha = 1.0 - confidence
    least_pass = 1 if passes else 0  # the decision reads the audit only with a judged-pass answer audited
    sizes = _fail_sizes(judged_fail, audited_fail) if judged_fail else [0]
    best: tuple[int, int] | None = None

    # Exceeded: the smallest judged-fail sample that decides (scanned, not bisected: rounding the projected
    # failures makes the verdict step up and down with the size).
    for a_f in sizes if judged_fail else []:
        fs = _projected(judged_fail, a_f, q_fail)
        if (
            fs.fails
            and sample_verdict(fs, _projected(passes, least_pass, q_pass), max_failure_rate, confidence) == "exceeded"
        ):
            best = (a_f, least_pass)
            break
    # Passed: the upper bound counts every judged-fail answer not audited as failing.
    for a_f in sizes:
        if best is not None and a_f + least_pass >= best[0] + best[1]:
            break
        fail_sample = _projected(judged_fail, a_f, q_fail)

        def passed(m: int, fail_sample: StratumSample = fail_sample) -> bool:
            counts = _high_counts(fail_sample, _projected(passes, m, q_pass))
            return counts is not None and audit_bounds.high_pvalue(*counts, max_failure_rate) <= alpha

        if passes == 0:
            found: int | None = 0 if passed(0) else None
        else:
            found = _smallest(passed, min(passes, MAX_MORE_AUDITED))
        if found is not None and (best is None or a_f + found < best[0] + best[1]):
            best = (a_f, found)
    return best


def audit_route_text(
    route: tuple[int, int] | None, audited: tuple[int, int], command: str, populations: tuple[int, int]
) -> str | None:
    """The route in words: 'people labelling the first 12 of the 20 answers the judge failed and the
    first 40 of the 2,957 it passed, in the queue's order (gate review queue ...)'. The audited sample
    of a stratum is a prefix of its draw: the first so many."""
    if route is None:
        return None
    fails, passes = route
    parts = []
    if fails > audited[0]:
        whole = fails == populations[0]
        parts.append(
            f"all {populations[0]:,} answers the judge failed"
            if whole
            else f"the first {fails:,} of the {populations[0]:,} answers the judge failed"
        )
    if passes > audited[1]:
        whole = passes == populations[1]
        parts.append(
            f"all {populations[1]:,} it passed"
            if whole
            else f"the first {passes:,} of the {populations[1]:,} it passed"
        )
    if not parts:
        return None
    # The queue draws every judged-fail answer and 100 judged-pass ones by default; `--sample N` the first N of each.
    if passes > QUEUE_PASS_SAMPLE:
        command = f"{command} --sample {max(fails, passes)}"
    return f"people labelling {' and '.join(parts)}, in the queue's order ({command})"


def rate_text(rate: AuditRate, limit: float) -> str:
    """The audit's figures in one clause."""
    shown = span(rate.low, rate.high)
    est = "no estimate yet" if rate.estimate is None else f"estimated failure rate {percent(rate.estimate)}"
    fs, ps = rate.fail_sample, rate.pass_sample
    return (
        f"audit: {est} ({shown}), limit {percent(limit)}; people failed {fs.fails} of {fs.size} audited answers "
        f"the judge failed ({fs.population} in all) and {ps.fails} of {ps.size} it passed ({ps.population} in all)"
        + (
            f"; {fs.open + ps.open} drawn answers without a final label count against the verdict"
            if fs.open + ps.open
            else ""
        )
    )


Orderer = Callable[[str, str, Sequence[str]], list[str]]
