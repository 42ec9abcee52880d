"""Benchmark: the audit plan. How many labels decide a slice, how often, and how close to the best any test can do?

The product gate's audit is sized before the run's K (the answers the judge failed) is known: two designs per
slice from n and calibration alone (gate/estimate/audit_sizing.py), one to pass a product at a quarter of the
limit, one to show a product at 2x/3x/5x it exceeded, each with 80% power; K only chooses which people label.
`passed` is read only from the design to pass, at 1 - confidence; `exceeded` from either, at 9/10 of it in
its own design and 1/10 in the other. Both are decided by two exact tests on exactly the planned items
(gate/estimate/audit_tests.py). This bench prints, side by side in one run, the plan against the audit it
replaces (today's: every judged-fail answer and the judged-pass answers the expected counts ask for, decided by
gate/estimate/audit_bounds.py), against the rule the gate had before (`sized_from_k`: one design sized from
this run's K, rebuilt here from the gate's own search; bench/audit_steering.py section 4 shows it passing a
product at its limit more than 5% of the time) and against a linear programme's bound on every valid test
(confidence 95%):

0. The headline (N = 3,000 answers, a judge with Se 0.85 and Sp 0.99, a 2% limit): labels for 80% power to
   pass a product at 0.5%, and to show one at 4% exceeded. Per row the labels and the power: the gate's design
   (exact at the expected K, and over every run, K choosing the design), the rule sized from K at the expected
   K, today's audit (its own route at the expected counts, then with more judged-pass labels), and the LP
   bound (for exceeded at the whole 1 - confidence and at the 9/10 of it the gate's design is read at). Then a
   product at 0.75%, between a quarter of the limit and the limit: the plan sized at a quarter of the limit
   (220 labels, passes 42.9% over every run) beside the plan sized at its own rate (`audit_sized_at: 0.0075`:
   1,336 labels on average, 77.7%), each with what it passes of a product at the limit (3.7% and 0.01%).
1. More evidence never weakens the verdict: the issue's cells (3,000 answers, the judge failed 200, people
   confirm 70% of those they label, a 3.4% limit: 60 / 150 / 180 / 200 judged-fail labels), and P(passed) of
   the headline product as the judged-pass labels of its design to pass grow.
2. The lower bound reads every failure people found: 70 answers all labelled, 6 failing, 4 of them judged fail.
3. (full run only) Power and labels on a grid: limits 1/2/5/10%, the product at a quarter of its limit and at
   twice it. Per cell: the design K chooses at the expected K (labels, the rate it was sized at, its power
   there); over every run (every K the run could have, each with the gate's plan at it): P(the verdict) and
   the labels people label on average; today's audit the same way.
4. The trial's slices: 70 answers, a 5% limit. What the plan says before any label, per K.
5. The planner's CPU per slice at 3,000 and 100,000 answers.

Every probability but the LP's is exact: a sum over every K and every planned sample's outcome (the region of a
design is read from its critical value, cross-checked against gate's own verdict at the region's edge).

The LP bound is coarsened, so it can only be too high (a bound on every valid test, not a test): for one
design (the labels split between the strata a few ways, the best shown) its variables are the outcomes (K
within 5 sd of the alternative's, each stratum's count; judged-pass counts past a 1e-7 tail left out and
counted as won), and the level is imposed only at 36 x 24 points (pi, q_F) of the null on the limit, not over
the whole null. The power it allows at the alternative is the most any test of that design, randomised or
not, could have.

    nice .venv/bin/python bench/audit_sizing.py            # everything (12 minutes on 2 shared cores, another bench alongside)
    nice .venv/bin/python bench/audit_sizing.py --quick    # the headline with fewer points, no grid (2 minutes)
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import sparse
from scipy.optimize import linprog
from scipy.stats import binom

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.audit_coverage import high_threshold, low_threshold_all, low_threshold_sampled  # noqa: E402
from gate.estimate import audit_bounds as ab  # noqa: E402
from gate.estimate import audit_rate as ar  # noqa: E402
from gate.estimate import audit_sizing as sz  # noqa: E402
from gate.estimate import audit_tests as at  # noqa: E402
from gate.estimate.failure_rate import cp_low  # noqa: E402

CONF = 0.95
ALPHA = 1 - CONF
N = 3000
SE, SP = 0.85, 0.99
CALIBRATION = sz.Calibration(true_fail=85, false_pass=15, true_pass=990, false_fail=10)
WINDOW = 4.0  # standard deviations of K summed over; the mass beyond is counted against the figure


def strata(p: float, se: float, sp: float) -> tuple[float, float, float]:
    """At true rate p and a judge (se, sp): pi, q_F, q_P."""
    pi = se * p + (1 - sp) * (1 - p)
    return pi, (se * p / pi if pi > 0 else 0.0), ((1 - se) * p / (1 - pi) if pi < 1 else 0.0)


def k_window(n: int, pi: float, width: float = WINDOW) -> tuple[np.ndarray, np.ndarray, float]:
    """The K the run could have (within `width` sd), their chances, and the chance left out."""
    sd = np.sqrt(n * pi * (1 - pi))
    ks = np.arange(max(0, int(n * pi - width * sd) - 1), min(n, int(n * pi + width * sd) + 1) + 1)
    pk = binom.pmf(ks, n, pi)
    return ks, pk, float(max(0.0, 1.0 - pk.sum()))


# --- the new rule: a design's region and its chance ---


def statistics(
    side: at.Side, design: at.Design, k: int, xs_f: np.ndarray, xs_p: np.ndarray, alpha: float = ALPHA
) -> np.ndarray:
    """The test's statistic over a grid of labels at K = k (what audit_tests.statistic computes, vectorised), its
    test read at `alpha` (the exceeded statistic's Clopper-Pearson bounds, the passed one's shift, are at it)."""
    n = design.n
    a_f, a_p = design.sizes(k)
    if design.whole:
        whole: np.ndarray = (xs_f[:, None] + xs_p[None, :]) / n
        return whole
    if side == "passed":
        term_f = (xs_f + at.fail_shift(alpha)) / a_f if a_f else 0.0 * xs_f
        term_p = at.PASS_SCALE * xs_p / a_p if a_p else 0.0 * xs_p
    else:
        term_f = cp_low(xs_f, max(a_f, 1), alpha) if a_f else 0.0 * xs_f
        term_p = cp_low(xs_p, max(a_p, 1), alpha) if a_p else 0.0 * xs_p
    return k / n * np.asarray(term_f, float)[:, None] + (1 - k / n) * np.asarray(term_p, float)[None, :]


@functools.cache
def edge(side: at.Side, design: at.Design, limit: float, alpha: float = ALPHA) -> float | None:
    """The design's critical value at `alpha` (whole audits: Clopper-Pearson's, as a share of n)."""
    if design.whole:
        xs = np.arange(design.n + 1)
        if side == "passed":
            ok = np.flatnonzero(binom.cdf(xs, design.n, limit) <= alpha)
            return float(ok[-1] / design.n) if ok.size else None
        ok = np.flatnonzero(binom.sf(xs - 1, design.n, limit) <= alpha)
        return float(ok[0] / design.n) if ok.size else None
    return at.critical(side, design, limit, alpha)


def verdict_chance(
    side: at.Side, design: at.Design | None, limit: float, k: int, q_f: float, q_p: float, alpha: float = ALPHA
) -> float:
    """P(the test of `side` on `design` at `alpha` rejects) at K = k when people fail the strata at q_f, q_p."""
    if design is None:
        return 0.0
    w = edge(side, design, limit, alpha)
    if w is None or (design.fail_cap == 0 and design.pass_cap == 0):
        return 0.0
    a_f, a_p = design.sizes(k)
    top_p = a_p if side == "exceeded" else min(a_p, int(binom.isf(1e-12, a_p, q_p)) + 2 if a_p else 0)
    xs_f, xs_p = np.arange(a_f + 1), np.arange(top_p + 1)
    stats = statistics(side, design, k, xs_f, xs_p, alpha)
    good = stats <= w + 1e-15 if side == "passed" else stats >= w - 1e-15
    prob = binom.pmf(xs_f, a_f, q_f)[:, None] * binom.pmf(xs_p, a_p, q_p)[None, :]
    return float((prob * good).sum())


@functools.cache
def plan_at(
    n: int, k: int, calibration: sz.Calibration | None, limit: float, sized_at: float | None = None
) -> sz.Sizing:
    """The gate's plan at K = k: two designs fixed before K, K choosing which is labelled (`sized_at`: the
    slice's `audit_sized_at`, the rate the design to pass is sized at; None: a quarter of the limit)."""
    return sz.plan_audit(
        judged_fail=k, judged_pass=n - k, calibration=calibration, limit=limit, confidence=CONF, pass_sized_at=sized_at
    )


