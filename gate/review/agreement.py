"""Agreement among reviewers: Krippendorff's alpha (nominal), its bootstrap interval, Cohen's kappa.

Pure functions over labels by unit: `{unit: {reviewer: label}}`. Alpha takes any number of
reviewers and missing labels (a unit with fewer than two labels adds nothing); an abstention is
not a value on the boundary, so callers leave it out. Alpha is None when it is undefined: fewer
than two pairable values, or every value the same (no expected disagreement).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Units = Mapping[str, Mapping[str, str]]  # unit -> reviewer -> label
BOOTSTRAP_SAMPLES = 1000
BOOTSTRAP_SEED = 20260101  # a fixed seed: the same labels always show the same interval


@dataclass(frozen=True)
class UnitCounts:
    """One unit's share of alpha: its observed disagreement and the pairable values it adds."""

    disagreement: float  # sum over ordered pairs of different values, each weighted 1/(m_u - 1)
    values: Mapping[str, int]  # label -> how many of the unit's pairable values it is


def unit_counts(labels: Sequence[str]) -> UnitCounts | None:
    """A unit's counts, or None when it has fewer than two labels (not pairable)."""
    m = len(labels)
    if m < 2:
        return None
    values = Counter(labels)
    same = sum(n * (n - 1) for n in values.values())
    return UnitCounts((m * (m - 1) - same) / (m - 1), dict(values))


def _alpha_of(disagreement: float, totals: Mapping[str, float]) -> float | None:
    n = sum(totals.values())
    expected = n * n - sum(v * v for v in totals.values())
    if n < 2 or expected <= 0:
        return None
    return 1.0 - (n - 1) * disagreement / expected


def alpha(units: Units) -> float | None:
    """Krippendorff's alpha for nominal data, missing labels allowed."""
    counts = [c for c in (unit_counts(list(by.values())) for by in units.values()) if c is not None]
    totals: Counter[str] = Counter()
    for c in counts:
        totals.update(c.values)
    return _alpha_of(sum(c.disagreement for c in counts), totals)


def alpha_interval(
    units: Units, samples: int = BOOTSTRAP_SAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float] | None:
    """A bootstrap 95% interval of alpha: units resampled with replacement, the 2.5th and 97.5th
    percentiles of the alphas that are defined. None when alpha itself is undefined."""
    counts = [c for c in (unit_counts(list(by.values())) for by in units.values()) if c is not None]
    if alpha(units) is None:
        return None
    import numpy as np

    labels = sorted({label for c in counts for label in c.values})
    table = np.array([[c.disagreement, *(c.values.get(label, 0) for label in labels)] for c in counts], dtype=float)
    rng = np.random.default_rng(seed)
    found: list[float] = []
    per_chunk = max(1, min(samples, 2_000_000 // max(1, len(counts))))
    done = 0
    while done < samples:
        size = min(per_chunk, samples - done)
        weights = rng.multinomial(len(counts), [1.0 / len(counts)] * len(counts), size=size)
        sums = weights @ table
        for row in sums:
            value = _alpha_of(float(row[0]), dict(zip(labels, (float(v) for v in row[1:]), strict=True)))
            if value is not None:
                found.append(value)
        done += size
    if not found:
        return None
    low, high = np.percentile(np.array(found), [2.5, 97.5])
    return float(low), float(high)


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two reviewers' labels on the same units; None when chance agreement is total."""
    n = len(pairs)
    if n == 0:
        return None
    observed = sum(1 for a, b in pairs if a == b) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(first[label] * second[label] for label in first) / (n * n)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)
