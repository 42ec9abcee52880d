"""Benchmark: does the audit estimate hold, what does it cost in labels, and does the transport test notice?

The audit estimate (gate/estimate/audit_rate.py, gate/estimate/audit_bounds.py) decides a product slice
from people's labels on a random sample of the run's own answers, per stratum (the K answers the judge
failed, the N - K it passed): an exact test of r_F + q_P against the limit for `passed` (every
judged-fail answer not audited counts as failing), an exact test of pi * q_F for `exceeded`.

Three tables, printed side by side in one run (confidence 95%):

1. Coverage grid, computed EXACTLY per cell (a sum over every K, no sampling error): N answers (60,
   400, 3,000: tiny slices too), true failure rate p at, above and below the limit L (p/L in 0.25,
   0.5, 1, 1.25, 2; L 2%, 5%, 20%), six judges (useless, weak, good, excellent, and two an adversary
   would pick: `blind` fails nothing, so every failure hides among the answers it passed; `alarmist`
   fails everything, so there is no judged-pass answer), audits of a = 20-1,000 per stratum (all of a
   smaller stratum: the sample size then depends on K, which the tests' derivation does not assume;
   the grid checks it). Each answer fails with probability p; the judge fails it with probability Se
   (a failing one) or 1 - Sp (a good one). Per cell:
     pass, fail        P(passed), P(exceeded); for p >= L pass is a false approval, for p <= L fail
                       a false failure: each at most 1 - confidence
     miss_hi, miss_lo  P(the test at the true p rejects): the interval's own coverage
     raw_pass          P(k/N <= L): the raw judge rule peers use (exact)
     cal_pass          P(passed) by the calibration estimate (Rogan-Gladen box, 100 labelled failing
                       and 1,000 labelled passing answers in calibration; simulated)
   A Monte Carlo cross-check draws runs in every cell and asks gate's own `sample_verdict`: each draw's
   verdict must equal the exact rule's.
2. Labels needed to decide, the audit against the box it replaced and against calibration, for limits
   1%, 2%, 5%, 10%, the product at a quarter of its limit and at twice it (N = 3,000, judge Se 0.85,
   Sp 0.99, expected counts): gate's own `audits_to_decide`; beside it the confirmed failures that
   make it `exceeded`.
3. The transport test (calibration_not_transferable): how often it flags a judge whose Se is 0.9 in
   calibration (100 labelled failing, 1,000 passing answers) and falls to 0.6 on the run's answers,
   and its false alarm rate when nothing changed.

    .venv/bin/python bench/audit_coverage.py            # the whole run (about six minutes on 2 cores)
    .venv/bin/python bench/audit_coverage.py --quick    # N = 400 and 3,000, fewer cells
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binom

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gate.estimate import audit_bounds as ab  # noqa: E402
from gate.estimate import audit_rate as ar  # noqa: E402
from gate.estimate.failure_rate import box_share, cp_high, cp_low, rogan_gladen  # noqa: E402

CONF = 0.95
ALPHA = 1 - CONF
JUDGES = {
    "useless": (0.5, 0.5),
    "weak": (0.7, 0.9),
    "good": (0.85, 0.99),
    "excellent": (0.95, 0.999),
    "blind": (0.0, 1.0),
    "alarmist": (1.0, 0.0),
}
RATIOS = (0.25, 0.5, 1.0, 1.25, 2.0)
AUDITS = (20, 100, 300, 1000)
LIMITS = (0.02, 0.05, 0.20)
SIZES = (60, 400, 3000)
N = 3000
CAL_FAIL, CAL_PASS = 100, 1000


def draw_run(rng: np.random.Generator, sims: int, n: int, p: float, se: float, sp: float) -> dict[str, Any]:
    """Per simulation: the four cells of (truth, judge) over n answers."""
    probs = [p * se, p * (1 - se), (1 - p) * (1 - sp), (1 - p) * sp]  # fail&judged fail, fail&passed, ...
    cells = rng.multinomial(n, probs, size=sims)
    return {"ff": cells[:, 0], "fp": cells[:, 1], "gf": cells[:, 2], "gp": cells[:, 3]}


def audit_samples(rng: np.random.Generator, run: dict[str, Any], a: int) -> tuple[Any, ...]:
    k = run["ff"] + run["gf"]
    passed = run["fp"] + run["gp"]
    a_f, a_p = np.minimum(a, k), np.minimum(a, passed)
    x_f = rng.hypergeometric(run["ff"], run["gf"], a_f)
    x_p = rng.hypergeometric(run["fp"], run["gp"], a_p)
    return k, a_f, x_f, a_p, x_p


def calibration_pass(rng: np.random.Generator, k: Any, n: int, se: float, sp: float, limit: float) -> Any:
    alpha = box_share(CONF)
    se_x = rng.binomial(CAL_FAIL, se, size=k.shape)
    sp_x = rng.binomial(CAL_PASS, sp, size=k.shape)
    high = rogan_gladen(cp_high(k, n, alpha), cp_low(se_x, CAL_FAIL, alpha), cp_high(sp_x, CAL_PASS, alpha), empty=1.0)
    return high <= limit


# --- the exact rules, as thresholds ---


@functools.cache
def high_threshold(n: int, m: int, limit: float) -> int:
    """The largest t with the upper test's tail P(Y1*m + Y2*n <= t) <= alpha (m = 0: on Y1 alone); -1: none."""
    if m == 0:
        ok = np.flatnonzero(binom.cdf(np.arange(n + 1), n, limit) <= ALPHA)
        return int(ok[-1]) if ok.size else -1
    lo, hi = -1, n * m + n * m  # the tail rises with t
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ab.high_tail(mid, n, m, limit) <= ALPHA else (lo, mid)
    return lo


