"""Benchmark: labels first, counted. Can a run use every label last release made on an unchanged answer?

The gate draws each run's audit plan fresh (gate/estimate/audit_sizing.py); a label last release made counts
only where that draw happens to fall on the same, unchanged answer. Putting the labelled answers first in the
draw order is invalid (bench/audit_steering.py section 3: 29.9% false approval when the team rewords what the
labels found). The counted design uses every one of them, and is valid whatever the team does to which answers
stay unchanged:

- L: the run's answers that carry a final label (unchanged since labelled), counted whole: X_L failures, known.
- R: the rest, split by the judge's verdict into R_F (K_r answers) and R_P (P_r answers). People label a fresh
  uniform sample of a_f of R_F and a_p of R_P (caps fixed before the run, as the gate's designs are) and find
  x_f and x_p failing.
- Stage 1, given every answer's truth and the partition (the draw is the only chance): a level-gamma test of
  T_R >= t (T_R the failures in R) on S = K_r x_f / a_f + P_r x_p / a_p, its p-value the largest P(S <= s_obs)
  over the splits F_f + F_p = t of those failures (two hypergeometric draws; more failures only make S larger).
- Stage 2: the run's failures T = X_L + T_R are Binomial(N, p) whatever the partition. With u* the largest u
  where P(Binomial(N, limit) <= u) <= alpha - gamma, the slice passes iff stage 1 rejects T_R >= u* - X_L + 1.
  A product at its limit passes with chance at most P(T <= u*) + gamma <= alpha.

The scenario is section 3's of bench/audit_steering.py: 70% of the answers unchanged since last release, the
changed ones failing 3x as often (each answer still fails with chance p); last release labelled the gate's
plan. Side by side in one run (confidence 95%, alpha 0.05, gamma 0.02 unless shown):

1. Exact, by enumeration. a) Stage 1 alone: R of 6 + 20 and 10 + 40 answers, four sample sizes each, every
   split of the failures and every t (1,911 and 11,275 cases a design): the largest P(rejecting a true
   T_R >= t) is 0.9996 of gamma, at gamma 0.005, 0.01 and 0.02; the p-value computed from its definition agrees
   with the bench's critical values at every outcome checked. b) The whole test, a product at its limit,
   N 20/30/40 at limits 10/20/30%, a good judge and one that fails nothing, two designs: with the team choosing
   L for each run knowing every truth (every |L| in each stratum, every placement of its failures) the worst
   is 3.00% (N 40 at 20%, the judge failing nothing; P(T <= u*) is 2.85% there, and putting every answer in L
   passes exactly that often).
2. False approval on a grid, simulated: 2,000 runs a cell, each run's P(passed) exact over this release's draw
   (standard errors shown); N 120/400/1,000 at limits 5%/10% (and 20% at 120), the judge's Se 0.85 or 0.3 on
   the run (calibration says 0.85, Sp 0.99), five things the team did: section 3's three (changes unrelated,
   fixes what was found, rewords what was found) and two adversaries (keeps only what passed: holds back every
   change to a labelled pass and rewords every labelled fail; keeps L only if few failed: all of it when last
   labels found at most the median number of failures, none of it otherwise). Counted: worst 1.85% +- 0.30
   (120 answers at 5%, where no sample reaches 80% power and R is labelled whole), 1.77% +- 0.29 where it is
   sized (120 at 10%, keeps only what passed), 0.00-0.25% at 400 and 1,000 answers; no cell above 5%. The
   gate's fresh draw beside it: worst 3.60% +- 0.09 (400 at 5%, Se 0.3). No single run with T > u* passes
   more than gamma of the time (largest 0.019982).
3. What each costs, a product at a quarter of the limit (the rate the gate sizes for), the judge as calibrated,
   the team's changes unrelated to the labels, 1,000 runs a cell: new labels (fresh: the plan's labels less
   those that fall on L) and the power each reaches. The counted design sized for 80% at the expected run:

       N     limit  |L|   fresh: new, power   counted, gamma 0.005 / 0.01 / 0.02: new (power)
       120   10%    34    35, 0.71            70 (0.67) / 67 (0.67) / 71 (0.66)
       120   20%    13    17, 0.66            47 (0.73) / 44 (0.76) / 43 (0.76)
       400   5%     54    67, 0.69            240 (0.77) / 199 (0.68) / 199 (0.69)
       400   10%    30    38, 0.66            113 (0.76) / 102 (0.70) / 97 (0.79)
       1,000 5%     58    78, 0.75            259 (0.76) / 243 (0.76) / 195 (0.72)
       1,000 10%    28    40, 0.76            120 (0.78) / 108 (0.80) / 89 (0.73)
       3,000 2%     152   203, 0.79           669 (0.77) / 523 (0.70) / 483 (0.74)

   (120 at 5%: the gate has no plan that decides; the counted design labels all of R, 120, for 0.57.)
   gamma 0.02 needs the fewest new labels in 5 of the 7 cells (0.01 in 2, 0.005 in none), hence the
   bench's choice; it is fixed from N, the limit and confidence alone, as the test requires. The counted
   design needs fewer new labels than the fresh draw in none of the 7 cells: 2.0-3.0x as many at gamma 0.02
   (1.9-3.0x with each cell's best gamma), and reaches about the same power.

Why it costs more: the fresh draw reuses only the labels it happens to draw (1-17 a run here), but its test
spends all of alpha on one sample of the whole run; the counted design gives gamma to stage 1, whose p-value is
the worst split of T_R over R's two strata (a test built to hold against any partition), and stage 2 reads
the total at alpha - gamma. L here is last release's plan alone (13-152 answers): a team using the counted
design every release would carry labels from more releases, a larger L; not measured here.

    nice .venv/bin/python bench/audit_carry_over.py           # sections 1-3 (40-64 s on 2 shared cores)
    nice .venv/bin/python bench/audit_carry_over.py --quick   # smaller enumerations, fewer cells and runs (11-15 s)
    nice .venv/bin/python bench/audit_carry_over.py --sections 3   # the costs only
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import gammaln, xlogy
from scipy.stats import binom

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.audit_sizing import edge, plan_at, statistics  # noqa: E402
from bench.audit_steering import BEHAVIOURS as STEERING_BEHAVIOURS  # noqa: E402
from bench.audit_steering import calibration_of  # noqa: E402

CONF = 0.95
ALPHA = 1 - CONF
GAMMAS = (0.005, 0.01, 0.02)  # stage 1's share of alpha, each shown in section 3
GAMMA = 0.02  # the one the counted design uses: the fewest new labels in most cells of section 3
POWER = 0.8
UNCHANGED = 0.7  # the share of answers unchanged since last release; the changed ones fail 3x as often
CALIBRATION = calibration_of(0.85, 0.99)
SP = 0.99
# Judged-fail sample sizes the search tries (besides none and the whole stratum), as the gate's ladder does.
LADDER = (4, 6, 8, 11, 16, 23, 32, 45, 64, 90, 128, 181, 256, 362, 512)
# What the team did between the releases: section 3 of bench/audit_steering.py's three, then two adversaries.
BEHAVIOURS = (*STEERING_BEHAVIOURS, "keeps only what passed", "keeps L only if few failed")
TINY = 1e-12  # a p-value within this of gamma counts as above it (the safe way)


# --- the counted design's test ---


@functools.cache
def u_star(n: int, limit: float, level: float) -> int:
    """The largest u with P(Binomial(n, limit) <= u) <= level (-1: none; then nothing can pass)."""
    ok = np.flatnonzero(binom.cdf(np.arange(n + 1), n, limit) <= level)
    return int(ok[-1]) if ok.size else -1


def hyp_pmf(pop: int, bad: np.ndarray, sample: int, xs: np.ndarray) -> np.ndarray:
    """P(x failures in a uniform sample of `sample` from `pop` answers, `bad` of them failing): rows `bad`,
    columns `xs`."""
    b = np.asarray(bad, dtype=float)[:, None]
    x = np.asarray(xs, dtype=float)[None, :]
    ok = (x <= b) & (sample - x <= pop - b) & (x >= 0)
    bb, xx = np.where(ok, b, 0.0), np.where(ok, x, 0.0)
    log = (
        gammaln(bb + 1)
        - gammaln(xx + 1)
        - gammaln(bb - xx + 1)
        + gammaln(pop - bb + 1)
        - gammaln(sample - xx + 1)
        - gammaln(pop - bb - sample + xx + 1)
        - (gammaln(pop + 1) - gammaln(sample + 1) - gammaln(pop - sample + 1))
    )
    out: np.ndarray = np.where(ok, np.exp(log), 0.0)
    return out


def z_grid(kr: int, pr: int, af: int, ap: int, xs_f: np.ndarray, xs_p: np.ndarray) -> np.ndarray:
    """S = K_r x_f / a_f + P_r x_p / a_p (the failures in R it estimates), times a_f a_p: an integer, so that
    equal statistics tie exactly. A stratum with no sample adds nothing."""
    w_f = kr * (ap or 1) if af else 0
    w_p = pr * (af or 1) if ap else 0
    z: np.ndarray = w_f * np.asarray(xs_f, dtype=np.int64)[:, None] + w_p * np.asarray(xs_p, dtype=np.int64)[None, :]
    return z


@functools.cache
def critical(t: int, kr: int, pr: int, af: int, ap: int, gamma: float) -> float:
    """Stage 1: the test of `T_R >= t` (T_R the failures in R) at level gamma, from a_f of R's K_r judged-fail
    answers and a_p of its P_r judged-pass ones, drawn uniformly. Its p-value is the largest P(S <= s_obs) over
    every split F_f + F_p = t of the failures (more failures only make S larger), so it rejects iff the
    statistic is below the returned value (+inf: T_R >= t is impossible, always rejected; -inf: never)."""
    if t <= 0:
        return -math.inf
    if t > kr + pr:
        return math.inf
    ms = np.arange(max(0, t - pr), min(t, kr) + 1)  # F_f of each split
    cols = min(ap, t)  # under any split x_p <= F_p <= t
    hf = hyp_pmf(kr, ms, af, np.arange(af + 1))
    hp = hyp_pmf(pr, t - ms, ap, np.arange(cols + 1))
    z = z_grid(kr, pr, af, ap, np.arange(af + 1), np.arange(cols + 1)).ravel()
    order = np.argsort(z, kind="stable")
    zs = z[order]
    joint = (hf[:, :, None] * hp[:, None, :]).reshape(ms.size, -1)[:, order]
    ends = np.r_[zs[1:] != zs[:-1], True]  # the last of each run of equal statistics
    pvalue = np.cumsum(joint, axis=1)[:, ends].max(axis=0)
    above = np.flatnonzero(pvalue > gamma - TINY)
    return float(zs[ends][above[0]])


def direct_pvalue(t: int, kr: int, pr: int, af: int, ap: int, x_f: int, x_p: int) -> float:
    """Stage 1's p-value at one outcome, straight from its definition (a cross-check of `critical`)."""
    if t <= 0:
        return 1.0
    if t > kr + pr:
        return 0.0
    z = z_grid(kr, pr, af, ap, np.arange(af + 1), np.arange(ap + 1))
    seen = z <= z[x_f, x_p]
    best = 0.0
    for f_f in range(max(0, t - pr), min(t, kr) + 1):
        pf = hyp_pmf(kr, np.array([f_f]), af, np.arange(af + 1))[0]
        pp = hyp_pmf(pr, np.array([t - f_f]), ap, np.arange(ap + 1))[0]
        best = max(best, float(pf @ seen @ pp))
    return best


