"""Benchmark: gate's own Krippendorff's alpha (gate/review/agreement.py) against the `krippendorff`
package, side by side in one run: the figures, and the bootstrap interval's time.

Why it matters: `krippendorff` was declared as a runtime dependency and never imported; this says
whether gate should compute alpha with it or keep its own (and the package only as the tests'
reference implementation). Both compute the same nominal alpha, missing labels allowed:

  figures     random label sets (2-4 reviewers, 1-40 items, 2-3 values, gaps, skewed shares):
              the largest |ours - theirs|, and how often one is undefined and the other is not
              (the package raises ValueError on a single-valued domain and returns nan when no
              disagreement is expected; gate's `alpha` returns None for both)
  bootstrap   `alpha_interval` (1,000 resamples of the units, seed 20260101, 2.5th-97.5th
              percentiles) against the same resamples (the same seed and multinomial weights) fed
              to the package: the intervals and the time of each, and their ratio

    .venv/bin/python bench/agreement_library.py
"""

from __future__ import annotations

import math
import random
import sys
import time
import warnings
from pathlib import Path

import krippendorff
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gate.review.agreement import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, Units, alpha, alpha_interval, unit_counts


def theirs(units: Units) -> float | None:
    labels = sorted({v for by in units.values() for v in by.values()})
    counts = np.array([[list(by.values()).count(v) for v in labels] for by in units.values()], dtype=float)
    try:
        value = krippendorff.alpha(value_counts=counts, level_of_measurement="nominal")
    except ValueError:  # "There has to be more than one value in the domain."
        return None
    return float(value) if math.isfinite(value) else None


def their_interval(units: Units) -> tuple[float, float]:
    """The package over the same resamples `alpha_interval` draws."""
    counts = [c for c in (unit_counts(list(by.values())) for by in units.values()) if c is not None]
    labels = sorted({v for c in counts for v in c.values})
    table = np.array([[c.values.get(v, 0) for v in labels] for c in counts], dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    weights = rng.multinomial(len(counts), [1.0 / len(counts)] * len(counts), size=BOOTSTRAP_SAMPLES)
    found = []
    for w in weights:
        try:
            value = krippendorff.alpha(value_counts=np.repeat(table, w, axis=0), level_of_measurement="nominal")
        except ValueError:
            continue
        if math.isfinite(value):
            found.append(value)
    low, high = np.percentile(np.array(found), [2.5, 97.5])
    return float(low), float(high)


def random_units(rng: random.Random) -> Units:
    reviewers, items = rng.choice([2, 3, 4]), rng.choice([1, 2, 3, 5, 10, 40])
    values = rng.choice([["pass", "fail"], ["pass", "fail", "other"]])
    skew = rng.random()
    return {
        str(i): {
            f"r{r}": values[0] if rng.random() < skew else rng.choice(values)
            for r in range(reviewers)
            if rng.random() >= 0.2
        }
        for i in range(items)
    }


def main() -> None:
    warnings.simplefilter("ignore", RuntimeWarning)  # the package's 0/0 on a set nobody could disagree on
    rng = random.Random(1)
    worst, mismatched, sets = 0.0, 0, 3000
    for _ in range(sets):
        units = random_units(rng)
        ours, other = alpha(units), theirs(units)
        if (ours is None) != (other is None):
            mismatched += 1
        elif ours is not None and other is not None:
            worst = max(worst, abs(ours - other))
    print(
        f"figures: {sets} label sets, largest |ours - krippendorff| = {worst:.1e}, undefined in one only: {mismatched}"
    )
    print(f"{'items':>6}  {'ours':>21} {'ms':>8}  {'krippendorff':>21} {'ms':>8}  {'ratio':>6}")
    for n in (8, 50, 500, 5000):
        units = {
            str(i): {"a": rng.choice(["pass", "fail"]), "b": rng.choice(["pass", "pass", "fail"])} for i in range(n)
        }
        t0 = time.perf_counter()
        ours_i = alpha_interval(units)
        t1 = time.perf_counter()
        theirs_i = their_interval(units)
        t2 = time.perf_counter()
        assert ours_i is not None
        print(
            f"{n:>6}  {ours_i[0]:>10.6f}-{ours_i[1]:<10.6f} {(t1 - t0) * 1000:>8.1f}  "
            f"{theirs_i[0]:>10.6f}-{theirs_i[1]:<10.6f} {(t2 - t1) * 1000:>8.1f}  {(t2 - t1) / (t1 - t0):>5.1f}x"
        )


if __name__ == "__main__":
    main()