def gate_chance(side: at.Side, plan: sz.Sizing, limit: float, k: int, q_f: float, q_p: float) -> float:
    """P(the gate's test of `side` rejects) at K = k: `passed` read from the plan's design to pass only
    (`pass_design`, None where K chose the design to show exceeded), `exceeded` from the labelled design, each
    at the level the plan reads it at (`Sizing.alpha`). An upper bound of P(the verdict): the verdict asks
    `exceeded` first."""
    design = plan.pass_design if side == "passed" else plan.design
    return verdict_chance(side, design, limit, k, q_f, q_p, plan.alpha(side))


def drawn(
    n: int,
    p: float,
    se: float,
    sp: float,
    calibration: sz.Calibration | None,
    limit: float,
    side: at.Side,
    sized_at: float | None = None,
) -> tuple[float, float]:
    """The gate at the truth: P(the verdict `side`) and the labels on average, each K with the plan the gate
    makes at it (the chance of K outside the window counted as the verdict where it is an error, for a figure
    that can only err high there)."""
    pi, q_f, q_p = strata(p, se, sp)
    ks, pk, rest = k_window(n, pi)
    chance, labels = rest if (p >= limit if side == "passed" else p <= limit) else 0.0, 0.0
    for k, w in zip(ks, pk, strict=True):
        plan = plan_at(n, int(k), calibration, limit, sized_at)
        labels += w * plan.labels
        chance += w * gate_chance(side, plan, limit, int(k), q_f, q_p)
    return chance, labels / pk.sum()