def threshold(n: int, limit: float, gamma: float, x_l: int) -> int:
    """Stage 2: the slice passes iff stage 1 rejects T_R >= this (u* - X_L + 1, u* at alpha - gamma)."""
    return u_star(n, limit, ALPHA - gamma) - x_l + 1


def chance(t: int, kr: int, pr: int, af: int, ap: int, gamma: float, pf: np.ndarray, pp: np.ndarray) -> float:
    """P(stage 1 rejects T_R >= t) when x_f has the chances pf (0..a_f) and x_p pp (0..len(pp) - 1)."""
    crit = critical(t, kr, pr, af, ap, gamma)
    if crit == math.inf:
        return 1.0
    if crit == -math.inf:
        return 0.0
    inside = z_grid(kr, pr, af, ap, np.arange(pf.size), np.arange(pp.size)) < crit
    return float(pf @ inside @ pp)


@dataclass(frozen=True)
class Caps:
    """The counted design: at most `fail` of R's judged-fail answers and `pass_` of its judged-pass ones (n:
    the whole stratum), fixed from n, the limit and calibration before the run. `sized`: reaches 80% power
    at the expected run (else the whole of R, the most any sample can do)."""

    fail: int
    pass_: int
    sized: bool

    def sizes(self, kr: int, pr: int) -> tuple[int, int]:
        return min(self.fail, kr), min(self.pass_, pr)


