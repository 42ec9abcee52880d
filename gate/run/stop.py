"""`stop_when_decided` while the run is under way: stop scheduling once `quality_failed` is certain.

Every judgment goes to the lane's running decision (`RunningDecision`: `gate.decide.settled.Settling`,
bound to the lane by `gate run`: a stage before the decision is given it, never imports it), which
keeps of it what the decision keeps, never the record. After each judgment that disagrees with its
human label, and after each later judgment of that case (one that agrees can complete a case whose
majority is a false pass; a violated pair stops the runner by its own check), it decides with the
decision's own rules whether `quality_failed` is certain. When it is, the run schedules nothing more: the judgments in
flight finish and are billed, and `decide` marks the cases never sent `not_needed`.

On a product lane the application's answers carry no human label: each answer's verdict, once its
repeats are in, goes to the lane's incremental check instead (`AnswerCheck`, bound by `gate run` to
`gate.decide.product.stop.ProductStopCheck`), which updates that slice's counts and asks its
interval once, so a look costs the same at the ten-thousandth answer as at the first. Its looks
follow the lane's seeded order (an answer is looked at once those before it are back), which
`gate decide` follows too; such a lane is judged in one process, so the looks are one sequence.

A verdict already certain before the first judgment (a gating check failed a case people did not
label fail) is found as the rule is made: the run then sends nothing, as its dry run says.

Worker processes share one flag (shared memory, fork-inherited): the worker that sees the verdict
decided stops every other one at its next case. Each process asks with what it has recorded plus
the controls (judged before the fork): the others' cases are taken at their labels, which only
errs towards judging more, never towards stopping wrongly.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gate.model.records import Record, majority

# Errors that mean a judgment was never made (gate.decide.evidence's unrun kinds): not back yet.
NOT_JUDGED = frozenset({"budget", "cancelled"})


class RunningDecision(Protocol):
    """The decision over the judgments so far, one at a time (gate.decide.settled.Settling)."""

    def add(self, record: Record) -> None:
        """One more judgment."""
        ...

    def hopeless(self) -> bool:
        """Whether even the most favourable completion of the judgments so far is `quality_failed`."""
        ...


class AnswerCheck(Protocol):
    """A product lane's stop, one answer at a time (gate.decide.product.stop.ProductStopCheck)."""

    def add(self, case_id: str, slice: str, judged_fail: bool | None) -> bool:
        """One answer back: judged fail, pass, or no verdict (None); whether the lane is now decided."""
        ...


@dataclass
class StopWhenDecided:
    decision: RunningDecision
    started: set[str] = field(default_factory=set)  # cases this process has sent a judgment of
    pending: set[str] = field(default_factory=set)  # cases whose next judgment may decide (see `after`)
    _flag: Any = None  # a shared byte across worker processes (None in one process)
    _local: bool = False
    answers: AnswerCheck | None = None  # a product lane's check of its unlabelled answers
    repeats: int = 1
    _labels: dict[str, dict[int, str | None]] = field(default_factory=dict)  # an answer's repeats so far

    @classmethod
    def of(
        cls,
        decision: RunningDecision,
        *,
        prior: Iterable[Record] = (),
        shared: bool = False,
        answers: AnswerCheck | None = None,
        repeats: int = 1,
    ) -> StopWhenDecided:
        flag = multiprocessing.get_context("fork").RawValue("b", 0) if shared else None
        rule = cls(decision, set(), set(), flag, answers=answers, repeats=repeats)
        earlier = False
        for r in prior:
            earlier = True
            decision.add(r)
            if rule._is_answer(r):
                rule._answer(r)
            else:
                rule._watch(r)
        if not earlier and decision.hopeless():
            rule._decide()  # decided before the first judgment (a gating check failed a case): send nothing
        return rule

    @property
    def decided(self) -> bool:
        """Whether any process of the run found the verdict decided."""
        return bool(self._flag.value) if self._flag is not None else self._local

    def may_send(self, case_id: str) -> bool:
        """Whether a judgment of this case may still be sent: always before the verdict is decided;
        after it, only the remaining repeats of a case already started, so no case's verdict is cut
        in two (its other repeats are what makes its false pass a verdict)."""
        return not self.decided or case_id in self.started

    def after(self, record: Record) -> bool:
        """Take one more judgment; whether the verdict is now decided (scheduling should stop)."""
        self.decision.add(record)
        if self.decided:
            return True
        if self._is_answer(record):
            return self._answer(record)
        asked = record.case_id in self.pending
        if not (self._watch(record) or asked) or record.status != "ok":
            return False
        if not self.decision.hopeless():
            return False
        return self._decide()

    def _decide(self) -> bool:
        if self._flag is not None:
            self._flag.value = 1
        self._local = True
        return True

    def _is_answer(self, record: Record) -> bool:
        return self.answers is not None and record.human_label is None and record.control_role is None

    def _answer(self, record: Record) -> bool:
        """An application's answer: once every repeat of it is back, its verdict (or that it has none:
        an error, a tie) goes to the check. A repeat never judged (budget, interruption) is not back."""
        if self.answers is None:
            return self.decided
        if record.status == "ok":
            mark: str | None = record.judge_label or ""
        elif record.status == "error" and record.error_kind not in NOT_JUDGED:
            mark = None
        else:
            return self.decided
        marks = self._labels.setdefault(record.case_id, {})
        marks[record.repeat_index] = mark
        if len(marks) < self.repeats:
            return self.decided
        labels = [m for m in marks.values() if m is not None]
        verdict = majority(labels) if len(labels) == len(marks) else None
        judged_fail = verdict == "fail" if verdict in ("pass", "fail") else None
        if not self.answers.add(record.case_id, record.slice, judged_fail):
            return self.decided
        return self._decide()

    def _watch(self, record: Record) -> bool:
        """Whether `record` disagrees with its label; its case is then watched: its next repeats may
        complete a majority that is a false pass, and so decide."""
        if record.status != "ok" or record.judge_label == record.human_label:
            return False
        self.pending.add(record.case_id)
        return True
