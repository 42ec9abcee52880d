"""Strata: raw rates beside production-prevalence-weighted rates, and oversampled strata. Pure.

A suite is usually built to over-represent rare, risky traffic, so its raw false-pass rate is not
the rate production would see. With `strata: {name: {prevalence: p}}` in the policy and `stratum`
on the cases, each completed case of stratum s weighs p_s / n_s (n_s: completed cases of s), so
every stratum counts by its production share whatever its sample size:

    weighted false-pass rate = sum_s w_s * false_pass_s / sum_s w_s * (false_pass_s + true_fail_s)

and likewise for false fails (over human-pass cases) and agreement (over all completed cases).
Strata with no completed case carry no weight; the prevalence the weighted figures cover is shown.
A stratum is oversampled when its share of the sample exceeds OVERSAMPLED_FACTOR x its prevalence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

OVERSAMPLED_FACTOR = 1.5
CONFUSION = ("true_pass", "true_fail", "false_pass", "false_fail")


@dataclass(frozen=True, kw_only=True)
class Confusion:
    """The completed judgments by their outcome against the human label (CONFUSION)."""

    true_pass: int = 0
    true_fail: int = 0
    false_pass: int = 0
    false_fail: int = 0

    @property
    def completed(self) -> int:
        return self.true_pass + self.true_fail + self.false_pass + self.false_fail


@dataclass(frozen=True)
class StratumRow(Confusion):
    name: str
    prevalence: float
    cases: int  # every case of the stratum in the sample (completed or not)
    share: float  # cases / all stratified cases

    @property
    def oversampled(self) -> bool:
        return self.cases > 0 and self.share > OVERSAMPLED_FACTOR * self.prevalence

    def to_dict(self) -> dict[str, Any]:
        return {
            "prevalence": self.prevalence,
            "cases": self.cases,
            "sample_share": self.share,
            "completed": self.completed,
            "true_pass": self.true_pass,
            "true_fail": self.true_fail,
            "false_pass": self.false_pass,
            "false_fail": self.false_fail,
            "oversampled": self.oversampled,
        }


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


@dataclass(frozen=True)
class Rates:
    false_pass_rate: float | None
    false_fail_rate: float | None
    agreement: float | None

    def to_dict(self) -> dict[str, float | None]:
        return {
            "false_pass_rate": self.false_pass_rate,
            "false_fail_rate": self.false_fail_rate,
            "agreement": self.agreement,
        }


def _rates(rows: Iterable[StratumRow], weight: Mapping[str, float]) -> Rates:
    fp = tf = ff = tp = 0.0
    for r in rows:
        w = weight.get(r.name, 0.0)
        fp, tf, ff, tp = fp + w * r.false_pass, tf + w * r.true_fail, ff + w * r.false_fail, tp + w * r.true_pass
    return Rates(_ratio(fp, fp + tf), _ratio(ff, ff + tp), _ratio(tp + tf, fp + tf + ff + tp))


@dataclass(frozen=True)
class Weighting:
    rows: tuple[StratumRow, ...]
    unstratified: int  # cases without a stratum (left out of both columns)
    raw: Rates
    weighted: Rates
    prevalence_covered: float  # the production share the weighted figures speak for

    @property
    def oversampled(self) -> list[str]:
        return [r.name for r in self.rows if r.oversampled]

    def to_dict(self) -> dict[str, Any]:
        return {
            "oversampled_factor": OVERSAMPLED_FACTOR,
            "strata": {r.name: r.to_dict() for r in self.rows},
            "oversampled": self.oversampled,
            "unstratified_cases": self.unstratified,
            "raw": self.raw.to_dict(),
            "prevalence_weighted": self.weighted.to_dict(),
            "prevalence_covered": self.prevalence_covered,
        }


def weigh(prevalence: Mapping[str, float], observations: Iterable[tuple[str | None, str | None]]) -> Weighting:
    """Tally (stratum, outcome) pairs (outcome one of CONFUSION, or None when not completed)."""
    counts: dict[str, dict[str, int]] = {name: dict.fromkeys(("cases", *CONFUSION), 0) for name in prevalence}
    unstratified = 0
    for stratum, outcome in observations:
        if stratum is None or stratum not in counts:
            unstratified += 1  # an unknown stratum is also a validator finding
            continue
        counts[stratum]["cases"] += 1
        if outcome in CONFUSION:
            counts[stratum][outcome] += 1
    total = sum(c["cases"] for c in counts.values())
    rows = tuple(
        StratumRow(
            name=name,
            prevalence=prevalence[name],
            cases=c["cases"],
            share=c["cases"] / total if total else 0.0,
            **{k: c[k] for k in CONFUSION},
        )
        for name, c in counts.items()
    )
    raw = _rates(rows, {r.name: 1.0 for r in rows})
    weights = {r.name: r.prevalence / r.completed for r in rows if r.completed}
    covered = sum(r.prevalence for r in rows if r.completed)
    return Weighting(rows, unstratified, raw, _rates(rows, weights), covered)