# --- the rule the gate had before (sized from K), rebuilt from the gate's own search ---


@dataclass(frozen=True)
class SizedFromK:
    """The audit plan as the gate sized it before e553aac: one design, the fewest labels reaching 80% power
    on the verdict calibration's prediction at this run's K points to, at that prediction and the K itself;
    both verdicts read from it at the whole 1 - confidence. `design` None: not even a whole audit of the run
    reaches the power (then nothing was labelled)."""

    n: int
    judged_fail: int
    design: at.Design | None
    aim: sz.Aim
    sized_at: float
    power: float

    @property
    def labels(self) -> int:
        return sum(self.design.sizes(self.judged_fail)) if self.design is not None else 0


def sized_from_k_uncached(n: int, k: int, calibration: sz.Calibration | None, limit: float) -> SizedFromK:
    """The old rule (bench/audit_given_k.py asks it of its own test, hence uncached here): the gate's private
    search (`sz._smallest`, `sz.plan_power`, `sz._whole_power`) at `sz.predicted` of this K, alpha for both
    sides. To show exceeded it tried the judged-fail ladder one cap at a time (`_old_smallest_to_exceed`, as
    the gate did then) and fell back to a whole audit where that failed."""
    rate, q_f, q_p, _ = sz.predicted(k, n, calibration)
    aim: sz.Aim = "passed" if rate < limit else "exceeded"
    whole = sz._whole_power(aim, n, rate, limit, ALPHA)
    if n == 0 or whole < sz.POWER:
        return SizedFromK(n, k, None, aim, rate, whole)
    if aim == "passed":
        found = sz._smallest(aim, k, n, q_f, q_p, limit, ALPHA, sz.POWER)
    else:
        found = _old_smallest_to_exceed(k, n, q_f, q_p, limit)
    design = found or at.Design(n, n, n)
    reached = sz.plan_power(aim, design, k, q_f, q_p, rate, limit, ALPHA)
    return SizedFromK(n, k, design, aim, rate, reached)  # labelled even where it fell short, as it was


def _old_smallest_to_exceed(k: int, n: int, q_f: float, q_p: float, limit: float) -> at.Design | None:
    caps = sorted({min(c, k) for c in (*sz.FAIL_CAPS, k) if 0 < min(c, k) <= sz.MAX_PASS_LABELS}) or [sz.FAIL_CAPS[0]]

    def reaches(cap: int) -> bool:
        return sz._reaches("exceeded", at.Design(n, cap, 0), k, q_f, q_p, limit, ALPHA, sz.POWER)

    below = 0
    for cap in caps:
        if reaches(cap):
            return at.Design(n, next((c for c in range(below + 1, cap) if reaches(c)), cap), 0)
        below = cap
    return None


