"""`stop_when_decided` while the run is under way: stop scheduling once `quality_failed` is certain.

After each judgment that disagrees with its human label, and after each later judgment of that
case (one that agrees can complete a case whose majority is a false pass; a violated pair stops the
runner by its own check), `hopeless` (`gate.decide.settled.hopeless`, bound to the lane by `gate run`:
a stage before the decision is given it, never imports it) decides with the decision's own rules
whether `quality_failed` is certain. When it is, the run schedules nothing more: the judgments in
flight finish and are billed, and `decide` marks the cases never sent `not_needed`.

On a product lane the application's answers carry no human label: each answer's verdict, once its
repeats are in, goes to the lane's incremental check instead (`AnswerCheck`, bound by `gate run` to
`gate.decide.product_stop.ProductStopCheck`), which updates that slice's counts and asks its
interval once, so a look costs the same at the ten-thousandth answer as at the first. Such a lane
is judged in one process (its looks are one sequence, in the order the answers complete, which
is the order their records are written and `gate decide` replays).

A verdict already certain before the first judgment (a gating check failed a case people did not
label fail) is found as the rule is made: the run then sends nothing, as its dry run says.

Worker processes share one flag (shared memory, fork-inherited): the worker that sees the verdict
decided stops every other one at its next case. Each process asks with what it has recorded plus
the controls (judged before the fork): the others' cases are taken at their labels, which only
errs towards judging more, never towards stopping wrongly.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gate.model.records import Record, majority

# The records so far -> whether even their most favourable completion is quality_failed.
Hopeless = Callable[[Sequence[Record]], bool]


class AnswerCheck(Protocol):
    """A product lane's stop, one answer at a time (gate.decide.product_stop.ProductStopCheck)."""

    def add(self, case_id: str, slice: str, judged_fail: bool) -> bool:
        """One answer's verdict; whether the lane is now decided."""
        ...


@dataclass
class StopWhenDecided:
    hopeless: Hopeless
    records: list[Record] = field(default_factory=list)
    started: set[str] = field(default_factory=set)  # cases this process has sent a judgment of
    pending: set[str] = field(default_factory=set)  # cases whose next judgment may decide (see `after`)
    _flag: Any = None  # a shared byte across worker processes (None in one process)
    _local: bool = False
    answers: AnswerCheck | None = None  # a product lane's check of its unlabelled answers
    repeats: int = 1
    _labels: dict[str, dict[int, str]] = field(default_factory=dict)  # an answer's repeats so far

    @classmethod
    def of(
        cls,
        hopeless: Hopeless,
        *,
        prior: Iterable[Record] = (),
        shared: bool = False,
        answers: AnswerCheck | None = None,
        repeats: int = 1,
    ) -> StopWhenDecided:
        flag = multiprocessing.get_context("fork").RawValue("b", 0) if shared else None
        rule = cls(hopeless, list(prior), set(), set(), flag, answers=answers, repeats=repeats)
        for r in rule.records:
            if rule._is_answer(r):
                rule._answer(r)
            else:
                rule._watch(r)
        if not rule.decided and hopeless(rule.records):
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
        self.records.append(record)
        if self.decided:
            return True
        if self._is_answer(record):
            return self._answer(record)
        asked = record.case_id in self.pending
        if not (self._watch(record) or asked) or record.status != "ok":
            return False
        if not self.hopeless(self.records):
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
        """An application's answer: once every repeat of it is in, its verdict goes to the check."""
        if record.status != "ok" or self.answers is None:
            return self.decided
        labels = self._labels.setdefault(record.case_id, {})
        labels[record.repeat_index] = record.judge_label or ""
        verdict = majority(list(labels.values())) if len(labels) >= self.repeats else None
        if verdict not in ("pass", "fail") or not self.answers.add(record.case_id, record.slice, verdict == "fail"):
            return self.decided
        return self._decide()

    def _watch(self, record: Record) -> bool:
        """Whether `record` disagrees with its label; its case is then watched: its next repeats may
        complete a majority that is a false pass, and so decide."""
        if record.status != "ok" or record.judge_label == record.human_label:
            return False
        self.pending.add(record.case_id)
        return True
