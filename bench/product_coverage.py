"""Benchmark: does the product gate's interval hold, and how often does each rule pass a bad product?

Simulates gate/estimate/failure_rate.py over a grid of cells: the true failure rate p around each
limit L (p/L in 0.25, 0.5, 0.8, 1, 1.25, 2), the judge's true sensitivity Se (0.6-0.99) and
specificity Sp (0.8-0.999), calibration with m labelled answers each way (m labelled failing ones
measure Se, m labelled passing ones Sp; 10-1,000), and N product answers (50-10,000), each judged
fail with probability q = Se p + (1 - Sp)(1 - p). Confidence 95%.

Per cell it prints, for the fixed design (all N judged, then decided):
  miss_hi, miss_lo   P(high < p), P(low > p): each at most 1 - confidence = 5%
  pass, fail         P(verdict passed), P(verdict exceeded); for p >= L pass must be <= 5%
  raw_pass           the rule peers use, pass when k/N <= L: P(pass) (for p >= L, what it lets through)
and for the sequential design (stop_when_decided: the run looks after every judgment and stops at
the first look where the slice is passed or exceeded; the k/n bound is the confidence sequence):
  miss_hi, miss_lo   at the interval the run reports (when it stops, or after N)
  ever               P(some look before the stop had high < p or low > p): the sequence's own claim
  pass, fail, judged the mean share of the N answers judged before the verdict

The fixed design is computed exactly: the three counts (judged fail of N, caught of m labelled
failing, passed of m labelled passing) are independent binomials, and for each calibration outcome
the verdict and each bound's miss are thresholds on k (Clopper-Pearson's duality with the binomial
distribution function), so each probability is an exact sum over the calibration outcomes (those
of probability below 1e-12 left out). A self-check draws cases per cell and asks the module itself
for the verdict, which must agree with the thresholds. The sequential design is simulated (numpy,
seeded): calibration drawn, then each path judged one answer at a time.

Before the grid, the order cells: a finite slice of N answers (10-5,000), F of them failing, judged
with stop_when_decided in case-id order (the failing answers last, as ids that group a topic sort
them) and in a random order (what the product lane's seeded order is), side by side on the same
judgments, with the fixed design on all N and on a random N/2. Per cell: P(passed), P(exceeded), the
share judged before the verdict, and the pass probability the stop loses against fixed N.

    .venv/bin/python bench/product_coverage.py                 # the order cells, then the grid's corner (~2 CPU-min)
    .venv/bin/python bench/product_coverage.py --order-only    # the order cells only
    .venv/bin/python bench/product_coverage.py --quick         # fewer order cells and paths, the corner
    .venv/bin/python bench/product_coverage.py --full --no-order   # the whole grid (~45 min)
    .venv/bin/python bench/product_coverage.py --full --sims 4000 --seed 7 --csv /tmp/cells.csv --summary-only
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binom

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gate.estimate.failure_rate import (  # noqa: E402
    CS_PRIOR,
    box_share,
    cp_high,
    cp_low,
    cs_log_evidence,
    failure_rate,
    judge_accuracy,
    slice_verdict,
)

CONFIDENCE = 0.95
A = box_share(CONFIDENCE)
NOMINAL = 1.0 - CONFIDENCE
TAIL = 1e-12

FULL = {
    "limit": (0.02, 0.05, 0.10),
    "ratio": (0.25, 0.5, 0.8, 1.0, 1.25, 2.0),
    "se": (0.6, 0.75, 0.9, 0.99),
    "sp": (0.8, 0.95, 0.995, 0.999),
    "m": (10, 100, 1000),
    "n": (50, 500, 2000, 10_000),
}
QUICK = {
    "limit": (0.02, 0.10),
    "ratio": (0.25, 1.0),
    "se": (0.6, 0.9),
    "sp": (0.95, 0.999),
    "m": (10, 1000),
    "n": (50, 2000),
}


@dataclass(frozen=True)
class Cell:
    limit: float
    ratio: float
    se: float
    sp: float
    m: int
    n: int

    @property
    def p(self) -> float:
        return self.ratio * self.limit

    @property
    def q(self) -> float:
        return self.se * self.p + (1.0 - self.sp) * (1.0 - self.p)


@dataclass
class Row:
    cell: Cell
    miss_hi: float
    miss_lo: float
    pass_: float
    fail: float
    raw_pass: float
    pass_half: float
    s_miss_hi: float = math.nan
    s_miss_lo: float = math.nan
    s_ever: float = math.nan
    s_pass: float = math.nan
    s_fail: float = math.nan
    s_judged: float = math.nan
    sims: int = 0


def support(m: int, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """The counts of Bin(m, prob) worth summing over, and their probabilities."""
    lo = int(binom.ppf(TAIL, m, prob))
    hi = int(binom.isf(TAIL, m, prob))
    xs = np.arange(max(lo - 1, 0), min(hi + 1, m) + 1)
    return xs, binom.pmf(xs, m, prob)


@dataclass(frozen=True)
class Calibration:
    """Per calibration outcome (arrays): the box's bounds of Se and Sp and the derived thresholds on
    the k/n bound (a verdict or a miss happens exactly when the k/n bound crosses one of them)."""

    se_low: np.ndarray
    se_high: np.ndarray
    sp_low: np.ndarray
    sp_high: np.ndarray
    weight: np.ndarray
    x_se: np.ndarray
    x_sp: np.ndarray

    @property
    def informative(self) -> np.ndarray:
        return self.se_low + self.sp_low > 1.0

    @property
    def d_hi(self) -> np.ndarray:
        return self.se_low + self.sp_high - 1.0

    @property
    def d_lo(self) -> np.ndarray:
        return self.se_high + self.sp_low - 1.0

    def u_hi(self, rate: float) -> np.ndarray:
        """high <= rate exactly when (k/n high) <= this (where d_hi > 0)."""
        return rate * self.d_hi + 1.0 - self.sp_high

    def u_lo(self, rate: float) -> np.ndarray:
        """low > rate exactly when (k/n low) > this (where d_lo > 0)."""
        return rate * self.d_lo + 1.0 - self.sp_low


def calibration_grid(cell: Cell) -> Calibration:
    xs_se, w_se = support(cell.m, cell.se)
    xs_sp, w_sp = support(cell.m, cell.sp)
    x_se, x_sp = (a.ravel() for a in np.meshgrid(xs_se, xs_sp, indexing="ij"))
    weight = np.outer(w_se, w_sp).ravel()
    return calibration_of(x_se, x_sp, cell.m, weight)


def calibration_of(x_se: np.ndarray, x_sp: np.ndarray, m: int, weight: np.ndarray) -> Calibration:
    return Calibration(
        se_low=cp_low(x_se, m, A),
        se_high=cp_high(x_se, m, A),
        sp_low=cp_low(x_sp, m, A),
        sp_high=cp_high(x_sp, m, A),
        weight=weight,
        x_se=x_se,
        x_sp=x_sp,
    )


# --- the fixed design, exactly ---


def k_at_most(n: int, u: np.ndarray) -> np.ndarray:
    """Per u, the largest k whose Clopper-Pearson upper bound is <= u (-1: none; n: all):
    cp_high(k) <= u exactly when P(Bin(n, u) <= k) <= a."""
    out = np.full(u.shape, -1, dtype=np.int64)
    out[u >= 1.0] = n
    mid = (u > 0.0) & (u < 1.0)
    kk = binom.ppf(A, n, u[mid]).astype(np.int64)  # smallest k with cdf >= a
    out[mid] = kk - 1 + (binom.cdf(kk, n, u[mid]) <= A)
    return np.minimum(out, n)


def k_above(n: int, u: np.ndarray) -> np.ndarray:
    """Per u, the smallest k whose Clopper-Pearson lower bound is > u (n + 1: none):
    cp_low(k) > u exactly when P(Bin(n, u) >= k) < a, i.e. P(Bin(n, u) <= k - 1) > 1 - a."""
    out = np.full(u.shape, n + 1, dtype=np.int64)
    out[u < 0.0] = 0
    mid = (u >= 0.0) & (u < 1.0)
    j = binom.ppf(1.0 - A, n, u[mid]).astype(np.int64)  # smallest j with cdf >= 1 - a
    j = j + (binom.cdf(j, n, u[mid]) <= 1.0 - A)
    out[mid] = np.minimum(j + 1, n + 1)
    return out


def fixed_thresholds(cal: Calibration, n: int, limit: float, p: float) -> dict[str, np.ndarray]:
    """Per calibration outcome, the k thresholds of each event (k <= kpass: passed, ...)."""
    inf, dhi, dlo = cal.informative, cal.d_hi > 0, cal.d_lo > 0
    none_le, none_gt = np.full(inf.shape, -1), np.full(inf.shape, n + 1)
    return {
        "pass_le": np.where(inf & dhi, k_at_most(n, cal.u_hi(limit)), none_le),
        "fail_ge": np.where(inf & dlo, k_above(n, cal.u_lo(limit)), none_gt),
        # high < p: cp_high(k) < u_hi(p); the tie has probability zero, so <= is the same sum
        "miss_hi_le": np.where(dhi, k_at_most(n, cal.u_hi(p)), none_le) if p > 0 else none_le,
        "miss_lo_ge": np.where(dlo, k_above(n, cal.u_lo(p)), none_gt),
    }


def fixed_exact(cell: Cell) -> tuple[dict[str, float], Calibration, dict[str, np.ndarray]]:
    cal = calibration_grid(cell)
    th = fixed_thresholds(cal, cell.n, cell.limit, cell.p)
    n, q, w = cell.n, cell.q, cal.weight

    def le(k: np.ndarray) -> float:
        return float((w * binom.cdf(k, n, q)).sum())

    def ge(k: np.ndarray) -> float:
        return float((w * binom.sf(k - 1, n, q)).sum())

    raw = float(binom.cdf(math.floor(cell.limit * n + 1e-9), n, q))
    return (
        {
            "miss_hi": le(th["miss_hi_le"]),
            "miss_lo": ge(th["miss_lo_ge"]),
            "pass": le(th["pass_le"]),
            "fail": ge(th["fail_ge"]),
            "raw_pass": raw,
        },
        cal,
        th,
    )


def self_check(cell: Cell, cal: Calibration, th: dict[str, np.ndarray], rng: np.random.Generator, draws: int) -> None:
    """The thresholds against the module's own verdict on drawn cases (the bench measures the
    shipped code, not a re-derivation of it)."""
    idx = rng.choice(len(cal.weight), size=draws, p=cal.weight / cal.weight.sum())
    ks = rng.binomial(cell.n, cell.q, size=draws)
    for i, k in zip(idx, ks, strict=True):
        judge = judge_accuracy(
            true_fail=int(cal.x_se[i]),
            false_pass=cell.m - int(cal.x_se[i]),
            true_pass=int(cal.x_sp[i]),
            false_fail=cell.m - int(cal.x_sp[i]),
            confidence=CONFIDENCE,
        )
        rate = failure_rate(judged_fail=int(k), n=cell.n, judge=judge, confidence=CONFIDENCE)
        verdict = slice_verdict(rate, cell.limit)
        want = "passed" if k <= th["pass_le"][i] else "exceeded" if k >= th["fail_ge"][i] else None
        got = verdict if verdict in ("passed", "exceeded") else None
        if got != want:
            raise SystemExit(f"self-check failed in {cell}: k={k} cal={i} module {verdict}, thresholds {want}")
        if (rate.high < cell.p) != (k <= th["miss_hi_le"][i]) or (rate.low > cell.p) != (k >= th["miss_lo_ge"][i]):
            raise SystemExit(f"self-check failed (bounds) in {cell}: k={k} {rate}")


# --- the sequential design, simulated ---


def sequential_sim(
    cell: Cell,
    sims: int,
    rng: np.random.Generator,
    block: int = 512,
    given: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Each path: calibration drawn, then answers judged one at a time; at each look the confidence
    sequence's bounds are compared with the thresholds (a threshold is outside the sequence exactly
    when the mixture's log evidence against it reaches log(1/a)). An upper bound can first drop
    below a threshold at any look, a lower bound first rise above one only at a look that added a
    fail (between fails its evidence only falls), so the latter are evaluated at fails only.
    `given` (caught, passed, paths) replaces the draws: the self-check replays them."""
    if given is not None:
        x_se, x_sp, paths = given
    else:
        x_se = rng.binomial(cell.m, cell.se, size=sims)
        x_sp = rng.binomial(cell.m, cell.sp, size=sims)
    cal = calibration_of(x_se, x_sp, cell.m, np.ones(sims))
    c = math.log(1.0 / A)
    inf, dhi, dlo = cal.informative, cal.d_hi > 0, cal.d_lo > 0
    edge = (1e-300, 1.0 - 1e-16)
    # name: (theta per path, whether the event is possible on that path, the bound's side)
    below = {
        "pass": (np.clip(cal.u_hi(cell.limit), *edge), inf & dhi),
        "mhi": (np.clip(cal.u_hi(cell.p), *edge), dhi & (cell.p > 0)),
    }
    above = {
        "fail": (np.clip(cal.u_lo(cell.limit), *edge), inf & dlo),
        "mlo": (np.clip(cal.u_lo(cell.p), *edge), dlo),
    }
    logs = {name: (np.log1p(-th), np.log(th) - np.log1p(-th)) for name, (th, _) in {**below, **above}.items()}
    a0, b0 = CS_PRIOR
    k = np.zeros(sims)
    logmix = np.zeros(sims)
    stopped_at = np.full(sims, cell.n)
    verdict = np.zeros(sims, dtype=np.int8)  # 1 passed, 2 exceeded
    ever = np.zeros(sims, dtype=bool)
    final_hi = np.zeros(sims, dtype=bool)
    final_lo = np.zeros(sims, dtype=bool)
    active = np.arange(sims)
    t0 = 0
    while active.size and t0 < cell.n:
        b = min(block, cell.n - t0)
        x = paths[active, t0 : t0 + b] if given is not None else rng.random((active.size, b)) < cell.q
        t = t0 + np.arange(1, b + 1, dtype=float)[None, :]
        kc = k[active, None] + np.cumsum(x, axis=1)
        before = kc - x
        lm = logmix[active, None] + np.cumsum(np.log(np.where(x, a0 + before, b0 + (t - 1) - before)), axis=1)
        lm -= np.cumsum(np.log(a0 + b0 + t - 1), axis=1)
        out = {}
        for name, (theta, ok) in below.items():
            l1, diff = logs[name][0][active, None], logs[name][1][active, None]
            out[name] = (lm - kc * diff - t * l1 >= c) & (kc < t * theta[active, None]) & ok[active, None]
        r, col = np.nonzero(x)
        for name, (theta, ok) in above.items():
            l1, diff = logs[name][0][active][r], logs[name][1][active][r]
            kk, tt = kc[r, col], t[0, col]
            hit = (lm[r, col] - kk * diff - tt * l1 >= c) & (kk > tt * theta[active][r]) & ok[active][r]
            out[name] = np.zeros(x.shape, dtype=bool)
            out[name][r[hit], col[hit]] = True
        decided = out["pass"] | out["fail"]
        has = decided.any(axis=1)
        first = np.where(has, decided.argmax(axis=1), b - 1)
        upto = np.arange(b)[None, :] <= first[:, None]
        ever[active] |= ((out["mhi"] | out["mlo"]) & upto).any(axis=1)
        stop = has | (t0 + b >= cell.n)
        verdict[active[has]] = np.where(out["pass"][np.arange(active.size), first][has], 1, 2)
        stopped_at[active[has]] = t0 + first[has] + 1
        # the reported interval (at the stop, or after N) against the true rate
        rows = np.arange(active.size)[stop]
        kf, tf, lf = kc[rows, first[rows]], t0 + first[rows] + 1.0, lm[rows, first[rows]]
        for name, sink, side in (("mhi", final_hi, below), ("mlo", final_lo, above)):
            theta, ok = side[name]
            l1, diff = logs[name][0][active][rows], logs[name][1][active][rows]
            th = theta[active][rows]
            beyond = kf < tf * th if name == "mhi" else kf > tf * th
            sink[active[rows]] = (lf - kf * diff - tf * l1 >= c) & beyond & ok[active][rows]
        k[active], logmix[active] = kc[:, -1], lm[:, -1]
        active = active[~stop]
        t0 += b
    return {
        "s_miss_hi": float(final_hi.mean()),
        "s_miss_lo": float(final_lo.mean()),
        "s_ever": float(ever.mean()),
        "s_pass": float((verdict == 1).mean()),
        "s_fail": float((verdict == 2).mean()),
        "s_judged": float((stopped_at / cell.n).mean()),
        "stopped_at": stopped_at,
        "verdict": verdict,
    }


