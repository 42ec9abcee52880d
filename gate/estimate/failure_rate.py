"""The product gate's statistics: a slice's failure rate corrected for the judge's own misses.

The judge that `gate calibrate` measured catches a failing answer with sensitivity `Se` and passes
a good one with specificity `Sp`. Of `n` answers it judged, `k` were judged fail; the corrected
failure rate is Rogan-Gladen's `(k/n + Sp - 1) / (Se + Sp - 1)`, clipped to [0, 1].

The interval is the box construction: each of `k/n`, `Se` and `Sp` gets a one-sided bound at level
`1 - a` with `a = (1 - confidence) / 3`, and the bounds of the rate are the box's corners (the
rate rises with `k/n` and `Sp` and falls with `Se`). A bound of the rate can only be wrong when one
of its three bounds is, so each holds at `confidence` on its own (union bound). The bounds of `Se`
and `Sp` are Clopper-Pearson; the bound of `k/n` is Clopper-Pearson for a fixed number of answers,
or, when the run may stop as soon as the slice is decided (`sequential`), a confidence sequence
(Robbins' beta-binomial mixture), which holds at every look at once, so stopping on a look costs
no validity. bench/product_coverage.py shows both on a grid.

Pure: no I/O, no clock. numpy and scipy are imported inside the functions (start-up time).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

METHOD = "rogan-gladen+box-clopper-pearson"
METHOD_SEQUENTIAL = "rogan-gladen+box-clopper-pearson+beta-binomial-confidence-sequence"

# The mixing prior of the confidence sequence for k/n: Beta(1/2, 10), its mass where the judged
# fail shares of gated slices lie (mean ~5%); tighter there than a flat prior, no worse at 25%.
CS_PRIOR = (0.5, 10.0)

# How far what_would_decide looks before it says no number can decide the slice.
MAX_MORE_ANSWERS = 10_000_000
MAX_MORE_LABELLED = 20_000  # of one kind: past this, labelling is no practical way to decide it

Verdict = Literal["passed", "exceeded", "inconclusive", "judge_unfit"]


@dataclass(frozen=True)
class Rate:
    """A proportion x/n with its one-sided bounds (0.0 and [0, 1] when n == 0)."""

    value: float
    low: float
    high: float
    x: int
    n: int


@dataclass(frozen=True)
class JudgeAccuracy:
    """The judge's accuracy in one slice, from calibration's labelled answers."""

    se: Rate  # sensitivity: true_fail / (true_fail + false_pass)
    sp: Rate  # specificity: true_pass / (true_pass + false_fail)


@dataclass(frozen=True)
class FailureRate:
    """A slice's corrected failure rate and its interval, with what it was computed from."""

    estimate: float
    low: float
    high: float
    judged_fail: int
    n: int
    method: str
    sequential: bool
    judge_informative: bool


@dataclass(frozen=True)
class WhatWouldDecide:
    """What would turn an inconclusive slice into a decided one, in numbers and in one sentence."""

    more_answers: int | None
    more_labelled_fails: int | None
    judge_limited: bool
    text: str
    more_labelled_passes: int | None = None


def box_share(confidence: float) -> float:
    """The level `a` each of the box's three bounds may miss at: a third of `1 - confidence`,
    so a corner built from three of them misses at most `1 - confidence` (union bound)."""
    if not 0.0 < confidence < 1.0 or math.isnan(confidence):
        raise ValueError(f"confidence must lie strictly between 0 and 1, not {confidence!r}")
    return (1.0 - confidence) / 3.0


def _check_count(x: int, n: int, what: str) -> None:
    if n < 0 or x < 0 or x > n:
        raise ValueError(f"{what}: need 0 <= {x} <= {n}")


# --- vectorised bounds (numpy arrays in, arrays out; the scalar API and the bench use them) ---


def cp_low(x: ArrayLike, n: ArrayLike, alpha: float) -> NDArray[Any]:
    """One-sided Clopper-Pearson lower bound of x/n at level 1 - alpha (0 when x == 0): exact,
    so it is never below nominal whatever n, unlike a normal approximation at small counts."""
    import numpy as np
    from scipy.special import betaincinv

    xs, ns = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(n, dtype=float))
    out = np.zeros(xs.shape)
    pos = xs > 0
    out[pos] = betaincinv(xs[pos], ns[pos] - xs[pos] + 1.0, alpha)
    return out


