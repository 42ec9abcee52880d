"""A prototype of the audit's tests made valid for a plan chosen after K: Berger-Boos, conditional on K.

The gate's tests (gate/estimate/audit_tests.py) are exact for one design fixed before K, the answers the judge
failed: their p-value sums over every K the run could have had. The gate used to size a slice's design
(fail_cap, pass_cap) from K; a design chosen from K picks, at each K, a test that may be anti-conservative at
that K, and that rule passed a product at its limit more often than 1 - confidence (bench/audit_steering.py,
section 4). The gate now fixes two designs before K and K only chooses which is labelled; this test given K is
the other remedy, measured beside it and not chosen: here each K gets the design sized from it
(bench/audit_sizing.sized_from_k, the rule the gate had), with the planner's question asked of this test.

Given K, the planned labels are Binomial(a_F, q_F) x Binomial(a_P, q_P) whatever design the planner chose at
that K. The test here is valid conditionally on K for every (q_F, q_P) on the null with pi within Clopper-Pearson's
one-sided bounds from K at 1 - gamma, at level alpha - gamma. A null point needs only one of the bounds (where its
q_F is below the limit, a smaller pi is worse for it; above, a larger one), and pi is beyond that bound with
chance at most gamma, so the procedure passes a product at its limit at most alpha of the time whatever design
each K gets (Berger and Boos, 1994). The sup over the null is one-dimensional: P(a statistic at least as good) is
monotone in q_F and q_P, so it is taken on the envelope of the null's lines over pi's interval, q_P(q_F) (its lower
edge for `passed`, upper for `exceeded`; nonincreasing in q_F), bounded over cells of q_F at one corner and
refined until each is below the level or a null point is above it.

The statistic is the gate's (audit_tests.statistic; a whole audit's is the total share). What it costs is
measured in bench/audit_steering.py section 4: valid in every cell, but at the headline (3,000 answers, a 2%
limit) the plan sized from K asking it needs 16 + 338 labels for 80% power to pass where the gate's design to
pass is 23 + 197, and 46 judged-fail labels to show twice the limit exceeded where the gate's design needs 24:
given K, pi's uncertainty enters as its worst case at a bound, not averaged over the runs. A larger gamma does
not buy it back (0.0025 to 0.02: 323-342 labels at the headline, measured once).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import numpy as np
from scipy.special import betaincinv

from bench.audit_sizing import ALPHA, SizedFromK, sized_from_k_uncached, statistics
from gate.estimate import audit_sizing as sz
from gate.estimate import audit_tests as at
from gate.estimate.audit_tests import _pmf  # the same binomial table the gate's tests use

GAMMA = 0.001  # the chance spent on pi leaving its interval
_ROUNDS = 24


def pi_interval(k: int, n: int, gamma: float) -> tuple[float, float]:
    """Clopper-Pearson's one-sided bounds of pi from K = k of n, each at 1 - gamma: a null point needs only one
    of them (where q_F is below the limit the worst pi is the smallest, above it the largest)."""
    low = float(betaincinv(k, n - k + 1, gamma)) if k > 0 else 0.0
    high = float(betaincinv(k + 1, n - k, 1 - gamma)) if k < n else 1.0
    return low, high


class GivenK:
    """One test at one limit and one K: `at_most(w)` asks whether, given K, the null's largest chance of a
    statistic at least as good as w is at most alpha - gamma."""

    def __init__(
        self, side: at.Side, design: at.Design, k: int, limit: float, alpha: float, gamma: float | None = None
    ):
        self.side, self.design, self.k, self.limit, self.alpha = side, design, k, limit, alpha
        self.passing = side == "passed"
        if alpha != ALPHA:
            raise ValueError(f"the statistic here is the bench's, at alpha {ALPHA}, not {alpha}")
        gamma = GAMMA if gamma is None else gamma
        self.level = alpha - gamma
        n = design.n
        self.a_f, self.a_p = design.sizes(k) if not design.whole else (k, n - k)
        self.pi_lo, self.pi_hi = pi_interval(k, n, gamma)
        xs_f, xs_p = np.arange(self.a_f + 1), np.arange(self.a_p + 1)
        self.stats = statistics(side, design, k, xs_f, xs_p)  # F x X, monotone in x_P per row

    def envelope(self, q_f: np.ndarray) -> np.ndarray:
        """The null's q_P at each q_F most favourable to the verdict (smallest for passed, largest for
        exceeded) over pi's interval, on p = limit."""
        lim = self.limit
        below = q_f <= lim
        # q_P = (lim - pi q_F)/(1 - pi) rises with pi where q_F < lim and falls where q_F > lim.
        low_first = below if self.passing else ~below
        pi = np.minimum(np.where(low_first, self.pi_lo, self.pi_hi), 1 - 1e-12)
        q_p: np.ndarray = np.clip((lim - pi * q_f) / (1 - pi), 0.0, 1.0)
        return q_p

    def top(self) -> float:
        """The largest q_F worth asking: past it the null's q_P is 0 and the chance only moves against the
        verdict (passed), or the null has no point (exceeded)."""
        lim = self.limit
        edge_pi = self.pi_hi if self.passing else self.pi_lo
        return 1.0 if edge_pi <= lim else min(1.0, lim / edge_pi)

    def chance(self, ws: np.ndarray, q_f: np.ndarray, q_p: np.ndarray) -> np.ndarray:
        """P(statistic at least as good as each w) at each (q_F, q_P): points x ws."""
        pf = _pmf(np.arange(self.a_f + 1)[None, :], self.a_f, q_f[:, None])  # Q x F
        pp = _pmf(np.arange(self.a_p + 1)[None, :], self.a_p, q_p[:, None])  # Q x X
        if self.passing:
            good = self.stats[None, :, :] <= ws[:, None, None] + 1e-15  # W x F x X
        else:
            good = self.stats[None, :, :] >= ws[:, None, None] - 1e-15
        out: np.ndarray = np.einsum("qf,qx,wfx->qw", pf, pp, good.astype(float))
        return out

    def at_most_each(self, ws: np.ndarray, budget: int | None = None) -> np.ndarray:
        answer = np.zeros(len(ws), dtype=bool)
        open_ = np.ones(len(ws), dtype=bool)
        top = self.top()
        lim = min(self.limit, top)
        edges = np.unique(np.concatenate([np.linspace(0, lim, 9), np.linspace(lim, top, 9)]))
        cells = np.stack([edges[:-1], edges[1:]], axis=1)
        for _ in range(_ROUNDS):
            idx = np.flatnonzero(open_)
            f0, f1 = cells.T
            corner_f, corner_p = (f0, self.envelope(f1)) if self.passing else (f1, self.envelope(f0))
            bad = self.chance(ws[idx], corner_f, corner_p) > self.level  # cells x open ws
            settled = ~bad.any(axis=0)
            answer[idx[settled]] = True
            open_[idx[settled]] = False
            if not open_.any():
                break
            idx, bad = idx[~settled], bad[:, ~settled]
            suspects = cells[bad.any(axis=1)]
            mids = np.concatenate([(suspects[:, 0] + suspects[:, 1]) / 2, suspects[:, 0], suspects[:, 1]])
            over = (self.chance(ws[idx], mids, self.envelope(mids)) > self.level).any(axis=0)
            open_[idx[over]] = False
            if not open_.any():
                break
            keep = bad[:, ~over].any(axis=1)
            cells = cells[keep]
            # keep only cells still suspect for some open w
            mid = (cells[:, 0] + cells[:, 1]) / 2
            cells = np.concatenate([np.stack([cells[:, 0], mid], 1), np.stack([mid, cells[:, 1]], 1)])
        return answer

    def at_most(self, w: float, budget: int | None = None) -> bool:
        return bool(self.at_most_each(np.array([w]))[0])