def counted_power(
    n: int, limit: float, gamma: float, x_l: int, kr: int, pr: int, af: int, ap: int, q_f: float, q_p: float
) -> float:
    """P(the counted design passes) where R's answers fail at q_f (judged fail) and q_p, independently."""
    top = min(ap, int(binom.isf(1e-13, ap, q_p)) + 2) if ap else 0
    pf = binom.pmf(np.arange(af + 1), af, q_f)
    pp = binom.pmf(np.arange(top + 1), ap, q_p)
    return chance(threshold(n, limit, gamma, x_l), kr, pr, af, ap, gamma, pf, pp)


def size_counted(
    n: int, limit: float, gamma: float, x_l: int, kr: int, pr: int, q_f: float, q_p: float
) -> tuple[int, int] | None:
    """The fewest labels (a_f + a_p) reaching 80% power at these expected counts: each a_f of the ladder, the
    smallest a_p that reaches it (a bisection: power grows with a_p up to the test's steps)."""
    best: tuple[int, int] | None = None

    def power(af: int, ap: int) -> float:
        return counted_power(n, limit, gamma, x_l, kr, pr, af, ap, q_f, q_p)

    for af in sorted({0, kr, *(c for c in LADDER if c < kr)}):
        if best is not None and af >= sum(best):
            break
        if power(af, pr) < POWER:
            continue
        lo, hi = -1, pr  # power(af, lo) < POWER <= power(af, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if mid >= 0 and power(af, mid) >= POWER else (mid, hi)
        if best is None or af + hi < sum(best):
            best = (af, hi)
    return best


# --- runs: last release's plan, the team's move, this release ---


@dataclass(frozen=True)
class Counts:
    """A run as both designs see it: K and the failures in each judged stratum, and L (the answers that carry
    a label): l_f judged fail (x_lf of them failing), l_p judged pass (x_lp failing)."""

    k: int
    f_fail: int
    f_pass: int
    l_f: int
    x_lf: int
    l_p: int
    x_lp: int

    @property
    def x_l(self) -> int:
        return self.x_lf + self.x_lp

    @property
    def size_l(self) -> int:
        return self.l_f + self.l_p