@functools.cache
def sized_from_k(n: int, k: int, calibration: sz.Calibration | None, limit: float) -> SizedFromK:
    return sized_from_k_uncached(n, k, calibration, limit)


def cross_check(side: at.Side, design: at.Design, limit: float, k: int, alpha: float = ALPHA) -> int:
    """Gate's own verdict at the region's edge: the outcomes on either side of the critical value must be
    decided as the region says (mismatches)."""
    w = edge(side, design, limit, alpha)
    if w is None or design.whole:
        return 0
    a_f, a_p = design.sizes(k)
    xs_f, xs_p = np.arange(a_f + 1), np.arange(min(a_p, 6) + 1)
    stats = statistics(side, design, k, xs_f, xs_p, alpha)
    order = np.argsort(np.abs(stats - w), axis=None)[:4]
    bad = 0
    for flat in order:
        i, j = np.unravel_index(flat, stats.shape)
        inside = stats[i, j] <= w + 1e-15 if side == "passed" else stats[i, j] >= w - 1e-15
        bad += int(at.rejects(side, design, k, int(i), int(j), limit, alpha) != bool(inside))
    return bad


# --- today's audit, exactly (gate/estimate/audit_bounds.py) ---


def old_chance(n: int, p: float, se: float, sp: float, fail_cap: int, m: int, limit: float) -> tuple[float, float]:
    """P(passed), P(exceeded) of today's audit labelling min(fail_cap, K) judged-fail answers and min(m, n-K)
    judged-pass ones: passed by the exact test of r_F + q_P (unaudited judged-fail answers counted failing),
    exceeded by the exact test of pi * q_F (80% of alpha) or the box (20%)."""
    from bench.audit_coverage import box_exceeds

    pi, q_f, q_p = strata(p, se, sp)
    ks, pk, _ = k_window(n, pi)
    passed = exceeded = 0.0
    exact = ALPHA * ar.EXACT_SHARE
    for k, w in zip(ks, pk, strict=True):
        k = int(k)
        a_f, a_p = min(fail_cap, k), min(m, n - k)
        t = high_threshold(n, a_p, limit)
        if t >= 0 and a_p:
            y2 = np.arange(a_p + 1)
            x_cap = (t - y2 * n) // a_p - (k - a_f)
            passed += w * float((binom.pmf(y2, a_p, q_p) * np.where(x_cap >= 0, binom.cdf(x_cap, a_f, q_f), 0)).sum())
        xs = np.arange(a_f + 1)
        if k == 0:
            hit = np.zeros(1, dtype=bool)
        elif a_f >= k:
            hit = xs >= low_threshold_all(n, limit)
        else:
            hit = (cp_low(k, n, exact) * cp_low(xs, a_f, exact)) >= low_threshold_sampled(n, a_f, limit)
        box = binom.sf(box_exceeds(k, n, a_f, xs, a_p, limit) - 1, a_p, q_p) if a_p else np.zeros(xs.shape)
        exceeded += w * float((binom.pmf(xs, a_f, q_f) * np.where(hit, 1.0, box)).sum())
    return passed, exceeded


def old_route(p: float, limit: float) -> tuple[int, int] | None:
    """Today's route at the expected counts (gate/estimate/audit_rate.audits_to_decide)."""
    pi, q_f, q_p = strata(p, SE, SP)
    return ar.audits_to_decide(
        judged_fail=round(pi * N), n=N, q_fail=q_f, q_pass=q_p, confidence=CONF, max_failure_rate=limit
    )


# --- the LP bound on any valid test ---


