"""Agreement statistics on a 2x2 human-vs-judge table: Wilson intervals and Cohen's kappa. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass

Z_95 = 1.96


@dataclass(frozen=True)
class Rate:
    """A proportion `k / n` with its Wilson 95% interval; `value` is None when n is 0."""

    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None

    @property
    def width(self) -> float | None:
        return None if self.low is None or self.high is None else self.high - self.low

    def to_dict(self) -> dict[str, float | int | None]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}


def wilson(k: int, n: int, z: float = Z_95) -> Rate:
    """The Wilson score interval for k successes in n trials.

    Unlike the normal approximation it stays inside [0, 1] and is honest at k = 0 or k = n,
    which is exactly where a small calibration set sits.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson({k}, {n}): need 0 <= k <= n")
    if n == 0:
        return Rate(k=0, n=0, value=None, low=None, high=None)
    p = k / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # At k = 0 (k = n) the bound is exactly 0 (1); floating point would leave dust around it.
    low = 0.0 if k == 0 else max(0.0, centre - half)
    high = 1.0 if k == n else min(1.0, centre + half)
    return Rate(k=k, n=n, value=p, low=low, high=high)


def cohen_kappa(true_pass: int, true_fail: int, false_pass: int, false_fail: int) -> float | None:
    """Cohen's kappa for human (rows) vs judge (columns) on pass/fail; None when undefined.

    Undefined when there is no case, or when chance agreement is 1 (both raters put every case
    in the same single class), which makes the denominator 0.
    """
    n = true_pass + true_fail + false_pass + false_fail
    if n == 0:
        return None
    observed = (true_pass + true_fail) / n
    human_pass = (true_pass + false_fail) / n
    judge_pass = (true_pass + false_pass) / n
    chance = human_pass * judge_pass + (1 - human_pass) * (1 - judge_pass)
    if math.isclose(chance, 1.0):
        return None
    return (observed - chance) / (1 - chance)