def check_sequential_against_module(rng: np.random.Generator, paths: int = 12) -> None:
    """Replays simulated paths through the module itself, one look per judgment, on a few small
    cells: the stop and the verdict must be the simulation's, path by path."""
    seen: set[int] = set()
    for cell in (Cell(0.10, 0.25, 0.9, 0.99, 100, 300), Cell(0.10, 3.0, 0.9, 0.99, 100, 300)):
        x_se = rng.binomial(cell.m, cell.se, size=paths)
        x_sp = rng.binomial(cell.m, cell.sp, size=paths)
        x = rng.random((paths, cell.n)) < cell.q
        sim = sequential_sim(cell, paths, rng, given=(x_se, x_sp, x))
        for i in range(paths):
            judge = judge_accuracy(
                true_fail=int(x_se[i]),
                false_pass=cell.m - int(x_se[i]),
                true_pass=int(x_sp[i]),
                false_fail=cell.m - int(x_sp[i]),
                confidence=CONFIDENCE,
            )
            stop, verdict, k = cell.n, 0, 0
            for t in range(1, cell.n + 1):
                k += int(x[i, t - 1])
                rate = failure_rate(judged_fail=k, n=t, judge=judge, confidence=CONFIDENCE, sequential=True)
                decided = slice_verdict(rate, cell.limit)
                if decided in ("passed", "exceeded"):
                    stop, verdict = t, 1 if decided == "passed" else 2
                    break
            if (stop, verdict) != (int(sim["stopped_at"][i]), int(sim["verdict"][i])):
                raise SystemExit(f"self-check failed (sequential) in {cell}, path {i}: module {stop, verdict}, sim")
            seen.add(verdict)
    if seen != {0, 1, 2}:
        raise SystemExit(f"self-check: the replayed paths should pass, exceed and stay open; got {sorted(seen)}")