def lp_bound(
    n: int,
    design: at.Design,
    alt: tuple[float, float, float],
    limit: float,
    side: at.Side,
    points: int = 36,
    alpha: float = ALPHA,
) -> float:
    """An upper bound of the power at `alt` of every test of the design valid at 1 - confidence: the largest
    power of any test, randomised or not, whose chance of its verdict is at most alpha at a grid of points of
    the null near alt (fewer constraints than the whole null: the bound can only be too high). Outcomes of K
    outside WINDOW sd are counted as won."""
    pi_a, qf_a, qp_a = alt
    ks, _, _ = k_window(n, pi_a, 5.0)
    a_f, a_p = np.minimum(design.fail_cap, ks), np.minimum(design.pass_cap, n - ks)
    xs_f = np.arange(int(a_f.max()) + 1)
    worst_q = qp_a if side == "passed" else max(qp_a, 2 * limit)
    xs_p = np.arange(min(int(a_p.max()), int(binom.isf(1e-7, max(int(a_p.max()), 1), worst_q)) + 3) + 1)

    def probs(pi: float, qf: float, qp: float) -> np.ndarray:
        pf = binom.pmf(xs_f[None, :], a_f[:, None], qf)
        pp = binom.pmf(xs_p[None, :], a_p[:, None], qp)
        joint: np.ndarray = (binom.pmf(ks, n, pi)[:, None, None] * pf[:, :, None] * pp[:, None, :]).ravel()
        return joint

    won = probs(pi_a, qf_a, qp_a)
    rows = []
    for pi in np.linspace(max(1e-6, ks.min() / n), ks.max() / n, points):
        for qf in np.linspace(0.0, min(1.0, limit / pi), 24):
            qp = (limit - pi * qf) / (1 - pi)
            if 0.0 <= qp <= 1.0:
                rows.append(probs(pi, qf, qp))
    constraints = np.array(rows)
    constraints[constraints < 1e-13] = 0.0
    res = linprog(
        -won, A_ub=sparse.csr_matrix(constraints), b_ub=np.full(len(rows), alpha), bounds=(0, 1), method="highs"
    )
    return float(-res.fun + (1.0 - won.sum()))


# --- the moonshot: labels for 80% power, the gate against today's rule and the LP bound ---


def fixed_power(side: at.Side, design: at.Design, p: float, limit: float, alpha: float = ALPHA) -> float:
    """P(the verdict `side`) of one fixed design drawn at the truth: every K the run could have (its chance
    outside the window counted against a pass, never for it), every outcome of the planned sample."""
    pi, q_f, q_p = strata(p, SE, SP)
    ks, pk, _ = k_window(N, pi)
    return float(
        sum(w * verdict_chance(side, design, limit, int(k), q_f, q_p, alpha) for k, w in zip(ks, pk, strict=True))
    )


@functools.cache
def lp_best(
    total: int, p: float, limit: float, side: at.Side, caps: tuple[int, ...], alpha: float = ALPHA
) -> tuple[float, str]:
    """The LP's bound on any valid test's power with `total` labels at the expected K, over a few splits."""
    alt = strata(p, SE, SP)
    best, where = 0.0, ""
    for cap in caps if side == "passed" else (total,):
        m = total - cap if side == "passed" else 0
        if m < 0:
            continue
        bound = lp_bound(N, at.Design(N, cap, m), alt, limit, side, alpha=alpha)
        if bound > best:
            best, where = bound, f"{cap} + {m}"
    return best, where


