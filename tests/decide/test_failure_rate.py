"""The product gate's statistics (gate/estimate/failure_rate.py) against known values: scipy's own
Clopper-Pearson, hand-computed Rogan-Gladen corners and binomial sums, the verdict rules, and the
sentence that says what would decide an inconclusive slice."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gate.estimate.failure_rate import (
    METHOD,
    METHOD_SEQUENTIAL,
    FailureRate,
    JudgeAccuracy,
    Rate,
    box_share,
    cp_high,
    cp_low,
    cs_high,
    cs_log_evidence,
    cs_low,
    failure_rate,
    judge_accuracy,
    mcnemar_exact,
    slice_verdict,
    what_would_decide,
)

ROOT = Path(__file__).resolve().parents[2]
A = 0.05 / 3  # the box share at 95%


def judge(tf: int, fp: int, tp: int, ff: int, confidence: float = 0.95) -> JudgeAccuracy:
    return judge_accuracy(true_fail=tf, false_pass=fp, true_pass=tp, false_fail=ff, confidence=confidence)


def rg(q: float, se: float, sp: float) -> float:
    return min(1.0, max(0.0, (q + sp - 1) / (se + sp - 1)))


@pytest.mark.parametrize(
    ("x", "n"), [(0, 10), (1, 10), (3, 10), (10, 10), (7, 250), (0, 1000), (45, 1000), (999, 1000)]
)
def test_one_sided_clopper_pearson_is_scipys_exact_interval_at_twice_the_level(x: int, n: int) -> None:
    """A one-sided bound at 1 - a is an end of the two-sided exact interval at 1 - 2a."""
    from scipy.stats import binomtest  # imported here: a second of CPU for every worker that collects this file

    ci = binomtest(x, n).proportion_ci(confidence_level=1 - 2 * A, method="exact")
    assert float(cp_low(x, n, A)[()]) == pytest.approx(ci.low, abs=1e-12)
    assert float(cp_high(x, n, A)[()]) == pytest.approx(ci.high, abs=1e-12)
    j = judge(x, n - x, x, n - x)
    assert (j.se.low, j.se.high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert j.se.value == x / n and (j.sp.x, j.sp.n) == (x, n)


def test_judge_accuracy_reads_sensitivity_from_fails_and_specificity_from_passes() -> None:
    j = judge(90, 10, 990, 10)
    assert (j.se.value, j.se.x, j.se.n) == (0.9, 90, 100)
    assert (j.sp.value, j.sp.x, j.sp.n) == (0.99, 990, 1000)
    assert j.se.low < 0.9 < j.se.high and j.sp.low < 0.99 < j.sp.high
    empty = judge(0, 0, 5, 0)
    assert empty.se == Rate(value=0.0, low=0.0, high=1.0, x=0, n=0)


def test_the_estimate_and_the_box_corners_by_hand() -> None:
    j = judge(90, 10, 990, 10)
    r = failure_rate(judged_fail=30, n=1000, judge=j, confidence=0.95)
    assert r.estimate == pytest.approx(0.02 / 0.89)
    q_low, q_high = float(cp_low(30, 1000, A)[()]), float(cp_high(30, 1000, A)[()])
    assert r.high == pytest.approx(rg(q_high, j.se.low, j.sp.high))
    assert r.low == pytest.approx(rg(q_low, j.se.high, j.sp.low))
    assert 0 < r.low < r.estimate < r.high < 1
    assert (r.judged_fail, r.n, r.method, r.sequential, r.judge_informative) == (30, 1000, METHOD, False, True)


def test_the_corners_are_the_extremes_of_the_box() -> None:
    """Every point of the box (k/n, Se, Sp between their bounds) gives a rate inside [low, high]."""
    j = judge(40, 10, 180, 20)
    r = failure_rate(judged_fail=60, n=400, judge=j, confidence=0.95)
    q_low, q_high = float(cp_low(60, 400, A)[()]), float(cp_high(60, 400, A)[()])
    grid = [np.linspace(lo, hi, 9) for lo, hi in ((q_low, q_high), (j.se.low, j.se.high), (j.sp.low, j.sp.high))]
    values = [rg(q, se, sp) for q in grid[0] for se in grid[1] for sp in grid[2]]
    assert min(values) == pytest.approx(r.low) and max(values) == pytest.approx(r.high)


def test_clipping_to_zero_and_one() -> None:
    j = judge(90, 10, 950, 50)  # Sp 0.95: a 2% fail share is below what good answers alone give
    low = failure_rate(judged_fail=2, n=100, judge=j, confidence=0.95)
    assert low.estimate == 0.0 and low.low == 0.0
    high = failure_rate(judged_fail=100, n=100, judge=j, confidence=0.95)
    assert high.estimate == 1.0 and high.high == 1.0


def test_a_denominator_at_or_below_zero_excludes_nothing_and_the_judge_is_unfit() -> None:
    j = judge(3, 7, 3, 7)  # catches 30% of failing answers and passes 30% of good ones
    assert j.se.low + j.sp.high <= 1 and j.se.high + j.sp.low <= 1
    r = failure_rate(judged_fail=5, n=10, judge=j, confidence=0.95)
    assert (r.low, r.high, r.judge_informative) == (0.0, 1.0, False)
    assert r.estimate == 0.5  # no correction possible: the raw share
    assert slice_verdict(r, 0.5) == "judge_unfit"


def test_judge_unfit_exactly_when_the_lower_bounds_sum_to_one_or_less() -> None:
    fit = judge(9, 1, 9, 1)
    assert fit.se.low + fit.sp.low > 1
    assert failure_rate(judged_fail=0, n=1000, judge=fit, confidence=0.95).judge_informative
    unfit = judge(7, 3, 9, 1)  # 70% caught of 10: its lower bound is too low
    assert unfit.se.low + unfit.sp.low <= 1
    r = failure_rate(judged_fail=0, n=1000, judge=unfit, confidence=0.95)
    assert not r.judge_informative and slice_verdict(r, 0.9) == "judge_unfit"


def rate(low: float, high: float, informative: bool = True) -> FailureRate:
    return FailureRate((low + high) / 2, low, high, 1, 10, METHOD, False, informative)


def test_the_verdict_rules() -> None:
    assert slice_verdict(rate(0.0, 0.02), 0.02) == "passed"  # high == limit passes
    assert slice_verdict(rate(0.0, 0.0201), 0.02) == "inconclusive"
    assert slice_verdict(rate(0.02, 0.05), 0.02) == "inconclusive"  # low == limit is not above it
    assert slice_verdict(rate(0.0201, 0.05), 0.02) == "exceeded"
    assert slice_verdict(rate(0.0, 0.01, informative=False), 0.02) == "judge_unfit"


def test_bad_counts_and_confidence_are_refused() -> None:
    with pytest.raises(ValueError, match="confidence"):
        box_share(1.0)
    with pytest.raises(ValueError):
        judge_accuracy(true_fail=-1, false_pass=1, true_pass=1, false_fail=1, confidence=0.95)
    with pytest.raises(ValueError):
        failure_rate(judged_fail=11, n=10, judge=judge(9, 1, 9, 1), confidence=0.95)


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 0, 1.0),
        (5, 0, 2 * 1 / 2**5),
        (0, 5, 2 * 1 / 2**5),
        (6, 1, 2 * (1 + 7) / 2**7),
        (10, 2, 2 * (1 + 12 + 66) / 2**12),
        (3, 3, 1.0),  # twice a tail over one half is capped
        (1, 0, 1.0),
    ],
)
def test_mcnemar_exact_is_twice_the_binomial_tail(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)


def test_mcnemar_exact_on_a_large_table_agrees_with_scipy() -> None:
    from scipy.stats import binomtest

    assert mcnemar_exact(560, 440) == pytest.approx(binomtest(440, 1000, 0.5).pvalue, rel=1e-9)
    assert mcnemar_exact(4000, 4000) == 1.0


def test_the_confidence_sequence_is_wider_than_a_fixed_bound_and_its_edges_are_consistent() -> None:
    ks, ns = np.array([0, 1, 5, 30, 200, 50]), np.array([50, 100, 1000, 1000, 10000, 50])
    hi, lo = cs_high(ks, ns, A), cs_low(ks, ns, A)
    assert (hi >= cp_high(ks, ns, A)).all() and (lo <= cp_low(ks, ns, A)).all()
    assert hi[-1] == 1.0 and lo[0] == 0.0
    c = math.log(1 / A)  # at each edge the evidence against it is exactly the threshold
    inner = (ks > 0) & (ks < ns)
    assert cs_log_evidence(ks[inner], ns[inner], hi[inner]) == pytest.approx(c, abs=1e-6)
    assert cs_log_evidence(ks[inner], ns[inner], lo[inner]) == pytest.approx(c, abs=1e-6)
    j = judge(95, 5, 999, 1)
    for k, n, h, low in zip(ks, ns, hi, lo, strict=True):
        r = failure_rate(judged_fail=int(k), n=int(n), judge=j, confidence=0.95, sequential=True)
        assert r.high == pytest.approx(rg(float(h), j.se.low, j.sp.high), abs=1e-12)
        assert r.low == pytest.approx(rg(float(low), j.se.high, j.sp.low), abs=1e-12)
        assert r.method == METHOD_SEQUENTIAL and r.sequential


def ever_excluded(theta: float, looks: int, bound: str) -> float:
    """P(some look t <= looks has theta above the upper bound), exactly: the distribution of the
    fail count carried forward, mass removed where the bound excludes theta."""
    mass = np.zeros(looks + 1)
    mass[0] = 1.0
    missed = 0.0
    upper = cs_high if bound == "cs" else cp_high
    for t in range(1, looks + 1):
        mass[1 : t + 1] = mass[1 : t + 1] * (1 - theta) + mass[0:t] * theta
        mass[0] *= 1 - theta
        out = upper(np.arange(t + 1), t, A) < theta
        missed += mass[: t + 1][out].sum()
        mass[: t + 1][out] = 0.0
    return missed


def test_the_confidence_sequence_holds_at_every_look_where_a_fixed_bound_does_not() -> None:
    """Looking after each of 300 judgments, a Clopper-Pearson bound is below the true share more
    often than its level allows; the confidence sequence is not (exact probabilities)."""
    assert ever_excluded(0.05, 300, "cs") <= A
    assert ever_excluded(0.05, 300, "cp") > 2 * A


def test_what_would_decide_counts_more_answers_when_the_limit_is_inside() -> None:
    j = judge(90, 10, 995, 5)
    w = what_would_decide(judged_fail=3, n=200, judge=j, confidence=0.95, max_failure_rate=0.05)
    assert slice_verdict(failure_rate(judged_fail=3, n=200, judge=j, confidence=0.95), 0.05) == "inconclusive"
    assert w.more_answers is not None and not w.judge_limited
    m = w.more_answers
    decided = failure_rate(judged_fail=round(3 / 200 * (200 + m)), n=200 + m, judge=j, confidence=0.95)
    assert slice_verdict(decided, 0.05) == "passed"
    fewer = failure_rate(judged_fail=round(3 / 200 * (200 + m // 2)), n=200 + m // 2, judge=j, confidence=0.95)
    assert slice_verdict(fewer, 0.05) == "inconclusive"
    assert w.text.startswith("The 5% limit lies inside the interval 0%-")
    assert "more answers (judged failing at the same share) would decide it" in w.text


def test_with_sp_known_to_one_and_a_half_percent_no_two_percent_limit_is_certified() -> None:
    j = judge(90, 10, 903, 47)  # Sp 95% from 950 labelled passing answers: +-1.6%
    assert (j.sp.high - j.sp.low) / 2 == pytest.approx(0.0157, abs=5e-4)
    for k, n in ((700, 10_000), (6_500, 100_000)):
        w = what_would_decide(judged_fail=k, n=n, judge=j, confidence=0.95, max_failure_rate=0.02)
        assert w.judge_limited and w.more_answers is None
        assert w.text.startswith(
            "More answers alone cannot decide it: even an exact fail share would leave the 2% limit"
        )
        assert "fails a good answer is known only to \u00b11.6% (from 950 labelled passing answers)" in w.text
    w = what_would_decide(judged_fail=700, n=10_000, judge=j, confidence=0.95, max_failure_rate=0.02)
    assert w.text.endswith("in calibration, with more answers judged, would decide it.")


def test_more_labelled_fails_when_the_judges_catch_rate_is_the_bottleneck() -> None:
    j = judge(17, 3, 999, 1)  # Se from only 20 labelled failing answers
    w = what_would_decide(judged_fail=1210, n=20_000, judge=j, confidence=0.95, max_failure_rate=0.10)
    assert w.judge_limited and w.more_labelled_fails is not None
    f = w.more_labelled_fails
    caught = 17 + round(0.85 * f)
    more = judge(caught, 20 + f - caught, 999, 1)
    assert slice_verdict(failure_rate(judged_fail=1210, n=20_000, judge=more, confidence=0.95), 0.10) == "passed"
    assert f"about {f} more labelled failing answers in calibration would decide it." in w.text
    assert "catches a failing one only to \u00b118.5% (from 20 labelled failing answers)" in w.text
    assert "the 10% limit inside the interval, because" in w.text  # one interval a message: the slice's


def test_a_decided_or_unfit_slice_needs_nothing_more() -> None:
    j = judge(90, 10, 999, 1)
    w = what_would_decide(judged_fail=5, n=2000, judge=j, confidence=0.95, max_failure_rate=0.05)
    assert (w.more_answers, w.more_labelled_fails, w.judge_limited) == (None, None, False)
    assert w.text.startswith("Decided: the interval 0%-") and w.text.endswith("lies within the 5% limit.")
    unfit = what_would_decide(judged_fail=5, n=20, judge=judge(3, 7, 3, 7), confidence=0.95, max_failure_rate=0.05)
    assert "may not tell failing answers from good ones" in unfit.text


def test_probabilities_of_the_binomial_used_here_are_scipys() -> None:
    """The bench's exact enumeration leans on this duality: the upper bound is at most u exactly
    when P(X <= k | u) <= a."""
    from scipy.stats import binom

    for k, n, u in ((3, 200, 0.05), (3, 200, 0.06), (10, 1000, 0.0185), (10, 1000, 0.02)):
        assert (float(cp_high(k, n, A)[()]) <= u) == (binom.cdf(k, n, u) <= A)


def test_importing_the_module_loads_neither_numpy_nor_scipy() -> None:
    probe = "import json, sys, gate.estimate.failure_rate; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    loaded = set(json.loads(out.stdout))
    assert "numpy" not in loaded and "scipy" not in loaded


def test_the_sequential_interval_is_defined_at_every_count_up_to_twenty_thousand_answers() -> None:
    # Near k = n the bisection's midpoint rounds onto 1 (from n = 77 at k = n - 1, from about
    # n = 1,459 at k = n - 2), where the log-likelihood is undefined: it must stop there, not raise.
    grid = [
        (k, n)
        for n in (1, 2, 3, 10, 76, 77, 78, 200, 1000, 1458, 1459, 1460, 5000, 20_000)
        for k in sorted({0, 1, 2, n // 7, n // 2, n - 2, n - 1, n})
        if 0 <= k <= n
    ]
    ks, ns = np.array([k for k, _ in grid]), np.array([n for _, n in grid])
    lows, highs = cs_low(ks, ns, A), cs_high(ks, ns, A)
    j = judge(95, 5, 995, 5)
    for (k, n), low, high in zip(grid, lows, highs, strict=True):
        rate = failure_rate(judged_fail=k, n=n, judge=j, confidence=0.95, sequential=True)
        assert 0.0 <= rate.low <= rate.estimate <= rate.high <= 1.0, (k, n)
        assert low <= k / n <= high
        # the scalar edges the decision uses are the vectorised ones, to double precision
        fixed = failure_rate(judged_fail=k, n=n, judge=j, confidence=0.95)
        assert rate.high >= fixed.high - 1e-12 and rate.low <= fixed.low + 1e-12, (k, n)
    from gate.estimate.failure_rate import _cs_edge

    for (k, n), low, high in zip(grid, lows, highs, strict=True):
        assert _cs_edge(k, n, A, up=False) == pytest.approx(low, abs=1e-12)
        assert _cs_edge(k, n, A, up=True) == pytest.approx(high, abs=1e-12)


def test_one_more_answer_is_said_in_the_singular() -> None:
    """17 of 20 labelled failing answers caught, 17 of 20 passing ones passed; 18 of 200 answers
    judged fail against a 20% limit: one more answer decides it."""
    w = what_would_decide(judged_fail=18, n=200, judge=judge(17, 3, 17, 3), confidence=0.95, max_failure_rate=0.2)
    assert w.more_answers == 1
    assert "about 1 more answer (judged failing at the same share) would decide it" in w.text, w.text
    w = what_would_decide(judged_fail=16, n=200, judge=judge(17, 3, 18, 2), confidence=0.95, max_failure_rate=0.2)
    assert w.more_labelled_fails == 1 and "about 1 more labelled failing answer in calibration" in w.text, w.text
