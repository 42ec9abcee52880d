"""Benchmark: does the audit estimate hold, what does it cost in labels, and does the transport test notice?

The audit estimate (gate/decide/audit_rate.py) decides a product slice from people's labels on a
random sample of the run's own answers, per stratum (the answers the judge failed, those it passed):
p = pi*q_F + (1 - pi)*q_P with a box of three one-sided Clopper-Pearson bounds at (1 - confidence)/3.

Three tables, printed side by side in one run (confidence 95%):

1. Coverage grid. N answers (fixed n), true failure rate p at, above and below the limit L (p/L in
   0.25, 0.5, 1, 1.25, 2), judges from useless to excellent, audits of a = 20-1,000 per stratum (all
   of a stratum when it is smaller). Simulated per cell: each answer fails with probability p, the
   judge fails it with probability Se (a failing one) or 1 - Sp (a good one), people label a simple
   random sample of a from each stratum (hypergeometric: without replacement). Per cell:
     miss_hi, miss_lo  P(high < p), P(low > p): each at most 1 - confidence
     pass, fail        P(passed), P(exceeded) by the audit; for p >= L pass is a false approval
     raw_pass          P(k/N <= L): the raw judge rule peers use
     cal_pass          P(passed) by the calibration estimate (Rogan-Gladen box, 100 labelled failing
                       and 1,000 labelled passing answers in calibration)
   The summary gives the worst false approval at p >= L of each rule over the grid.
2. Labels needed to decide, audit against calibration, for limits 1%, 2%, 5%, 10%, the product at a
   quarter of its limit and at twice it (N = 3,000, judge Se 0.85, Sp 0.99): the audit's count is
   gate's own (audits_to_decide: all the judged-fail answers and the fewest judged-pass ones, at the
   expected shares), the calibration's the fewest labelled answers (failing + passing, any mix on a
   grid) whose box decides at the expected counts; beside them, the same audit with the box's share
   spent unevenly (pi at a tenth of 1 - confidence, q_F and q_P at 0.45 each): valid by the same
   union bound, NOT adopted (see the README).
3. The transport test (calibration_not_transferable): how often it flags a judge whose Se is 0.9 in
   calibration (100 labelled failing, 1,000 passing answers) and falls to 0.6 on the run's answers,
   and its false alarm rate when nothing changed.

A self-check asks gate's functions (audit_rate, audit_verdict, transport) for a sample of draws per
cell and must agree with the vectorised replica.

    .venv/bin/python bench/audit_coverage.py            # the whole run (~ a few minutes)
    .venv/bin/python bench/audit_coverage.py --quick    # fewer simulations per cell
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gate.decide import audit_rate as ar  # noqa: E402
from gate.decide.failure_rate import box_share, cp_high, cp_low, rogan_gladen  # noqa: E402

CONF = 0.95
JUDGES = {"useless": (0.5, 0.5), "weak": (0.7, 0.9), "good": (0.85, 0.99), "excellent": (0.95, 0.999)}
RATIOS = (0.25, 0.5, 1.0, 1.25, 2.0)
AUDITS = (20, 100, 300, 1000)
LIMITS = (0.02, 0.05)
N = 3000
CAL_FAIL, CAL_PASS = 100, 1000


def draw_run(rng: np.random.Generator, sims: int, n: int, p: float, se: float, sp: float) -> dict[str, Any]:
    """Per simulation: the four cells of (truth, judge) over n answers."""
    probs = [p * se, p * (1 - se), (1 - p) * (1 - sp), (1 - p) * sp]  # fail&judged fail, fail&passed, ...
    cells = rng.multinomial(n, probs, size=sims)
    return {"ff": cells[:, 0], "fp": cells[:, 1], "gf": cells[:, 2], "gp": cells[:, 3]}


def audit_bounds(
    k: Any, n: int, a_f: Any, x_f: Any, a_p: Any, x_p: Any, shares: tuple[float, float, float]
) -> tuple[Any, Any]:
    """The box's bounds, vectorised (shares: the alpha of pi, q_F, q_P; gate's is a third each)."""
    a_pi, a_qf, a_qp = shares
    pi_lo, pi_hi = cp_low(k, n, a_pi), cp_high(k, n, a_pi)
    qf_lo = np.where(a_f > 0, cp_low(x_f, np.maximum(a_f, 1), a_qf), 0.0)
    qf_hi = np.where(a_f > 0, cp_high(x_f, np.maximum(a_f, 1), a_qf), 1.0)
    qp_lo = np.where(a_p > 0, cp_low(x_p, np.maximum(a_p, 1), a_qp), 0.0)
    qp_hi = np.where(a_p > 0, cp_high(x_p, np.maximum(a_p, 1), a_qp), 1.0)
    high = np.minimum(1.0, np.maximum(pi_lo * qf_hi + (1 - pi_lo) * qp_hi, pi_hi * qf_hi + (1 - pi_hi) * qp_hi))
    low = np.maximum(0.0, np.minimum(pi_lo * qf_lo + (1 - pi_lo) * qp_lo, pi_hi * qf_lo + (1 - pi_hi) * qp_lo))
    return low, high


def audit_samples(rng: np.random.Generator, run: dict[str, Any], a: int) -> tuple[Any, ...]:
    k = run["ff"] + run["gf"]
    passed = run["fp"] + run["gp"]
    a_f, a_p = np.minimum(a, k), np.minimum(a, passed)
    x_f = rng.hypergeometric(run["ff"], run["gf"], a_f) if True else None
    x_p = rng.hypergeometric(run["fp"], run["gp"], a_p)
    return k, a_f, x_f, a_p, x_p


def calibration_pass(rng: np.random.Generator, k: Any, n: int, se: float, sp: float, limit: float) -> Any:
    alpha = box_share(CONF)
    se_x = rng.binomial(CAL_FAIL, se, size=k.shape)
    sp_x = rng.binomial(CAL_PASS, sp, size=k.shape)
    high = rogan_gladen(cp_high(k, n, alpha), cp_low(se_x, CAL_FAIL, alpha), cp_high(sp_x, CAL_PASS, alpha), empty=1.0)
    return high <= limit


def self_check(k: Any, a_f: Any, x_f: Any, a_p: Any, x_p: Any, low: Any, high: Any, n: int) -> int:
    """gate's own audit_rate on a few draws must equal the replica's bounds."""
    bad = 0
    for i in range(min(5, len(k))):
        fs = ar.StratumSample(int(k[i]), int(a_f[i]), int(x_f[i]), int(a_f[i] - x_f[i]), ())
        ps = ar.StratumSample(int(n - k[i]), int(a_p[i]), int(x_p[i]), int(a_p[i] - x_p[i]), ())
        got = ar.audit_rate(fail_sample=fs, pass_sample=ps, confidence=CONF)
        if abs(got.low - low[i]) > 1e-9 or abs(got.high - high[i]) > 1e-9:
            bad += 1
    return bad


def coverage(rng: np.random.Generator, sims: int) -> dict[str, float]:
    third = box_share(CONF)
    print(f"1. Coverage grid: N = {N:,} answers, {sims:,} simulations per cell, confidence {CONF:g}")
    print(
        f"{'limit':>5} {'p/L':>5} {'judge':>9} {'a':>5} | {'miss_hi':>7} {'miss_lo':>7} {'pass':>6} {'fail':>6} | {'raw_pass':>8} {'cal_pass':>8}"
    )
    worst = {"audit": 0.0, "raw": 0.0, "calibration": 0.0, "miss_hi": 0.0, "miss_lo": 0.0}
    mismatches = 0
    for limit, ratio, (name, (se, sp)) in itertools.product(LIMITS, RATIOS, JUDGES.items()):
        p = ratio * limit
        run = draw_run(rng, sims, N, p, se, sp)
        raw = float(np.mean((run["ff"] + run["gf"]) / N <= limit))
        cal = float(np.mean(calibration_pass(rng, run["ff"] + run["gf"], N, se, sp, limit)))
        for a in AUDITS:
            k, a_f, x_f, a_p, x_p = audit_samples(rng, run, a)
            low, high = audit_bounds(k, N, a_f, x_f, a_p, x_p, (third, third, third))
            mismatches += self_check(k, a_f, x_f, a_p, x_p, low, high, N)
            miss_hi, miss_lo = float(np.mean(high < p)), float(np.mean(low > p))
            passed, failed = float(np.mean(high <= limit)), float(np.mean(low > limit))
            worst["miss_hi"], worst["miss_lo"] = max(worst["miss_hi"], miss_hi), max(worst["miss_lo"], miss_lo)
            if ratio >= 1:
                worst["audit"] = max(worst["audit"], passed)
                worst["raw"], worst["calibration"] = max(worst["raw"], raw), max(worst["calibration"], cal)
            print(
                f"{limit:>5.0%} {ratio:>5g} {name:>9} {a:>5} | {miss_hi:>7.3f} {miss_lo:>7.3f} {passed:>6.3f} {failed:>6.3f} |"
                f" {raw:>8.3f} {cal:>8.3f}"
            )
    print(
        f"Worst over the grid: audit false approval (p >= L) {worst['audit']:.3f}, miss_hi {worst['miss_hi']:.3f}, "
        f"miss_lo {worst['miss_lo']:.3f} (each allowed {1 - CONF:.2f}); the raw rule's false approval "
        f"{worst['raw']:.3f}; the calibration estimate's {worst['calibration']:.3f}. Self-check mismatches: {mismatches}"
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


def _uneven(limit: float, k: int, q_f: float, q_p: float) -> int | None:
    """The audit's labels with the box's share spent unevenly (pi 0.1, q_F 0.45, q_P 0.45 of 1 - confidence),
    searched as audits_to_decide searches (each judged-fail sample size, the fewest judged-pass ones)."""
    total = 1 - CONF
    shares = (0.1 * total, 0.45 * total, 0.45 * total)
    m = np.arange(1, N - k + 1)
    best = None
    for a_f in ar._fail_sizes(k, 0):
        x_f, x_p = np.full(m.shape, round(q_f * a_f)), np.round(q_p * m)
        ones = np.ones(m.shape)
        low, high = audit_bounds(k * ones, N, a_f * ones, x_f, m, x_p, shares)
        decided = np.flatnonzero((high <= limit) | (low > limit))
        if decided.size and (best is None or a_f + int(m[decided[0]]) < best):
            best = a_f + int(m[decided[0]])
    return best


def labels_needed() -> None:
    se, sp = 0.85, 0.99
    print(f"\n2. Labels needed to decide: N = {N:,} answers, judge Se {se}, Sp {sp} (expected counts)")
    print(f"{'limit':>5} {'product':>8} | {'audit':>6} {'(failed + passed)':>18} {'uneven':>7} | {'calibration':>11}")
    for limit, ratio in itertools.product((0.01, 0.02, 0.05, 0.10), (0.25, 2.0)):
        p = ratio * limit
        k = round((se * p + (1 - sp) * (1 - p)) * N)
        q_f = se * p / (se * p + (1 - sp) * (1 - p))
        q_p = (1 - se) * p / ((1 - se) * p + sp * (1 - p))
        route = ar.audits_to_decide(judged_fail=k, n=N, q_fail=q_f, q_pass=q_p, confidence=CONF, max_failure_rate=limit)
        audit = "never" if route is None else f"{route[0] + route[1]:,}"
        split = "" if route is None else f"({route[0]} + {route[1]:,})"
        uneven = _uneven(limit, k, q_f, q_p)
        cal = _cal_labels(limit, p, se, sp)
        print(
            f"{limit:>5.0%} {f'{ratio:g}L':>8} | {audit:>6} {split:>18} {('never' if uneven is None else f'{uneven:,}'):>7} | "
            f"{('never' if cal is None else f'{cal:,}'):>11}"
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
    return apart & (a_f + a_p > 0) & ((a_f > 0) | (k == 0)) & ((a_p > 0) | (k == N))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer simulations per cell")
    parser.add_argument("--sims", type=int, default=None)
    parser.add_argument("--seed", type=int, default=38)
    args = parser.parse_args()
    sims = args.sims or (400 if args.quick else 4000)
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    coverage(rng, sims)
    labels_needed()
    transport_power(rng, max(200, sims // 4))
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
