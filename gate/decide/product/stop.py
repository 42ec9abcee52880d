"""A product lane that stops once decided: each slice's failure rate, updated one answer at a time.

The lane looks after every answer it judges (`stop_when_decided`), so a slice's interval is the
confidence sequence's (gate/estimate/failure_rate.py, `sequential`), valid at every look at once.
A slice is decided at the first look whose interval lies within its limit (`passed`) or above it
(`exceeded`), and that look's verdict is the slice's: the answers judged after it (in flight when
the lane stopped, or judged because another slice was still open) are recorded and billed, and
never un-decide it. Only `exceeded` may still follow a `passed` look, when the answers judged
since fail the slice on their own interval: what was judged never passes what it already fails.
The lane is decided once any slice is `exceeded` or every slice it judges has `passed`, and every
answer of a zero-tolerance slice (`max_failures`: people confirm each answer the judge fails there)
has come back.

`ProductStopCheck.add` takes one answer's verdict and keeps, per slice, the two counts `k` (judged
fail) and `n` (judged) and the look that decided it: one interval evaluation per answer, never a
rebuild of the decision. The looks follow the seeded order the lane sends its answers in
(gate/plan/selection.py), an answer being looked at once all those before it are back. The run's
stop feeds it each answer as it comes back; the decision (gate/decide/product/verdict.py) feeds it the
recorded answers of the same plan, in the same order, so the look the run stopped at is the look
`gate decide` finds, and its verdict is the same. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gate.estimate import failure_rate as fr


@dataclass(frozen=True)
class Look:
    """The look that decided a slice: its verdict and interval on the first `n` answers judged."""

    verdict: fr.Verdict  # "passed" or "exceeded"
    n: int
    judged_fail: int
    rate: fr.FailureRate


@dataclass
class SliceLooks:
    """One slice's answers, counted as they are judged, and the look that decided it (if any)."""

    limit: float
    judge: fr.JudgeAccuracy
    confidence: float
    k: int = 0
    n: int = 0
    look: Look | None = None

    def add(self, judged_fail: bool) -> None:
        """One more answer judged: update the counts and ask the interval once."""
        self.n += 1
        self.k += int(judged_fail)
        if self.look is not None and self.look.verdict == "exceeded":
            return  # nothing later can lift it
        rate = fr.failure_rate(
            judged_fail=self.k, n=self.n, judge=self.judge, confidence=self.confidence, sequential=True
        )
        verdict = fr.slice_verdict(rate, self.limit)
        if verdict == "exceeded" or (verdict == "passed" and self.look is None):
            self.look = Look(verdict, self.n, self.k, rate)

    @property
    def verdict(self) -> fr.Verdict | None:
        return self.look.verdict if self.look is not None else None


class ProductStopCheck:
    """Whether a product lane is decided, one answer at a time.

    `slices`: the slices the lane judges answers of. `limits` and `judges` hold each one's
    `max_failure_rate` and the judge's accuracy there; a slice missing from either can never pass
    (its verdict needs figures it lacks), so the lane then stops only on an `exceeded` slice.

    `order`: the lane's answers in the seeded order it sends them in. The looks then follow that
    order, not the order the verdicts come back in: an answer is looked at once every answer before
    it has come back, so a judge that is slower on failing answers cannot hide them from a look (the
    interval is valid only over an order unrelated to the answers). Without `order`, the answers are
    looked at as they are added.

    `add(case_id, slice, judged_fail)`: `judged_fail` True or False for an answer judged fail or
    pass; None for one that came back without a verdict (an evaluator error, a tie between repeats),
    which is never counted but lets the look go past it. A case is counted once: a second answer of
    the same case id (a resumed run's judgment read again) changes nothing.
    """

    def __init__(
        self,
        slices: Iterable[str],
        limits: Mapping[str, float],
        judges: Mapping[str, fr.JudgeAccuracy],
        confidence: float,
        order: Sequence[str] | None = None,
        whole: Mapping[str, int] | None = None,
    ) -> None:
        self.slices = frozenset(slices)
        # Zero-tolerance slices (`max_failures`) and how many answers each holds: people confirm every
        # answer the judge fails there, so the lane may not pass before all of them are back.
        self.whole = dict(whole or {})
        self._come_back: dict[str, int] = {}
        self.looks: dict[str, SliceLooks] = {
            name: SliceLooks(limits[name], judges[name], confidence)
            for name in sorted(self.slices)
            if name in limits and name in judges
        }
        self.seen: set[str] = set()
        self._decided = False
        self.order = tuple(order) if order is not None else None
        self._ordered = frozenset(self.order or ())
        self._next = 0  # the first answer of `order` not looked at yet
        self._back: dict[str, tuple[str, bool | None]] = {}  # come back, waiting for those before them

    def add(self, case_id: str, slice: str, judged_fail: bool | None) -> bool:
        """One answer come back (judged fail, pass, or no verdict: None); whether the lane is now decided."""
        if case_id in self.seen:
            return self._decided
        self.seen.add(case_id)
        if self.order is None:
            self._look(slice, judged_fail)
            return self._decided
        if case_id not in self._ordered:
            return self._decided  # not an answer the lane sends: never looked at
        self._back[case_id] = (slice, judged_fail)
        while self._next < len(self.order) and self.order[self._next] in self._back:
            self._look(*self._back.pop(self.order[self._next]))
            self._next += 1
        return self._decided

    def _look(self, slice: str, judged_fail: bool | None) -> None:
        self._come_back[slice] = self._come_back.get(slice, 0) + 1
        looks = self.looks.get(slice)
        if looks is not None and judged_fail is not None:
            looks.add(judged_fail)
        if self._decided or looks is None:
            return  # decided stays so: a later answer may only turn a passed slice exceeded
        passing = (looks.verdict == "passed" or slice in self.whole) and self._all_passed()
        self._decided = looks.verdict == "exceeded" or passing

    def _all_passed(self) -> bool:
        """Every slice passed, and every zero-tolerance slice has all its answers back."""
        return (
            len(self.looks) == len(self.slices)
            and all(s.verdict == "passed" for s in self.looks.values())
            and all(self._come_back.get(name, 0) >= count for name, count in self.whole.items())
        )

    @property
    def decided(self) -> bool:
        return self._decided

    def look(self, slice: str) -> Look | None:
        """The look that decided `slice`, or None while it is open."""
        looks = self.looks.get(slice)
        return looks.look if looks is not None else None