def check_sequence_evidence(rng: np.random.Generator) -> None:
    """The incremental mixture the simulation carries equals the module's closed form."""
    x = rng.random(3000) < 0.03
    kc = np.cumsum(x)
    t = np.arange(1, x.size + 1)
    a0, b0 = CS_PRIOR
    before = kc - x
    lm = np.cumsum(np.log(np.where(x, a0 + before, b0 + (t - 1) - before)) - np.log(a0 + b0 + t - 1))
    theta = 0.05
    closed = cs_log_evidence(kc, t, theta)
    ours = lm - kc * np.log(theta) - (t - kc) * np.log1p(-theta)
    if not np.allclose(closed, ours, atol=1e-8):
        raise SystemExit("self-check failed: the simulated mixture differs from the module's")


# --- the order the answers are judged in: case-id order against the seeded random one ---

# A finite slice of N answers, F of them truly failing; each judged fail with probability Se when it
# fails, 1 - Sp when it is good. Case ids group topics, so the adversary's order puts the failing
# answers last (the good ones are judged first); the product lane judges each slice in a seeded
# random order instead (a uniform permutation per path here). The same calibration and the same
# judgments are taken in both orders, and every answer judged for the fixed design.
ORDER_GRID = {
    "limit": (0.02, 0.05, 0.15),
    "ratio": (0.25, 0.5, 0.8, 1.0, 1.25, 2.0, 4.0),
    "judge": ((0.6, 0.95), (0.75, 0.995), (0.9, 0.8), (0.99, 0.999)),
    "m": (100, 1000),
    "n": (10, 20, 50, 120, 500, 2000, 5000),
}
ORDER_QUICK = {
    "limit": (0.05, 0.15),
    "ratio": (0.25, 1.0, 2.0),
    "judge": ((0.9, 0.95), (0.99, 0.999)),
    "m": (1000,),
    "n": (20, 120, 1000),
}
ORDERS = ("case_id", "random")