EXACT = ALPHA * ar.EXACT_SHARE  # the lower bound: the exact test at this share, the box at the rest
BOX = ALPHA - EXACT


@functools.cache
def low_threshold_all(n: int, limit: float) -> int:
    """Every judged-fail answer audited: the fewest confirmed failures that reject p <= limit."""
    ok = np.flatnonzero(binom.sf(np.arange(n + 1) - 1, n, limit) <= EXACT)
    return int(ok[0]) if ok.size else n + 1


@functools.cache
def low_threshold_sampled(n: int, a: int, limit: float) -> float:
    """A sample of a judged-fail answers: the smallest statistic cp_low(K)*cp_low(X, a) that rejects."""
    lo, hi = limit, 1.0  # the tail falls as the observed statistic rises
    if ab.sampled_tail(hi, n, a, limit, EXACT) > EXACT:
        return 2.0
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ab.sampled_tail(mid, n, a, limit, EXACT) <= EXACT else (mid, hi)
    return hi


def box_exceeds(k: int, n: int, a_f: int, x_f: Any, m: int, limit: float) -> Any:
    """Per x_F: the fewest judged-pass failures x_P (of m) at which the box at BOX is above the limit
    (m + 1: none). Both ends of pi must be: low is the smaller end."""
    third = BOX / 3
    pi_ends = (float(cp_low(k, n, third)), float(cp_high(k, n, third)))
    qf_lo = cp_low(x_f, a_f, third) if a_f else np.zeros(np.shape(x_f))
    need = np.full(np.shape(x_f), -np.inf)
    for pi in pi_ends:
        if pi >= 1.0:
            need = np.where(pi * qf_lo > limit, need, np.inf)
        else:
            need = np.maximum(need, (limit - pi * qf_lo) / (1 - pi))
    qp_lo = cp_low(np.arange(m + 1), m, third) if m else np.zeros(1)
    first = np.searchsorted(qp_lo, need, side="right")  # the first x_P whose bound is above `need`
    return np.where(np.isinf(need) & (need > 0), m + 1, first)