def cp_high(x: ArrayLike, n: ArrayLike, alpha: float) -> NDArray[Any]:
    """One-sided Clopper-Pearson upper bound of x/n at level 1 - alpha (1 when x == n)."""
    import numpy as np
    from scipy.special import betaincinv

    xs, ns = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(n, dtype=float))
    out = np.ones(xs.shape)
    below = xs < ns
    out[below] = betaincinv(xs[below] + 1.0, ns[below] - xs[below], 1.0 - alpha)
    return out


def cs_log_evidence(k: ArrayLike, n: ArrayLike, theta: ArrayLike) -> NDArray[Any]:
    """log of Robbins' beta-binomial mixture martingale against `theta` after k fails in n:
    log of (the data's probability under the Beta(CS_PRIOR) mixture) / (its probability at theta).
    Under the true theta it is a nonnegative martingale, so by Ville's inequality it ever reaches
    log(1/alpha) with probability at most alpha: the thetas it has not reached form a confidence
    sequence, valid at every look at once."""
    import numpy as np
    from scipy.special import betaln, xlog1py, xlogy

    a0, b0 = CS_PRIOR
    ks, ns, th = np.broadcast_arrays(
        np.asarray(k, dtype=float), np.asarray(n, dtype=float), np.asarray(theta, dtype=float)
    )
    mixture = betaln(a0 + ks, b0 + ns - ks) - betaln(a0, b0)
    with np.errstate(divide="ignore"):
        at_theta = xlogy(ks, th) + xlog1py(ns - ks, -th)
    result: NDArray[Any] = mixture - at_theta
    return result


def _cs_bisect(k: NDArray[Any], n: NDArray[Any], inside: NDArray[Any], outside: NDArray[Any], c: float) -> NDArray[Any]:
    """The edge of {theta: evidence < c} between `inside` and `outside`, to double precision
    (the set is an interval: the evidence is convex in theta)."""
    import numpy as np

    for _ in range(64):
        mid = (inside + outside) / 2.0
        keep = cs_log_evidence(k, n, mid) < c
        inside, outside = np.where(keep, mid, inside), np.where(keep, outside, mid)
    return inside


def cs_low(k: ArrayLike, n: ArrayLike, alpha: float) -> NDArray[Any]:
    """Lower bound of k/n valid at every look with probability 1 - alpha (the confidence
    sequence's lower edge; 0 when k == 0)."""
    import numpy as np

    ks, ns = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    out = np.zeros(ks.shape)
    pos = ks > 0
    if pos.any():
        kk, nn = ks[pos], ns[pos]
        out[pos] = _cs_bisect(kk, nn, kk / nn, np.zeros(kk.shape), math.log(1.0 / alpha))
    return out


def cs_high(k: ArrayLike, n: ArrayLike, alpha: float) -> NDArray[Any]:
    """Upper bound of k/n valid at every look with probability 1 - alpha (1 when k == n)."""
    import numpy as np

    ks, ns = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    out = np.ones(ks.shape)
    below = ks < ns
    if below.any():
        kk, nn = ks[below], ns[below]
        out[below] = _cs_bisect(kk, nn, kk / nn, np.ones(kk.shape), math.log(1.0 / alpha))
    return out


def _cs_edge(k: int, n: int, alpha: float, up: bool) -> float:
    """One edge of the confidence sequence for one (k, n), in plain floats (the scalar API asks
    this dozens of times per slice; numpy's per-call overhead would dominate)."""
    if (k == n) if up else (k == 0):
        return 1.0 if up else 0.0
    a0, b0 = CS_PRIOR
    mixture = math.lgamma(a0 + k) + math.lgamma(b0 + n - k) - math.lgamma(a0 + b0 + n)
    mixture -= math.lgamma(a0) + math.lgamma(b0) - math.lgamma(a0 + b0)
    c = math.log(1.0 / alpha)
    inside, outside = k / n, (1.0 if up else 0.0)
    for _ in range(64):
        mid = (inside + outside) / 2.0
        if mid in (inside, outside):
            # No float lies between the two: the edge is found. (Near 1 or 0 the midpoint rounds onto
            # the bracket's end, where the logarithm below is undefined: at k = n - 1 from n = 77 on.)
            break
        at_mid = (k * math.log(mid) if k else 0.0) + ((n - k) * math.log1p(-mid) if n - k else 0.0)
        if mixture - at_mid < c:
            inside = mid
        else:
            outside = mid
    return inside


