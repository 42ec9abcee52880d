"""Benchmark: when `gate calibrate --candidate-model` says one judge errs more often (exact McNemar,
p < 0.05), how often is that said of two judges that err equally, and how often is a real
difference found?

The two judges judge the same n labelled cases of a slice. Per case, each is right or wrong; the
paired test (gate/estimate/failure_rate.py `mcnemar_exact`) reads only the cases one of them got
wrong: b (the current judge only) and c (the candidate only). The grid:

  n       4, 8, 12, 20, 50, 100, 200, 500   (tiny slices included: where a test is easiest to fool)
  e       0.02, 0.10, 0.30                  the current judge's error rate
  shared  0, 0.5, 0.9                       the share of its errors the candidate makes too
  mix     the cases the same (homogeneous), or split in two halves where one judge is the worse
          in one half and the better in the other by the same margin (the adversary's pick: the
          overall rates are equal, every case leans one way)

Under "they err equally" (the candidate's rate = e) it prints the rejection rate: P(p < 0.05)
and, separately, the share that says the candidate errs more (the alarm a team acts on). Both
must stay at or under 5%. Then the power: the candidate's rate 1.5x, 2x and 3x e (and 0.5x), the
share of runs in which the test says so.

Homogeneous cells are computed exactly (D = b + c is binomial over n, b given D binomial over D);
mixed cells are simulated (numpy, seeded, --sims paths each).

    .venv/bin/python bench/judge_migration.py            # the whole grid (~1 CPU-min)
    .venv/bin/python bench/judge_migration.py --quick    # n up to 50, fewer paths
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import numpy as np
from scipy.stats import binom

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gate.estimate.failure_rate import mcnemar_exact  # noqa: E402

ALPHA = 0.05
SIZES = (4, 8, 12, 20, 50, 100, 200, 500)
RATES = (0.02, 0.10, 0.30)
SHARED = (0.0, 0.5, 0.9)


@functools.cache
def p_value(b: int, c: int) -> float:
    return mcnemar_exact(b, c)


def cells(e_cur: float, e_cand: float, shared: float) -> tuple[float, float, float]:
    """P(only current wrong), P(only candidate wrong), P(both wrong) for one case."""
    both = shared * min(e_cur, e_cand)
    return e_cur - both, e_cand - both, both


def exact(n: int, e_cur: float, e_cand: float, shared: float) -> tuple[float, float]:
    """P(p < alpha), P(p < alpha and c > b): exact, for n cases alike."""
    only_cur, only_cand, _ = cells(e_cur, e_cand, shared)
    disc = only_cur + only_cand
    if disc <= 0:
        return 0.0, 0.0
    reject = worse = 0.0
    share_c = only_cand / disc
    for d in range(n + 1):
        pd = float(binom.pmf(d, n, disc))
        if pd < 1e-15:
            continue
        for c in range(d + 1):
            if p_value(d - c, c) < ALPHA:
                pc = pd * float(binom.pmf(c, d, share_c))
                reject += pc
                worse += pc if c > d - c else 0.0
    return reject, worse


def mixed(n: int, e: float, shared: float, margin: float, sims: int, rng: np.random.Generator) -> tuple[float, float]:
    """Equal overall rates, every case leaning one way: half the cases the current judge errs at
    e + margin and the candidate at e - margin, the other half the reverse."""
    half = n // 2
    b = np.zeros(sims, dtype=np.int64)
    c = np.zeros(sims, dtype=np.int64)
    for size, (ec, ek) in ((half, (e + margin, e - margin)), (n - half, (e - margin, e + margin))):
        only_cur, only_cand, both = cells(ec, ek, shared)
        draws = rng.multinomial(size, [only_cur, only_cand, both, 1 - only_cur - only_cand - both], size=sims)
        b += draws[:, 0]
        c += draws[:, 1]
    ps = np.array([p_value(int(x), int(y)) for x, y in zip(b, c, strict=True)])
    hit = ps < ALPHA
    return float(hit.mean()), float((hit & (c > b)).mean())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--sims", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=46)
    args = ap.parse_args(argv)
    sizes = tuple(n for n in SIZES if n <= 50) if args.quick else SIZES
    sims = 4_000 if args.quick else args.sims
    rng = np.random.default_rng(args.seed)
    print(f"null (equal error rates): P(p < {ALPHA}) and P(says the candidate errs more), each must be <= {ALPHA}")
    print(f"{'n':>4} {'e':>5} {'shared':>6}  {'alike':>15}  {'mixed (adversary)':>18}")
    worst = 0.0
    for n in sizes:
        for e in RATES:
            for shared in SHARED:
                r, w = exact(n, e, e, shared)
                mr, mw = mixed(n, e, shared, e / 2, sims, rng)
                worst = max(worst, r, mr)
                print(f"{n:>4} {e:>5.2f} {shared:>6.1f}  {r:>7.4f} {w:>7.4f}  {mr:>9.4f} {mw:>8.4f}")
    print(f"worst rejection rate under the null over the grid: {worst:.4f} (limit {ALPHA})")
    print("\npower (homogeneous, exact): P(says the candidate errs more) when its rate is k x e; 0.5x: P(says less)")
    factors = (0.5, 1.5, 2.0, 3.0)
    print(f"{'n':>4} {'e':>5} {'shared':>6}  " + "  ".join(f"{k:>5}x" for k in factors))
    for n in sizes:
        for e in RATES:
            row = []
            for k in factors:
                r, w = exact(n, e, min(k * e, 0.99), 0.5)
                row.append(r - w if k < 1 else w)
            print(f"{n:>4} {e:>5.2f} {0.5:>6.1f}  " + "  ".join(f"{x:>6.3f}" for x in row))
    return 0 if worst <= ALPHA else 1


if __name__ == "__main__":
    sys.exit(main())