def rejects(
    side: at.Side, design: at.Design, k: int, x_f: int, x_p: int, limit: float, alpha: float,
    budget: int | None = None, gamma: float | None = None,
) -> bool:  # fmt: skip
    """audit_tests.rejects, given K."""
    if not 0.0 < limit < 1.0:
        return False
    test = GivenK(side, design, k, limit, alpha, gamma)
    return test.at_most(float(test.stats[x_f, x_p]))


def critical(
    side: at.Side, design: at.Design, k: int, limit: float, alpha: float, gamma: float | None = None
) -> float | None:
    """The edge of the region given K: the statistic values the test reaches, read off the grid's own values
    (bisection over the sorted distinct values, the test monotone in w)."""
    test = GivenK(side, design, k, limit, alpha, gamma)
    values = np.unique(test.stats)
    if side == "exceeded":
        values = values[::-1]
    lo, hi = -1, len(values)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if test.at_most(float(values[mid])) else (lo, mid)
    return None if lo < 0 else float(values[lo])


_CRITICAL: dict[tuple[at.Side, at.Design, int, float, float, float], float | None] = {}


def verdict_chance(
    side: at.Side, design: at.Design, limit: float, k: int, q_f: float, q_p: float, alpha: float
) -> float:
    """P(the verdict `side`) given K = k when people fail the strata at q_f, q_p, by the test given K."""
    key = (side, design, k, limit, alpha, GAMMA)
    if key not in _CRITICAL:
        _CRITICAL[key] = critical(side, design, k, limit, alpha)
    w = _CRITICAL[key]
    if w is None:
        return 0.0
    a_f, a_p = _sizes(design, k)
    test_stats = statistics(side, design, k, np.arange(a_f + 1), np.arange(a_p + 1))
    good = test_stats <= w + 1e-15 if side == "passed" else test_stats >= w - 1e-15
    prob = _pmf(np.arange(a_f + 1), a_f, q_f)[:, None] * _pmf(np.arange(a_p + 1), a_p, q_p)[None, :]
    return float((prob * good).sum())


def _sizes(design: at.Design, k: int) -> tuple[int, int]:
    return (k, design.n - k) if design.whole else design.sizes(k)


@contextlib.contextmanager
def _planner_asks_given_k() -> Iterator[None]:
    """The gate's planner with its question "does this design reach the power?" asked of the test given K (a
    bench-only switch: the search, the ladder of caps and the power target are the gate's)."""
    original = at.rejects  # the module the planner's search asks (gate.estimate.audit_sizing imports it whole)

    def asked(side: at.Side, design: at.Design, k: int, x_f: int, x_p: int, limit: float, alpha: float,
              budget: int | None = None) -> bool:  # fmt: skip
        return rejects(side, design, k, x_f, x_p, limit, alpha)

    at.rejects = asked
    try:
        yield
    finally:
        at.rejects = original


@functools.cache
def plan_at(n: int, k: int, calibration: sz.Calibration | None, limit: float, confidence: float) -> SizedFromK:
    """The plan sized from K (the rule the gate had, bench/audit_sizing.sized_from_k) when its test is the
    one given K: a design chosen from K, which the test given K allows."""
    if confidence != 1 - ALPHA:
        raise ValueError(f"the statistic here is the bench's, at confidence {1 - ALPHA}, not {confidence}")
    with _planner_asks_given_k():
        return sized_from_k_uncached(n, k, calibration, limit)
