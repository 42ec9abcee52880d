"""Benchmark: does `gate review status`'s bootstrap 95% interval of Krippendorff's alpha hold?

Two reviewers label n items. Each item is truly failing with probability `prevalence`; each
reviewer gives the true label with probability `accuracy`, independently (else the other label).
The population alpha of a cell is alpha over 200,000 such items. Per cell, R samples of n items:

  undefined   share of samples where alpha is undefined (every label the same): status shows n/a
  cover       share of defined samples whose interval holds the population alpha (target 0.95)
  miss_lo     share whose interval lies wholly above it (people look more agreed than they are)
  width       mean width of the interval
  below       share of samples whose alpha is below review.min_alpha 0.667 (export refuses the slice)

The grid includes what an adversary (or a small team) would pick: few items, a rare failure (the
pairable values are then nearly all one label and alpha swings), and reviewers near the 0.667 line.

    .venv/bin/python bench/review_agreement.py            # R = 400 (~3 min on 2 cores)
    .venv/bin/python bench/review_agreement.py --quick    # R = 100
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gate.review.agreement import alpha, alpha_interval

MIN_ALPHA = 0.667


def sample(n: int, prevalence: float, accuracy: float, rng: random.Random) -> dict[str, dict[str, str]]:
    units: dict[str, dict[str, str]] = {}
    for i in range(n):
        truth = "fail" if rng.random() < prevalence else "pass"
        other = "pass" if truth == "fail" else "fail"
        units[str(i)] = {r: truth if rng.random() < accuracy else other for r in ("a", "b")}
    return units


def cell(n: int, prevalence: float, accuracy: float, reps: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    truth = alpha(sample(200_000, prevalence, accuracy, rng))
    assert truth is not None
    undefined = covered = miss_lo = below = 0
    widths: list[float] = []
    for _ in range(reps):
        units = sample(n, prevalence, accuracy, rng)
        point = alpha(units)
        if point is None:
            undefined += 1
            continue
        below += point < MIN_ALPHA
        interval = alpha_interval(units, samples=1000, seed=rng.randrange(1 << 30))
        if interval is None:
            undefined += 1
            continue
        low, high = interval
        covered += low <= truth <= high
        miss_lo += low > truth
        widths.append(high - low)
    defined = max(1, reps - undefined)
    return {
        "alpha": truth,
        "undefined": undefined / reps,
        "cover": covered / defined,
        "miss_lo": miss_lo / defined,
        "width": sum(widths) / max(1, len(widths)),
        "below": below / defined,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100 samples per cell")
    ap.add_argument("--reps", type=int, default=400)
    args = ap.parse_args()
    reps = 100 if args.quick else args.reps
    print(f"bootstrap 95% interval of nominal alpha, 2 reviewers, {reps} samples per cell, 1000 resamples each")
    print(
        f"{'n':>5} {'prev':>5} {'acc':>5} {'alpha':>6} {'undef':>6} {'cover':>6} {'miss_lo':>7} {'width':>6} {'<0.667':>7}"
    )
    started = time.perf_counter()
    worst = 1.0
    for n in (20, 50, 200, 1000):
        for prevalence in (0.5, 0.2, 0.05):
            for accuracy in (0.97, 0.9, 0.85):
                r = cell(n, prevalence, accuracy, reps, seed=hash((n, prevalence, accuracy)) & 0xFFFF)
                worst = min(worst, r["cover"]) if r["undefined"] < 0.5 else worst
                print(
                    f"{n:>5} {prevalence:>5} {accuracy:>5} {r['alpha']:>6.3f} {r['undefined']:>6.2f} "
                    f"{r['cover']:>6.3f} {r['miss_lo']:>7.3f} {r['width']:>6.3f} {r['below']:>7.2f}"
                )
    print(f"worst coverage where alpha is mostly defined: {worst:.3f} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
