"""The human-vs-judge comparison as a deterministic Ragas `@discrete_metric` (aligned/misaligned).

No model ever decides whether two labels match. ragas is imported only when `ragas_comparator()`
is called (by `gate calibrate`), never when this module is imported.
"""

from __future__ import annotations

from typing import Any

from gate.measure.calibrate.core import Comparator

ALIGNMENT_VALUES = ["aligned", "misaligned"]


class AlignmentError(RuntimeError):
    """The alignment metric returned no value: a defect, never a verdict."""


def labels_align(human_label: str, judge_label: str) -> str:
    """The comparison itself: exact equality of canonical labels (aliases were applied upstream)."""
    return "aligned" if human_label == judge_label else "misaligned"


def alignment_metric() -> Any:
    """The ragas metric object wrapping `labels_align`."""
    from gate.judge.discrete import discrete_metric_decorator

    discrete_metric = discrete_metric_decorator()

    @discrete_metric(name="human_judge_alignment", allowed_values=ALIGNMENT_VALUES)
    def human_judge_alignment(human_label: str, judge_label: str) -> str:
        return labels_align(human_label, judge_label)

    return human_judge_alignment


def ragas_comparator(metric: Any = None) -> Comparator:
    """A comparator that scores each distinct (human, judge) label pair once through the metric.

    The metric is deterministic, so a pair's answer is memoized: a calibration set has at most
    a handful of distinct pairs, and each `score()` builds a validation model and an event loop.
    `metric` defaults to `alignment_metric()`.
    """
    metric = alignment_metric() if metric is None else metric
    seen: dict[tuple[str, str], str] = {}

    def compare(human_label: str, judge_label: str) -> str:
        key = (human_label, judge_label)
        if key not in seen:
            result = metric.score(human_label=human_label, judge_label=judge_label)
            # ragas turns an exception or a disallowed value into `value=None`: never a verdict.
            if result.value is None:
                raise AlignmentError(f"the alignment metric gave no value for {key}: {result.reason}")
            seen[key] = str(result.value)
        return seen[key]

    return compare