def moonshot(quick: bool) -> None:
    limit = 0.02
    print(f"0. The headline: N = {N:,}, Se {SE}, Sp {SP}, a {limit:.0%} limit (confidence {CONF:.0%})")
    # Passing: the product at 0.5%.
    p = 0.005
    pi, q_f, q_p = strata(p, SE, SP)
    k = round(pi * N)
    plan = plan_at(N, k, CALIBRATION, limit)
    assert plan.pass_design is not None
    design = plan.pass_design
    at_k = at.power("passed", design, k, q_f, q_p, limit, plan.alpha("passed"))
    every, labels = drawn(N, p, SE, SP, CALIBRATION, limit, "passed")
    old = sized_from_k(N, k, CALIBRATION, limit)
    print(f"   a product at {p:.1%}, expected K {k}: labels for 80% power to pass")
    print(f"   {'rule':<70} {'labels':>7} {'power':>7}")
    print(
        f"   {'the gate: its design to pass, fixed before K (' + _split(design, k) + ')':<70}"
        f" {plan.labels:>7} {at_k:>7.3f}   (exact at this K)"
    )
    print(
        f"   {'  the gate over every run (K chooses the design; labels on average)':<70} {labels:>7.1f} {every:>7.3f}"
    )
    if old.design is not None:
        print(
            f"   {'sized from K (the rule before), at the expected K (' + _split(old.design, k) + ')':<70}"
            f" {old.labels:>7} {verdict_chance('passed', old.design, limit, k, q_f, q_p):>7.3f}   (exact at this K)"
        )
    route = old_route(p, limit)
    assert route is not None
    print(
        f"   {'today: its own route at the expected counts (' + str(route[0]) + ' + ' + str(route[1]) + ')':<70}"
        f" {route[0] + route[1]:>7} {old_chance(N, p, SE, SP, N, route[1], limit)[0]:>7.3f}"
    )
    for m in (230, 260, 280, 300) if quick else (200, 230, 245, 260, 280, 300, 320):
        print(
            f"   {'today: all judged-fail answers + ' + str(m) + ' judged-pass':<70} {k + m:>7}"
            f" {old_chance(N, p, SE, SP, N, m, limit)[0]:>7.3f}",
            flush=True,
        )
    caps = (16, 23) if quick else (8, 16, 23, 32)
    for total in (160, 200, 220) if quick else (140, 160, 180, 200, 220):
        bound, where = lp_best(total, p, limit, "passed", caps)
        print(
            f"   {'LP: no valid test of these designs passes more often':<70} {total:>7} {bound:>7.3f}   (best split {where})",
            flush=True,
        )
    sized_at_rows(limit)
    # Exceeded: twice the limit.
    p = 2 * limit
    pi, q_f, q_p = strata(p, SE, SP)
    k = round(pi * N)
    plan = plan_at(N, k, CALIBRATION, limit)
    assert plan.design is not None and plan.aim == "exceeded"
    design, alpha = plan.design, plan.alpha("exceeded")
    every, labels = drawn(N, p, SE, SP, CALIBRATION, limit, "exceeded")
    old = sized_from_k(N, k, CALIBRATION, limit)
    print(f"   a product at {p:.0%} (twice the limit), expected K {k}: labels for 80% power to reach exceeded")
    print(
        f"   {'the gate: its design to show exceeded (' + str(plan.fail_labels) + ' judged fail), at ' + f'{alpha:.3f}':<70}"
        f" {plan.labels:>7} {at.power('exceeded', design, k, q_f, q_p, limit, alpha):>7.3f}   (exact at this K)"
    )
    print(
        f"   {'  the gate over every run (K chooses the design; labels on average)':<70} {labels:>7.1f} {every:>7.3f}"
    )
    if old.design is not None:
        print(
            f"   {'sized from K (the rule before), at the expected K (' + _split(old.design, k) + '), at 0.05':<70}"
            f" {old.labels:>7} {verdict_chance('exceeded', old.design, limit, k, q_f, q_p):>7.3f}   (exact at this K)"
        )
    for c in (12, 15, 18):
        fixed = at.Design(N, c, 0)
        print(
            f"   {'the test with ' + str(c) + ' judged-fail labels at 0.05, drawn at the truth':<70} {c:>7}"
            f" {fixed_power('exceeded', fixed, p, limit):>7.3f}"
            f"   ({at.power('exceeded', fixed, k, q_f, q_p, limit, ALPHA):.3f} at this K)"
        )
    for c in (12, 15, 18):
        print(
            f"   {'today: ' + str(c) + ' judged-fail labels':<70} {c:>7} {old_chance(N, p, SE, SP, c, 0, limit)[1]:>7.3f}"
        )
    for c, level in ((10, ALPHA), (12, ALPHA), (15, ALPHA), (18, alpha), (24, alpha)) if quick else (
        (8, ALPHA), (10, ALPHA), (12, ALPHA), (15, ALPHA), (18, ALPHA), (15, alpha), (18, alpha), (21, alpha),
        (24, alpha),
    ):  # fmt: skip
        bound, _ = lp_best(c, p, limit, "exceeded", (), level)
        print(
            f"   {'LP: no valid test at ' + f'{level:.3f}' + ' reaches exceeded more often':<70} {c:>7} {bound:>7.3f}",
            flush=True,
        )
    pass_design = plan_at(N, 43, CALIBRATION, limit).pass_design
    checks = cross_check("passed", pass_design, limit, 43) if pass_design is not None else 0
    checks += cross_check("exceeded", design, limit, k, alpha)
    print(
        "   The LP bounds every valid test of the design, randomised or not, but it is coarsened (see the docstring)."
    )
    print(f"   Mismatches between the regions read here and gate's own verdict at their edges: {checks}\n")


