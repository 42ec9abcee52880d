"""Benchmark: what would a tighter interval buy, and does it hold where an adversary would look?

Two published intervals were candidates for the product gate, one per estimate:

- for the calibration estimate, Lee et al.'s plug-in interval ("How to Correctly Report LLM-as-a-Judge
  Evaluations", arXiv 2511.21140): the Rogan-Gladen correction with a delta-method normal interval over
  the run's judged-fail share and the judge's sensitivity and specificity from calibration, each count
  smoothed first (the run's as Agresti-Coull does, the judge's by one success and one failure);
- for the audit estimate, prediction-powered inference (Angelopoulos et al., Science 2023), as its
  mean interval is usually applied: the judge's failure share over every answer, plus the mean of
  (person's verdict - judge's verdict) over a uniform random sample of answers people labelled, with a
  normal interval from both variances.

The gate adopts neither. This script shows why, and what each would have bought, side by side with
the gate's own rules in one run (confidence 95%: each one-sided bound may miss at 5%, so the normal
intervals are taken two-sided at 90%):

1. Lee et al. against the gate's calibration box, on the product grid (limits 2%, 5%, 10%; true
   failure rate from a quarter of the limit to twice it; Se 0.6-0.99; Sp 0.8-0.999; m = 10, 100, 1,000
   labelled answers each way; N = 50-10,000 judged answers), simulated: P(passed) where the product
   is at or above its limit (false approval) and P(exceeded) where it is at or below (false failure),
   each allowed 5%.
2. PPI against the gate's audit, on the audit grid (N 60, 400, 3,000; limits 2%, 5%, 20%; the judges
   of bench/audit_coverage.py, the blind and the alarmist among them; PPI given as many labels as the
   gate's audit draws, a per stratum, uniformly over the run), simulated the same way.
3. Labels needed at 3,000 answers (judge Se 0.85, Sp 0.99, expected counts) by each of the four.

    .venv/bin/python bench/interval_candidates.py            # the whole run (279 s on 2 shared cores)
    .venv/bin/python bench/interval_candidates.py --quick    # 2,000 runs per cell (about 50 s)
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.audit_coverage import JUDGES, _cal_labels, draw_run, expected_strata, high_threshold  # noqa: E402
from gate.estimate import audit_rate as ar  # noqa: E402
from gate.estimate.failure_rate import box_share, cp_high, cp_low, rogan_gladen  # noqa: E402

CONF = 0.95
ALPHA = 1 - CONF
Z = float(norm.ppf(CONF))  # a one-sided bound at 95%: a two-sided normal interval at 90%
N = 3000

CAL_GRID = {
    "limit": (0.02, 0.05, 0.10),
    "ratio": (0.25, 0.5, 1.0, 1.25, 2.0),
    "se": (0.6, 0.75, 0.9, 0.99),
    "sp": (0.8, 0.95, 0.995, 0.999),
    "m": (10, 100, 1000),
    "n": (50, 500, 2000, 10_000),
}
AUDIT_GRID = {
    "n": (60, 400, 3000),
    "limit": (0.02, 0.05, 0.20),
    "ratio": (0.25, 0.5, 1.0, 1.25, 2.0),
    "a": (20, 100, 300, 1000),
}


# --- Lee et al.'s plug-in interval, in the failure rate's terms ---


def lee_bounds(k: Any, n: int, caught: Any, m_fail: int, passed: Any, m_pass: int) -> tuple[Any, Any]:
    """The failure rate's (low, high) at 95% each side, by the plug-in interval. The paper writes it for
    accuracy theta with p = P(judged correct), q0 = specificity for 'correct' (our Se: a failing
    answer judged fail), q1 = sensitivity (our Sp); the failure rate is 1 - theta. NaN where the
    smoothed judge is no better than chance (the paper's interval is undefined there)."""
    z2 = Z * Z
    p = ((n - k) + z2 / 2) / (n + z2)
    q0 = (caught + 1) / (m_fail + 2)
    q1 = (passed + 1) / (m_pass + 2)
    n_s, m0, m1 = n + z2, m_fail + 2, m_pass + 2
    den = q0 + q1 - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        theta = np.where(den > 0, (p + q0 - 1) / den, np.nan)
        shift = 2 * z2 * (-(1 - theta) * q0 * (1 - q0) / m0 + theta * q1 * (1 - q1) / m1)
        se = np.sqrt(p * (1 - p) / n_s + (1 - theta) ** 2 * q0 * (1 - q0) / m0 + theta**2 * q1 * (1 - q1) / m1) / den
    theta_low = np.clip(theta + shift - Z * se, 0, 1)
    theta_high = np.clip(theta + shift + Z * se, 0, 1)
    return 1 - theta_high, 1 - theta_low


def box_bounds(k: Any, n: int, caught: Any, m_fail: int, passed: Any, m_pass: int) -> tuple[Any, Any]:
    """The gate's calibration estimate: Rogan-Gladen at the box's corners, each of the three counts
    bounded by Clopper-Pearson at a third of 1 - confidence."""
    a = box_share(CONF)
    high = rogan_gladen(cp_high(k, n, a), cp_low(caught, m_fail, a), cp_high(passed, m_pass, a), empty=1.0)
    low = rogan_gladen(cp_low(k, n, a), cp_high(caught, m_fail, a), cp_low(passed, m_pass, a), empty=0.0)
    return low, high


@dataclass
class Tally:
    """Per rule, the worst rate seen of each kind and where, and the cells over 1 - confidence by more
    than the simulation's noise."""

    noise: float
    worst: dict[str, tuple[float, str]] = field(default_factory=dict)
    over: dict[str, int] = field(default_factory=dict)
    cells: int = 0

    def cell(self, where: str, rates: dict[str, list[tuple[str, float]]]) -> None:
        """One cell's rates: rule -> [(kind, rate)]."""
        self.cells += 1
        for rule, found in rates.items():
            for kind, rate in found:
                key = f"{rule} {kind}"
                if rate > self.worst.get(key, (-1.0, ""))[0]:
                    self.worst[key] = (rate, where)
            self.over[rule] = self.over.get(rule, 0) + int(any(rate > ALPHA + self.noise for _, rate in found))

    def print_worst(self, keys: tuple[str, ...]) -> None:
        for key in keys:
            rate, where = self.worst[key]
            print(f"  worst {key:<22} {rate:6.3f}  ({where})")


def calibration_grid(rng: np.random.Generator, sims: int) -> None:
    print(f"1. Lee et al. against the gate's calibration box: {sims:,} simulated runs per cell, confidence {CONF:g}")
    tally = Tally(3 * np.sqrt(ALPHA * (1 - ALPHA) / sims))
    for limit, ratio, se, sp, m, n in itertools.product(*CAL_GRID.values()):
        p = ratio * limit
        q = se * p + (1 - sp) * (1 - p)
        k = rng.binomial(n, q, size=sims)
        caught = rng.binomial(m, se, size=sims)
        passed = rng.binomial(m, sp, size=sims)
        rates: dict[str, list[tuple[str, float]]] = {}
        for name, bounds in (("lee", lee_bounds), ("box", box_bounds)):
            low, high = bounds(k, n, caught, m, passed, m)
            rates[name] = [("false approval", float(np.mean(high <= limit)))] if ratio >= 1 else []
            if ratio <= 1:
                rates[name].append(("false failure", float(np.mean(low > limit))))
        tally.cell(f"limit {limit:.0%}, p {ratio:g}L, Se {se}, Sp {sp}, m {m}, N {n:,}", rates)
    tally.print_worst(("lee false approval", "lee false failure", "box false approval", "box false failure"))
    print(
        f"  cells over {ALPHA:.0%} by more than simulation noise (3 sd = {tally.noise:.3f}), of {tally.cells:,}:"
        f" Lee et al. {tally.over['lee']:,}, the gate's box {tally.over['box']:,}"
    )


# --- prediction-powered inference on a uniform audit ---


def uniform_audit(rng: np.random.Generator, run: dict[str, Any], size: Any) -> tuple[Any, Any, Any]:
    """A uniform random sample of `size` answers of the run: how many of it are (failing, judged pass),
    (good, judged fail), and all failing ones."""
    left = run["ff"] + run["fp"] + run["gf"] + run["gp"]
    drawn = {}
    rest = size
    for cell in ("ff", "fp", "gf"):
        left = left - run[cell]
        drawn[cell] = rng.hypergeometric(run[cell], left, rest)
        rest = rest - drawn[cell]
    return drawn["fp"], drawn["gf"], drawn["ff"] + drawn["fp"]


def ppi_bounds(k: Any, n: int, size: Any, missed: Any, wrongly_failed: Any) -> tuple[Any, Any]:
    """PPI's mean interval: theta = k/n + mean(Y - f) over the labelled sample, normal, both variances."""
    rectifier = (missed - wrongly_failed) / size
    spread = (missed + wrongly_failed) / size - rectifier**2
    spread = spread * size / np.maximum(size - 1, 1)  # the sample variance
    share = k / n
    se = np.sqrt(share * (1 - share) / n + spread / size)
    theta = share + rectifier
    return theta - Z * se, theta + Z * se


def audit_passes(k: Any, n: int, a: int, failing_in_fail: Any, failing_in_pass: Any, limit: float) -> Any:
    """The gate's audit `passed`, by bench/audit_coverage.py's exact threshold on its test statistic."""
    a_f, m = np.minimum(a, k), np.minimum(a, n - k)
    y1 = failing_in_fail + (k - a_f)  # unaudited judged-fail answers count as failing
    out = np.zeros(k.shape, dtype=bool)
    for size in np.unique(m):
        rows = m == size
        t = high_threshold(n, int(size), limit)
        stat = y1[rows] * size + failing_in_pass[rows] * n if size else y1[rows]
        out[rows] = (t >= 0) & (stat <= t)
    return out


def audit_grid(rng: np.random.Generator, sims: int) -> None:
    print(f"\n2. PPI against the gate's audit: {sims:,} simulated runs per cell, confidence {CONF:g}")
    tally = Tally(3 * np.sqrt(ALPHA * (1 - ALPHA) / sims))
    for (n, limit, ratio, a), (judge, (se, sp)) in itertools.product(
        itertools.product(*AUDIT_GRID.values()), JUDGES.items()
    ):
        if a > n and a != min(x for x in AUDIT_GRID["a"] if x >= n):
            continue  # past the slice's size every audit is the whole slice: one cell is enough
        p = ratio * limit
        run = draw_run(rng, sims, n, p, se, sp)
        k = run["ff"] + run["gf"]
        a_f, a_p = np.minimum(a, k), np.minimum(a, n - k)
        # the gate's audit: a per stratum; people's verdicts on each sample
        x_f = rng.hypergeometric(run["ff"], run["gf"], a_f)
        x_p = rng.hypergeometric(run["fp"], run["gp"], a_p)
        gate_pass = audit_passes(k, n, a, x_f, x_p, limit)
        # PPI: as many labels, drawn uniformly over the run
        size = np.maximum(a_f + a_p, 1)
        missed, wrongly_failed, _ = uniform_audit(rng, run, size)
        low, high = ppi_bounds(k, n, size, missed, wrongly_failed)
        rates: dict[str, list[tuple[str, float]]] = {"ppi": [], "audit": []}
        if ratio >= 1:
            rates["ppi"].append(("false approval", float(np.mean(high <= limit))))
            rates["audit"].append(("false approval", float(np.mean(gate_pass))))
        if ratio <= 1:
            rates["ppi"].append(("false failure", float(np.mean(low > limit))))
        tally.cell(f"N {n:,}, limit {limit:.0%}, p {ratio:g}L, judge {judge}, a {a}", rates)
    tally.print_worst(("ppi false approval", "ppi false failure", "audit false approval"))
    print(
        f"  cells over {ALPHA:.0%} by more than simulation noise (3 sd = {tally.noise:.3f}), of {tally.cells:,}: PPI"
        f" {tally.over['ppi']:,}, the gate's audit {tally.over['audit']:,} (its false failure is computed exactly in"
        " bench/audit_coverage.py)"
    )


# --- labels needed, at the expected counts ---


def lee_labels(limit: float, p: float, se: float, sp: float) -> int | None:
    """The fewest calibration labels (failing + passing) with which Lee et al.'s interval decides."""
    q = se * p + (1 - sp) * (1 - p)
    k = round(q * N)
    grid = sorted({int(x) for x in np.geomspace(10, 200_000, 120)})
    best = None
    for m_f in grid:
        for m_p in grid:
            if best is not None and m_f + m_p >= best:
                break
            low, high = lee_bounds(np.array(k), N, np.array(round(se * m_f)), m_f, np.array(round(sp * m_p)), m_p)
            if float(high) <= limit or float(low) > limit:
                best = m_f + m_p
                break
    return best


def ppi_labels(limit: float, p: float, se: float, sp: float) -> int | None:
    """The fewest uniformly drawn audit labels with which PPI's interval decides, at the expected
    shares (not counts rounded per size: a handful of labels would round every disagreement to none
    and PPI's interval to nothing, which is the failure the grid shows, not a plan)."""
    q = se * p + (1 - sp) * (1 - p)
    k = round(q * N)
    sizes = np.arange(2, N + 1)
    missed = p * (1 - se) * sizes
    wrongly = (1 - p) * (1 - sp) * sizes
    low, high = ppi_bounds(np.full(sizes.shape, k), N, sizes, missed, wrongly)
    decided = np.flatnonzero((high <= limit) | (low > limit))
    return int(sizes[decided[0]]) if decided.size else None


def labels_needed() -> None:
    se, sp = 0.85, 0.99
    print(f"\n3. Labels needed to decide: N = {N:,} answers, judge Se {se}, Sp {sp} (expected counts)")
    print(f"{'limit':>5} {'product':>8} | {'audit':>6} {'PPI':>6} | {'calibration box':>15} {'Lee et al.':>10}")

    def shown(x: int | None) -> str:
        return "never" if x is None else f"{x:,}"

    for limit, ratio in itertools.product((0.01, 0.02, 0.05, 0.10), (0.25, 2.0)):
        p = ratio * limit
        k, q_f, q_p = expected_strata(p, se, sp)
        route = ar.audits_to_decide(judged_fail=k, n=N, q_fail=q_f, q_pass=q_p, confidence=CONF, max_failure_rate=limit)
        audit = None if route is None else route[0] + route[1]
        print(
            f"{limit:>5.0%} {f'{ratio:g}L':>8} | {shown(audit):>6} {shown(ppi_labels(limit, p, se, sp)):>6} |"
            f" {shown(_cal_labels(limit, p, se, sp)):>15} {shown(lee_labels(limit, p, se, sp)):>10}",
            flush=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer simulated runs per cell")
    parser.add_argument("--seed", type=int, default=2511)
    args = parser.parse_args()
    sims = 2000 if args.quick else 20_000
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    calibration_grid(rng, sims)
    audit_grid(rng, sims)
    labels_needed()
    print(f"\n{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
