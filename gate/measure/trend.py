"""The rubric trend: one graded 1-5 judgment beside the verdict, reported per slice, never a gate.

The trend is a second Ragas `DiscreteMetric` (allowed values "1".."5") judged by the same evaluator
machinery as the verdict: the same boundary (`Budget`), retries and metering, so every trend
attempt counts against the one cost cap. Its judgments go to `trend.jsonl`, never to
`records.jsonl`: they are not verdicts, and nothing in the decision reads them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.model.cases import Case
from gate.model.policy import TREND_BANDS, Trend
from gate.model.records import Record
from gate.model.trend_rubric import BAND_VALUES

if TYPE_CHECKING:
    from gate.model.result import Trend as BaseTrend

TREND_RECORDS = "trend.jsonl"


def _stats(bands: Sequence[int], errors: int, unrun: int) -> dict[str, Any]:
    dist = Counter(bands)
    return {
        "n": len(bands),
        "mean": sum(bands) / len(bands) if bands else None,
        "distribution": {v: dist.get(int(v), 0) for v in BAND_VALUES},
        "errors": errors,
        "unrun": unrun,
    }


def summarize(trend: Trend, cases: Sequence[Case], records: Sequence[Record]) -> dict[str, Any]:
    """`result.json` `trend`: per slice and overall, the mean, the band distribution, errors, unrun."""
    by_case = {r.case_id: r for r in records}
    per_slice: dict[str, tuple[list[int], list[int]]] = {}
    all_bands: list[int] = []
    errors = unrun = 0
    slice_counts: dict[str, list[int]] = {}
    for case in cases:
        bands, counts = per_slice.setdefault(case.slice, ([], [0, 0]))
        slice_counts[case.slice] = counts
        r = by_case.get(case.case_id)
        if r is not None and r.status == "ok" and r.judge_label in BAND_VALUES:
            bands.append(int(r.judge_label))
            all_bands.append(int(r.judge_label))
        elif r is not None and r.status == "error":
            counts[0] += 1
            errors += 1
        else:
            counts[1] += 1
            unrun += 1
    return {
        "name": trend.name,
        "gate": False,
        "bands": {str(b): trend.bands[b] for b in TREND_BANDS},
        "overall": _stats(all_bands, errors, unrun),
        "slices": {s: _stats(b, c[0], c[1]) for s, (b, c) in sorted(per_slice.items())},
        "cost": {
            "total": sum(r.cost for r in records),
            "input_tokens": sum(r.input_tokens for r in records),
            "output_tokens": sum(r.output_tokens for r in records),
            "http_attempts": sum(len(r.attempts) for r in records),
            # Held reservations (unanswered, usage missing) count against the same boundary.
            "budget_spent": sum(r.cost for r in records) + sum(a.held for r in records for a in r.attempts),
            "unanswered_attempts": sum(1 for r in records for a in r.attempts if a.status_code is None),
            "rate_limited": sum(1 for r in records for a in r.attempts if a.status_code == 429),
        },
    }


def read_base_trend(base: Path) -> tuple[BaseTrend | None, str | None]:
    """The `trend` of a base run (its --out dir or result.json), or why there is none to compare.

    Never an error: the base only adds a column to the report, and an absent or broken base
    artifact (the base branch never ran, it expired) must not stop this run; what is wrong with
    it (file, field, fix) is said in the report instead.
    """
    from gate.model.result import ResultProblem, load_result

    try:
        result = load_result(base / "result.json" if base.is_dir() else base, "base result")
    except ResultProblem as exc:
        return None, exc.message
    except Exception as exc:  # an OSError, a RecursionError...: still only a note
        return None, unreadable_base(base, exc)
    return (result.trend, None) if result.trend is not None else (None, "the base run has no trend")


def unreadable_base(base: Path, exc: BaseException) -> str:
    """One paragraph for a base run that could not be read in a way no check foresaw."""
    from gate.model.escape import visible

    return (
        f"{visible(base, 120)}: the base run could not be read ({type(exc).__name__}: {visible(exc, 200)}); "
        "the state does not depend on it; fix: pass a base run's --out directory (its result.json)"
    )


def _mean(stats: Mapping[str, Any] | None) -> float | None:
    mean = stats["mean"] if stats is not None else None
    return float(mean) if mean is not None else None


def compare_to_base(summary: dict[str, Any], base: BaseTrend | None, problem: str | None = None) -> dict[str, Any]:
    """Add `base` to a trend summary: the base's mean and distribution per slice, and the change."""
    if base is None or base.name != summary["name"]:
        why = problem or ("the base run has no trend" if base is None else "the base run judged another trend")
        return {**summary, "base": {"compared": False, "note": why}}
    same_bands = base.bands == summary["bands"]
    slices: dict[str, Any] = {}
    for name in sorted({*summary["slices"], *base.slices}):
        head_mean = _mean(summary["slices"].get(name))
        base_stats = base.slices.get(name)
        base_mean = base_stats.mean if base_stats is not None else None
        slices[name] = {
            "mean": base_mean,
            "distribution": base_stats.distribution.written() if base_stats is not None else None,
            "change": None if head_mean is None or base_mean is None else head_mean - base_mean,
        }
    head_all, base_all = _mean(summary["overall"]), base.overall.mean
    return {
        **summary,
        "base": {
            "compared": True,
            "same_bands": same_bands,
            "overall": {
                "mean": base_all,
                "change": None if head_all is None or base_all is None else head_all - base_all,
            },
            "slices": slices,
        },
    }