def sized_at_rows(limit: float) -> None:
    """A product between a quarter of its limit and the limit: the plan sized at a quarter of it beside the
    plan sized at the product's own rate (the slice's `audit_sized_at`), over every run; and what each passes
    of a product at the limit (within 1 - confidence: the design is still fixed before K)."""
    rate = 0.0075
    print(f"   a product at {rate:.2%}: the design to pass sized at a quarter of the limit, or at its own rate")
    for sized_at in (None, rate):
        every, labels = drawn(N, rate, SE, SP, CALIBRATION, limit, "passed", sized_at)
        # At the limit with the judge as calibrated K mostly chooses the design to show exceeded; a judge that
        # catches 0.3 of the failures on the run (calibration says 0.85) makes it choose the design to pass.
        false = max(drawn(N, limit, se, SP, CALIBRATION, limit, "passed", sized_at)[0] for se in (SE, 0.3))
        what = "a quarter of the limit" if sized_at is None else f"audit_sized_at: {sized_at}"
        print(
            f"   {'  sized at ' + what + ' (over every run; labels on average)':<70} {labels:>7.1f} {every:>7.3f}"
            f"   (a product at the limit, judge Se {SE} or 0.3 on the run: passes {false:.4f})",
            flush=True,
        )


def _split(design: at.Design, k: int) -> str:
    f_labels, p_labels = design.sizes(k)
    return f"{f_labels} + {p_labels}"


# --- the sections ---


def monotone() -> None:
    print("1. More evidence never weakens the verdict")
    print("   3,000 answers, the judge failed 200, people confirm 70% of those they label, limit 3.4%:")
    print(f"   {'judged-fail labels':>18} | {'today':>12} | {'the plan':>10}")
    for labelled in (60, 150, 180, 200):
        confirmed = round(0.7 * labelled)
        fs = ar.StratumSample(200, labelled, confirmed, labelled - confirmed, ())
        ps = ar.StratumSample(2800, 0, 0, 0, ())
        old = ar.sample_verdict(fs, ps, 0.034, CONF)
        old_p = ab.low_pvalue(200, 3000, confirmed, labelled, 0.034, ALPHA * ar.EXACT_SHARE)
        new = (
            "exceeded"
            if at.rejects("exceeded", at.Design(3000, labelled, 0), 200, confirmed, 0, 0.034, ALPHA)
            else "not"
        )
        print(f"   {labelled:>18} | {old:>12} | {new:>10}   (today's sampled test p = {old_p:.3f})")
    print(
        "   The headline product (2% limit, product at 0.5%), P(passed) drawn at the truth, as judged-pass labels grow:"
    )
    pi, q_f, q_p = strata(0.005, SE, SP)
    pass_design = plan_at(N, round(pi * N), CALIBRATION, 0.02).to_pass.design
    assert pass_design is not None
    cap = pass_design.fail_cap
    print(f"   {'judged-pass labels':>18} | {'today (all judged fail)':>23} | {f'the plan ({cap} judged fail)':>25}")
    for m in (172, 190, 200, 210, 230, 260):
        today = old_chance(N, 0.005, SE, SP, N, m, 0.02)[0]
        ks, pk, _ = k_window(N, pi)
        design = at.Design(N, cap, m)
        new = sum(w * verdict_chance("passed", design, 0.02, int(k), q_f, q_p) for k, w in zip(ks, pk, strict=True))
        print(f"   {m:>18} | {today:>23.3f} | {new:>25.3f}", flush=True)


def low_bound() -> None:
    print("\n2. The lower bound reads every failure people found: 70 answers, all labelled, 6 failing (4 judged fail)")
    fs = ar.StratumSample(5, 5, 4, 1, ())
    ps = ar.StratumSample(65, 65, 2, 63, ())
    old = ar.audit_rate(fail_sample=fs, pass_sample=ps, confidence=CONF).low
    new = at.bound("exceeded", at.Design(70, 70, 70), 5, 4, 2, ALPHA)
    cp = float(cp_low(6, 70, ALPHA))
    print(f"   today {old:.2%}; the plan (a whole audit) {new:.2%}; Clopper-Pearson on 6 of 70 {cp:.2%}")


