"""Exact one-sided bounds of a slice's failure rate from people's audit, one test each way.

The judge splits the slice's `n` answers into the `K` it failed and the `n - K` it passed; people
label a random sample of each. The failure rate of the application is

    p = r_F + (1 - pi) * q_P,  r_F = pi * q_F

with `pi` the share the judge fails, `q_F` and `q_P` the share people fail among the answers the
judge failed and passed. Each answer of the run is an independent draw, so:

- `X_F`, the answers both the judge and people fail, is Binomial(n, r_F) when every judged-fail
  answer is audited (its distribution needs no value of `pi`);
- `K` is Binomial(n, pi), and a sample of `a` judged-fail answers has Binomial(a, q_F) people fail;
- a sample of `m` judged-pass answers has Binomial(m, q_P) people fail, whatever `K` is.

**high** (does the slice pass?): since `p <= r_F + q_P`, it is the smallest `L` that an exact test of
`r_F + q_P >= L` rejects, with statistic `Y1/n + Y2/m`: `Y1` counts every judged-fail answer people
did not pass (failed, unsettled, or never audited), so `Y1 >= X_F` and the test only errs the safe
way; `Y2` counts the judged-pass sample's failed and unsettled answers. Its p-value is the largest
tail probability over every split of `L` between `r_F` and `q_P` (the nuisance). One test spends the
whole `1 - confidence`, where a box of three bounds spends a third on each and pays for `pi` twice.

**low** (does the slice exceed its limit?): since `p >= r_F`, the lowest `L` at which an exact test
of `r_F <= L` still rejects. With every judged-fail answer audited, `X_F` alone decides it
(Clopper-Pearson on n). With a sample of them, the statistic is the product of Clopper-Pearson's
lower bounds of `pi` and `q_F`, its tail taken at the worst `pi` with `pi * q_F = L`. It reads no
judged-pass answer, so gate/estimate/audit_rate.py sets the box of three bounds beside it (a union
bound: 80% of 1 - confidence to this test, 20% to the box).

Both sups over a nuisance are taken on a grid of cells, each bounded by the corner that makes the
tail largest (each tail is monotone in each parameter), so the grid can only make a bound wider,
never invalid. bench/audit_coverage.py shows the coverage on a grid that includes tiny slices and
the judges an adversary would pick. Pure; numpy and scipy are imported inside the functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numpy.typing import NDArray

METHOD = "audit+exact-tests"
_CELLS = 160  # nuisance cells per test
_STEPS = 40  # bisection steps of a bound: far below a reported digit
_TAIL = 1e-12  # probability left out of a binomial window, added back as a bound


def high_pvalue(y1: int, n: int, y2: int, m: int, limit: float) -> float:
    """The exact p-value of `r_F + q_P >= limit` given `Y1 = y1` of `n` and `Y2 = y2` of `m`
    (m = 0: no judged-pass answer in the slice, so no `q_P` term)."""
    from scipy.stats import binom

    if limit <= 0.0:
        return 1.0
    if m == 0:
        return float(binom.cdf(y1, n, min(limit, 1.0)))
    return high_tail(y1 * m + y2 * n, n, m, limit)


def high_tail(t: int, n: int, m: int, limit: float) -> float:
    """The largest P(Y1*m + Y2*n <= t) over `r_F + q_P = limit` (the statistic Y1/n + Y2/m, in integers)."""
    import numpy as np
    from scipy.stats import binom

    y2s = np.arange(0, m + 1)
    lim = np.floor((t - y2s * n) / m).astype(np.int64)
    keep = lim >= 0
    y2s, lim = y2s[keep], np.minimum(lim[keep], n)
    if limit >= 1.0:
        # r_F + q_P >= 1 takes in every point with r_F = 1 - q_P; the grid below covers it.
        limit = 1.0
    edges = np.linspace(0.0, limit, _CELLS + 1)
    r_low, r_high = edges[:-1, None], edges[1:, None]
    # Over a cell [r_low, r_high] of r_F (q_P = limit - r_F): Y1's cdf is largest at r_low, and the
    # sum is largest with Y2 as small as it can be: q_P at limit - r_high.
    q = np.clip(limit - r_high, 0.0, 1.0)
    tails = (binom.pmf(y2s[None, :], m, q) * binom.cdf(lim[None, :], n, np.minimum(r_low, 1.0))).sum(axis=1)
    return float(min(1.0, tails.max()))


@functools.lru_cache(maxsize=8)
def _cp_low_table(n: int, gamma: float) -> NDArray[Any]:
    """Clopper-Pearson's lower bound of K/n for every K: the sampled test reads it a cell at a time."""
    import numpy as np

    from gate.estimate.failure_rate import cp_low

    table = cp_low(np.arange(n + 1), n, gamma)
    table.setflags(write=False)
    return table