def rogan_gladen(q: ArrayLike, se: ArrayLike, sp: ArrayLike, *, empty: float) -> NDArray[Any]:
    """(q + sp - 1) / (se + sp - 1) clipped to [0, 1]; `empty` where the denominator is <= 0 (the
    judge fails good answers as often as it catches bad ones: the formula says nothing there)."""
    import numpy as np

    qs, ses, sps = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (q, se, sp)))
    den = ses + sps - 1.0
    ok = den > 0
    out = np.full(qs.shape, float(empty))
    out[ok] = np.clip((qs[ok] + sps[ok] - 1.0) / den[ok], 0.0, 1.0)
    return out


# --- the scalar API ---


def _cp_edges(x: int, n: int, alpha: float) -> tuple[float, float]:
    """Clopper-Pearson's one-sided bounds of x/n (n > 0) at 1 - alpha each, in plain floats."""
    from scipy.special import betaincinv

    low = float(betaincinv(x, n - x + 1, alpha)) if x > 0 else 0.0
    high = float(betaincinv(x + 1, n - x, 1.0 - alpha)) if x < n else 1.0
    return low, high


def _rate(x: int, n: int, alpha: float) -> Rate:
    if n == 0:
        return Rate(value=0.0, low=0.0, high=1.0, x=x, n=n)
    low, high = _cp_edges(x, n, alpha)
    return Rate(value=x / n, low=low, high=high, x=x, n=n)


def judge_accuracy(
    *, true_fail: int, false_pass: int, true_pass: int, false_fail: int, confidence: float
) -> JudgeAccuracy:
    """Se and Sp from calibration's counts, each bounded one-sided at 1 - a (a box share), so the
    corners that use them keep the rate's bounds at `confidence`."""
    alpha = box_share(confidence)
    _check_count(true_fail, true_fail + false_pass, "labelled failing answers")
    _check_count(true_pass, true_pass + false_fail, "labelled passing answers")
    return JudgeAccuracy(
        se=_rate(true_fail, true_fail + false_pass, alpha), sp=_rate(true_pass, true_pass + false_fail, alpha)
    )


def _corners(q_low: float, q_high: float, judge: JudgeAccuracy) -> tuple[float, float]:
    """The box's corners: high from (k/n high, Sp high, Se low), low from (k/n low, Sp low, Se
    high); a denominator <= 0 makes high 1 and low 0 (nothing excluded)."""
    high = rogan_gladen(q_high, judge.se.low, judge.sp.high, empty=1.0)[()]
    low = rogan_gladen(q_low, judge.se.high, judge.sp.low, empty=0.0)[()]
    return float(low), float(high)


def _q_bounds(k: int, n: int, alpha: float, sequential: bool) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    if sequential:
        return _cs_edge(k, n, alpha, up=False), _cs_edge(k, n, alpha, up=True)
    return _cp_edges(k, n, alpha)


def failure_rate(
    *, judged_fail: int, n: int, judge: JudgeAccuracy, confidence: float, sequential: bool = False
) -> FailureRate:
    """The slice's corrected failure rate with its box interval. `sequential` takes the bound of
    k/n from the confidence sequence, which a run that stops once decided needs: it looked after
    every judgment, and a fixed-n bound checked at every look would miss far more often."""
    _check_count(judged_fail, n, "answers judged fail")
    q_low, q_high = _q_bounds(judged_fail, n, box_share(confidence), sequential)
    low, high = _corners(q_low, q_high, judge)
    q = judged_fail / n if n else 0.0
    # No correction is possible when Se + Sp <= 1: the estimate is then the raw share judged fail.
    estimate = float(rogan_gladen(q, judge.se.value, judge.sp.value, empty=q)[()])
    return FailureRate(
        estimate=estimate,
        low=low,
        high=high,
        judged_fail=judged_fail,
        n=n,
        method=METHOD_SEQUENTIAL if sequential else METHOD,
        sequential=sequential,
        judge_informative=judge.se.low + judge.sp.low > 1.0,
    )


def slice_verdict(rate: FailureRate, max_failure_rate: float) -> Verdict:
    """judge_unfit when the judge may not tell fail from pass at all (then no interval means
    anything); passed when the whole interval is within the limit; exceeded when all of it is
    above; otherwise the data cannot tell, and the verdict says so instead of guessing."""
    if not rate.judge_informative:
        return "judge_unfit"
    if rate.high <= max_failure_rate:
        return "passed"
    if rate.low > max_failure_rate:
        return "exceeded"
    return "inconclusive"