def exact_cell(n: int, p: float, se: float, sp: float, a: int, limit: float) -> tuple[float, float]:
    """P(passed), P(exceeded) at the limit, exactly: a sum over every K of the run."""
    pi = p * se + (1 - p) * (1 - sp)
    q_f = p * se / pi if pi > 0 else 0.0
    q_p = p * (1 - se) / (1 - pi) if pi < 1 else 0.0
    ks = np.arange(n + 1)
    pk = binom.pmf(ks, n, pi)
    passed = exceeded = 0.0
    for k in np.flatnonzero(pk > 1e-14):
        k = int(k)
        a_f, m = min(a, k), min(a, n - k)
        # passed: Y1 = X_F + (k - a_F) with X_F ~ Bin(a_F, q_F); Y2 ~ Bin(m, q_P)
        t = high_threshold(n, m, limit)
        if t >= 0:
            y2 = np.arange(m + 1)
            cap = (t - y2 * n) // m if m else np.array([t])
            x_cap = cap - (k - a_f)
            pmf2 = binom.pmf(y2, m, q_p) if m else np.array([1.0])
            passed += pk[k] * float((pmf2 * np.where(x_cap >= 0, binom.cdf(x_cap, a_f, q_f), 0.0)).sum())
        # exceeded: the exact test (every judged-fail answer audited when k <= a, else a sample of a), or the box
        xs = np.arange(a_f + 1)
        if k == 0:
            exact = np.zeros(1, dtype=bool)
        elif k <= a:
            exact = xs >= low_threshold_all(n, limit)
        else:
            exact = (cp_low(k, n, EXACT) * cp_low(xs, a, EXACT)) >= low_threshold_sampled(n, a, limit)
        box = (
            binom.sf(box_exceeds(k, n, a_f, xs, m, limit) - 1, m, q_p)
            if m
            else (box_exceeds(k, n, a_f, xs, 0, limit) == 0)
        )
        exceeded += pk[k] * float((binom.pmf(xs, a_f, q_f) * np.where(exact, 1.0, box)).sum())
    return passed, exceeded


def cross_check(
    rng: np.random.Generator, n: int, p: float, se: float, sp: float, a: int, limit: float, draws: int
) -> int:
    """Draws of the cell, each decided by gate's own sample_verdict and by the exact rule's thresholds."""
    run = draw_run(rng, draws, n, p, se, sp)
    k, a_f, x_f, a_p, x_p = audit_samples(rng, run, a)
    bad = 0
    for i in range(draws):
        fs = ar.StratumSample(int(k[i]), int(a_f[i]), int(x_f[i]), int(a_f[i] - x_f[i]), ())
        ps = ar.StratumSample(int(n - k[i]), int(a_p[i]), int(x_p[i]), int(a_p[i] - x_p[i]), ())
        got = ar.sample_verdict(fs, ps, limit, CONF)
        m = int(a_p[i])
        t = high_threshold(n, m, limit)
        y1 = int(x_f[i] + k[i] - a_f[i])
        want = "passed" if (y1 * m + int(x_p[i]) * n if m else y1) <= t else None
        if want is None:
            if x_f[i] == 0:
                hit = False
            elif a_f[i] >= k[i]:
                hit = x_f[i] >= low_threshold_all(n, limit)
            else:
                stat = float(cp_low(int(k[i]), n, EXACT) * cp_low(int(x_f[i]), int(a_f[i]), EXACT))
                hit = stat >= low_threshold_sampled(n, int(a_f[i]), limit)
            low, _ = box_bounds(k[i], n, a_f[i], x_f[i], a_p[i], x_p[i], BOX)
            want = "exceeded" if hit or float(low) > limit else None
        bad += int(got != (want or "inconclusive"))
    return bad


def coverage(rng: np.random.Generator, sizes: tuple[int, ...], draws: int, sims: int) -> dict[str, float]:
    print(
        f"1. Coverage grid, exact per cell (confidence {CONF:g}); cross-check: {draws} drawn runs per cell decided by gate"
    )
    print(
        f"{'N':>5} {'limit':>5} {'p/L':>5} {'judge':>9} {'a':>5} | {'pass':>6} {'fail':>6} {'miss_hi':>7} {'miss_lo':>7} |"
        f" {'raw_pass':>8} {'cal_pass':>8}"
    )
    worst = {"false_pass": 0.0, "false_fail": 0.0, "miss_hi": 0.0, "miss_lo": 0.0, "raw": 0.0, "calibration": 0.0}
    mismatches = cells = 0
    for n, limit, ratio, (name, (se, sp)) in itertools.product(sizes, LIMITS, RATIOS, JUDGES.items()):
        p = ratio * limit
        pi = p * se + (1 - p) * (1 - sp)
        raw = float(binom.cdf(np.floor(limit * n + 1e-9), n, pi))
        run = draw_run(rng, sims, n, p, se, sp)
        cal = float(np.mean(calibration_pass(rng, run["ff"] + run["gf"], n, se, sp, limit)))
        for a in sorted({min(a, n) for a in AUDITS}):  # past the slice's size every audit is the whole slice
            passed, failed = exact_cell(n, p, se, sp, a, limit)
            miss_hi, miss_lo = exact_cell(n, p, se, sp, a, p)
            mismatches += cross_check(rng, n, p, se, sp, a, limit, draws)
            cells += 1
            worst["miss_hi"], worst["miss_lo"] = max(worst["miss_hi"], miss_hi), max(worst["miss_lo"], miss_lo)
            if ratio >= 1:
                worst["false_pass"] = max(worst["false_pass"], passed)
                worst["raw"], worst["calibration"] = max(worst["raw"], raw), max(worst["calibration"], cal)
            if ratio <= 1:
                worst["false_fail"] = max(worst["false_fail"], failed)
            print(
                f"{n:>5} {limit:>5.0%} {ratio:>5g} {name:>9} {a:>5} | {passed:>6.3f} {failed:>6.3f} {miss_hi:>7.3f}"
                f" {miss_lo:>7.3f} | {raw:>8.3f} {cal:>8.3f}",
                flush=True,
            )
    print(
        f"Worst over the {cells} cells: the audit's false approval (p >= L) {worst['false_pass']:.4f}, false failure"
        f" (p <= L) {worst['false_fail']:.4f}, miss_hi {worst['miss_hi']:.4f}, miss_lo {worst['miss_lo']:.4f} (each"
        f" allowed {ALPHA:.2f}); the raw rule's false approval {worst['raw']:.3f}; the calibration estimate's"
        f" {worst['calibration']:.3f}. Cross-check mismatches with gate's sample_verdict: {mismatches}"
    )
    return worst


