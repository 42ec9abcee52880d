"""The two exact tests a planned audit is decided by: `passed` and `exceeded`, for a design fixed before any label.

A slice of `n` answers; the judge fails `K` of them. The audit's design labels the first `min(c, K)` answers
of the judged-fail stratum's random draw and the first `min(m, n - K)` of the judged-pass one (`c`, `m`: the
plan's caps, fixed before anyone labels). People fail `x_F` and `x_P` of them. With `pi` the share the judge
fails and `q_F`, `q_P` the share people fail in each stratum, the application's failure rate is

    p = pi * q_F + (1 - pi) * q_P.

Each test reads one statistic, linear in `K` for fixed labels:

- **passed** (the rate is below the limit): `W = (K/n)(x_F + s_F)/a_F + (1 - K/n) * 2 x_P/a_P`. The shift
  `s_F` keeps a small judged-fail sample from vouching for a large stratum (a judge that fails 400 answers
  and 15 labels that find none is no evidence of a low rate); the factor 2 on the judged-pass failures makes
  one found there cost what it should when `a_P` is large.
- **exceeded** (the rate is above it): `V = (K/n) lo(x_F, a_F) + (1 - K/n) lo(x_P, a_P)` with `lo` the
  one-sided Clopper-Pearson lower bound at `1 - confidence`: it reads every failure people confirm, in either
  stratum, and with a large stratum and a small sample it asks for more than one.

Each test is exact and unconditional: its p-value is the largest chance, over every `(pi, q_F, q_P)` with the
rate at the limit, that the statistic comes out at least as good for the verdict as it did, summed over every
`K` the run could have had. The sup is bounded over cells of `(pi, q_F)` (`q_P` then follows): in a cell each
tail is bounded at a corner, because for fixed labels the statistic is monotone in `K` (it is linear in it) and
in the labels, and the labels' distributions are monotone in `q_F` and `q_P`; where a stratum is smaller than
its cap (`K < c`, or `n - K < m`) the sample is the whole stratum, and those `K` are added one at a time with
the largest chance any `pi` of the cell gives them. Cells whose bound is above the level are split until every
bound is below it (the test rejects) or a point of the null puts the chance above it (it does not). A bound can
only be too wide, never too narrow: a cell that cannot be settled in the rounds allowed counts as not rejected.

A design that labels both whole strata whatever `K` is (`c >= n`, `m >= n`) reads `x = x_F + x_P`, which is
Binomial(n, p) exactly: the tests are Clopper-Pearson's, with no nuisance at all.

Pure: numbers in, numbers out; numpy and scipy are imported inside the functions.
tests/decide/test_audit_sizing.py checks the size by enumerating small slices exactly; bench/audit_sizing.py on a grid.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from numpy.typing import NDArray

METHOD = "audit-plan+exact-unconditional"
Side = Literal["passed", "exceeded"]

PASS_SCALE = 2.0  # the weight on a failure found among the answers the judge passed (see above)
_ROUNDS = 18  # refinements of the cells before a test gives up (and does not reject)
# Cells a test may bound in all before it gives up (and does not reject). Near a tie (the null's largest chance
# within a hair of alpha) the cells that must be split multiply; the budget keeps every question under a
# fraction of a second and answers such a tie the safe way.
_BUDGET = 1_200
_TAIL = 1e-13  # binomial mass left out past a window, added back to the bound
_EDGE = 1e-10  # a K whose largest chance over a cell is below this is counted whole (it adds at most that)


@dataclass(frozen=True)
class Design:
    """What the plan labels: the first `fail_cap` answers of the judged-fail draw (all of a smaller
    stratum) and the first `pass_cap` of the judged-pass draw, fixed before `K` is known to the test."""

    n: int
    fail_cap: int
    pass_cap: int

    @property
    def whole(self) -> bool:
        """Both strata labelled whole, whatever K: the plain binomial case."""
        return self.fail_cap >= self.n and self.pass_cap >= self.n

    def sizes(self, k: int) -> tuple[int, int]:
        """The sample sizes at K = k."""
        return min(self.fail_cap, k), min(self.pass_cap, self.n - k)


def fail_shift(alpha: float) -> float:
    """s_F: large enough that a judged-fail sample finding no failure in a big stratum does not pass
    (its chance of finding none, e^(-limit * s_F / W), stays below alpha), small enough to cost little."""
    return 0.5 * math.log(1.0 / alpha)


def statistic(side: Side, design: Design, k: int, x_f: int, x_p: int, alpha: float) -> float:
    """W (passed: smaller is better) or V (exceeded: larger is stronger), or the whole-slice share."""
    if design.whole:
        return (x_f + x_p) / design.n
    n = design.n
    a_f, a_p = design.sizes(k)
    if side == "passed":
        term_f = (x_f + fail_shift(alpha)) / a_f if a_f else 0.0
        term_p = PASS_SCALE * x_p / a_p if a_p else 0.0
    else:
        term_f = _cp_low_scalar(x_f, a_f, alpha) if a_f else 0.0
        term_p = _cp_low_scalar(x_p, a_p, alpha) if a_p else 0.0
    return k / n * term_f + (1 - k / n) * term_p


def _cp_low_scalar(x: int, a: int, alpha: float) -> float:
    from scipy.special import betaincinv

    return float(betaincinv(x, a - x + 1, alpha)) if x > 0 else 0.0


def rejects(
    side: Side, design: Design, k: int, x_f: int, x_p: int, limit: float, alpha: float, budget: int | None = None
) -> bool:
    """Whether the test rejects at the limit: `passed` rejects `p >= limit`, `exceeded` rejects `p <= limit`.
    A `budget` below the verdict's (the planner's quick question) may only say no where the verdict says yes."""
    if not 0.0 < limit < 1.0:
        return False
    if design.whole:
        from scipy.stats import binom

        x = x_f + x_p
        tail = binom.cdf(x, design.n, limit) if side == "passed" else binom.sf(x - 1, design.n, limit)
        return bool(tail <= alpha)
    return _Test(side, design, limit, alpha).at_most(statistic(side, design, k, x_f, x_p, alpha), budget)


# Remembered: each bound is some 24 runs of the test (about half a second of CPU), and every command
# that assembles the run's result (run, decide, merge, the report beside it) asks it again.
@functools.lru_cache(maxsize=256)
def bound(side: Side, design: Design, k: int, x_f: int, x_p: int, alpha: float, steps: int = 24) -> float:
    """The interval's edge: for `passed` the smallest limit the test rejects at (the upper bound), for
    `exceeded` the largest (the lower bound); 1.0 / 0.0 when none. Bisected: the test is monotone in the
    limit (a null further from the data is easier to reject), so the edge returned always holds."""
    if design.whole:
        from gate.estimate.failure_rate import _cp_edges

        low, high = _cp_edges(x_f + x_p, design.n, alpha)
        return high if side == "passed" else low
    from gate.estimate.failure_rate import percent

    lo, hi = 0.0, 1.0
    rising = side == "passed"
    rounding: Literal["up", "down"] = "up" if rising else "down"
    for _ in range(steps):
        # Each step is a whole test. Once every limit left in (lo, hi] prints the same, rounded outward as the
        # interval is shown (above 0.01%, where `percent` is monotone), no further step can change a figure
        # anyone reads; the edge returned still holds, wider than the exact one by less than the printed step.
        if lo >= 1e-4 and percent(lo, rounding) == percent(hi, rounding):
            break
        mid = (lo + hi) / 2
        if rejects(side, design, k, x_f, x_p, mid, alpha) == rising:
            hi = mid
        else:
            lo = mid
    return hi if rising else lo


def power(side: Side, design: Design, k: int, q_f: float, q_p: float, limit: float, alpha: float) -> float:
    """P(the test rejects) at K = k when people fail each stratum's answers at q_f and q_p: the chance this
    plan reaches the verdict on this run, if the rates are as assumed."""
    import numpy as np
    from scipy.stats import binom

    a_f, a_p = design.sizes(k)
    xs_f, xs_p = np.arange(a_f + 1), np.arange(a_p + 1)
    prob = binom.pmf(xs_f, a_f, q_f)[:, None] * binom.pmf(xs_p, a_p, q_p)[None, :]
    live = prob > 1e-12
    outcomes = [(float(prob[i, j]), int(i), int(j)) for i, j in zip(*np.nonzero(live), strict=True)]
    if design.whole or not 0.0 < limit < 1.0:
        return sum(pr for pr, i, j in outcomes if rejects(side, design, k, i, j, limit, alpha))
    values = np.array(sorted({statistic(side, design, k, i, j, alpha) for _, i, j in outcomes}))
    if side == "exceeded":
        values = values[::-1]  # strongest first, as for passed
    test = _Test(side, design, limit, alpha)
    # The values the test reaches are a prefix (it is monotone in w): found by bisection, each value asked
    # alone, as the verdict asks it.
    lo, hi = -1, len(values)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if test.at_most(float(values[mid])) else (lo, mid)
    if lo < 0:
        return 0.0
    reached = values[: lo + 1]
    edge = float(reached.max() if side == "passed" else reached.min())
    good: Callable[[float], bool] = (lambda v: v <= edge) if side == "passed" else (lambda v: v >= edge)
    return sum(pr for pr, i, j in outcomes if good(statistic(side, design, k, i, j, alpha)))


class _Test:
    """One test at one limit: `at_most(ws)` asks, for each w, whether the null's largest chance of a statistic
    at least as good as w is at most alpha (vectorised over w: a power calculation asks about many)."""

    def __init__(self, side: Side, design: Design, limit: float, alpha: float) -> None:
        self.side, self.design, self.limit, self.alpha = side, design, limit, alpha
        self.passing = side == "passed"
        self.c, self.m = min(design.fail_cap, design.n), min(design.pass_cap, design.n)

    # --- the statistic on arrays ---

    def _term_f(self, x: NDArray[Any], a: NDArray[Any] | int) -> NDArray[Any]:
        import numpy as np

        from gate.estimate.failure_rate import cp_low

        a_arr = np.asarray(a, dtype=float)
        if self.passing:
            out: NDArray[Any] = (x + fail_shift(self.alpha)) / np.maximum(a_arr, 1.0)
        else:
            out = cp_low(x, np.maximum(a_arr, 1.0), self.alpha)
        return np.where(a_arr > 0, out, 0.0)  # an empty sample says nothing (statistic() agrees)

    def _term_p(self, x: NDArray[Any], a: NDArray[Any] | int) -> NDArray[Any]:
        import numpy as np

        from gate.estimate.failure_rate import cp_low

        a_arr = np.asarray(a, dtype=float)
        if self.passing:
            out: NDArray[Any] = PASS_SCALE * x / np.maximum(a_arr, 1.0)
        else:
            out = cp_low(x, np.maximum(a_arr, 1.0), self.alpha)
        return np.where(a_arr > 0, out, 0.0)

    def _good(self, values: NDArray[Any], ws: NDArray[Any]) -> NDArray[Any]:
        """Outcomes at least as good for the verdict as each w (values broadcast against ws)."""
        out: NDArray[Any] = values <= ws + 1e-15 if self.passing else values >= ws - 1e-15
        return out

    # --- the sup over the null ---

    def at_most(self, w: float, budget: int | None = None) -> bool:
        import numpy as np

        return bool(self.at_most_each(np.array([w]), budget)[0])

    def at_most_each(self, ws: NDArray[Any], budget: int | None = None) -> NDArray[Any]:
        """Per w: True when every cell's bound is at most alpha; False when a point of the null is above it
        (or the cells could not be settled within the budget: the safe answer). The refinement is the same
        whatever the budget, so True under a smaller budget is True under a larger one."""
        import numpy as np

        answer = np.zeros(len(ws), dtype=bool)
        open_ = np.ones(len(ws), dtype=bool)
        cells = self._start()
        spent = 0
        for _ in range(_ROUNDS):
            spent += len(cells)
            if spent > (_BUDGET if budget is None else budget):
                break
            q_f, q_p, meets = self._corners(cells)
            cells, q_f, q_p = cells[meets], q_f[meets], q_p[meets]
            idx = np.flatnonzero(open_)
            bad = self._bounds(ws[idx], cells[:, 0], cells[:, 1], q_f, q_p) > self.alpha  # cells x open ws
            settled = ~bad.any(axis=0)
            answer[idx[settled]] = True
            open_[idx[settled]] = False
            if not open_.any():
                return answer
            bad = bad[:, ~settled]
            idx = idx[~settled]
            suspects = cells[bad.any(axis=1)]
            points = self._points(suspects)
            if len(points):
                over = (self._bounds(ws[idx], points[:, 0], points[:, 0], points[:, 1], points[:, 2]) > self.alpha).any(
                    0
                )
                open_[idx[over]] = False  # a null point above alpha: not rejected
                bad = bad[:, ~over]
            if not open_.any():
                return answer
            cells = self._split(cells[bad.any(axis=1)])
        return answer

    def _start(self) -> NDArray[Any]:
        """Cells (pi0, pi1, f0, f1) covering every pi and every q_F the boundary p = limit allows."""
        import numpy as np

        edges = np.unique(np.concatenate([[0.0], np.geomspace(1e-6, 0.5, 12), 1.0 - np.geomspace(0.5, 1e-6, 6), [1.0]]))
        rows = []
        for pi0, pi1 in itertools.pairwise(edges):
            top = 1.0 if pi0 <= self.limit else min(1.0, self.limit / pi0)
            fs = np.linspace(0.0, top, 3)
            rows += [(pi0, pi1, f0, f1) for f0, f1 in itertools.pairwise(fs)]
        return np.array(rows)

    def _corners(self, cells: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
        """Per cell the (q_F, q_P) that makes the verdict likeliest (small for passed, large for exceeded),
        and whether the cell meets the null at all."""
        import numpy as np

        pi0, pi1, f0, f1 = cells.T
        q = []
        for p in (pi0, pi1):
            for f in (f0, f1):
                with np.errstate(divide="ignore", invalid="ignore"):
                    at_one = np.where(p * f < self.limit, np.inf, -np.inf)
                    q.append(np.where(p < 1.0, (self.limit - p * f) / (1.0 - p), at_one))
        qs = np.array(q)
        if self.passing:
            qp = qs.min(axis=0)
            return f0, np.clip(qp, 0.0, 1.0), qp <= 1.0
        qp = qs.max(axis=0)
        return f1, np.clip(qp, 0.0, 1.0), qp >= 0.0

    def _points(self, cells: NDArray[Any]) -> NDArray[Any]:
        """Points of the null (on p = limit) inside the cells, (pi, q_F, q_P): each cell's middle, and its two
        ends in pi at the q_F of its worst corner (where the bound was taken)."""
        import numpy as np

        pi0, pi1, f0, f1 = cells.T
        f_worst = f0 if self.passing else f1
        pis = np.concatenate([(pi0 + pi1) / 2, pi0, pi1])
        fs = np.concatenate([(f0 + f1) / 2, f_worst, f_worst])
        keep = pis < 1.0
        pis, fs = pis[keep], fs[keep]
        qp = (self.limit - pis * fs) / (1.0 - pis)
        ok = (qp >= 0.0) & (qp <= 1.0)
        out: NDArray[Any] = np.stack([pis[ok], fs[ok], qp[ok]], axis=1)
        return out

    def _split(self, cells: NDArray[Any]) -> NDArray[Any]:
        """Halve each cell in pi where it is wide against K's spread, and in q_F where it is wide against the
        cell's own q_F (both where both are)."""
        import numpy as np

        n = self.design.n
        pi0, pi1, f0, f1 = cells.T
        mid_pi = (pi0 + pi1) / 2
        wide_pi = n * (pi1 - pi0) > 0.25 * np.sqrt(n * mid_pi * (1 - mid_pi)) + 0.25
        wide_f = ~wide_pi | (f1 - f0 > 0.05 * f1 + 1e-4)
        mid_f = (f0 + f1) / 2
        halves = []
        for lo_pi, hi_pi in ((pi0, np.where(wide_pi, mid_pi, pi1)), (np.where(wide_pi, mid_pi, pi0), pi1)):
            for lo_f, hi_f in ((f0, np.where(wide_f, mid_f, f1)), (np.where(wide_f, mid_f, f0), f1)):
                halves.append(np.stack([lo_pi, hi_pi, lo_f, hi_f], axis=1))
        out: NDArray[Any] = np.unique(np.concatenate(halves), axis=0)
        return out

    # --- the bound of one cell ---

    def _bounds(
        self, ws: NDArray[Any], pi0: NDArray[Any], pi1: NDArray[Any], q_f: NDArray[Any], q_p: NDArray[Any]
    ) -> NDArray[Any]:
        """Per cell and w, a bound of P(statistic at least as good as w) over pi in [pi0, pi1] with (q_F, q_P)
        at the cell's worst corner; exact where pi0 == pi1. Cells x ws."""
        import numpy as np
        from scipy.special import bdtr, bdtrc
        from scipy.stats import binom

        n, c, m = self.design.n, self.c, self.m
        width = self._window(ws, q_p)
        xs_f, xs_p = np.arange(c + 1), np.arange(width)
        up, lo, hi = self._ksets(ws, xs_f, xs_p)  # ws x F x X
        pf = _pmf(xs_f[None, :], c, q_f[:, None])
        pp = _pmf(xs_p[None, :], m, q_p[:, None])
        # Linear in K: an up-set [lo, n] is likeliest at pi1, a down-set [0, hi] at pi0. Only the sets that are
        # neither empty nor everything need the binomial tail.
        shape = (len(pi0), *up.shape)
        edge_k = np.where(up, lo - 1, hi)  # P(K > lo - 1) or P(K <= hi)
        whole = np.where(up, lo <= 0, hi >= n)
        empty = np.where(up, lo > n, hi < 0)
        tail = np.broadcast_to(np.where(whole, 1.0, 0.0).ravel(), (len(pi0), whole.size)).copy()
        some = np.flatnonzero(~(whole | empty).ravel())
        if some.size:
            k_some, up_some = edge_k.ravel()[some], up.ravel()[some]
            tail[:, some] = np.where(
                up_some[None], bdtrc(k_some[None], n, pi1[:, None]), bdtr(k_some[None], n, pi0[:, None])
            )
        tail = tail.reshape(shape)
        total = np.einsum("cf,cx,cwfx->cw", pf, pp, tail)
        if not self.passing:
            total += binom.sf(width - 1, m, q_p)[:, None]  # past the window, all counted
        total += self._edges(ws, pi0, pi1, q_f, q_p, pf, pp, (up, lo, hi))
        out: NDArray[Any] = np.minimum(total, 1.0)
        return out

    def _window(self, ws: NDArray[Any], q_p: NDArray[Any]) -> int:
        """How many x_P values to read. For passed, only those that can still pass at some K (the statistic
        rises with x_P, so past the first that cannot, none can); for exceeded a window holding all but
        _TAIL of x_P's mass (the rest is added to the bound)."""
        import numpy as np
        from scipy.stats import binom

        n, c, m = self.design.n, self.c, self.m
        if not m:
            return 1
        if not self.passing:
            return int(min(m, max(1.0, float(binom.isf(_TAIL, m, float(q_p.max()))) + 1))) + 1
        w = float(ws.max())
        if c and fail_shift(self.alpha) / c <= w:
            return m + 1  # a loose limit: every x_P may pass somewhere
        # The smallest the statistic gets for x_P = x >= 1 (the judged-pass stratum has answers, K < n):
        # linear in K between the edges, (1 - K/n) * 2x/a_P with K up to c, or the judged-fail term alone.
        floor = self._term_p(np.arange(m + 1).astype(float), m) * (1 - min(c, n - 1) / n)
        can = np.flatnonzero(floor <= w + 1e-15)
        return int(can[-1]) + 2 if can.size else 1

    def _ksets(
        self, ws: NDArray[Any], xs_f: NDArray[Any], xs_p: NDArray[Any]
    ) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
        """Per w and (x_F, x_P) at the caps, the K (over all of 0..n) whose statistic is at least as good as
        w: an up-set [lo, n] or a down-set [0, hi] (the statistic is linear in K)."""
        import numpy as np

        n = self.design.n
        a = self._term_f(xs_f.astype(float), self.c)[None, :, None]
        b = self._term_p(xs_p.astype(float), self.m)[None, None, :]
        w = ws[:, None, None]
        slope = a - b  # statistic = b + (K/n) * slope
        with np.errstate(divide="ignore", invalid="ignore"):
            kstar = n * (w - b) / slope
        flat = np.broadcast_to(slope == 0, kstar.shape)
        flat_good = self._good(b + 0 * w, w)
        # passed wants statistic <= w: an up-set where it falls with K; exceeded wants >= w: where it rises.
        up = np.broadcast_to((slope < 0) if self.passing else (slope > 0), kstar.shape)
        lo = np.where(up, np.ceil(kstar - 1e-9), 0.0)
        hi = np.where(up, float(n), np.floor(kstar + 1e-9))
        lo = np.where(flat, np.where(flat_good, 0.0, n + 1.0), lo)
        hi = np.where(flat, np.where(flat_good, float(n), -1.0), hi)
        return up & ~flat, np.clip(lo, 0, n + 1).astype(np.int64), np.clip(hi, -1, n).astype(np.int64)

    def _edges(
        self,
        ws: NDArray[Any],
        pi0: NDArray[Any],
        pi1: NDArray[Any],
        q_f: NDArray[Any],
        q_p: NDArray[Any],
        pf: NDArray[Any],
        pp: NDArray[Any],
        sets: tuple[NDArray[Any], NDArray[Any], NDArray[Any]],
    ) -> NDArray[Any]:
        """The K where a stratum is smaller than its cap (K < c, n - K < m): there the sample is the whole
        stratum. The central sum counted them as if at the caps; add, with the largest chance any pi of the
        cell gives that K, what the true statistic reaches beyond that. Cells x ws."""
        import numpy as np
        from scipy.stats import binom

        n, c, m = self.design.n, self.c, self.m
        extra = np.zeros((len(pi0), len(ws)))
        ks = np.array(sorted(set(range(0, c)) | set(range(max(n - m + 1, c), n + 1))), dtype=np.int64)
        # A K where even the best labels cannot reach any w adds nothing: skip it before any work.
        ks = ks[self._reachable(ks, ws)] if ks.size else ks
        if not ks.size:
            return extra
        # The largest chance of each K over each cell (its pmf at the cell's pi nearest K/n), only where K is
        # within reach of the cell (40 standard deviations: the chance beyond is far below _EDGE).
        spread = 40.0 * np.sqrt(n * np.maximum(pi1, 1.0 / n)) + 40.0
        near = (ks[:, None] >= n * pi0[None, :] - spread[None, :]) & (ks[:, None] <= n * pi1[None, :] + spread[None, :])
        rows, cols = np.nonzero(near)
        if not rows.size:
            return extra
        env_pairs = _pmf(ks[rows], n, np.clip(ks[rows] / n, pi0[cols], pi1[cols]))
        # A K this unlikely in a cell adds at most its chance: counted whole, without the work.
        live = env_pairs > _EDGE
        np.add.at(extra, cols[~live], env_pairs[~live][:, None] * np.ones(len(ws))[None, :])
        rows, cols, env_pairs = rows[live], cols[live], env_pairs[live]
        if not rows.size:
            return extra
        up, lo, hi = sets
        k = ks[rows]
        a_f, a_p = np.minimum(c, k), np.minimum(m, n - k)
        xs_f, xs_p = np.arange(c + 1), np.arange(pp.shape[1])
        stat = (ks[:, None, None] / n) * self._term_f(
            xs_f[None, :, None].astype(float), np.minimum(c, ks)[:, None, None]
        )
        stat = stat + (1 - ks[:, None, None] / n) * self._term_p(
            xs_p[None, None, :].astype(float), np.minimum(m, n - ks)[:, None, None]
        )
        good = self._good(stat[:, None], ws[None, :, None, None])[rows]  # pairs x ws x F x X
        p_f = _pmf_small(xs_f, a_f, q_f[cols])
        p_p = _pmf_small(xs_p, a_p, q_p[cols])
        edge = np.einsum("pf,px,pwfx->pw", p_f, p_p, good)
        if not self.passing:
            edge += binom.sf(pp.shape[1] - 1, a_p, q_p[cols])[:, None]
        inside = np.where(up[None], lo[None] <= ks[:, None, None, None], hi[None] >= ks[:, None, None, None])[rows]
        counted = np.einsum("pf,px,pwfx->pw", pf[cols], pp[cols], inside)
        np.add.at(extra, cols, env_pairs[:, None] * np.maximum(edge - counted, 0.0))
        return extra

    def _reachable(self, ks: NDArray[Any], ws: NDArray[Any]) -> NDArray[Any]:
        """Per K, whether some labels give a statistic at least as good as some w (the best: no failure
        found for passed, every answer failing for exceeded)."""
        import numpy as np

        n = self.design.n
        a_f, a_p = np.minimum(self.c, ks), np.minimum(self.m, n - ks)
        best_f, best_p = (0 * ks, 0 * ks) if self.passing else (a_f, a_p)
        value = ks / n * self._term_f(best_f.astype(float), a_f) + (1 - ks / n) * self._term_p(
            best_p.astype(float), a_p
        )
        out: NDArray[Any] = value <= float(ws.max()) + 1e-15 if self.passing else value >= float(ws.min()) - 1e-15
        return out


