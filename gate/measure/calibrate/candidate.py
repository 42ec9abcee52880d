"""Two judges side by side on the same labelled cases: the one a policy names and a candidate to move to.

Pure: from the two `Calibration`s (gate/measure/calibrate/core.py) of the same lane's records, per
slice and over every slice: each judge's sensitivity (`Se`, the failures people labelled that it
fails) and specificity (`Sp`, the passes it passes), each with its Wilson 95% interval; and an exact
paired test of their errors on the cases both judged (McNemar: under "they err equally", each case
only one of them got wrong is that one's with probability 1/2; `gate.estimate.failure_rate.mcnemar_exact`).
What the comparison cannot see, it says: cases only one judge completed are counted beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gate.estimate.failure_rate import mcnemar_exact
from gate.measure.calibrate.core import Calibration, CaseVerdict
from gate.measure.calibrate.stats import Rate, wilson
from gate.model.wording import plural

ALL = "all slices"
WRONG = frozenset({"false_pass", "false_fail"})
SIGNIFICANT = 0.05  # the level the summary names a difference at; the p-value itself is always shown
# Below 6 cases that only one judge got wrong the exact test cannot reach p < 0.05 (5 of 5 one way:
# p = 0.0625), whatever the judges: bench/judge_migration.py shows how many labelled cases it takes.
FEWEST_TO_TELL = 6


@dataclass(frozen=True)
class Accuracy:
    """One judge on one slice: Se and Sp with their intervals, and the cases it left without a verdict."""

    se: Rate  # true_fail / (true_fail + false_pass)
    sp: Rate  # true_pass / (true_pass + false_fail)
    completed: int
    not_completed: int  # errors, review, unrun: never inside a rate

    def to_dict(self) -> dict[str, Any]:
        return {
            "se": {"k": self.se.k, **self.se.to_dict()},
            "sp": {"k": self.sp.k, **self.sp.to_dict()},
            "completed": self.completed,
            "not_completed": self.not_completed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Accuracy:
        se, sp = data["se"], data["sp"]
        return cls(wilson(se["k"], se["n"]), wilson(sp["k"], sp["n"]), data["completed"], data["not_completed"])


@dataclass(frozen=True)
class PairedErrors:
    """Both judges' errors on the cases both completed."""

    n: int
    both_right: int
    current_only_wrong: int
    candidate_only_wrong: int
    both_wrong: int

    @property
    def p_value(self) -> float:
        return mcnemar_exact(self.current_only_wrong, self.candidate_only_wrong)

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "both_right": self.both_right,
            "current_only_wrong": self.current_only_wrong,
            "candidate_only_wrong": self.candidate_only_wrong,
            "both_wrong": self.both_wrong,
            "p_value": self.p_value,
            "test": "exact McNemar (two-sided binomial on the discordant cases)",
        }

    def in_words(self) -> str:
        """`McNemar p = 0.020: the candidate errs less often`, or why the cases show no difference."""
        p = self.p_value
        if self.current_only_wrong + self.candidate_only_wrong < FEWEST_TO_TELL:
            return f"McNemar p = {p:.2f}: too few to tell apart"
        if self.current_only_wrong == self.candidate_only_wrong or p >= SIGNIFICANT:
            return f"McNemar p = {p:.2f}: no difference shown"
        more = "more" if self.candidate_only_wrong > self.current_only_wrong else "less"
        return f"McNemar p = {p:.3f}: the candidate errs {more} often"


@dataclass(frozen=True)
class SliceComparison:
    current: Accuracy
    candidate: Accuracy
    paired: PairedErrors
    labelled: int  # the slice's labelled cases in either judge's records

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SliceComparison:
        """A slice's comparison as migration.json holds it."""
        p = data["paired"]
        pair = PairedErrors(
            p["n"], p["both_right"], p["current_only_wrong"], p["candidate_only_wrong"], p["both_wrong"]
        )
        return cls(Accuracy.from_dict(data["current"]), Accuracy.from_dict(data["candidate"]), pair, data["labelled"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "labelled": self.labelled,
            "current": self.current.to_dict(),
            "candidate": self.candidate.to_dict(),
            "paired": self.paired.to_dict(),
        }


def accuracy(verdicts: Iterable[CaseVerdict]) -> Accuracy:
    counts = {"true_pass": 0, "true_fail": 0, "false_pass": 0, "false_fail": 0}
    not_completed = 0
    for v in verdicts:
        if v.bucket == "completed" and v.outcome in counts:
            counts[v.outcome] += 1
        else:
            not_completed += 1
    return Accuracy(
        se=wilson(counts["true_fail"], counts["true_fail"] + counts["false_pass"]),
        sp=wilson(counts["true_pass"], counts["true_pass"] + counts["false_fail"]),
        completed=sum(counts.values()),
        not_completed=not_completed,
    )


def paired(current: Mapping[str, CaseVerdict], candidate: Mapping[str, CaseVerdict]) -> PairedErrors:
    cells = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for case_id, mine in current.items():
        theirs = candidate.get(case_id)
        if theirs is None or mine.bucket != "completed" or theirs.bucket != "completed":
            continue
        cells[(mine.outcome in WRONG, theirs.outcome in WRONG)] += 1
    return PairedErrors(
        n=sum(cells.values()),
        both_right=cells[(False, False)],
        current_only_wrong=cells[(True, False)],
        candidate_only_wrong=cells[(False, True)],
        both_wrong=cells[(True, True)],
    )


def compare_judges(current: Calibration, candidate: Calibration) -> dict[str, SliceComparison]:
    """Per slice (worst first, as calibration lists them), then `ALL`."""
    mine = {v.case_id: v for v in current.verdicts}
    theirs = {v.case_id: v for v in candidate.verdicts}
    slices = list(dict.fromkeys([*current.slices, *candidate.slices]))
    out: dict[str, SliceComparison] = {}
    for name in [*slices, ALL]:
        ids = {i for i, v in {**mine, **theirs}.items() if name == ALL or v.slice == name}
        a = {i: v for i, v in mine.items() if i in ids}
        b = {i: v for i, v in theirs.items() if i in ids}
        out[name] = SliceComparison(accuracy(a.values()), accuracy(b.values()), paired(a, b), len(ids))
    return out


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.0f}%"


def rate_text(rate: Rate) -> str:
    """`2/3 = 67% (21-94%)`, or `no case` when nothing was labelled that way."""
    if rate.n == 0:
        return "no case"
    return f"{rate.k}/{rate.n} = {_pct(rate.value)} ({_pct(rate.low)}-{_pct(rate.high)})"


def slice_lines(name: str, c: SliceComparison) -> list[str]:
    """A slice's comparison in four plain lines (each under 100 columns for an ordinary name)."""
    both = c.paired
    head = f"{name}: {plural(c.labelled, 'labelled case')}, {both.n} judged by both"
    gaps = [
        f"{who} left {k} without a verdict"
        for who, k in (("current", c.current.not_completed), ("candidate", c.candidate.not_completed))
        if k
    ]
    if gaps:
        head += f" ({'; '.join(gaps)})"
    return [
        head,
        f"  Se (fails caught)   current {rate_text(c.current.se):<22}  candidate {rate_text(c.candidate.se)}",
        f"  Sp (passes kept)    current {rate_text(c.current.sp):<22}  candidate {rate_text(c.candidate.sp)}",
        f"  wrong: only current {both.current_only_wrong}, only candidate {both.candidate_only_wrong}, both "
        f"{both.both_wrong}; {both.in_words()}",
    ]
