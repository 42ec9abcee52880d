"""The judging of one plan: `Runner` judges its cases, controls first, under the hard cost boundary,
stopping at a failed control, a violated pair, a failure of its own or a signal; `judge_all` runs it
on an event loop. Its own module so that `gate.commands.run` (one process) and `gate.run.workers` (each forked
worker) both drive it without importing each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gate.judge import Evaluator, Judgment, partial_judgment
from gate.judge.budget import SEND_GATE, Budget, SendGate
from gate.judge.journal import CURRENT as JOURNAL_CONTEXT
from gate.judge.journal import AttemptJournal, JournalContext
from gate.judge.pacing import Pacer, pacing
from gate.judge.vetting import vet_record
from gate.model.cases import Case, Dataset
from gate.model.lineage import Lineage
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy
from gate.model.records import Record, RecordsFile, RecordShard, RecordWriter, majority
from gate.plan.selection import Plan
from gate.run.lineage import JudgeSettings
from gate.run.outdir import describe
from gate.run.progress import Progress
from gate.run.recording import make_record, write_or_keep
from gate.run.signals import STOP_SIGNALS, take
from gate.run.stop import StopWhenDecided
from gate.validate.case_checks import NO_CHECKS, CheckResults


@dataclass(frozen=True)
class JudgingTools:
    """What a lane needs to judge, given to a `Runner` whole: the evaluator, the budget it reserves
    against, the journal its attempts are written ahead to, the records sink and the progress it
    reports to. Each forked worker judges with its own evaluator, records file and progress."""

    evaluator: Evaluator
    budget: Budget
    writer: RecordWriter
    progress: Progress
    journal: AttemptJournal | None = None
    # The run's one rate-limit pacer (gate/judge/pacing.py): every judgment of every share and
    # worker admits its requests through it. None: unpaced.
    pacer: Pacer | None = None


@dataclass(frozen=True)
class RecordContext:
    """What turns a judgment into a records line: the policy, the run's lineage and judge settings,
    the dataset, and the deterministic checks' values."""

    loaded: LoadedPolicy
    dataset: Dataset
    lineage: Lineage
    judge: JudgeSettings
    check_results: CheckResults = NO_CHECKS
    shard: RecordShard | None = None  # `--shard I/N`: written on every record (a merge decides controls per shard)


