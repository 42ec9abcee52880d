"""The audit's exact tests hold at their level: checked by enumerating every outcome of small runs.

For a slice of n answers the outcomes are K (judged fail), X_F (people's failures among them) and the
judged-pass sample's failures; each is enumerated with its exact probability, and the chance the test
rejects a true hypothesis must stay within 1 - confidence at every nuisance point tried, including the
corners (a judge that fails nothing, one that fails everything, people failing all or none).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import pytest
from scipy.stats import binom

from gate.estimate import audit_bounds as ab
from gate.estimate import audit_rate as ar

if TYPE_CHECKING:
    import numpy as np

ALPHA = 0.05


def passed_probability(n: int, m: int, pi: float, q_f: float, q_p: float, limit: float) -> float:
    """P(the upper test rejects p >= limit), every judged-fail answer audited, m of the judged-pass ones."""
    total = 0.0
    for k in range(n + 1):
        size = min(m, n - k)
        for x in range(k + 1):
            for y in range(size + 1):
                if ab.high_pvalue(x, n, y, size, limit) <= ALPHA:
                    total += binom.pmf(k, n, pi) * binom.pmf(x, k, q_f) * binom.pmf(y, size, q_p)
    return total


def exceeded_probability(n: int, a: int, pi: float, q_f: float, limit: float) -> float:
    """P(the exact lower test rejects p <= limit) with a sample of a judged-fail answers (all of them when
    K <= a)."""
    total = 0.0
    for k in range(1, n + 1):
        size = min(a, k)
        for x in range(size + 1):
            if ab.low_pvalue(k, n, x, size, limit, ALPHA) <= ALPHA:
                total += binom.pmf(k, n, pi) * binom.pmf(x, size, q_f)
    return total


@pytest.mark.parametrize(
    ("pi", "q_f", "q_p"),
    [(0.2, 0.5, 0.1), (0.05, 1.0, 0.15), (0.0, 0.0, 0.2), (1.0, 0.2, 0.0), (0.5, 0.3, 0.1), (0.3, 0.0, 0.3)],
)
def test_the_upper_test_passes_a_slice_at_or_over_its_limit_at_most_one_time_in_twenty(
    pi: float, q_f: float, q_p: float
) -> None:
    n, m = 14, 6
    p = pi * q_f + (1 - pi) * q_p
    # At the true rate (the hypothesis p >= p holds), and at a limit below it.
    for limit in (p, p * 0.8):
        if limit > 0:
            assert passed_probability(n, m, pi, q_f, q_p, limit) <= ALPHA + 1e-9


@pytest.mark.parametrize(("pi", "q_f"), [(0.3, 0.5), (0.6, 0.25), (0.15, 1.0), (1.0, 0.15), (0.4, 0.375)])
def test_the_lower_test_fails_a_slice_within_its_limit_at_most_one_time_in_twenty(pi: float, q_f: float) -> None:
    n, a = 16, 4
    r = pi * q_f
    for limit in (r, r * 1.25):
        assert exceeded_probability(n, a, pi, q_f, limit) <= ALPHA + 1e-9


def test_the_tests_are_not_so_wide_they_never_decide() -> None:
    # A clean audit of 300 judged-pass answers with no judged-fail answer passes a 2% limit; 12 of 15
    # audited judged-fail answers confirmed, of 131 in 3,000, exceed it.
    assert ab.high_pvalue(0, 3000, 0, 300, 0.02) <= ALPHA
    assert ab.low_pvalue(131, 3000, 12, 15, 0.02, ALPHA) <= ALPHA
    # The bounds agree with the tests at the limit, on both sides of it.
    high = ab.audit_high(13, 3000, 0, 180, ALPHA)
    assert ab.high_pvalue(13, 3000, 0, 180, high * 1.001) <= ALPHA < ab.high_pvalue(13, 3000, 0, 180, high * 0.99)
    low = ab.audit_low(131, 3000, 12, 15, ALPHA)
    assert (
        ab.low_pvalue(131, 3000, 12, 15, low * 0.999, ALPHA)
        <= ALPHA
        < ab.low_pvalue(131, 3000, 12, 15, low * 1.01, ALPHA)
    )


def test_people_failing_answers_the_judge_passed_can_make_a_slice_exceed() -> None:
    # Every answer audited: people failed the 3 the judge failed and 19 of the 57 it passed (37% against a
    # 15% limit). The exact test reads only judged-fail answers; the box beside it reads the rest.
    fs = ar.StratumSample(3, 3, 3, 0, ())
    ps = ar.StratumSample(57, 57, 19, 38, ())
    assert ar.sample_verdict(fs, ps, 0.15, 0.95) == "exceeded"
    assert ar.audit_rate(fail_sample=fs, pass_sample=ps, confidence=0.95).low > 0.15


def test_every_grid_cell_only_widens_the_test() -> None:
    # The upper test's p-value never drops below the largest tail at any single split of the limit.
    for y1, y2 in itertools.product((0, 3), (0, 1)):
        for r in (0.0, 0.01, 0.05, 0.1):
            direct = sum(
                binom.pmf(j, 20, 0.1 - r) * binom.cdf((y1 * 20 + (y2 - j) * 200) // 20, 200, r)
                for j in range(21)
                if (y1 * 20 + (y2 - j) * 200) >= 0
            )
            assert ab.high_pvalue(y1, 200, y2, 20, 0.1) >= direct - 1e-12


def test_the_sampled_lower_test_holds_along_the_whole_edge_of_its_hypothesis() -> None:
    """200 answers, 20 judged-fail ones audited, a 10% limit: the statistic's rejection threshold comes
    from the test itself, and the chance of reaching it is summed exactly at every pi from the limit to
    1 (with q_F = limit/pi, the edge of p <= limit where the test is most likely to err)."""
    import numpy as np

    from gate.estimate.failure_rate import cp_low

    n, a, limit = 200, 20, 0.1
    lo, hi = limit, 1.0  # the smallest statistic the test rejects at
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ab.sampled_tail(mid, n, a, limit, ALPHA) <= ALPHA else (mid, hi)
    ks = np.arange(a, n + 1)
    need = np.searchsorted(cp_low(np.arange(a + 1), a, ALPHA), hi / cp_low(ks, n, ALPHA))
    worst = 0.0
    for pi in np.geomspace(limit, 1.0, 120):
        q = limit / pi
        tail = np.where(need <= a, binom.sf(need - 1, a, q), 0.0)
        worst = max(worst, float((binom.pmf(ks, n, pi) * tail).sum()))
    assert 0.01 < worst <= ALPHA  # near its level somewhere, never past it


def _exact_sup(n: int, m: int, limit: float, splits: int = 641) -> np.ndarray[Any, Any]:
    """For every outcome (Y1, Y2): the largest P(Y1*m + Y2*n <= its value) over splits of `limit` into
    r_F + q_P, on a grid four times finer than the test's own cells (so it lands inside them)."""
    import numpy as np

    y1, y2 = np.arange(n + 1)[:, None], np.arange(m + 1)[None, :]
    t = (y1 * m + y2 * n).ravel()
    order = np.argsort(t, kind="stable")
    last = np.searchsorted(t[order], t[order], side="right") - 1  # ties: P(T <= t) takes them all
    sup = np.zeros(t.size)
    for r in np.linspace(max(0.0, limit - 1.0), min(limit, 1.0), splits):
        cum = np.cumsum((binom.pmf(y1, n, r) * binom.pmf(y2, m, limit - r)).ravel()[order])
        at = np.empty(t.size)
        at[order] = cum[last]
        sup = np.maximum(sup, at)
    return sup.reshape(n + 1, m + 1)