def low_pvalue_sampled(k: int, n: int, x: int, a: int, limit: float, gamma: float) -> float:
    """The exact p-value of `pi * q_F <= limit` given `k` of `n` judged fail and `x` of a sample of
    `a < k` of them failed by people. Statistic: `cp_low(K, n) * cp_low(X, min(a, K))`, both at `gamma`."""
    from gate.estimate.failure_rate import cp_low

    if x == 0 or limit >= 1.0:
        return 1.0
    return sampled_tail(float(cp_low(k, n, gamma) * cp_low(x, a, gamma)), n, a, limit, gamma)


def sampled_tail(observed: float, n: int, a: int, limit: float, gamma: float) -> float:
    """The largest P(cp_low(K, n) * cp_low(X, a) >= observed) over `pi * q_F = limit`."""
    import numpy as np
    from scipy.stats import binom

    from gate.estimate.failure_rate import cp_low

    if observed <= limit:
        return 1.0
    lows = cp_low(np.arange(a + 1), a, gamma)  # rises with x
    grid = np.geomspace(max(limit, 1e-12), 1.0, _CELLS + 1)
    pi_low, pi_high = grid[:-1], grid[1:]
    # Over a cell of pi (q_F = limit/pi): the tail is largest with K from pi_high and q_F from pi_low.
    q = np.minimum(1.0, limit / pi_low)
    starts = np.maximum(binom.ppf(_TAIL / 2, n, pi_high), a).astype(np.int64)
    width = int((binom.isf(_TAIL / 2, n, pi_high) - starts).max()) + 1
    ks = starts[:, None] + np.arange(max(width, 1))[None, :]
    inside = ks <= n
    ks = np.minimum(ks, n)
    pk = np.where(inside, binom.pmf(ks, n, pi_high[:, None]), 0.0)
    need = np.searchsorted(lows, observed / np.maximum(_cp_low_table(n, gamma)[ks], 1e-300), side="left")
    tail = np.where(need <= a, binom.sf(need - 1, a, q[:, None]), 0.0)
    # A K below a (the sample would be all of K) rejects only if cp_low(K, n) alone could reach the
    # observed value; then it is counted as a rejection (only ever wider).
    small_k_can_reject = a > 0 and float(cp_low(a - 1, n, gamma)) >= observed
    below = binom.cdf(a - 1, n, pi_high) if small_k_can_reject else np.zeros(_CELLS)
    return float(min(1.0, ((pk * tail).sum(axis=1) + below).max() + 2 * _TAIL))


def low_pvalue(k: int, n: int, x: int, a: int, limit: float, alpha: float) -> float:
    """The p-value of `p <= limit` from the judged-fail answers people failed: `x` of a sample of `a`
    of the `k` the judge failed (a == k: every one of them audited)."""
    from scipy.stats import binom

    if x == 0 or limit >= 1.0:
        return 1.0
    if a >= k:
        return float(binom.sf(x - 1, n, max(limit, 0.0)))
    return low_pvalue_sampled(k, n, x, a, limit, alpha)


def _bisect(holds: Callable[[float], bool], rising: bool, top: float = 1.0) -> float:
    """The edge of {L in [0, top] : holds(L)}: the smallest such L when holds rises with L, the largest
    when it falls; bracketed so the edge returned always holds (or is 0 / top when none does)."""
    lo, hi = 0.0, top
    for _ in range(_STEPS):
        mid = (lo + hi) / 2
        if holds(mid) == rising:
            hi = mid
        else:
            lo = mid
    return hi if rising else lo


def audit_high(y1: int, n: int, y2: int, m: int, alpha: float) -> float:
    """The upper bound: the smallest limit the exact test rejects `p >= limit` at."""
    if m == 0 and n > 0 and y1 >= n:
        return 1.0
    return _bisect(lambda limit: high_pvalue(y1, n, y2, m, limit) <= alpha, rising=True)


def audit_low(k: int, n: int, x: int, a: int, alpha: float) -> float:
    """The lower bound: the largest limit at which the exact test still rejects `p <= limit`."""
    from gate.estimate.failure_rate import cp_low

    if x == 0:
        return 0.0
    # No limit at or above the statistic's own value is rejected: the bound lies below it.
    top = x / n if a >= k else float(cp_low(k, n, alpha) * cp_low(x, a, alpha))
    return _bisect(lambda limit: low_pvalue(k, n, x, a, limit, alpha) <= alpha, rising=False, top=top)