@dataclass(frozen=True)
class Before:
    """One run before the team's move: which answers are unchanged, which fail, the judge's verdicts, and
    which last release's plan labelled (drawn in each stratum by last release's seed)."""

    same: np.ndarray
    fails: np.ndarray
    judged_fail: np.ndarray
    planned: np.ndarray

    @property
    def found(self) -> int:
        """The failures last release's labels found among the answers unchanged since."""
        return int((self.planned & self.same & self.fails).sum())


def last_release(rng: np.random.Generator, n: int, p: float, se: float, limit: float) -> Before:
    """The product at rate p: unchanged answers fail at r, changed ones at 3r (0.7 r + 0.3 * 3r = p), so that
    each answer fails with chance p independently and the run's failures are Binomial(n, p)."""
    r = p / (UNCHANGED + 3 * (1 - UNCHANGED))
    same = rng.random(n) < UNCHANGED
    fails = np.where(same, rng.random(n) < r, rng.random(n) < 3 * r)
    judged_fail = np.where(fails, rng.random(n) < se, rng.random(n) > SP)
    before = plan_at(n, int(judged_fail.sum()), CALIBRATION, limit)
    key = rng.random(n)
    planned = np.zeros(n, dtype=bool)
    for stratum, size in ((True, before.fail_labels), (False, before.pass_labels)):
        ids = np.flatnonzero(judged_fail == stratum)
        planned[ids[np.argsort(key[ids])][:size]] = True
    return Before(same, fails, judged_fail, planned)


def team_move(rng: np.random.Generator, behaviour: str, run: Before, median: float) -> Counts:
    """What the team did between the releases, and the run this release sees. L is last release's labelled
    answers still unchanged (a reworded answer is a new answer: its label no longer carries)."""
    fails, judged_fail = run.fails, run.judged_fail
    found = run.planned & run.same & fails
    carried = run.planned & run.same
    if behaviour == "fixes what was found":  # they pass now, and the judge reads them afresh
        fails = fails & ~found
        judged_fail = np.where(found, rng.random(fails.size) > SP, judged_fail)
        carried = carried & ~found
    elif behaviour == "rewords what was found":  # still failing, out of L
        carried = carried & ~found
    elif behaviour == "keeps only what passed":  # holds back every change to a labelled pass, rewords each fail
        carried = run.planned & ~fails
    elif behaviour == "keeps L only if few failed":  # all of L or none of it, as last labels found few or many
        carried = carried if run.found <= median else np.zeros_like(carried)
    elif behaviour != "changes unrelated":
        raise ValueError(behaviour)
    jf, jp = judged_fail, ~judged_fail
    return Counts(
        int(jf.sum()),
        int((fails & jf).sum()),
        int((fails & jp).sum()),
        int((carried & jf).sum()),
        int((carried & jf & fails).sum()),
        int((carried & jp).sum()),
        int((carried & jp & fails).sum()),
    )


@functools.cache
def fresh_region(n: int, k: int, limit: float) -> tuple[int, int, np.ndarray | None]:
    """The gate's plan at K = k: its sample sizes and the outcomes that pass (None: K chose the design to
    show exceeded, or no plan decides; people may still label, nothing passes)."""
    plan = plan_at(n, k, CALIBRATION, limit)
    a_f, a_p = plan.fail_labels, plan.pass_labels
    design = plan.pass_design
    w = edge("passed", design, limit) if design is not None and plan.labels else None
    if design is None or w is None:
        return a_f, a_p, None
    stats = statistics("passed", design, k, np.arange(a_f + 1), np.arange(a_p + 1))
    return a_f, a_p, stats <= w + 1e-15


def fresh(n: int, limit: float, c: Counts) -> tuple[float, int, float]:
    """The gate's fresh draw at this run: P(passed) over the draw (exact), its labels, and how many of them
    carry over on average (those the draw happens to put on L)."""
    a_f, a_p, region = fresh_region(n, c.k, limit)
    carried = (a_f * c.l_f / c.k if c.k else 0.0) + (a_p * c.l_p / (n - c.k) if n > c.k else 0.0)
    if region is None:
        return 0.0, a_f + a_p, carried
    pf = hyp_pmf(c.k, np.array([c.f_fail]), a_f, np.arange(a_f + 1))[0]
    pp = hyp_pmf(n - c.k, np.array([c.f_pass]), a_p, np.arange(a_p + 1))[0]
    return float(pf @ region @ pp), a_f + a_p, carried


def counted(n: int, limit: float, gamma: float, caps: Caps, c: Counts) -> tuple[float, int]:
    """The counted design at this run: P(passed) over the draw of R's sample (exact), and its labels (all new:
    no answer of R carries one)."""
    kr, pr = c.k - c.l_f, n - c.k - c.l_p
    af, ap = caps.sizes(kr, pr)
    f_f, f_p = c.f_fail - c.x_lf, c.f_pass - c.x_lp
    pf = hyp_pmf(kr, np.array([f_f]), af, np.arange(af + 1))[0]
    pp = hyp_pmf(pr, np.array([f_p]), ap, np.arange(min(ap, f_p) + 1))[0]
    return chance(threshold(n, limit, gamma, c.x_l), kr, pr, af, ap, gamma, pf, pp), af + ap