@pytest.mark.parametrize(("n", "m", "limit"), [(12, 4, 0.5), (16, 5, 0.8)])
def test_the_upper_tests_p_value_is_never_below_the_exact_tail_at_any_split_of_the_limit(
    n: int, m: int, limit: float
) -> None:
    """The exact size check: for every outcome of a small slice, the p-value is at least the largest tail
    over every split of the limit between r_F and q_P, taken between the test's own grid points too (a
    cell bounded by the wrong corner fell short of it by up to 0.02, and the test passed slices it should
    not); and the grid costs almost nothing over the exact supremum. Its size then stays within 1 -
    confidence at every split."""
    import numpy as np

    sup = _exact_sup(n, m, limit)
    got = np.array([[ab.high_pvalue(y1, n, y2, m, limit) for y2 in range(m + 1)] for y1 in range(n + 1)])
    assert (got >= sup - 1e-12).all(), float((sup - got).max())
    assert float((got - sup).max()) < 0.05  # wider only by the cells' width
    rejected = got <= ALPHA
    y1, y2 = np.arange(n + 1)[:, None], np.arange(m + 1)[None, :]
    for r in np.linspace(max(0.0, limit - 1.0), min(limit, 1.0), 41):
        assert float((binom.pmf(y1, n, r) * binom.pmf(y2, m, limit - r) * rejected).sum()) <= ALPHA


@pytest.mark.parametrize(("n", "limit"), [(20, 0.1), (40, 0.05), (40, 0.25)])
def test_the_fully_audited_lower_test_is_the_exact_binomial_test(n: int, limit: float) -> None:
    """Every judged-fail answer audited: X_F, the answers both the judge and people fail, is Binomial(n,
    r_F), and the p-value of r_F <= limit is exactly P(X_F >= x) (one off, P(X_F > x), it failed slices
    within their limit: its size went past 1 - confidence)."""
    k = n // 2
    sizes = []
    for x in range(1, k + 1):
        exact = sum(float(binom.pmf(j, n, limit)) for j in range(x, n + 1))
        assert ab.low_pvalue(k, n, x, k, limit, ALPHA) == pytest.approx(exact, rel=1e-9, abs=1e-15)
        if ab.low_pvalue(k, n, x, k, limit, ALPHA) <= ALPHA:
            sizes.append(float(binom.pmf(x, n, limit)))
    assert sum(sizes) <= ALPHA