def power_table(limits: tuple[float, ...]) -> None:
    print(f"\n3. Power and labels on a grid: N = {N:,}, Se {SE}, Sp {SP} (calibration 85/100 and 990/1,000)")
    print(
        f"   {'limit':>5} {'product':>7} | {'the design K chooses at E[K]':>28} {'sized at':>8} {'power':>6} |"
        f" {'every run: P(verdict)':>21} {'labels':>7} | {'today: labels':>13} {'P(verdict)':>10}"
    )
    mismatches = 0
    for limit, ratio in itertools.product(limits, (0.25, 2.0)):
        p = ratio * limit
        side: at.Side = "passed" if ratio < 1 else "exceeded"
        pi, _q_f, _q_p = strata(p, SE, SP)
        k = round(pi * N)
        plan = plan_at(N, k, CALIBRATION, limit)
        chance, labels = drawn(N, p, SE, SP, CALIBRATION, limit, side)
        if plan.design is not None:
            mismatches += cross_check(side, plan.design, limit, k, plan.alpha(side))
        route = old_route(p, limit)
        if route is None:
            today = "never"
            old = float("nan")
        else:
            fail_cap = N if route[0] >= k else route[0]
            old = old_chance(N, p, SE, SP, fail_cap, route[1], limit)[0 if side == "passed" else 1]
            today = f"{route[0] + route[1]:,}"
        shown = (
            ("every answer" if plan.design.whole else f"{plan.fail_labels} + {plan.pass_labels}")
            if plan.design is not None
            else "no plan"
        )
        print(
            f"   {limit:>5.0%} {f'{ratio:g}L':>7} | {shown + ' (' + plan.aim + ')':>28} {plan.sized_at:>8.2%}"
            f" {plan.power:>6.3f} | {chance:>21.3f} {labels:>7.1f} | {today:>13} {old:>10.3f}",
            flush=True,
        )
    print(f"   Cross-check mismatches between the regions read here and gate's own verdict: {mismatches}")


def trial() -> None:
    print("\n4. The trial's slices: 70 answers, a 5% limit, a judge with Se 0.85 and Sp 0.99")
    for k in (1, 2, 4, 6, 8, 10):
        plan = plan_at(70, k, CALIBRATION, 0.05)
        part = plan.part
        if plan.design is not None:
            what = f"labels {plan.fail_labels} + {plan.pass_labels} ({plan.power:.1%} power at {plan.sized_at:.2%})"
        elif part.design is not None and part.decides:
            caps = f"{part.design.fail_cap} + {part.design.pass_cap}"
            what = f"no labels: its design ({caps}, fixed before K) cannot reach {plan.aim} at this K"
        else:
            what = (
                f"no plan decides: a whole audit would reach {plan.power:.0%}; about {plan.answers_needed or 0:,}"
                f" answers would, or a limit of {plan.limit_it_decides or 0:.1%}"
            )
        print(
            f"   K = {k}: predicted {plan.predicted:.2%} ({plan.aim}, the design sized at {plan.sized_at:.2%}): {what}"
        )


def timing() -> None:
    print("\n5. The planner's CPU per slice")
    cases = [
        (3000, 0.005, 0.02),
        (3000, 0.04, 0.02),
        (100_000, 0.005, 0.02),
        (100_000, 0.04, 0.02),
        (100_000, 0.0025, 0.01),
    ]
    for n, p, limit in cases:
        k = round(strata(p, SE, SP)[0] * n)
        sz.size_part.cache_clear()  # the two designs are remembered per slice: time them afresh
        start = time.process_time()
        plan = sz.plan_audit(judged_fail=k, judged_pass=n - k, calibration=CALIBRATION, limit=limit, confidence=CONF)
        _ = plan.labels  # the labelled design is sized on first use
        spent = time.process_time() - start
        print(f"   {n:>7,} answers, K {k:>5,}, limit {limit:.0%}: {plan.labels:>4} labels, {spent:.2f} s CPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the headline with fewer points; no grid of limits")
    args = parser.parse_args()
    started = time.monotonic()
    moonshot(args.quick)
    monotone()
    low_bound()
    if not args.quick:
        power_table((0.01, 0.02, 0.05, 0.10))
    trial()
    timing()
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