@functools.cache
def quarter_runs(n: int, limit: float, draws: int = 1000) -> tuple[Counts, ...]:
    """Runs of a product at a quarter of the limit (the rate the gate sizes for), the judge as calibrated (Se
    0.85, Sp 0.99), the team's changes unrelated to the labels; their own seed, so that every section sizes
    from the same runs."""
    rng = np.random.default_rng([n, round(limit * 10_000)])
    runs = (last_release(rng, n, limit / 4, 0.85, limit) for _ in range(draws))
    return tuple(team_move(rng, "changes unrelated", run, 0.0) for run in runs)


@functools.cache
def expected_run(n: int, limit: float) -> tuple[int, int, int, float, float]:
    """The quarter-limit runs on average: K_r, P_r, X_L and the failure shares of R's two strata."""
    runs = quarter_runs(n, limit)
    kr = np.mean([c.k - c.l_f for c in runs])
    pr = np.mean([n - c.k - c.l_p for c in runs])
    f_f = np.mean([c.f_fail - c.x_lf for c in runs])
    f_p = np.mean([c.f_pass - c.x_lp for c in runs])
    x_l = np.mean([c.x_l for c in runs])
    return round(kr), round(pr), round(x_l), float(f_f / kr) if kr else 0.0, float(f_p / pr)


@functools.cache
def counted_caps(n: int, limit: float, gamma: float) -> Caps:
    """The counted design sized before the run, as the gate sizes its own: 80% power at the expected run of a
    product at a quarter of the limit. A stratum labelled whole at the expected run is labelled whole in every
    run; where no sample reaches 80%, the whole of R (the most power any sample has)."""
    kr, pr, x_l, q_f, q_p = expected_run(n, limit)
    best = size_counted(n, limit, gamma, x_l, kr, pr, q_f, q_p)
    if best is None:
        return Caps(n, n, False)
    af, ap = best
    return Caps(n if af >= kr else af, n if ap >= pr else ap, True)


# --- section 1: exact ---