def _pmf(x: Any, n: Any, p: Any) -> NDArray[Any]:
    """Binomial(n, p) probabilities at x, vectorised without scipy.stats' per-call overhead (0 outside 0..n)."""
    import numpy as np
    from scipy.special import gammaln, xlog1py, xlogy

    xs, ns, ps = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(n, dtype=float), np.asarray(p, dtype=float))
    inside = (xs >= 0) & (xs <= ns)
    xs_in = np.where(inside, xs, 0.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        log = (
            gammaln(ns + 1) - gammaln(xs_in + 1) - gammaln(ns - xs_in + 1) + xlogy(xs_in, ps) + xlog1py(ns - xs_in, -ps)
        )
        out: NDArray[Any] = np.nan_to_num(np.where(inside, np.exp(log), 0.0), nan=0.0)
    return out


def _pmf_small(xs: NDArray[Any], sizes: NDArray[Any], qs: NDArray[Any]) -> NDArray[Any]:
    """Rows of Binomial(size, q) probabilities at xs (0..X-1) for many (size, q): the log binomial
    coefficients come from one table over the sizes present."""
    import numpy as np
    from scipy.special import gammaln, xlog1py, xlogy

    top = int(sizes.max()) if sizes.size else 0
    table = np.arange(top + 1, dtype=float)
    lg = gammaln(table + 1)
    x = xs[None, :].astype(float)
    size = sizes[:, None].astype(float)
    inside = x <= size
    xin = np.where(inside, x, 0.0)
    log_coef = lg[sizes][:, None] - lg[xin.astype(np.int64)] - lg[(size - xin).astype(np.int64)]
    with np.errstate(invalid="ignore", divide="ignore"):
        log = log_coef + xlogy(xin, qs[:, None]) + xlog1py(size - xin, -qs[:, None])
        out: NDArray[Any] = np.nan_to_num(np.where(inside, np.exp(log), 0.0), nan=0.0)
    return out


def critical(side: Side, design: Design, limit: float, alpha: float, steps: int = 30) -> float | None:
    """The edge of the test's region: for `passed` the largest statistic it reaches the verdict at, for
    `exceeded` the smallest (None: no statistic reaches it). Bisected over the statistic (the test is monotone
    in it); the benches read a design's whole region from it."""
    test = _Test(side, design, limit, alpha)
    good, bad = (0.0, 1.0 + PASS_SCALE) if side == "passed" else (1.0, 0.0)
    if not test.at_most(good):
        return None
    for _ in range(steps):
        mid = (good + bad) / 2
        good, bad = (mid, bad) if test.at_most(mid) else (good, mid)
    return good