def _cal_labels(limit: float, p: float, se: float, sp: float) -> int | None:
    """The fewest calibration labels (failing + passing) whose box decides at the expected counts."""
    alpha = box_share(CONF)
    q = se * p + (1 - sp) * (1 - p)
    k = round(q * N)
    best = None
    grid = sorted({int(x) for x in np.geomspace(10, 200_000, 120)})
    for m_f in grid:
        for m_p in grid:
            if best is not None and m_f + m_p >= best:
                break
            se_x, sp_x = round(se * m_f), round(sp * m_p)
            high = rogan_gladen(
                float(cp_high(k, N, alpha)),
                float(cp_low(se_x, m_f, alpha)),
                float(cp_high(sp_x, m_p, alpha)),
                empty=1.0,
            )
            low = rogan_gladen(
                float(cp_low(k, N, alpha)), float(cp_high(se_x, m_f, alpha)), float(cp_low(sp_x, m_p, alpha)), empty=0.0
            )
            if float(high) <= limit or float(low) > limit:
                best = m_f + m_p
                break
    return best


def box_bounds(k: Any, n: int, a_f: Any, x_f: Any, a_p: Any, x_p: Any, alpha: float = ALPHA) -> tuple[Any, Any]:
    """The box: three one-sided Clopper-Pearson bounds at a third of alpha (the audit's bounds until the
    exact tests; its lower bound still decides beside the exact test's, at half of 1 - confidence)."""
    third = alpha / 3
    pi_lo, pi_hi = cp_low(k, n, third), cp_high(k, n, third)
    qf_lo = np.where(a_f > 0, cp_low(x_f, np.maximum(a_f, 1), third), 0.0)
    qf_hi = np.where(a_f > 0, cp_high(x_f, np.maximum(a_f, 1), third), 1.0)
    qp_lo = np.where(a_p > 0, cp_low(x_p, np.maximum(a_p, 1), third), 0.0)
    qp_hi = np.where(a_p > 0, cp_high(x_p, np.maximum(a_p, 1), third), 1.0)
    high = np.minimum(1.0, np.maximum(pi_lo * qf_hi + (1 - pi_lo) * qp_hi, pi_hi * qf_hi + (1 - pi_hi) * qp_hi))
    low = np.maximum(0.0, np.minimum(pi_lo * qf_lo + (1 - pi_lo) * qp_lo, pi_hi * qf_lo + (1 - pi_hi) * qp_lo))
    return low, high


def _box(limit: float, k: int, q_f: float, q_p: float) -> int | None:
    """The box's labels, searched as audits_to_decide searches (each judged-fail sample size, the fewest
    judged-pass ones)."""
    m = np.arange(1, N - k + 1)
    best = None
    for a_f in ar._fail_sizes(k, 0):
        x_f, x_p = np.full(m.shape, round(q_f * a_f)), np.round(q_p * m)
        ones = np.ones(m.shape)
        low, high = box_bounds(k * ones, N, a_f * ones, x_f, m, x_p)
        decided = np.flatnonzero((high <= limit) | (low > limit))
        if decided.size and (best is None or a_f + int(m[decided[0]]) < best):
            best = a_f + int(m[decided[0]])
    return best