def stage1_exact(quick: bool) -> None:
    print(
        "1. Exact, by enumeration (no simulation).\n"
        "   a) Stage 1 alone: every population of R with K_r judged-fail and P_r judged-pass answers below, every\n"
        "      split (F_f, F_p) of its failures, every t: the largest P(stage 1 rejects T_R >= t | T_R >= t),\n"
        "      over gamma. At most 1 in every case. 'direct': outcomes where `critical` and the p-value computed\n"
        "      from its definition disagree."
    )
    print(
        f"   {'K_r':>4} {'P_r':>4} {'a_f':>4} {'a_p':>4} {'cases':>6} | "
        + " ".join(f"{'g=' + str(g):>8}" for g in GAMMAS)
        + f" | {'direct':>6}"
    )
    pops = [(6, 20), (10, 40)] if not quick else [(6, 20)]
    worst_all = 0.0
    for kr, pr in pops:
        for af, ap in ((2, 5), (4, 10), (kr, 12), (3, 3 * pr // 4)):
            ratios, cases, mismatches = [], 0, 0
            z = z_grid(kr, pr, af, ap, np.arange(af + 1), np.arange(ap + 1))
            hf = hyp_pmf(kr, np.arange(kr + 1), af, np.arange(af + 1))
            hp = hyp_pmf(pr, np.arange(pr + 1), ap, np.arange(ap + 1))
            null_of = np.add.outer(np.arange(kr + 1), np.arange(pr + 1))
            for gamma in GAMMAS:
                worst = 0.0
                for t in range(1, kr + pr + 1):
                    crit = critical(t, kr, pr, af, ap, gamma)
                    rejected = hf @ (z < crit) @ hp.T  # every (F_f, F_p)
                    worst = max(worst, float(rejected[null_of >= t].max()))
                    cases += int((null_of >= t).sum()) if gamma == GAMMAS[0] else 0
                    if gamma == GAMMA and t % 3 == 1:  # a third of the t, every outcome
                        for x_f in range(af + 1):
                            for x_p in range(min(ap, t + 2) + 1):
                                by_def = direct_pvalue(t, kr, pr, af, ap, x_f, x_p) <= gamma - TINY
                                mismatches += by_def != bool(z[x_f, x_p] < crit)
                ratios.append(worst / gamma)
                worst_all = max(worst_all, worst / gamma)
            print(
                f"   {kr:>4} {pr:>4} {af:>4} {ap:>4} {cases:>6,} | "
                + " ".join(f"{r:>8.4f}" for r in ratios)
                + f" | {mismatches:>6}",
                flush=True,
            )
    print(f"   Worst over every case: {worst_all:.4f} of gamma.")


def whole_exact(n: int, limit: float, gamma: float, caps: Caps, se: float, sp: float) -> tuple[float, float, float]:
    """The whole counted test at a product at its limit, exact: P(passed) when the team puts L wherever it likes
    (every |L| in each stratum, every X_L placement of the failures, chosen per run knowing every answer's
    truth), when L is empty, and the bound P(T <= u*) + gamma."""
    u = u_star(n, limit, ALPHA - gamma)
    if u < 0:
        return 0.0, 0.0, float(binom.cdf(0, n, limit)) + gamma
    # Every run (F_F, F_P, K): the four cells (failing / passing x judged fail / pass), multinomial.
    cells = np.array([limit * se, limit * (1 - se), (1 - limit) * (1 - sp), (1 - limit) * sp])
    grid = [(a, b, c) for a in range(n + 1) for b in range(n + 1 - a) for c in range(n + 1 - a - b)]
    abc = np.array(grid)
    d = n - abc.sum(axis=1)
    counts = np.column_stack([abc, d]).astype(float)
    with np.errstate(divide="ignore"):
        logp = gammaln(n + 1) - gammaln(counts + 1).sum(axis=1) + xlogy(counts, cells).sum(axis=1)
    prob = np.exp(logp)
    keep = prob > 1e-15
    left_out = max(0.0, 1.0 - float(prob[keep].sum()))  # counted as passed
    f_fail, f_pass, k = abc[keep, 0], abc[keep, 1], abc[keep, 0] + abc[keep, 2]
    prob = prob[keep]
    best = np.zeros(prob.size)
    empty = np.zeros(prob.size)
    for kr in range(n + 1):
        for pr in range(n + 1 - kr):
            rows = np.flatnonzero((k >= kr) & (n - k >= pr))
            if not rows.size:
                continue
            af, ap = caps.sizes(kr, pr)
            hf = hyp_pmf(kr, np.arange(kr + 1), af, np.arange(af + 1))
            hp = hyp_pmf(pr, np.arange(pr + 1), ap, np.arange(ap + 1))
            z = z_grid(kr, pr, af, ap, np.arange(af + 1), np.arange(ap + 1))
            table = np.array([hf @ (z < critical(u - x_l + 1, kr, pr, af, ap, gamma)) @ hp.T for x_l in range(u + 1)])
            l_f, l_p = k[rows] - kr, n - k[rows] - pr
            for x_lf in range(u + 1):
                for x_lp in range(u + 1 - x_lf):
                    f_f, f_p = f_fail[rows] - x_lf, f_pass[rows] - x_lp
                    ok = (x_lf <= l_f) & (f_f >= 0) & (f_f <= kr) & (x_lp <= l_p) & (f_p >= 0) & (f_p <= pr)
                    value = table[x_lf + x_lp, np.clip(f_f, 0, kr), np.clip(f_p, 0, pr)]
                    best[rows[ok]] = np.maximum(best[rows[ok]], value[ok])
                    if kr + pr == n:
                        empty[rows[ok]] = value[ok]
    return float(prob @ empty) + left_out, float(prob @ best) + left_out, float(binom.cdf(u, n, limit)) + gamma


def whole_test_exact(quick: bool) -> None:
    print(
        f"\n   b) The whole counted test (gamma {GAMMA}), a product at its limit, exact over every run: P(passed)\n"
        "      when L is empty, and when the team chooses L per run, knowing every answer's truth: every |L| in\n"
        "      each judged stratum and every placement of L's failures (X_L), the worst for each run. Allowed 0.05;\n"
        "      'bound' is P(T <= u*) + gamma, u* the largest u with P(T <= u) <= alpha - gamma. With every answer\n"
        "      in L nothing is sampled and the slice passes exactly when T <= u*."
    )
    print(
        f"   {'N':>4} {'limit':>5} {'judge':>13} {'R_F cap':>7} {'R_P cap':>7} {'u*':>3} | {'L empty':>8}"
        f" {'worst L':>8} {'P(T<=u*)':>8} {'bound':>6}"
    )
    sizes = [20, 30] if quick else [20, 30, 40]
    judges = {"Se .85 Sp .99": (0.85, 0.99), "fails nothing": (0.0, 1.0)}
    worst = 0.0
    for n in sizes:
        for limit in (0.1, 0.2, 0.3):
            u = u_star(n, limit, ALPHA - GAMMA)
            if u < 0:
                print(
                    f"   {n:>4} {limit:>5.0%} {'':>13} {'':>7} {'':>7} {u:>3} | nothing can pass (P(T = 0) > alpha - gamma)"
                )
                continue
            for name, (se, sp) in judges.items():
                for caps in (Caps(n, n // 2, True), Caps(4, 3 * n // 4, True)):
                    if name == "fails nothing" and caps.fail != n:
                        continue  # no judged-fail answers: the cap on them does not matter
                    alone, adversary, bound = whole_exact(n, limit, GAMMA, caps, se, sp)
                    worst = max(worst, adversary)
                    cap_f = "all" if caps.fail >= n else str(caps.fail)
                    print(
                        f"   {n:>4} {limit:>5.0%} {name:>13} {cap_f:>7} {caps.pass_:>7} {u:>3} | {alone:>8.4f}"
                        f" {adversary:>8.4f} {bound - GAMMA:>8.4f} {bound:>6.4f}",
                        flush=True,
                    )
    print(f"   Worst with the team choosing L: {worst:.4f} (allowed {ALPHA:.2f}).")


# --- section 2: validity on the grid (simulated) ---


def validity(rng: np.random.Generator, draws: int, quick: bool) -> None:
    print(
        f"\n2. False approval, the product at its limit: {draws:,} runs a cell (each run's P(passed) exact over this\n"
        f"   release's draw; '±' one Monte Carlo standard error); {UNCHANGED:.0%} of answers unchanged, changed ones\n"
        f"   failing 3x as often; calibration says Se 0.85, Sp 0.99; the counted design at gamma {GAMMA}, sized\n"
        "   before the run (section 3)."
    )
    print(
        f"   {'N':>5} {'limit':>5} {'Se':>4} {'what the team did':>26} {'fails':>6} | {'fresh':>15} {'labels':>6}"
        f" {'carried':>7} | {'counted':>15} {'|L|':>5} {'X_L':>5} {'labels':>6} {'T > u*':>7}"
    )
    cells = [(120, 0.05), (120, 0.10), (120, 0.20), (400, 0.05), (400, 0.10), (1000, 0.05), (1000, 0.10)]
    if quick:
        cells = [(120, 0.10), (1000, 0.05)]
    worst: list[tuple[str, float, float, bool]] = []  # the cell, counted's P(passed), its error, sized
    fresh_worst: list[tuple[str, float, float]] = []
    run_worst = 0.0
    for n, limit in cells:
        caps = counted_caps(n, limit, GAMMA)
        for se in (0.85, 0.3):
            befores = [last_release(rng, n, limit, se, limit) for _ in range(draws)]
            median = float(np.median([b.found for b in befores]))
            for behaviour in BEHAVIOURS:
                rows = np.zeros((draws, 9))
                u = u_star(n, limit, ALPHA - GAMMA)
                for i, before in enumerate(befores):
                    c = team_move(rng, behaviour, before, median)
                    f_pass, f_labels, f_carried = fresh(n, limit, c)
                    c_pass, c_labels = counted(n, limit, GAMMA, caps, c)
                    total = c.f_fail + c.f_pass
                    true_null = c_pass if total > u else 0.0  # T_R >= u* - X_L + 1 holds: stage 1 at most gamma
                    rows[i] = total / n, f_pass, f_labels, f_carried, c_pass, c.size_l, c.x_l, c_labels, true_null
                mean = rows.mean(axis=0)
                se_f, se_c = rows[:, 1].std() / math.sqrt(draws), rows[:, 4].std() / math.sqrt(draws)
                print(
                    f"   {n:>5,} {limit:>5.0%} {se:>4} {behaviour:>26} {mean[0]:>6.2%} | {mean[1]:>7.4f} ±{se_f:.4f}"
                    f" {mean[2]:>6.1f} {mean[3]:>7.1f} | {mean[4]:>7.4f} ±{se_c:.4f} {mean[5]:>5.1f} {mean[6]:>5.2f}"
                    f" {mean[7]:>6.1f} {rows[:, 8].max():>7.4f}",
                    flush=True,
                )
                run_worst = max(run_worst, float(rows[:, 8].max()))
                if behaviour != "fixes what was found":
                    cell = f"{n:,} answers, {limit:.0%}, Se {se}, {behaviour}"
                    worst.append((cell, float(mean[4]), se_c, caps.sized))
                    fresh_worst.append((cell, float(mean[1]), se_f))
    name, value, err, _ = max(worst, key=lambda w: w[1])
    over = [w for w in worst if w[1] - 2 * w[2] > ALPHA]
    sized = [w for w in worst if w[3]]
    s_name, s_value, s_err, _ = max(sized, key=lambda w: w[1]) if sized else ("none", math.nan, math.nan, True)
    f_name, f_value, f_err = max(fresh_worst, key=lambda w: w[1])
    print(
        f"   Counted, worst: {value:.4f} ±{err:.4f} ({name});\n"
        f"   where it is sized for 80%: {s_value:.4f} ±{s_err:.4f} ({s_name});\n"
        f"   cells above 5% by more than 2 standard errors: {len(over)} of {len(worst)}.\n"
        f"   Fresh, worst: {f_value:.4f} ±{f_err:.4f} ({f_name}).\n"
        f"   Largest P(passed) of one run with T > u*: {run_worst:.6f} (gamma {GAMMA}).\n"
        "   'fixes what was found' lowers the run's rate below the limit ('fails'): a pass there is no false\n"
        "   approval, and it is left out of the worst. 'carried': the fresh plan's labels that fall on L (those\n"
        "   people need not label again); 'labels': what each design has people label this release (the counted\n"
        "   design's are all new). 'keeps only what passed': the team holds back every change to an answer last\n"
        "   release's labels passed and rewords every one they failed (L is all of last plan's passes); 'keeps L\n"
        "   only if few failed': keeps every unchanged labelled answer when last labels found at most the median\n"
        "   number of failures, else rewords them all (L is empty). 'T > u*': the largest P(passed) of one run\n"
        f"   whose failures T exceed u* (stage 1 then faces a true hypothesis: at most gamma, {GAMMA})."
    )


# --- section 3: what each costs ---


def cost(quick: bool) -> None:
    print(
        "\n3. New labels for 80% power, the product at a quarter of the limit (the rate the gate sizes for), the\n"
        "   judge as calibrated (Se 0.85, Sp 0.99), the team's changes unrelated to the labels; 1,000 runs a cell\n"
        "   (each run's power exact over the draw). fresh: the gate's plan; 'new' = its labels less those that\n"
        "   fall on L. counted: sized for 80% at the expected run (K_r, P_r, X_L), L counted whole; 'caps' are\n"
        "   its R_F / R_P sample sizes ('all': the whole stratum); its labels are all new. '*': no sample reaches\n"
        "   80% at the expected run (the whole of R is shown)."
    )
    head = " ".join(f"{'g=' + str(g) + ': caps':>16} {'new':>5} {'power':>5}" for g in GAMMAS)
    print(
        f"   {'N':>5} {'limit':>5} {'|L|':>5} {'X_L':>4} | {'fresh':>6} {'new':>5} {'power':>5} | {head} | {'ratio':>5}"
    )
    cells = [(120, 0.05), (120, 0.10), (120, 0.20), (400, 0.05), (400, 0.10), (1000, 0.05), (1000, 0.10), (3000, 0.02)]
    if quick:
        cells = [(120, 0.10), (1000, 0.05), (3000, 0.02)]
    compared: list[tuple[int, float, float, dict[float, float]]] = []  # n, limit, fresh's new, counted's per gamma
    for n, limit in cells:
        runs = quarter_runs(n, limit)
        fresh_rows = np.array([fresh(n, limit, c) for c in runs])
        f_power = float(fresh_rows[:, 0].mean())
        f_new = float((fresh_rows[:, 1] - fresh_rows[:, 2]).mean())
        f_labels = float(fresh_rows[:, 1].mean())
        parts, news = [], {}
        for gamma in GAMMAS:
            caps = counted_caps(n, limit, gamma)
            rows = np.array([counted(n, limit, gamma, caps, c) for c in runs])
            news[gamma] = float(rows[:, 1].mean())
            cap_text = "/".join("all" if cap >= n else str(cap) for cap in (caps.fail, caps.pass_))
            star = "" if caps.sized else "*"
            parts.append(f"{cap_text + star:>16} {rows[:, 1].mean():>5.0f} {rows[:, 0].mean():>5.2f}")
        both = f_labels > 0 and counted_caps(n, limit, GAMMA).sized
        ratio = news[GAMMA] / f_new if both else math.nan
        if both:
            compared.append((n, limit, f_new, news))
        mean_l = np.mean([c.size_l for c in runs])
        mean_xl = np.mean([c.x_l for c in runs])
        fresh_text = f"{f_labels:>6.1f} {f_new:>5.1f} {f_power:>5.2f}" if f_labels else f"{'none':>6} {'':>5} {'':>5}"
        print(
            f"   {n:>5,} {limit:>5.0%} {mean_l:>5.1f} {mean_xl:>4.2f} | {fresh_text} | {' '.join(parts)} | {ratio:>5.2f}",
            flush=True,
        )
    print(
        f"   'ratio': the counted design's new labels over the fresh plan's, at gamma {GAMMA}. '|L|', 'X_L': the\n"
        "   labelled answers unchanged since last release and their failures, on average."
    )
    if not compared:
        return
    cheapest = {g: sum(min(news, key=lambda h: news[h]) == g for *_, news in compared) for g in GAMMAS}
    at_gamma = [news[GAMMA] / f_new for _, _, f_new, news in compared]
    at_best = [min(news.values()) / f_new for _, _, f_new, news in compared]
    fewer = sum(r < 1 for r in at_gamma)
    fewer_best = sum(r < 1 for r in at_best)
    print(
        "   Fewest new labels of the three gammas: "
        + ", ".join(f"{g} in {cheapest[g]}" for g in GAMMAS)
        + f" of the {len(compared)} cells both designs are sized in."
    )
    headline = [(f_new, news[GAMMA]) for n, limit, f_new, news in compared if (n, limit) == (3000, 0.02)]
    said = (
        f"; 3,000 answers at 2%: {headline[0][0]:.0f} new labels fresh, {headline[0][1]:.0f} counted"
        if headline
        else ""
    )
    print(
        f"   Conclusion: the counted design needs fewer new labels than the fresh draw in {fewer} of {len(compared)}"
        f" cells at gamma {GAMMA} ({fewer_best} with the best gamma of each cell): {min(at_gamma):.1f}-"
        f"{max(at_gamma):.1f}x as many ({min(at_best):.1f}-{max(at_best):.1f}x at the best){said}."
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller enumerations, fewer cells and runs")
    parser.add_argument("--sections", default="123", help="the sections to run, e.g. 13 (default: all three)")
    parser.add_argument("--seed", type=int, default=47)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    if "1" in args.sections:
        stage1_exact(args.quick)
        whole_test_exact(args.quick)
    if "2" in args.sections:
        validity(rng, 500 if args.quick else 2000, args.quick)
    if "3" in args.sections:
        cost(args.quick)
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