class Runner:
    """Judges one plan with its tools; holds the run's state (why it stopped, the verdicts it checks
    mid-run), never its records: each is written to the records file as it is made and leaves
    memory (only one the file could not take stays, in `unwritten`), so a run holds the same memory
    at its hundred-thousandth judgment as at its first.

    A share of the plan (the controls judged first, a worker's cases) is a new Runner over the same
    context (`for_share`), starting with empty state: nothing is copied and reset by hand.
    """

    def __init__(
        self,
        plan: Plan,
        tools: JudgingTools,
        context: RecordContext,
        *,
        reuse: dict[tuple[str, int], Record] | None = None,
        waived_pairs: set[str] | None = None,
        stop_rule: StopWhenDecided | None = None,
    ) -> None:
        self.plan, self.tools, self.context = plan, tools, context
        self.stop_rule = stop_rule  # the lane's `stop_when_decided` (gate/run/stop.py); None: judge everything
        self.reuse = reuse if reuse is not None else {}
        self.waived_pairs = waived_pairs if waived_pairs is not None else set()  # an active pair_violated override
        # Where this runner's records start in the records file (those of an earlier attempt, or
        # recovered from its journal, come before), and those the file could not take.
        self.first_byte = tools.writer.size()
        self.unwritten: list[Record] = []
        # case id -> labels of its completed judgments, for the control and pair checks mid-run:
        # of the controls and the pairs' members only (no other verdict is looked at before the end)
        self.watched = {c.case_id for c in plan.scheduled if c.is_control or c.pair is not None}
        self.ok_labels: dict[str, list[str]] = {}
        self.pair_members: dict[str, list[Case]] = {}
        for c in plan.scheduled:
            if c.pair is not None:
                self.pair_members.setdefault(c.pair.id, []).append(c)
        self.stop_reason: str | None = None
        self.sent_cases: set[str] = set()  # cases a request of which went out (in this process)
        self.stopped_by: str | None = None  # the signal that cancelled the run (SIGINT, SIGTERM, SIGHUP)
        self.tasks: set[asyncio.Task[None]] = set()
        # Why the run stopped on a failure of its own (outputs not writable, a bug in a worker).
        self.failure_kind: str | None = None  # "output_failed" | "internal_error"
        self.failure: str | None = None

    def for_share(
        self,
        plan: Plan,
        tools: JudgingTools | None = None,
        *,
        loaded: LoadedPolicy | None = None,
        pairs: bool = True,
    ) -> Runner:
        """A runner of part of this plan (same reused judgments and waivers), fresh state; `loaded`
        replaces the policy (a worker's share of the concurrency). `pairs=False`: the share checks
        no pair mid-run (its mates may be judged elsewhere)."""
        context = self.context if loaded is None else dataclasses.replace(self.context, loaded=loaded)
        share = Runner(
            plan,
            tools or self.tools,
            context,
            reuse=self.reuse,
            waived_pairs=self.waived_pairs,
            stop_rule=self.stop_rule,
        )
        if not pairs:
            share.pair_members = {}
        return share

    def absorb(self, share: Runner) -> None:
        """Take in what a share judged in this process (the controls): its verdicts, the records its
        file could not take and why it stopped, as if this runner had judged them."""
        self.unwritten += share.unwritten
        for case_id, labels in share.ok_labels.items():
            self.ok_labels.setdefault(case_id, []).extend(labels)
        self.stop_reason = share.stop_reason
        self.stopped_by = self.stopped_by or share.stopped_by
        if self.failure is None:
            self.failure_kind, self.failure = share.failure_kind, share.failure

    # The tools and context by name, for the code that reads a run's runner.
    @property
    def loaded(self) -> LoadedPolicy:
        return self.context.loaded

    @property
    def dataset(self) -> Dataset:
        return self.context.dataset

    @property
    def lineage(self) -> Lineage:
        return self.context.lineage

    @property
    def judge(self) -> JudgeSettings:
        return self.context.judge

    @property
    def check_results(self) -> CheckResults:
        return self.context.check_results

    @property
    def evaluator(self) -> Evaluator:
        return self.tools.evaluator

    @property
    def budget(self) -> Budget:
        return self.tools.budget

    @property
    def writer(self) -> RecordWriter:
        return self.tools.writer

    @property
    def progress(self) -> Progress:
        return self.tools.progress

    @property
    def journal(self) -> AttemptJournal | None:
        return self.tools.journal

    @property
    def pacer(self) -> Pacer | None:
        return self.tools.pacer

    def to_record(self, case: Case, repeat: int, j: Judgment) -> Record:
        # A cached verdict is read back from storage CI restores: it meets the same contract.
        return vet_record(self._make_record(case, repeat, j), self.loaded.policy.metric, case)

    def _make_record(self, case: Case, repeat: int, j: Judgment) -> Record:
        return make_record(
            case,
            repeat,
            j,
            self.loaded,
            self.lineage,
            self.plan.lane,
            self.evaluator.ragas_version,
            self.judge,
            self.check_results.for_record(case.case_id),
            self.plan.order_seed,
            self.context.shard,
            self.plan.audit_sizing.get(case.slice),
        )

    def emit(self, record: Record, line: bytes | None = None) -> None:
        """Record one judgment: remembered for the checks mid-run, then written (`line`: as a
        worker wrote it) and let go; kept in memory only when the records file cannot take it."""
        self.remember(record)
        self.keep(record, line)

    def keep(self, record: Record, line: bytes | None = None) -> None:
        """Write one record to the records file; after a write failed, keep it in `unwritten`
        instead, for result.json."""
        if self.failure_kind == "output_failed":
            self.unwritten.append(record)
            return
        try:
            write_or_keep(self.writer, record, self.unwritten, line)
        except OSError as exc:
            self.fail_writing(shown_path(self.writer.path), exc)

    def records(self) -> RecordsFile:
        """What this runner recorded: its part of the records file, then what the file could not take."""
        return RecordsFile(self.writer.path, tuple(self.unwritten), self.first_byte)

    def fail(self, kind: str, message: str) -> None:
        """Stop at once: no new judgment, no retry; the judgments in flight are cancelled."""
        if self.failure is None:
            self.failure_kind, self.failure = kind, message
        self.stop_reason = kind
        try:
            current = asyncio.current_task()
        except RuntimeError:  # after the loop: nothing left to cancel
            return
        for t in list(self.tasks):
            if t is not current:
                t.cancel()

    def fail_writing(self, path: str, exc: OSError) -> None:
        message = (
            f"writing {path} failed ({describe(exc)}): scheduling stopped at once and the judgments in flight "
            "were abandoned"
        )
        self.fail("output_failed", message)

    def remember(self, record: Record) -> None:
        if self.stop_rule is not None and self.stop_rule.after(record) and self.stop_reason is None:
            self.stop_reason = "verdict_decided"  # in-flight judgments finish; nothing new is sent
        if record.status == "ok" and record.case_id in self.watched:
            self.ok_labels.setdefault(record.case_id, []).append(record.judge_label or "")

    async def judge_one(self, case: Case, repeat: int) -> None:
        if self.stop_rule is not None:
            if not self.stop_rule.may_send(case.case_id):
                # Another worker process found the verdict decided: this judgment is not needed.
                self.stop_reason = self.stop_reason or "verdict_decided"
                return
            self.stop_rule.started.add(case.case_id)
        reused = self.reuse.get((case.case_id, repeat))
        if reused is not None:
            # Completed in an earlier attempt of this run: already in records.jsonl, nothing to pay.
            self.remember(reused)
            return
        journal = self.journal
        token = JOURNAL_CONTEXT.set(JournalContext(journal, case.case_id, repeat)) if journal is not None else None
        gate = SendGate(lambda: self.may_still_send(case), lambda: self.sent_cases.add(case.case_id))
        gate_token = SEND_GATE.set(gate)
        try:
            j = await self.evaluator.judge(case, repeat, self.budget)
        except asyncio.CancelledError as exc:
            # The evaluator attaches what it sent before the interrupt: those attempts were paid.
            partial = partial_judgment(exc) or Judgment(status="skipped", error_kind="cancelled")
            partial.error_message = partial.error_message or "interrupted while in flight"
            self.emit(self.to_record(case, repeat, partial))
            raise
        finally:
            SEND_GATE.reset(gate_token)
            if token is not None:
                JOURNAL_CONTEXT.reset(token)
        if gate.refused and not j.attempts:
            return  # never sent: the lane stopped while it waited for budget room, as if never scheduled
        self.emit(self.to_record(case, repeat, j))
        if journal is not None and journal.error is not None and self.failure_kind != "output_failed":
            self.fail_writing(shown_path(journal.path), journal.error)
        self.progress.tick(j, self.budget.spent, self.budget.reserved)
        if self.stop_reason is None:
            self.stop_reason = self._stop_after(case, j)

    def _stop_after(self, case: Case, j: Judgment) -> str | None:
        """Why this judgment stops scheduling, if it does: the boundary; an auth error (401, 403) or a
        model the provider does not serve (404 model_not_found): every later request would meet it; a control that failed or ended in an evaluator error
        (no other verdict could count; what is never sent is `not_needed`, gate.decide.control_stop)."""
        if j.error_kind == "budget":
            return "budget"
        if j.error_kind in ("auth", "model_not_found"):  # every later request would meet it too
            return j.error_kind
        if case.is_control and j.status == "error":
            return "control_error"
        verdict = self.verdict(case) if case.is_control else None
        if verdict is not None and verdict != case.human_label:
            return "control_failed"
        return None

    async def run_phase(self, items: Sequence[tuple[Case, int]], after_case: Callable[[Case], None]) -> None:
        queue: deque[tuple[Case, int]] = deque(items)
        remaining: dict[str, int] = {}
        for case, _ in items:
            remaining[case.case_id] = remaining.get(case.case_id, 0) + 1

        async def worker() -> None:
            while queue and self.may_schedule(queue[0][0]):
                case, repeat = queue.popleft()
                try:
                    await self.judge_one(case, repeat)
                    remaining[case.case_id] -= 1
                    if remaining[case.case_id] == 0:
                        del remaining[case.case_id]
                        self.sent_cases.discard(case.case_id)  # nothing of it waits to be sent any more
                        after_case(case)
                except Exception as exc:  # a bug, never a verdict: stop, and say so per case
                    self.fail("internal_error", f"a worker failed on {case.case_id}: {type(exc).__name__}: {exc}")
                    return

        n = min(self.loaded.policy.evaluator.max_concurrency, len(items))
        workers = [asyncio.create_task(worker()) for _ in range(n)]
        self.tasks.update(workers)
        # Workers catch their own exceptions (see `worker`); what is left here is cancellation.
        await asyncio.gather(*workers, return_exceptions=True)
        self.tasks.difference_update(workers)

    def may_schedule(self, case: Case) -> bool:
        """Nothing new after a stop; after `stop_when_decided`'s, a started case's other repeats still go."""
        if self.stop_reason is None:
            return True
        return (
            self.stop_reason == "verdict_decided"
            and self.stop_rule is not None
            and self.stop_rule.may_send(case.case_id)
        )

    def may_still_send(self, case: Case) -> bool:
        """Whether a judgment of `case` that waited (for budget room) may still send its request: not
        after a stop; after `stop_when_decided`'s, only when a request of its case already went out,
        so that no case is cut between its repeats (gate.run.stop)."""
        decided = self.stop_rule is not None and self.stop_rule.decided
        if self.stop_reason is None and not decided:
            return True
        return self.stop_reason in (None, "verdict_decided") and case.case_id in self.sent_cases

    def verdict(self, case: Case) -> str | None:
        labels = self.ok_labels.get(case.case_id, [])
        return majority(labels) if len(labels) >= self.plan.repeats else None

    def check_pair(self, case: Case) -> None:
        if case.pair is None or self.stop_reason is not None:
            return
        mates = [c for c in self.pair_members.get(case.pair.id, []) if c.case_id != case.case_id]
        if len(mates) != 1:
            return
        a, b = self.verdict(case), self.verdict(mates[0])
        if a is None or b is None:
            return
        violated = (case.pair.kind == "invariant" and a != b) or (case.pair.kind == "flip" and a == b)
        # A violation an active override waives for both cases blocks nothing: decide agrees.
        if violated and not {case.case_id, mates[0].case_id} <= self.waived_pairs:
            self.stop_reason = "pair_violated"

    def controls_failed(self) -> bool:
        for case in self.plan.scheduled:
            if case.expected_control_role is None:
                continue
            v = self.verdict(case)
            if v is not None and v != case.human_label:
                return True
        return False

    def cancel(self, signal_name: str | None = None) -> None:
        if self.stop_reason is None:
            self.stop_reason = "cancelled"
            self.stopped_by = signal_name
        for t in list(self.tasks):
            t.cancel()

    async def execute(self) -> None:
        scheduled = self.plan.scheduled
        controls = [c for c in scheduled if c.is_control]
        others = [c for c in scheduled if not c.is_control]
        reps = range(self.plan.repeats)
        if controls:
            self.progress.phase("controls", len(controls))
        await self.run_phase([(c, i) for c in controls for i in reps], self.check_pair)
        if self.stop_reason is None and self.controls_failed():
            self.stop_reason = "control_failed"
        if self.stop_reason is None:
            if others:
                self.progress.phase("cases", len(others))
            await self.run_phase([(c, i) for c in others for i in reps], self.check_pair)


async def judge_all(runner: Runner) -> None:
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in STOP_SIGNALS:
        with contextlib.suppress(RuntimeError, ValueError):  # no signal support here (e.g. Windows)
            loop.add_signal_handler(sig, runner.cancel, sig.name)
            installed.append(sig)
    lost = take()
    if lost is not None:  # it came before these handlers, and the exception it raised was dropped
        runner.cancel(lost)
    try:
        with pacing(runner.pacer):  # the tasks execute starts copy the context: every judgment is paced
            await runner.execute()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await runner.evaluator.aclose()