def expected_strata(p: float, se: float, sp: float) -> tuple[int, float, float]:
    """At N answers and true rate p: the judged-fail count, and the share people fail of the answers
    the judge failed (q_F) and of those it passed (q_P), as expected."""
    judged_fail = se * p + (1 - sp) * (1 - p)
    return round(judged_fail * N), se * p / judged_fail, (1 - se) * p / (1 - judged_fail)


def labels_needed() -> None:
    se, sp = 0.85, 0.99
    print(f"\n2. Labels needed to decide: N = {N:,} answers, judge Se {se}, Sp {sp} (expected counts)")
    print(
        f"{'limit':>5} {'product':>8} | {'audit':>6} {'(failed + passed)':>18} {'confirmed':>9} | {'box':>6} |"
        f" {'calibration':>11}"
    )
    for limit, ratio in itertools.product((0.01, 0.02, 0.05, 0.10), (0.25, 2.0)):
        p = ratio * limit
        k, q_f, q_p = expected_strata(p, se, sp)
        route = ar.audits_to_decide(judged_fail=k, n=N, q_fail=q_f, q_pass=q_p, confidence=CONF, max_failure_rate=limit)
        audit = "never" if route is None else f"{route[0] + route[1]:,}"
        split = "" if route is None else f"({route[0]} + {route[1]:,})"
        confirmed = "" if route is None or ratio < 1 else str(round(q_f * route[0]))
        box = _box(limit, k, q_f, q_p)
        cal = _cal_labels(limit, p, se, sp)
        print(
            f"{limit:>5.0%} {f'{ratio:g}L':>8} | {audit:>6} {split:>18} {confirmed:>9} |"
            f" {('never' if box is None else f'{box:,}'):>6} | {('never' if cal is None else f'{cal:,}'):>11}"
        )


def transport_power(rng: np.random.Generator, sims: int) -> None:
    print(
        f"\n3. The transport test: calibration Se 0.9, Sp 0.99 ({CAL_FAIL} + {CAL_PASS:,} labelled), N = {N:,}, {sims:,} runs per cell"
    )
    print(f"{'p':>5} {'a':>5} | {'flagged (Se 0.6 on the run)':>27} {'false alarm (Se 0.9)':>21}")
    alpha = (1 - CONF) / ar.TRANSPORT_BOUNDS
    checked = 0
    for p, a in itertools.product((0.02, 0.05, 0.2), (100, 300, 1000)):
        rates = []
        for run_se in (0.6, 0.9):
            run = draw_run(rng, sims, N, p, run_se, 0.99)
            k, a_f, x_f, a_p, x_p = audit_samples(rng, run, a)
            se_x = rng.binomial(CAL_FAIL, 0.9, size=sims)
            sp_x = rng.binomial(CAL_PASS, 0.99, size=sims)
            flagged = _flags(k, a_f, x_f, a_p, x_p, se_x, sp_x, alpha)
            for i in range(3):  # gate's own test on a few draws
                t = ar.transport(
                    fail_sample=ar.StratumSample(int(k[i]), int(a_f[i]), int(x_f[i]), int(a_f[i] - x_f[i]), ()),
                    pass_sample=ar.StratumSample(int(N - k[i]), int(a_p[i]), int(x_p[i]), int(a_p[i] - x_p[i]), ()),
                    true_fail=int(se_x[i]), false_pass=int(CAL_FAIL - se_x[i]), true_pass=int(sp_x[i]),
                    false_fail=int(CAL_PASS - sp_x[i]), confidence=CONF,
                )  # fmt: skip
                checked += int(t is not None and (not t.carries_over) != bool(flagged[i]))
            rates.append(float(np.mean(flagged)))
        print(f"{p:>5.0%} {a:>5} | {rates[0]:>27.3f} {rates[1]:>21.3f}")
    print(f"Self-check mismatches with gate's transport(): {checked}")


def _odds(q: Any) -> Any:
    return np.where(q >= 1, np.inf, q / (1 - q))


