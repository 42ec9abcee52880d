"""Benchmark: can a team steer the audit's verdict? The ways an audit of the gate was steered, against the plan.

A product at or above its limit must pass at most 1 - confidence of the time, whatever the team does that the
gate allows. Today's audit (every judged-fail answer and 100 judged-pass ones by default, labels read up to
the last one given) let a team choose its queue, label until it passes, or lean on calibration where the judge
is worse on the run. The plan (gate/estimate/audit_sizing.py) fixes the labels before anyone sees a verdict and
reads exactly them, a planned item without a label counting against the verdict. Side by side in one run
(confidence 95%, 5% allowed):

1. The steering grid. Per cell, P(passed) of a product at its limit (or above it) by today's rule under each
   way of steering it, simulated, and by the plan, exact (a sum over every K the run could have, each with the
   plan the planner makes at that K, and every outcome of its sample):
     default      today's default queue labelled truthfully, decided once
     best of 20   the team draws 20 queues and hands in one that passes, if any does
     every label  labels one judged-pass answer at a time and stops at the first pass
     every 10     ... decides after every 10 labels
     the hint     labels as many more as today's "what would decide it" asks, round after round
   The plan has one queue (any other is refused), and with its open items counted as failing no look before
   the last label passes a slice the whole plan would not: under every way above its figure is the plan's.
   Cells: the issue's run (1,000 answers, 5% limit, a judge with Se 0.85 and Sp 0.99), the same run with a
   judge whose Se on the run is 0.3 where calibration says 0.85 (with and without `audit: required`: without
   it calibration decides), tiny and large slices (60 and 400 answers at 2% / 5% / 20% limits, 3,000 at 2%)
   with a judge that fails nothing, one that fails everything and a good one, calibration true or lying (the
   old rule is simulated up to 1,000 answers only).
2. Anytime labelling: the plan read after every label (stopping at the first pass) against a sequential test
   that may stop the moment it is decided: a betting e-process on the judged-pass labels (Waudby-Smith and
   Ramdas; the judged-fail part fixed as planned, each part at half of 1 - confidence). False approval with a
   team that stops at the first pass (product at the limit), and power and labels at a quarter of it: 3,000
   answers at 2% (the quick run), 1,000 at 5%, 400 and 60 at 20%.
3. Labels carry over: last release labelled a plan of the same answers; 70% are unchanged, and the changed ones
   fail three times as often (1,000 answers, the product at its 5% limit, a judge with Se 0.3 on the run where
   calibration says 0.85, so that the plans label). Three ways to draw this release's plan: fresh (the gate's);
   last release's labelled answers first; coupled (an unchanged answer keeps its key of last release's seed, a
   changed one gets a key of this run's: a uniformly random order of the stratum while which answers change is
   unrelated to last release's draw). Three things the team did between the releases: changes unrelated to the
   labels; fixed the answers last release's labels found failing; reworded them, still failing (an adversary
   who wants them out of the prefix). False approval, the failures the plan reads, and labels carried over.

    nice .venv/bin/python bench/audit_steering.py            # the whole run (about 25 minutes on 2 shared cores)
    nice .venv/bin/python bench/audit_steering.py --quick    # the issue's run and fewer draws (about 12 minutes)
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import binom

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.audit_sizing import drawn, edge, plan_at, statistics, strata  # noqa: E402
from gate.estimate import audit_rate as ar  # noqa: E402
from gate.estimate import audit_sizing as sz  # noqa: E402
from gate.estimate import failure_rate as fr  # noqa: E402

CONF = 0.95
ALPHA = 1 - CONF


def calibration_of(se: float, sp: float, fails: int = 100, passes: int = 1000) -> sz.Calibration:
    caught, passed = round(se * fails), round(sp * passes)
    return sz.Calibration(caught, fails - caught, passed, passes - passed)


# --- today's rule, steered (simulated) ---


def old_passes(k: int, n: int, x_f: int, a_f: int, x_p: int, a_p: int, limit: float) -> bool:
    fs = ar.StratumSample(k, a_f, x_f, a_f - x_f, ())
    ps = ar.StratumSample(n - k, a_p, x_p, a_p - x_p, ())
    return ar.sample_verdict(fs, ps, limit, CONF) == "passed"


@functools.cache
def old_pass_limits(n: int, limit: float, top: int) -> np.ndarray:
    """Today's passed test with every judged-fail answer labelled: per judged-pass sample size m (1..top), its
    threshold t on x_F * m + x_P * n (bench/audit_coverage.py's, exact; -1: none)."""
    from bench.audit_coverage import high_threshold

    return np.array([high_threshold(n, m, limit) for m in range(1, top + 1)])


def old_ok(n: int, x_f: int, found: np.ndarray, limit: float) -> np.ndarray:
    """Per m (1..len(found)): does today's rule pass with x_f judged-fail failures and found[m-1] among m?"""
    t = old_pass_limits(n, limit, len(found))
    m = np.arange(1, len(found) + 1)
    return (t >= 0) & (x_f * m + found * n <= t)


def steer_old(
    rng: np.random.Generator, n: int, p: float, se: float, sp: float, limit: float, draws: int
) -> dict[str, float]:
    """Today's rule under each way of steering it (every judged-fail answer labelled, judged-pass ones as the way
    says, up to 300): the share of simulated runs that pass."""
    counts = dict.fromkeys(("default", "best of 20", "every label", "every 10", "the hint"), 0)
    pi, q_f, q_p = strata(p, se, sp)
    hinted = min(draws, 200)  # the hint asks today's route each round: fewer runs
    for draw in range(draws):
        k = int(rng.binomial(n, pi))
        fails_f = int(rng.binomial(k, q_f))
        stratum = n - k
        bad_p = int(rng.binomial(stratum, q_p))
        top = min(stratum, 300)
        if top < 1:
            continue
        order = rng.permutation(stratum)[:top] < bad_p  # True: a failing judged-pass answer, in draw order
        found = np.cumsum(order)
        ok = old_ok(n, fails_f, found, limit)
        m0 = min(ar.QUEUE_PASS_SAMPLE, top)
        counts["default"] += bool(ok[m0 - 1])
        counts["every label"] += bool(ok.any())
        counts["every 10"] += bool(ok[9::10].any())
        queues = [int((rng.permutation(stratum)[:m0] < bad_p).sum()) for _ in range(20)]
        counts["best of 20"] += bool(old_ok(n, fails_f, np.array(sorted(queues)[:1] * m0), limit)[m0 - 1])
        if draw < hinted:
            counts["the hint"] += _follows_hint(n, k, fails_f, found, ok, limit, m0)
    out = {key: value / draws for key, value in counts.items()}
    out["the hint"] = counts["the hint"] / hinted
    return out


def _follows_hint(n: int, k: int, fails_f: int, found: np.ndarray, ok: np.ndarray, limit: float, m0: int) -> bool:
    """Round after round: decide at m labels; if not passed, label as many more as today's route asks."""
    m = m0
    for _ in range(12):
        if m < 1 or m > len(ok):
            return False
        if ok[m - 1]:
            return True
        q_p = float(found[m - 1]) / m
        route = ar.audits_to_decide(
            judged_fail=k, n=n, q_fail=fails_f / k if k else 0.0, q_pass=q_p, confidence=CONF, max_failure_rate=limit,
            audited_fail=k,
        )  # fmt: skip
        if route is None or route[1] <= m:
            return False
        m = route[1]
    return False


def calibration_passes(n: int, p: float, se: float, sp: float, calibration: sz.Calibration, limit: float) -> float:
    """P(the calibration estimate passes the slice), exact over K: what decides a slice without usable labels."""
    judge = fr.judge_accuracy(
        true_fail=calibration.true_fail, false_pass=calibration.false_pass, true_pass=calibration.true_pass,
        false_fail=calibration.false_fail, confidence=CONF,
    )  # fmt: skip
    pi = strata(p, se, sp)[0]
    total = 0.0
    for k in np.flatnonzero(binom.pmf(np.arange(n + 1), n, pi) > 1e-12):
        rate = fr.failure_rate(judged_fail=int(k), n=n, judge=judge, confidence=CONF)
        total += float(binom.pmf(k, n, pi)) * (fr.slice_verdict(rate, limit) == "passed")
    return total


# --- section 1 ---

JUDGES = {
    "good": (0.85, 0.99),
    "fails nothing": (0.0, 1.0),
    "fails everything": (1.0, 0.0),
    "Se 0.3 on the run": (0.3, 0.99),
}


def grid(rng: np.random.Generator, quick: bool, draws: int) -> None:
    print(
        f"1. The steering grid: P(passed) at or above the limit (allowed {ALPHA:.0%}); today's rule simulated ({draws:,} runs a cell), the plan exact"
    )
    print(
        f"   {'N':>5} {'limit':>5} {'p/L':>4} {'judge on the run':>17} {'calibration':>11} | {'default':>7} {'best20':>6}"
        f" {'each':>6} {'each10':>6} {'hint':>6} | {'calib.':>6} | {'the plan':>8} {'labels':>7}"
    )
    cells: list[tuple[int, float, float, str, str]] = [
        (1000, 0.05, 1.0, "good", "true"),
        (1000, 0.05, 1.0, "Se 0.3 on the run", "says 0.85"),
        (1000, 0.05, 1.5, "Se 0.3 on the run", "says 0.85"),
    ]
    if not quick:
        sizes = [(60, 0.02), (60, 0.05), (60, 0.20), (400, 0.02), (400, 0.05), (400, 0.20), (3000, 0.02)]
        for (n, limit), judge in itertools.product(sizes, ("good", "fails nothing", "fails everything")):
            cells.append((n, limit, 1.0, judge, "true" if judge == "good" else "says 0.85"))
    worst = 0.0
    for n, limit, ratio, judge, told in cells:
        se, sp = JUDGES[judge]
        calibration = calibration_of(se, sp) if told == "true" else calibration_of(0.85, 0.99)
        p = ratio * limit
        old = (
            steer_old(rng, n, p, se, sp, limit, draws)
            if n <= 1000
            else dict.fromkeys(("default", "best of 20", "every label", "every 10", "the hint"), float("nan"))
        )
        calib = calibration_passes(n, p, se, sp, calibration, limit)
        chance, labels = drawn(n, p, se, sp, calibration, limit, "passed")
        worst = max(worst, chance)
        print(
            f"   {n:>5,} {limit:>5.0%} {ratio:>4g} {judge:>17} {told:>11} | {old['default']:>7.3f} {old['best of 20']:>6.3f}"
            f" {old['every label']:>6.3f} {old['every 10']:>6.3f} {old['the hint']:>6.3f} | {calib:>6.3f} | {chance:>8.4f} {labels:>7.1f}",
            flush=True,
        )
    print(f"   Worst false approval of the plan over the {len(cells)} cells: {worst:.4f} (allowed {ALPHA:.2f}).")
    print(
        "   The plan's figure holds under every column: the queue is the run's plan (any other is refused), the\n"
        "   draw's seed is the run's own (a chosen seed is a chosen queue: today's 'best20'), and with open planned\n"
        "   items counted as failing a look that passes means the finished plan passes too (each label can only\n"
        "   lower the count), so no stopping rule passes more often than the whole plan: section 2 checks it."
    )
    print(
        "   'calib.' is the calibration estimate, which decides a slice without usable labels unless `audit: required`."
    )


# --- section 2: anytime labelling ---


def betting_stop(rng: np.random.Generator, stream: np.ndarray, q0: float, alpha: float) -> int | None:
    """The first label at which a betting e-process against `failure share >= q0` reaches 1/alpha (None:
    never within the stream). Bets of a few sizes, averaged (a mixture is an e-process too)."""
    if q0 <= 0:
        return None
    lambdas = np.array([0.5, 0.75, 0.9, 0.97]) / (1 - q0)
    factors = 1 + lambdas[None, :] * (q0 - stream[:, None])
    wealth = np.cumprod(factors, axis=0).mean(axis=1)
    hit = np.flatnonzero(wealth >= 1 / alpha)
    return int(hit[0]) + 1 if hit.size else None


def anytime(rng: np.random.Generator, draws: int, quick: bool) -> None:
    calibration = calibration_of(0.85, 0.99)
    print(f"\n2. Anytime labelling: judge Se 0.85 Sp 0.99, calibration true; {draws:,} runs a row")
    print(
        f"   {'N':>5} {'limit':>5} {'product':>8} | {'plan, stop at first pass':>24} {'plan, whole':>11} {'labels':>7} |"
        f" {'betting, stop when decided':>26} {'labels':>7}"
    )
    cells = [(3000, 0.02)] if quick else [(3000, 0.02), (1000, 0.05), (400, 0.20), (60, 0.20)]
    for n, limit in cells:
        for p in (limit, limit / 4):
            _anytime_row(rng, draws, n, limit, p, calibration)
    print("   At the limit a pass is a false approval (allowed 0.05); at a quarter of it, the power. A run whose K")
    print("   gives no plan labels nothing and passes nothing (it counts in the rows, as no pass).")


def _anytime_row(
    rng: np.random.Generator, draws: int, n: int, limit: float, p: float, calibration: sz.Calibration
) -> None:
    pi, q_f, q_p = strata(p, 0.85, 0.99)
    stop_pass = whole_pass = bet_pass = 0
    plan_labels = bet_labels = 0.0
    for _ in range(draws):
        k = int(rng.binomial(n, pi))
        plan = plan_at(n, k, calibration, limit)
        if not plan.labels:
            continue
        w = edge("passed", plan.design, limit)
        f_labels = rng.random(plan.fail_labels) < q_f
        p_labels = rng.random(plan.pass_labels) < q_p
        x_f = int(f_labels.sum())
        # After each judged-pass label (the judged-fail ones first), the open items count as failing.
        found = np.cumsum(p_labels)
        opens = plan.pass_labels - np.arange(1, plan.pass_labels + 1)
        if plan.pass_labels:
            looks = statistics("passed", plan.design, k, np.array([x_f]), found + opens)[0]
        else:
            looks = statistics("passed", plan.design, k, np.array([x_f]), np.array([0]))[0]
        passed_any = w is not None and bool((looks <= w + 1e-15).any())
        passed_end = w is not None and bool(looks[-1] <= w + 1e-15)
        stop_pass += passed_any
        whole_pass += passed_end
        plan_labels += plan.labels
        # The sequential alternative: the judged-fail part as planned bounds pi*q_F at alpha/2 (Clopper-Pearson
        # on K and on the sample, alpha/4 each); the judged-pass labels then stream into a betting e-process
        # against q_P >= limit - that bound, at alpha/2 (valid: (1 - pi) q_P <= q_P).
        r_hi = (
            float(fr.cp_high(k, n, ALPHA / 4) * fr.cp_high(x_f, plan.fail_labels, ALPHA / 4))
            if plan.fail_labels
            else float(fr.cp_high(k, n, ALPHA / 2))
        )
        stream = (rng.random(n - k) < q_p).astype(float)
        stop = betting_stop(rng, stream, limit - r_hi, ALPHA / 2)
        bet_pass += stop is not None
        bet_labels += plan.fail_labels + (stop if stop is not None else n - k)
    print(
        f"   {n:>5,} {limit:>5.0%} {p:>8.2%} | {stop_pass / draws:>24.4f} {whole_pass / draws:>11.4f}"
        f" {plan_labels / draws:>7.1f} | {bet_pass / draws:>26.4f} {bet_labels / draws:>7.1f}",
        flush=True,
    )


# --- section 3: labels carried over ---

METHODS = ("fresh", "labelled first", "coupled")
# What the team does between the releases with the answers last release's labels found failing.
BEHAVIOURS = ("changes unrelated", "fixes what was found", "rewords what was found")


def carry_over(rng: np.random.Generator, draws: int) -> None:
    n, limit, unchanged = 1000, 0.05, 0.7
    se, sp = 0.3, 0.99  # the judge on the run; calibration says 0.85: plans sized to pass, so they label
    print(
        f"\n3. Labels carried over: {n:,} answers, {limit:.0%} limit, the product at it, judge Se {se} on the run"
        f" (calibration says 0.85);\n   {unchanged:.0%} of the answers unchanged since last release, the changed"
        f" ones failing 3x as often; {draws:,} runs a row"
    )
    print(
        f"   {'what the team did':>24} {'the run fails':>13} | {'draw':>14} {'P(passed)':>9}"
        f" {'failures read':>13} {'labels carried over':>19}"
    )
    calibration = calibration_of(0.85, 0.99)
    for behaviour in BEHAVIOURS:
        tally = {m: np.zeros(6) for m in METHODS}  # passed, carried, labels, estimate, rate (runs with a plan), rate
        for _ in range(draws):
            _carry_run(rng, behaviour, n, limit, unchanged, se, sp, calibration, tally)
        share = tally["fresh"][5] / draws
        for i, (method, (passed, carried, labels, estimate, planned_rate, _)) in enumerate(tally.items()):
            what = f"{behaviour:>24} {share:>13.2%}" if i == 0 else " " * 38
            print(
                f"   {what} | {method:>14} {passed / draws:>9.4f} {estimate / max(planned_rate, 1e-12):>13.2f}"
                f" {carried / max(labels, 1):>7.0%} of {labels / draws:>3.0f} a run",
                flush=True,
            )
    print(
        "   'failures read': the plan's estimate of the run's failure rate over the rate itself, averaged over the\n"
        "   runs with a plan (1.00: unbiased). 'coupled' (an unchanged answer keeps its key of last release's seed,\n"
        "   a changed one gets one of this run's) is a uniformly random order only while which answers change does\n"
        "   not depend on last release's draw. But the team knows that draw (it labelled it) and what it found:\n"
        "   fixing the answers found failing, or rewording them, takes them out of the prefix the plan reads first,\n"
        "   and the plan reads fewer failures than there are. 'fixes what was found': the fixes lower the run's rate\n"
        "   below the limit, so a pass there is no false approval, but the estimate still reads low. The gate draws\n"
        "   fresh: last release's labels count where the fresh plan draws their items."
    )


def _carry_run(
    rng: np.random.Generator,
    behaviour: str,
    n: int,
    limit: float,
    unchanged: float,
    se: float,
    sp: float,
    calibration: sz.Calibration,
    tally: dict[str, np.ndarray],
) -> None:
    """One run: last release's plan labelled, the team's move, this release's plan drawn each way and decided."""
    # The product at its limit: unchanged fail at r, changed at 3r, 0.7 r + 0.3 * 3r = limit.
    r_unchanged = limit / (unchanged + 3 * (1 - unchanged))
    same = rng.random(n) < unchanged
    fails = np.where(same, rng.random(n) < r_unchanged, rng.random(n) < 3 * r_unchanged)
    judged_fail = np.where(fails, rng.random(n) < se, rng.random(n) > sp)
    # Last release's plan: the prefix of each stratum in the order of its seed's keys.
    previous_key = rng.random(n)
    before = plan_at(n, int(judged_fail.sum()), calibration, limit)
    planned = np.zeros(n, dtype=bool)
    for stratum, size in ((True, before.fail_labels), (False, before.pass_labels)):
        ids = np.flatnonzero(judged_fail == stratum)
        planned[ids[np.argsort(previous_key[ids])][:size]] = True
    found = planned & same & fails  # what last release's labels found failing, unchanged so far
    if behaviour != "changes unrelated":
        same = same & ~found  # the team changes each of them: a new answer, a new key
    if behaviour == "fixes what was found":  # they pass now, and the judge reads them afresh
        fails = fails & ~found
        judged_fail = np.where(found, rng.random(n) > sp, judged_fail)
    k = int(judged_fail.sum())
    plan = plan_at(n, k, calibration, limit)
    w = edge("passed", plan.design, limit)
    tally["fresh"][5] += fails.mean()
    if w is None or not plan.labels:
        return  # no plan: nothing labelled, nothing passed
    labelled = planned & same  # the labels that carry over: same item, same rubric
    fresh_key = rng.random(n)
    strata_ids = (np.flatnonzero(judged_fail), np.flatnonzero(~judged_fail))
    for method in METHODS:
        key = {
            "fresh": fresh_key,
            "labelled first": np.where(labelled, fresh_key - 1.0, fresh_key),
            "coupled": np.where(same, previous_key, fresh_key),
        }[method]
        picks = [
            ids[np.argsort(key[ids])][:size]
            for ids, size in zip(strata_ids, (plan.fail_labels, plan.pass_labels), strict=True)
        ]
        x_f, x_p = int(fails[picks[0]].sum()), int(fails[picks[1]].sum())
        stat = statistics("passed", plan.design, k, np.array([x_f]), np.array([x_p]))[0, 0]
        estimate = sum(ids.size / n * fails[p].mean() for ids, p in zip(strata_ids, picks, strict=True) if p.size)
        carried = sum(int(labelled[p].sum()) for p in picks)
        tally[method][:5] += (stat <= w + 1e-15, carried, plan.labels, estimate, fails.mean())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the issue's run only, fewer draws")
    parser.add_argument("--seed", type=int, default=45)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    grid(rng, args.quick, 300 if args.quick else 500)
    anytime(rng, 300 if args.quick else 600, args.quick)
    carry_over(rng, 300 if args.quick else 1000)
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