def mcnemar_exact(pass_to_fail: int, fail_to_pass: int) -> float:
    """Exact two-sided McNemar p-value: under no change each discordant pair is equally likely to
    go either way, so min(b, c) is binomial(b + c, 1/2); twice its tail, capped at 1. Exact
    integers, so small tables (where the chi-square version is wrong) are right."""
    if pass_to_fail < 0 or fail_to_pass < 0:
        raise ValueError("discordant pair counts must be >= 0")
    total = pass_to_fail + fail_to_pass
    if total == 0:
        return 1.0
    smaller = min(pass_to_fail, fail_to_pass)
    tail, term = 0, 1
    for i in range(smaller + 1):
        tail += term
        term = term * (total - i) // (i + 1)
    return min(1.0, float(Fraction(2 * tail, 2**total)))


# --- what would decide an inconclusive slice ---


def _smallest(decides: Callable[[int], bool], cap: int) -> int | None:
    """The smallest m in 1..cap with decides(m) (doubling, then halving: the projections are
    monotone up to rounding, which is what "about" in the sentence allows); None past cap."""
    hi = 1
    while not decides(hi):
        if hi >= cap:
            return None
        hi = min(cap, hi * 2)
    lo = hi // 2  # decides(lo) is False (or lo == 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decides(mid) else (mid, hi)
    return hi


def percent(x: float, rounding: Literal["near", "down", "up"] = "near") -> str:
    """A rate as a short percentage: 2%, 1.5%, 12.5%, 0.35%, 0.004%. An interval's ends round
    outwards ("down" its low, "up" its high), so the printed interval contains the computed one
    and a high of 10.04% never reads as a 10% limit."""
    v = x * 100.0
    if 0 < v < 0.01:
        return f"{v:.1g}%"
    digits = 1 if v >= 1 else 2
    scale = 10**digits
    if rounding == "up":
        v = math.ceil(v * scale - 1e-9) / scale
    elif rounding == "down":
        v = math.floor(v * scale + 1e-9) / scale
    text = f"{v:.{digits}f}".rstrip("0").rstrip(".")
    return f"{text}%"


def span(low: float, high: float) -> str:
    """An interval as text, its ends rounded outwards: 0.38%-4.4%."""
    return f"{percent(low, 'down')}-{percent(high, 'up')}"


def _about(m: int) -> str:
    """A count rounded up to two significant digits: 237 -> 240."""
    if m < 100:
        return str(m)
    step = 10 ** (len(str(m)) - 2)
    return f"{-(-m // step) * step:,}"


def _more(m: int, what: str) -> str:
    """ "1 more answer", "240 more answers": the count rounded as `_about` rounds it."""
    return f"{_about(m)} more {what}" + ("" if m == 1 else "s")


def _decided(k: int, n: int, judge: JudgeAccuracy, alpha: float, limit: float, sequential: bool) -> bool:
    q_low, q_high = _q_bounds(k, n, alpha, sequential)
    low, high = _corners(q_low, q_high, judge)
    return high <= limit or low > limit


def _with_labels(judge: JudgeAccuracy, alpha: float, fails: int = 0, passes: int = 0) -> JudgeAccuracy:
    """The judge with more labelled answers, caught / passed at the observed Se / Sp."""
    se_x = judge.se.x + round(judge.se.value * fails)
    sp_x = judge.sp.x + round(judge.sp.value * passes)
    return JudgeAccuracy(se=_rate(se_x, judge.se.n + fails, alpha), sp=_rate(sp_x, judge.sp.n + passes, alpha))


def _uncertainty_clause(judge: JudgeAccuracy) -> str:
    sp_pm = (judge.sp.high - judge.sp.low) / 2.0
    se_pm = (judge.se.high - judge.se.low) / 2.0
    return (
        f"how often the judge fails a good answer is known only to \u00b1{percent(sp_pm)} "
        f"(from {judge.sp.n:,} labelled passing answers) and how often it catches a failing one "
        f"only to \u00b1{percent(se_pm)} (from {judge.se.n:,} labelled failing answers)"
    )


def _labelled_clause(fails: int | None, passes: int | None) -> str | None:
    """ "about N more labelled passing answers or about M more labelled failing answers in
    calibration", the options that exist (None: neither alone decides it)."""
    options = []
    if passes is not None:
        options.append(f"about {_more(passes, 'labelled passing answer')}")
    if fails is not None:
        options.append(f"about {_more(fails, 'labelled failing answer')}")
    return " or ".join(options) + " in calibration" if options else None


