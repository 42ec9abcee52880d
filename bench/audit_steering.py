"""Benchmark: can a team steer the audit's verdict? The ways an audit of the gate was steered, against the plan.

A product at or above its limit must pass at most 1 - confidence of the time, whatever the team does that the
gate allows. Today's audit (every judged-fail answer and 100 judged-pass ones by default, labels read up to
the last one given) let a team choose its queue, label until it passes, or lean on calibration where the judge
is worse on the run. The plan (gate/estimate/audit_sizing.py) is two designs fixed before the run's K (the
answers the judge failed): one to pass a product at a quarter of the limit, one to show a product at 2x/3x/5x
it exceeded; K only chooses which people label (calibration's prediction at K under the limit: the first).
`passed` is read only from the design to pass, `exceeded` from either (at 9/10 and 1/10 of 1 - confidence);
the verdict reads exactly the planned items, a planned item without a label counting against it. Side by side
in one run (confidence 95%, 5% allowed):

1. The steering grid. Per cell, P(passed) of a product at its limit (or above it) by today's rule under each
   way of steering it, simulated, and by the plan, exact (a sum over every K the run could have, each with the
   plan the gate makes at that K, and every outcome of its sample):
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
   answers at 2% (the quick run), 1,000 at 5%, 400 and 60 at 20%. A run whose K chooses the design to show
   exceeded passes neither way (its labels are counted for both).
3. Labels carry over: last release labelled a plan of the same answers; 70% are unchanged, and the changed ones
   fail three times as often (1,000 answers, the product at its 5% limit, a judge with Se 0.3 on the run where
   calibration says 0.85, so that K chooses the design to pass). Three ways to draw this release's plan: fresh
   (the gate's); last release's labelled answers first; coupled (an unchanged answer keeps its key of last
   release's seed, a changed one gets a key of this run's: a uniformly random order of the stratum while which
   answers change is unrelated to last release's draw). Three things the team did between the releases:
   changes unrelated to the labels; fixed the answers last release's labels found failing; reworded them, still
   failing (an adversary who wants them out of the prefix). False approval, the failures the plan reads, and
   labels carried over.
4. The plan chosen after K. The gate's tests are exact for a design fixed before K, summed over every K the run
   could have had. Exact P(passed) of a product at its limit, each rule in the loop (each K the plan the rule
   makes at it), where the judge fails few on the run and calibration says it fails many (Se 0.02-0.3 on the
   run, Sp 1.0 and 0.99; 60, 120 and 400 answers; 5%, 10% and 20% limits; calibration as the example's, Se
   0.83 Sp 1.0, or a good judge's; 88 cells), three rules side by side:
     sized from K  the rule the gate had (`bench/audit_sizing.sized_from_k`, rebuilt from the gate's search):
                   one design sized at calibration's prediction from this K, both verdicts read from it at
                   1 - confidence: worst 5.77% (400 answers, 5%, Se 0.3), above 5% in 14 of the 88 cells
     the gate      two designs fixed before K: worst 4.49% (400 answers, 5%, Se 0.1), none above 5%; its
                   P(exceeded) at the limit beside it (worst 0.25%), and on 48 cells where K often chooses the
                   design to show exceeded (a judge as calibrated, or failing more good answers on the run than
                   calibration says: worst 3.24%; the design to show exceeded reads it at 4.5%, the design
                   to pass at 0.5%)
     given K       the Berger-Boos test given K (bench/audit_given_k.py), each K the design sized from K asking
                   it: worst 3.13%
   and what each costs at the headline (3,000 answers, Se 0.85, Sp 0.99, a 2% limit): labels and power at the
   expected K and over every run, with the LP's bound on any valid test of as many labels (bench/audit_sizing.py):
   to pass a product at 0.5% the gate's 220 labels (79.1% over every run), sized from K 220 at the expected K
   but 698 on average (73.5%), given K 354 (635 on average, 73.3%); to show one at 4% exceeded the gate's 24
   (80.5%), sized from K 18 (194 on average, 84.1%), given K 46 (723 on average, 84.7%); a product at 0.75%
   passes 42.9% of the time with the gate's 220, 78.8% with 1,587 labels on average sized from K, 76.6% with
   1,439 given K; and (full run) three of section 1's cells.

    nice .venv/bin/python bench/audit_steering.py                 # sections 1-4 (11 minutes on 2 shared cores)
    nice .venv/bin/python bench/audit_steering.py --quick         # the issue's runs, fewer draws, section 4 quick (4.5 minutes)
    nice .venv/bin/python bench/audit_steering.py --sections 123  # sections 1-3 only (1.5 minutes)
    nice .venv/bin/python bench/audit_steering.py --after-k       # section 4: 88 cells, 48 more, the costs (10-12 minutes)
    nice .venv/bin/python bench/audit_steering.py --after-k --quick  # four found cells, 12 more, the costs (4-6 minutes)
    nice .venv/bin/python bench/audit_steering.py --after-k --slow   # ... and two slow cells (20-40 minutes more)
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

from bench import audit_given_k as given_k  # noqa: E402
from bench.audit_sizing import (  # noqa: E402
    drawn,
    edge,
    gate_chance,
    k_window,
    plan_at,
    sized_from_k,
    statistics,
    strata,
    verdict_chance,
)
from gate.estimate import audit_rate as ar  # noqa: E402
from gate.estimate import audit_sizing as sz  # noqa: E402
from gate.estimate import audit_tests as at  # noqa: E402
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
    ok: np.ndarray = (t >= 0) & (x_f * m + found * n <= t)
    return ok


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
        if plan.pass_design is None:  # K chose the design to show exceeded (or none): it cannot pass
            plan_labels += plan.labels
            bet_labels += plan.labels
            continue
        w = edge("passed", plan.pass_design, limit)
        f_labels = rng.random(plan.fail_labels) < q_f
        p_labels = rng.random(plan.pass_labels) < q_p
        x_f = int(f_labels.sum())
        # After each judged-pass label (the judged-fail ones first), the open items count as failing.
        found = np.cumsum(p_labels)
        opens = plan.pass_labels - np.arange(1, plan.pass_labels + 1)
        if plan.pass_labels:
            looks = statistics("passed", plan.pass_design, k, np.array([x_f]), found + opens)[0]
        else:
            looks = statistics("passed", plan.pass_design, k, np.array([x_f]), np.array([0]))[0]
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
    tally["fresh"][5] += fails.mean()
    if plan.pass_design is None or not plan.labels:
        return  # K chose the design to show exceeded, or no plan: nothing passed (tallied as runs without a pass)
    design = plan.pass_design
    w = edge("passed", design, limit)
    if w is None:
        return
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
        stat = statistics("passed", design, k, np.array([x_f]), np.array([x_p]))[0, 0]
        estimate = sum(ids.size / n * fails[p].mean() for ids, p in zip(strata_ids, picks, strict=True) if p.size)
        carried = sum(int(labelled[p].sum()) for p in picks)
        tally[method][:5] += (stat <= w + 1e-15, carried, plan.labels, estimate, fails.mean())


# --- section 4: the plan chosen after K ---

# Calibration as the example product has it (Se 0.83, Sp 1.0) and a good judge's (Se 0.85, Sp 0.99).
AFTER_K_CALIBRATIONS = {"example": sz.Calibration(50, 10, 120, 0), "good": sz.Calibration(85, 15, 990, 10)}
# The cells an hour's search found above 5%, first (the quick run), then the grid around them.
AFTER_K_FOUND = [
    (400, 0.05, 0.1, 1.0, "example"),
    (400, 0.10, 0.3, 1.0, "example"),
    (120, 0.10, 0.1, 1.0, "example"),
    (60, 0.20, 0.3, 1.0, "good"),
]
# The first found above 5% too (5.41%), both slow: K reaches 34-48, where no small plan reaches the power and the
# planner's search asks the exact test about pass caps near the whole stratum (every K whose judged-pass stratum
# is smaller than the cap is summed alone, audit_tests._Test._edges: 0.6 s a question, some 50 questions a
# plan): 50-235 s a plan on a loaded machine, 500-1,500 s the cell.
AFTER_K_SLOW = [(400, 0.20, 0.3, 1.0, "good"), (400, 0.20, 0.3, 0.99, "good")]


def after_k_cells(quick: bool, slow: bool) -> list[tuple[int, float, float, float, str]]:
    if quick:
        return AFTER_K_FOUND + (AFTER_K_SLOW if slow else [])
    cells = list(AFTER_K_FOUND) + (AFTER_K_SLOW if slow else [])
    judges = [(0.02, 1.0), (0.1, 1.0), (0.3, 1.0), (0.1, 0.99), (0.3, 0.99)]
    for n, limit, (se, sp), told in itertools.product((60, 120, 400), (0.05, 0.10, 0.20), judges, AFTER_K_CALIBRATIONS):
        if (n, limit, se, sp, told) not in cells + AFTER_K_SLOW:
            cells.append((n, limit, se, sp, told))
    return cells


RULES = ("sized from K", "the gate", "given K")
RULE_NAMES = {
    "sized from K": "sized from K (before)",
    "the gate": "the gate (designs fixed before K)",
    "given K": "given K (Berger-Boos)",
}
# Cells where K often chooses the design to show exceeded (the judge on the run as calibrated, or failing more
# good answers than calibration says): P(exceeded) of a product at its limit, read from either design.
EXCEEDED_CELLS = [
    (n, limit, se, sp, told)
    for n, limit in itertools.product((60, 120, 400, 1000), (0.05, 0.10, 0.20))
    for se, sp, told in ((0.85, 0.99, "good"), (0.83, 1.0, "example"), (0.85, 0.95, "good"), (1.0, 0.9, "example"))
]


def after_k(quick: bool, slow: bool) -> None:
    """Exact false approval of each rule in the loop (each K the plan the rule makes at it): the rule the gate
    had (one design sized from K, both tests on it at 1 - confidence), the gate's (two designs fixed before K),
    and the test given K (bench/audit_given_k.py) with plans sized from K asking it."""
    print(
        "\n4. The plan chosen after K: P(passed) of a product at its limit, exact, every K the run could have"
        f" (allowed {ALPHA:.0%});\n   a judge failing few on the run where calibration says it fails many."
        "\n   sized from K: the rule the gate had: each K one design sized at calibration's prediction from K,"
        "\n                 both verdicts read from it by the gate's tests (exact for a design fixed before K)"
        "\n   the gate:     two designs sized before K (to pass a product at a quarter of the limit, to show one at"
        "\n                 2x/3x/5x exceeded); K only chooses which is labelled; `passed` read only from the first"
        "\n                 at 1 - confidence, `exceeded` from either (9/10 and 1/10 of it); 'exc.' is P(exceeded)"
        f"\n   given K:      the Berger-Boos test given K (gamma {given_k.GAMMA}), each K the design sized from K"
        " asking it"
    )
    print(
        f"   {'N':>5} {'limit':>5} {'Se':>5} {'Sp':>5} {'calibration':>11} |"
        + "".join(f" {rule:>12} {'labels':>6} |" for rule in RULES)
        + f" {'exc.':>6} | {'s':>4}"
    )
    worst = {rule: (0.0, "") for rule in (*RULES, "the gate: exceeded")}
    over = dict.fromkeys(RULES, 0)
    cells = after_k_cells(quick, slow)
    for n, limit, se, sp, told in cells:
        started = time.monotonic()
        calibration = AFTER_K_CALIBRATIONS[told]
        row = ""
        where = f"{n} answers, {limit:.0%}, Se {se} Sp {sp}, calibration {told}"
        for rule in RULES:
            chance, labels = after_k_cell(rule, n, limit, se, sp, calibration)
            if chance > worst[rule][0]:
                worst[rule] = (chance, where)
            over[rule] += chance > ALPHA
            row += f" {chance:>12.4f} {labels:>6.1f} |"
        exceeded, _ = after_k_cell("the gate", n, limit, se, sp, calibration, side="exceeded")
        if exceeded > worst["the gate: exceeded"][0]:
            worst["the gate: exceeded"] = (exceeded, where)
        print(
            f"   {n:>5,} {limit:>5.0%} {se:>5g} {sp:>5g} {told:>11} |{row} {exceeded:>6.4f} |"
            f" {time.monotonic() - started:>4.0f}",
            flush=True,
        )
    for rule in RULES:
        value, where = worst[rule]
        print(
            f"   P(passed), {RULE_NAMES[rule]}: worst {value:.4f} ({where}); above {ALPHA:.0%} in {over[rule]}"
            f" of the {len(cells)} cells."
        )
    value, where = worst["the gate: exceeded"]
    print(f"   P(exceeded), the gate: worst {value:.4f} ({where}).")
    after_k_exceeded(quick)
    after_k_cost(quick)


def after_k_exceeded(quick: bool) -> None:
    """The gate's P(exceeded) at the limit where K often chooses the design to show exceeded: the two routes to
    `exceeded` (9/10 of 1 - confidence in that design, 1/10 in the design to pass) must stay within it."""
    cells = [cell for cell in EXCEEDED_CELLS if cell[0] == 400] if quick else EXCEEDED_CELLS
    print(
        f"   P(exceeded) of a product at its limit, the gate, where K often chooses the design to show exceeded"
        f" (allowed {ALPHA:.0%}):"
    )
    print(
        f"   {'N':>5} {'limit':>5} {'Se':>5} {'Sp':>5} {'calibration':>11} | {'P(aim exc.)':>11}"
        f" {'P(exceeded)':>11} {'labels':>6} | {'P(passed)':>9}"
    )
    worst, where = 0.0, ""
    for n, limit, se, sp, told in cells:
        calibration = AFTER_K_CALIBRATIONS[told]
        pi = strata(limit, se, sp)[0]
        ks, pk, _ = k_window(n, pi)
        aimed = sum(
            float(w) for k, w in zip(ks, pk, strict=True) if plan_at(n, int(k), calibration, limit).aim == "exceeded"
        )
        exceeded, labels = after_k_cell("the gate", n, limit, se, sp, calibration, side="exceeded")
        passed, _ = after_k_cell("the gate", n, limit, se, sp, calibration)
        if exceeded > worst:
            worst, where = exceeded, f"{n} answers, {limit:.0%}, Se {se} Sp {sp}, calibration {told}"
        print(
            f"   {n:>5,} {limit:>5.0%} {se:>5g} {sp:>5g} {told:>11} | {aimed:>11.3f} {exceeded:>11.4f} {labels:>6.1f}"
            f" | {passed:>9.4f}",
            flush=True,
        )
    print(f"   Worst P(exceeded) of the gate over these {len(cells)} cells: {worst:.4f} ({where}).")


def after_k_cost(quick: bool) -> None:
    """What each rule costs at the headline: the plan at the expected K (labels, power at that K), over every
    run (P(the verdict), labels on average), the LP's bound on any valid test of that many labels; a product
    at 0.75%, between a quarter of the limit and the limit; and (full run) three of section 1's cells."""
    from bench.audit_sizing import CALIBRATION, SE, SP, N, lp_best

    limit = 0.02
    print(
        f"   What it costs. The headline: {N:,} answers, Se {SE}, Sp {SP}, a {limit:.0%} limit; per rule the plan at"
        " the expected K\n   (labels, power exact at that K), over every run (P(the verdict), labels on average),"
        " and the LP's bound on\n   any valid test with the labels at the expected K (bench/audit_sizing.py; at the"
        " whole 1 - confidence)"
    )
    print(
        f"   {'product':>8} {'verdict':>9} {'K':>4} | {'rule':>33} {'labels at K':>11} {'power':>6} |"
        f" {'every run':>9} {'labels':>7} | {'LP bound':>8}"
    )
    rows: tuple[tuple[float, at.Side], ...] = ((0.005, "passed"), (0.04, "exceeded"), (0.0075, "passed"))
    for p, side in rows:
        pi, q_f, q_p = strata(p, SE, SP)
        k = round(pi * N)
        for i, rule in enumerate(RULES):
            started = time.monotonic()
            design, chance_at_k = headline_plan(rule, N, k, limit, q_f, q_p, side)
            f_labels, p_labels = design.sizes(k) if design is not None else (0, 0)
            chance, labels = after_k_cell(rule, N, limit, SE, SP, CALIBRATION, p=p, side=side)
            bound = ""
            if p != 0.0075 and design is not None:
                caps = (f_labels,) if side == "exceeded" else tuple(sorted({f_labels, 16, 23}))
                bound = f"{lp_best(f_labels + p_labels, p, limit, side, caps)[0]:>8.3f}"
            what = f"{p:>8.2%} {side:>9} {k:>4}" if i == 0 else " " * 24
            print(
                f"   {what} | {RULE_NAMES[rule]:>33} {f'{f_labels} + {p_labels}':>11} {chance_at_k:>6.3f} |"
                f" {chance:>9.3f} {labels:>7.1f} | {bound:>8}   ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
    if quick:
        return
    print("   Section 1's cells (Se 0.85, Sp 0.99, calibration true), drawn at the truth: P(passed) at the limit; at a")
    print("   quarter of it the power to pass and the labels on average:")
    print(
        f"   {'N':>5} {'limit':>5} |" + "".join(f" {rule + ': at L':>18} {'L/4':>6} {'labels':>6} |" for rule in RULES)
    )
    for n, limit in ((1000, 0.05), (400, 0.05), (60, 0.20)):
        calibration = calibration_of(0.85, 0.99)
        row = ""
        for rule in RULES:
            at_limit, _ = after_k_cell(rule, n, limit, 0.85, 0.99, calibration)
            power, labels = after_k_cell(rule, n, limit, 0.85, 0.99, calibration, p=limit / 4)
            row += f" {at_limit:>18.4f} {power:>6.3f} {labels:>6.1f} |"
        print(f"   {n:>5,} {limit:>5.0%} |{row}", flush=True)


def headline_plan(
    rule: str, n: int, k: int, limit: float, q_f: float, q_p: float, side: at.Side
) -> tuple[at.Design | None, float]:
    """The design a rule labels at the headline's expected K, and its chance of `side` exact at that K."""
    from bench.audit_sizing import CALIBRATION

    if rule == "the gate":
        plan = plan_at(n, k, CALIBRATION, limit)
        return plan.design, gate_chance(side, plan, limit, k, q_f, q_p)
    if rule == "given K":
        design = given_k.plan_at(n, k, CALIBRATION, limit, CONF).design
        return design, given_k.verdict_chance(side, design, limit, k, q_f, q_p, ALPHA) if design else 0.0
    design = sized_from_k(n, k, CALIBRATION, limit).design
    return design, verdict_chance(side, design, limit, k, q_f, q_p)


def after_k_cell(
    rule: str,
    n: int,
    limit: float,
    se: float,
    sp: float,
    calibration: sz.Calibration,
    p: float | None = None,
    side: at.Side = "passed",
) -> tuple[float, float]:
    """P(the verdict `side`) at the rate p (the limit unless given) and the labels on average, every K the run
    could have, each with the plan the rule makes at it (the chance of K outside the window counted as the
    verdict where the verdict is wrong, as not reached otherwise: the figure can only err against the rule)."""
    p = limit if p is None else p
    pi, q_f, q_p = strata(p, se, sp)
    ks, pk, rest = k_window(n, pi)
    wrong = p >= limit if side == "passed" else p <= limit
    chance, labels = (rest if wrong else 0.0), 0.0
    for k, w in ((int(k), float(w)) for k, w in zip(ks, pk, strict=True)):
        if rule == "the gate":
            plan = plan_at(n, k, calibration, limit)
            labels += w * plan.labels
            chance += w * gate_chance(side, plan, limit, k, q_f, q_p)
        elif rule == "given K":
            given = given_k.plan_at(n, k, calibration, limit, CONF)
            labels += w * given.labels
            if given.design is not None:
                chance += w * given_k.verdict_chance(side, given.design, limit, k, q_f, q_p, ALPHA)
        else:
            old = sized_from_k(n, k, calibration, limit)
            labels += w * old.labels
            chance += w * verdict_chance(side, old.design, limit, k, q_f, q_p)
    return chance, labels / pk.sum()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the issue's run only, fewer draws")
    parser.add_argument("--after-k", action="store_true", help="only section 4, the plan chosen after K")
    parser.add_argument("--sections", default="1234", help="the sections to run, e.g. 123 (default: all four)")
    parser.add_argument("--slow", action="store_true", help="section 4 with its slow cell (about 20 minutes more)")
    parser.add_argument("--seed", type=int, default=45)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    sections = "4" if args.after_k else args.sections
    if "1" in sections:
        grid(rng, args.quick, 300 if args.quick else 500)
    if "2" in sections:
        anytime(rng, 300 if args.quick else 600, args.quick)
    if "3" in sections:
        carry_over(rng, 300 if args.quick else 1000)
    if "4" in sections:
        after_k(args.quick, args.slow)
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