@dataclass
class OrderRow:
    cell: Cell  # its p is the slice's own failing share F/N
    ratio: float  # the cell's F/N over L before rounding F to a count
    failing: int  # F
    fixed_pass: float
    fixed_fail: float
    half_pass: float  # the fixed design judging a random half of the answers (N/2): P(passed)
    pass_: dict[str, float]  # per order: P(passed) with stop_when_decided
    fail: dict[str, float]
    judged: dict[str, float]  # per order: mean share of the N answers judged before the verdict
    sims: int

    @property
    def lost(self) -> float:
        """The pass probability the stop (random order) gives up against judging every answer."""
        return self.fixed_pass - self.pass_["random"]


def failing_count(limit: float, ratio: float, n: int) -> int:
    """F for a slice of n answers whose failing share is ratio x limit: rounded towards the limit's
    side the ratio names (at or above it for ratio >= 1, below it otherwise), so a cell at the limit
    never sits under it by rounding."""
    exact = ratio * limit * n
    return min(n, math.ceil(exact - 1e-9)) if ratio >= 1.0 else max(0, math.floor(exact - 1e-9))


def ordered_paths(
    n: int, failing: int, se: float, sp: float, sims: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """Per order, the judged-fail flags of each path in judging order (the same judgments)."""
    truth = np.zeros((sims, n), dtype=bool)
    truth[:, n - failing :] = True  # case-id order: the failing answers sort last
    judged = np.where(truth, rng.random((sims, n)) < se, rng.random((sims, n)) < 1.0 - sp)
    shuffled = rng.permuted(np.arange(n)[None, :].repeat(sims, axis=0), axis=1)
    return {"case_id": judged, "random": np.take_along_axis(judged, shuffled, axis=1)}


def order_cell(limit: float, ratio: float, se: float, sp: float, m: int, n: int, sims: int, seed: int) -> OrderRow:
    rng = np.random.default_rng([seed, int(limit * 1000), int(ratio * 100), int(se * 1000), int(sp * 1000), m, n])
    failing = failing_count(limit, ratio, n)
    cell = Cell(limit, failing / (n * limit), se, sp, m, n)
    x_se = rng.binomial(m, se, size=sims)
    x_sp = rng.binomial(m, sp, size=sims)
    paths = ordered_paths(n, failing, se, sp, sims, rng)
    cal = calibration_of(x_se, x_sp, m, np.ones(sims))
    th = fixed_thresholds(cal, n, limit, cell.p)
    k = paths["case_id"].sum(axis=1)
    half = n // 2
    k_half = paths["random"][:, :half].sum(axis=1)
    half_pass = float((k_half <= fixed_thresholds(cal, half, limit, cell.p)["pass_le"]).mean()) if half else 0.0
    row = OrderRow(
        cell,
        ratio,
        failing,
        float((k <= th["pass_le"]).mean()),
        float((k >= th["fail_ge"]).mean()),
        half_pass,
        {},
        {},
        {},
        sims,
    )
    for order in ORDERS:
        sim = sequential_sim(cell, sims, rng, given=(x_se, x_sp, paths[order]))
        row.pass_[order], row.fail[order], row.judged[order] = sim["s_pass"], sim["s_fail"], sim["s_judged"]
    return row


def check_order_against_module(rng: np.random.Generator, paths: int = 8) -> None:
    """Paths in both orders replayed through the module itself, one look per judgment: the stop and
    the verdict must be the simulation's, path by path (the order cells measure the shipped
    intervals, not a copy of them)."""
    for limit, ratio, n in ((0.15, 2.0, 40), (0.05, 0.25, 400)):
        failing = failing_count(limit, ratio, n)
        cell = Cell(limit, failing / (n * limit), 0.9, 0.99, 100, n)
        x_se = rng.binomial(cell.m, cell.se, size=paths)
        x_sp = rng.binomial(cell.m, cell.sp, size=paths)
        for order, x in ordered_paths(n, failing, cell.se, cell.sp, paths, rng).items():
            sim = sequential_sim(cell, paths, rng, given=(x_se, x_sp, x))
            for i in range(paths):
                got = replay(cell, int(x_se[i]), int(x_sp[i]), x[i])
                if got != (int(sim["stopped_at"][i]), int(sim["verdict"][i])):
                    raise SystemExit(f"self-check failed ({order} order) in {cell}, path {i}: module {got}, sim")


def replay(cell: Cell, caught: int, passed: int, path: np.ndarray) -> tuple[int, int]:
    """(the judgment the module stops at, its verdict: 0 none, 1 passed, 2 exceeded), one look per judgment."""
    judge = judge_accuracy(
        true_fail=caught,
        false_pass=cell.m - caught,
        true_pass=passed,
        false_fail=cell.m - passed,
        confidence=CONFIDENCE,
    )
    k = 0
    for t in range(1, cell.n + 1):
        k += int(path[t - 1])
        rate = failure_rate(judged_fail=k, n=t, judge=judge, confidence=CONFIDENCE, sequential=True)
        decided = slice_verdict(rate, cell.limit)
        if decided in ("passed", "exceeded"):
            return t, 1 if decided == "passed" else 2
    return cell.n, 0


ORDER_HEADER = (
    f"{'L':>5} {'F/N':>9} {'Se':>5} {'Sp':>5} {'m':>5} {'N':>5} | {'pass':>6} {'fail':>6} | "
    f"{'pass':>6} {'fail':>6} {'judged':>6} | {'pass':>6} {'fail':>6} {'judged':>6} | {'lost':>6}"
)


def order_line(row: OrderRow) -> str:
    c = row.cell
    share = f"{row.failing}/{c.n}"
    return (
        f"{c.limit:5.2f} {share:>9} {c.se:5.3g} {c.sp:5.3g} {c.m:5d} {c.n:5d} | {pct(row.fixed_pass)} "
        f"{pct(row.fixed_fail)} | {pct(row.pass_['case_id'])} {pct(row.fail['case_id'])} "
        f"{pct(row.judged['case_id'])} | {pct(row.pass_['random'])} {pct(row.fail['random'])} "
        f"{pct(row.judged['random'])} | {pct(row.lost)}"
    )


def order_rows(grid: dict[str, tuple[Any, ...]], sims: int, seed: int, quiet: bool) -> list[OrderRow]:
    rows = []
    if not quiet:
        print(f"{'':39}| fixed N       | stop, case-id order  | stop, random order   |")
        print(ORDER_HEADER)
    for limit, ratio, (se, sp), m, n in itertools.product(*(grid[k] for k in ("limit", "ratio", "judge", "m", "n"))):
        row = order_cell(limit, ratio, se, sp, m, n, sims, seed)
        rows.append(row)
        if not quiet:
            print(order_line(row), flush=True)
    return rows


def order_summary(rows: list[OrderRow]) -> list[str]:
    """The false approval of each order side by side, and what the stop costs and saves."""
    bad = [r for r in rows if r.ratio >= 1.0]
    good = [r for r in rows if r.ratio < 1.0]
    out = [
        f"Order ({len(rows)} cells, {rows[0].sims} paths each; nominal false approval: at most {100 * NOMINAL:.0f}%):"
    ]
    for order in ORDERS:
        r = max(bad, key=lambda r: r.pass_[order])
        out.append(
            f"  stop, {order} order: P(passed) when F/N >= L, worst {100 * r.pass_[order]:.2f}% "
            f"({where(r)}); cells above nominal: {sum(mc_above(x.pass_[order], x.sims) for x in bad)} of {len(bad)}"
        )
    r = max(bad, key=lambda r: r.fixed_pass)
    out.append(f"  fixed N: P(passed) when F/N >= L, worst {100 * r.fixed_pass:.2f}% ({where(r)})")
    for ratio in sorted({r.ratio for r in good}):
        chosen = [r for r in good if r.ratio == ratio]
        lost = np.array([r.lost for r in chosen])
        r = max(chosen, key=lambda r: r.lost)
        out.append(
            f"  pass probability lost by the stop (random order) against fixed N, F/N = {ratio:g} L: median "
            f"{100 * np.median(lost):.1f} points, worst {100 * r.lost:.1f} ({where(r)}); over 10 points in "
            f"{int((lost > 0.10).sum())} of {len(chosen)} cells"
        )
        some = [r for r in chosen if r.fixed_pass >= 0.5]
        if some:
            lost = np.array([r.lost for r in some])
            out.append(
                f"    where fixed N passes >= 50% ({len(some)} cells): median {100 * np.median(lost):.1f} points, "
                f"over 10 points in {int((lost > 0.10).sum())}"
            )
    quarter = [r for r in good if r.ratio == 0.25]
    for label, chosen in (
        ("where fixed N/2 passes >= 90%", [r for r in quarter if r.half_pass >= 0.9]),
        ("where fixed N passes >= 90%", [r for r in quarter if r.fixed_pass >= 0.9]),
        ("every cell", quarter),
    ):
        shares = np.array([r.judged["random"] for r in chosen])
        out.append(
            f"  F/N = L/4, share judged before the verdict (random order), {label}: median "
            f"{100 * np.median(shares):.1f}%, worst {100 * shares.max():.1f}%, over half in "
            f"{int((shares > 0.5).sum())} of {len(chosen)} cells"
        )
    return out


def where(r: OrderRow) -> str:
    c = r.cell
    return f"L={c.limit:g} F/N={r.failing}/{c.n} Se={c.se:g} Sp={c.sp:g} m={c.m}"


# --- the grid and the report ---


def cells(grid: dict[str, tuple[Any, ...]]) -> list[Cell]:
    keys = ("limit", "ratio", "se", "sp", "m", "n")
    return [Cell(*values) for values in itertools.product(*(grid[k] for k in keys))]


def run_cell(cell: Cell, sims: int, seed: int, index: int, checks: int) -> Row:
    rng = np.random.default_rng([seed, index])
    exact, cal, th = fixed_exact(cell)
    if checks:
        self_check(cell, cal, th, rng, checks)
    half = Cell(cell.limit, cell.ratio, cell.se, cell.sp, cell.m, cell.n // 2)
    th_half = fixed_thresholds(cal, half.n, half.limit, half.p)
    pass_half = float((cal.weight * binom.cdf(th_half["pass_le"], half.n, half.q)).sum())
    row = Row(cell, exact["miss_hi"], exact["miss_lo"], exact["pass"], exact["fail"], exact["raw_pass"], pass_half)
    if sims:
        for name, value in sequential_sim(cell, sims, rng).items():
            if name.startswith("s_"):
                setattr(row, name, value)
        row.sims = sims
    return row


HEADER = (
    f"{'L':>5} {'p/L':>4} {'Se':>5} {'Sp':>5} {'m':>5} {'N':>6} | "
    f"{'miss_hi':>7} {'miss_lo':>7} {'pass':>6} {'fail':>6} {'raw_pass':>8} | "
    f"{'miss_hi':>7} {'miss_lo':>7} {'ever':>6} {'pass':>6} {'fail':>6} {'judged':>6}"
)


def pct(x: float) -> str:
    return "     -" if math.isnan(x) else f"{100 * x:6.2f}"


def line(row: Row) -> str:
    c = row.cell
    return (
        f"{c.limit:5.2f} {c.ratio:4.2f} {c.se:5.3g} {c.sp:5.3g} {c.m:5d} {c.n:6d} | "
        f" {pct(row.miss_hi)}  {pct(row.miss_lo)} {pct(row.pass_)} {pct(row.fail)}   {pct(row.raw_pass)} | "
        f" {pct(row.s_miss_hi)}  {pct(row.s_miss_lo)} {pct(row.s_ever)} {pct(row.s_pass)} {pct(row.s_fail)} "
        f"{pct(row.s_judged)}"
    )


def mc_above(rate: float, sims: int) -> bool:
    """Whether a simulated rate is above nominal beyond Monte Carlo error (its one-sided 99.9%
    Clopper-Pearson lower bound above 1 - confidence)."""
    if not sims or math.isnan(rate):
        return False
    return float(cp_low(round(rate * sims), sims, 0.001)[()]) > NOMINAL


def worst(rows: list[Row], label: str, value: Any, keep: Any = lambda r: True) -> str:
    chosen = [r for r in rows if keep(r) and not math.isnan(value(r))]
    if not chosen:
        return f"  {label}: no cell"
    r = max(chosen, key=value)
    c = r.cell
    where = f"L={c.limit:g} p/L={c.ratio:g} Se={c.se:g} Sp={c.sp:g} m={c.m} N={c.n}"
    return f"  {label}: {100 * value(r):.2f}% ({where})"


def summary(rows: list[Row]) -> list[str]:
    at_or_above = lambda r: r.cell.ratio >= 1.0  # noqa: E731
    below = lambda r: r.cell.ratio < 1.0  # noqa: E731
    out = [f"Worst cell per property ({len(rows)} cells; nominal: at most {100 * NOMINAL:.0f}%):"]
    out.append(worst(rows, "fixed, P(high < p)", lambda r: r.miss_hi))
    out.append(worst(rows, "fixed, P(low > p)", lambda r: r.miss_lo))
    out.append(worst(rows, "fixed, P(pass) for p >= L", lambda r: r.pass_, at_or_above))
    out.append(worst(rows, "raw k/N <= L, P(pass) for p >= L", lambda r: r.raw_pass, at_or_above))
    out.append(worst(rows, "fixed, P(exceeded) for p < L", lambda r: r.fail, below))
    out.append(worst(rows, "raw k/N <= L, P(fail) for p < L", lambda r: 1.0 - r.raw_pass, below))
    if any(r.sims for r in rows):
        out.append(worst(rows, "sequential, P(high < p) at the verdict", lambda r: r.s_miss_hi))
        out.append(worst(rows, "sequential, P(low > p) at the verdict", lambda r: r.s_miss_lo))
        out.append(worst(rows, "sequential, P(a bound ever wrong before the stop)", lambda r: r.s_ever))
        out.append(worst(rows, "sequential, P(pass) for p >= L", lambda r: r.s_pass, at_or_above))
        out.append(worst(rows, "sequential, P(exceeded) for p < L", lambda r: r.s_fail, below))
        out += quarter_summary(rows)
    fixed_over = [r for r in rows if max(r.miss_hi, r.miss_lo) > NOMINAL or (r.cell.ratio >= 1 and r.pass_ > NOMINAL)]
    seq_over = [
        r
        for r in rows
        if mc_above(max(r.s_miss_hi, r.s_miss_lo), r.sims) or (r.cell.ratio >= 1 and mc_above(r.s_pass, r.sims))
    ]
    out.append(f"Cells above nominal: fixed {len(fixed_over)} (exact), sequential {len(seq_over)} (beyond MC error)")
    out += [f"  ABOVE NOMINAL: {line(r)}" for r in fixed_over + seq_over]
    return out


def quarter_summary(rows: list[Row]) -> list[str]:
    """At p = L/4: the share of the N answers the sequential design judged before its verdict
    (target: at most half), over the cells where the fixed design passes at least 90% of the time
    with all N answers, and over those where it does so with N/2 (where deciding by N/2 is
    possible at all: no valid design can pass at N/2 what a fixed design at N/2 cannot)."""
    text = []
    for label, key in (("N", lambda r: r.pass_), ("N/2", lambda r: r.pass_half)):
        chosen = [r for r in rows if r.cell.ratio == 0.25 and key(r) >= 0.9 and r.sims]
        if not chosen:
            text.append(f"  p = L/4: no cell the fixed design passes 90% of the time with {label}")
            continue
        shares = np.array([r.s_judged for r in chosen])
        over = [r for r in chosen if r.s_judged > 0.5]
        text.append(
            f"  p = L/4, cells the fixed design passes >= 90% with {label} answers ({len(chosen)}): share judged "
            f"before the verdict median {100 * np.median(shares):.1f}%, worst {100 * shares.max():.1f}%, "
            f"{len(over)} over half; sequential pass rate min {100 * min(r.s_pass for r in chosen):.1f}%"
        )
        text += [f"    over half: {line(r)}" for r in over]
    return text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="the whole grid (3,456 cells; ~45 min), not its corner")
    ap.add_argument("--quick", action="store_true", help="fewer order cells and paths (a smoke run)")
    ap.add_argument("--sims", type=int, help="sequential paths per grid cell (default 1000; the corner 400)")
    ap.add_argument("--order-sims", type=int, help="paths per order cell (default 1000; --quick 400)")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--checks", type=int, default=3, help="module self-checks per cell (default 3)")
    ap.add_argument("--no-sequential", action="store_true", help="the fixed design only (exact, fast)")
    ap.add_argument("--no-order", action="store_true", help="leave out the order cells")
    ap.add_argument("--order-only", action="store_true", help="the order cells only")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--csv", type=Path, help="every grid cell's figures as CSV")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    check_sequence_evidence(rng)
    if not args.no_order:
        check_order_against_module(rng)
        started = time.perf_counter()
        order_sims = args.order_sims or (400 if args.quick else 1000)
        grid = ORDER_QUICK if args.quick else ORDER_GRID
        print(
            f"Order cells: the failing answers sorted last (case-id order) against the seeded random order, "
            f"confidence {CONFIDENCE}, {order_sims} paths per cell, seed {args.seed}"
        )
        rows = order_rows(grid, order_sims, args.seed, args.summary_only)
        print(f"({time.perf_counter() - started:.0f} s)")
        print("\n".join(order_summary(rows)))
    if not args.order_only:
        grid_run(args, rng)


def grid_run(args: argparse.Namespace, rng: np.random.Generator) -> None:
    grid = FULL if args.full else QUICK
    sims = 0 if args.no_sequential else (args.sims or (1000 if args.full else 400))
    if sims:
        check_sequential_against_module(rng)
    todo = cells(grid)
    started = time.perf_counter()
    print(f"\n{len(todo)} cells, confidence {CONFIDENCE}, sequential paths per cell {sims}, seed {args.seed}")
    print(f"{'':34}| fixed N (exact){'':26}| stop_when_decided (simulated)")
    if not args.summary_only:
        print(HEADER)
    rows = []
    for i, cell in enumerate(todo):
        row = run_cell(cell, sims, args.seed, i, args.checks)
        rows.append(row)
        if not args.summary_only:
            print(line(row), flush=True)
    print(f"({time.perf_counter() - started:.0f} s)")
    print("\n".join(summary(rows)))
    if args.csv:
        with args.csv.open("w", newline="") as fh:
            writer = csv.writer(fh)
            fields = [f for f in asdict(rows[0]) if f != "cell"]
            writer.writerow(["limit", "ratio", "se", "sp", "m", "n", *fields])
            for r in rows:
                d = asdict(r)
                writer.writerow(
                    [*(d["cell"][k] for k in ("limit", "ratio", "se", "sp", "m", "n")), *(d[f] for f in fields)]
                )


if __name__ == "__main__":
    main()