def _labelled_and_answers(share: float, judge: JudgeAccuracy, alpha: float, limit: float) -> str:
    """When neither kind of labelled answer alone decides it at the answers judged so far: how
    many would, once more answers pin the fail share down (one kind, or as many of each)."""

    def exact(j: JudgeAccuracy) -> bool:
        low, high = _corners(share, share, j)
        return high <= limit or low > limit

    fails = _smallest(lambda f: exact(_with_labels(judge, alpha, fails=f)), MAX_MORE_LABELLED)
    passes = _smallest(lambda g: exact(_with_labels(judge, alpha, passes=g)), MAX_MORE_LABELLED)
    clause = _labelled_clause(fails, passes)
    if clause is None:
        each = _smallest(lambda t: exact(_with_labels(judge, alpha, fails=t, passes=t)), MAX_MORE_LABELLED)
        if each is None:
            return "no practical number of labelled answers would decide it: improve the judge for this slice"
        clause = f"about {_more(each, 'labelled answer')} of each kind (failing and passing) in calibration"
    return f"{clause}, with more answers judged, would decide it"


def _settled_text(verdict: Verdict, rate: FailureRate, limit: float, judge: JudgeAccuracy) -> str:
    shown = span(rate.low, rate.high)
    if verdict == "passed":
        return f"Decided: the interval {shown} lies within the {percent(limit)} limit."
    if verdict == "exceeded":
        return f"Decided: the interval {shown} lies above the {percent(limit)} limit."
    return (
        f"The judge may not tell failing answers from good ones here (it catches at least "
        f"{percent(judge.se.low)} of failing answers and passes at least {percent(judge.sp.low)} of good "
        "ones): label more answers in calibration, or improve the judge."
    )


def what_would_decide(
    *,
    judged_fail: int,
    n: int,
    judge: JudgeAccuracy,
    confidence: float,
    max_failure_rate: float,
    sequential: bool = False,
) -> WhatWouldDecide:
    """What would settle an inconclusive slice: about how many more answers (judged failing at the
    share seen so far), or more labelled answers in calibration (caught / passed at the judge's
    observed rates), and whether the judge's own uncertainty is what stands in the way (then no
    number of answers can: even an exact fail share leaves the limit inside the interval)."""
    rate = failure_rate(judged_fail=judged_fail, n=n, judge=judge, confidence=confidence, sequential=sequential)
    verdict = slice_verdict(rate, max_failure_rate)
    if verdict != "inconclusive":
        return WhatWouldDecide(None, None, False, _settled_text(verdict, rate, max_failure_rate, judge))
    alpha, limit = box_share(confidence), max_failure_rate
    share = judged_fail / n if n else 0.0
    exact_low, exact_high = _corners(share, share, judge)
    judge_limited = n > 0 and exact_low <= limit < exact_high

    def by_answers(m: int) -> bool:
        return _decided(round(share * (n + m)), n + m, judge, alpha, limit, sequential)

    def by_fails(f: int) -> bool:
        return _decided(judged_fail, n, _with_labels(judge, alpha, fails=f), alpha, limit, sequential)

    def by_passes(g: int) -> bool:
        return _decided(judged_fail, n, _with_labels(judge, alpha, passes=g), alpha, limit, sequential)

    answers = None if judge_limited or n == 0 else _smallest(by_answers, MAX_MORE_ANSWERS)
    fails = _smallest(by_fails, MAX_MORE_LABELLED) if judge.se.n > 0 else None
    passes = _smallest(by_passes, MAX_MORE_LABELLED) if judge.sp.n > 0 else None
    # Labelling is the bottleneck when answers cannot decide it, or would take ten times as many
    # answers as labels (a label costs a person; an answer, a judgment).
    if answers is not None:
        fails = fails if fails is not None and 10 * fails <= answers else None
        passes = passes if passes is not None and 10 * passes <= answers else None
    labelled = _labelled_clause(fails, passes)
    shown = span(rate.low, rate.high)
    if judge_limited:
        fix = f"{labelled} would decide it" if labelled else _labelled_and_answers(share, judge, alpha, limit)
        text = (
            # One interval a message: the slice's (its figures); this one is only said to hold the limit.
            f"More answers alone cannot decide it: even an exact fail share would leave the "
            f"{percent(limit)} limit inside the interval, because "
            f"{_uncertainty_clause(judge)}; {fix}."
        )
    elif n == 0:
        text = f"No answers judged yet: the {percent(limit)} limit lies inside {shown}."
    else:
        options = [f"about {_more(answers, 'answer')} (judged failing at the same share)"] if answers else []
        options += [labelled] if labelled else []
        how = " or ".join(options) if options else "no practical number of answers"
        text = f"The {percent(limit)} limit lies inside the interval {shown}: {how} would decide it."
    return WhatWouldDecide(
        more_answers=answers,
        more_labelled_fails=fails,
        judge_limited=judge_limited,
        text=text,
        more_labelled_passes=passes,
    )