def ppv(p: Any, se: Any, sp: Any) -> Any:
    return np.where(se * p + (1 - sp) * (1 - p) > 0, se * p / (se * p + (1 - sp) * (1 - p)), 0.0)


def fo(p: Any, se: Any, sp: Any) -> Any:
    return np.where((1 - se) * p + sp * (1 - p) > 0, (1 - se) * p / ((1 - se) * p + sp * (1 - p)), 1.0)


def _flags(k: Any, a_f: Any, x_f: Any, a_p: Any, x_p: Any, se_x: Any, sp_x: Any, alpha: float) -> Any:
    se_lo, se_hi = cp_low(se_x, CAL_FAIL, alpha), cp_high(se_x, CAL_FAIL, alpha)
    sp_lo, sp_hi = cp_low(sp_x, CAL_PASS, alpha), cp_high(sp_x, CAL_PASS, alpha)
    qf_lo, qf_hi = cp_low(x_f, np.maximum(a_f, 1), alpha), cp_high(x_f, np.maximum(a_f, 1), alpha)
    qp_lo, qp_hi = cp_low(x_p, np.maximum(a_p, 1), alpha), cp_high(x_p, np.maximum(a_p, 1), alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        pred = (se_lo * sp_lo / ((1 - se_lo) * (1 - sp_lo)), se_hi * sp_hi / ((1 - se_hi) * (1 - sp_hi)))
        seen_lo = np.where(_odds(qp_hi) == 0, np.where(_odds(qf_lo) > 0, np.inf, 1.0), _odds(qf_lo) / _odds(qp_hi))
        seen_hi = np.where(_odds(qp_lo) == 0, np.where(_odds(qf_hi) > 0, np.inf, 1.0), _odds(qf_hi) / _odds(qp_lo))
        apart = (pred[1] < seen_lo) | (seen_hi < pred[0])
        pi_lo, pi_hi = cp_low(k, N, alpha), cp_high(k, N, alpha)
        p_lo = np.maximum(0.0, np.minimum(pi_lo * qf_lo + (1 - pi_lo) * qp_lo, pi_hi * qf_lo + (1 - pi_hi) * qp_lo))
        p_hi = np.minimum(1.0, np.maximum(pi_lo * qf_hi + (1 - pi_lo) * qp_hi, pi_hi * qf_hi + (1 - pi_hi) * qp_hi))
        pf = (ppv(p_lo, se_lo, sp_lo), ppv(p_hi, se_hi, sp_hi))
        pp = (fo(p_lo, se_hi, sp_hi), fo(p_hi, se_lo, sp_lo))
    apart |= (a_f > 0) & ((pf[1] < qf_lo) | (qf_hi < pf[0]))
    apart |= (a_p > 0) & ((pp[1] < qp_lo) | (qp_hi < pp[0]))
    # Se and Sp on the run, from the same bounds, against calibration's.
    with np.errstate(divide="ignore", invalid="ignore"):
        run_se_lo = np.nan_to_num(pi_lo * qf_lo / (pi_lo * qf_lo + (1 - pi_lo) * qp_hi), nan=0.0)
        run_se_hi = np.nan_to_num(pi_hi * qf_hi / (pi_hi * qf_hi + (1 - pi_hi) * qp_lo), nan=1.0)
        a_lo, b_hi = (1 - pi_hi) * (1 - qp_hi), pi_hi * (1 - qf_lo)
        a_hi, b_lo = (1 - pi_lo) * (1 - qp_lo), pi_lo * (1 - qf_hi)
        run_sp_lo = np.nan_to_num(a_lo / (a_lo + b_hi), nan=0.0)
        run_sp_hi = np.nan_to_num(a_hi / (a_hi + b_lo), nan=1.0)
    apart |= (se_hi < run_se_lo) | (run_se_hi < se_lo) | (sp_hi < run_sp_lo) | (run_sp_hi < sp_lo)
    return apart & (a_f + a_p > 0) & ((a_f > 0) | (k == 0)) & ((a_p > 0) | (k == N))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 400 and 3,000 only, fewer draws")
    parser.add_argument("--sims", type=int, default=None)
    parser.add_argument("--seed", type=int, default=38)
    args = parser.parse_args()
    sims = args.sims or (400 if args.quick else 4000)
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    coverage(rng, SIZES[1:] if args.quick else SIZES, 1 if args.quick else 3, sims)
    labels_needed()
    transport_power(rng, max(200, sims // 4))
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
