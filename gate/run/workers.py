"""Every core: a run's cases judged by several worker processes that share one hard budget.

One asyncio process is bound near one core's worth of ragas + instructor + openai work (~3 ms of
CPU per judgment), so when the policy's concurrency asks for more than one process can drive, the
parent judges the controls, then forks K workers (ragas is already imported) that each judge an
interleaved share of the other cases at concurrency C/K. They share:

- the budget: `spent` and `reserved` live in shared memory behind one lock, so every reservation
  of every process is checked against the same boundary: the hard cap holds across processes;
- the cache: SQLite in WAL mode, safe across processes;
- the records: each worker appends to its own `records.w<k>.jsonl` in --out (flushed per line),
  folded into records.jsonl when the workers end, or by `--resume` when the whole run died.
  A file that cannot be read whole (a corrupt line in the middle, an unreadable file) is never
  dropped in silence: what can be read is kept, what was paid is billed from the attempt journal,
  and a `worker_records_unreadable` blocker names the file and the cases left unrun.

A worker that dies (killed, out of memory) loses only its in-flight attempts, whose reservations
stay counted as spent; its unfinished cases are unrun (`evaluation_incomplete`), and `--resume`
judges them, reusing every judgment that completed. A worker that fails on its own (a bug, its
records file unwritable) says so to the parent, which stops the others and ends the run as one
process would: an `internal_error` (or `output_failed`) blocker, the reason on each unjudged case.

The number of workers: `$GATE_WORKERS` when set, else min(cores, ceil(C / 16), judgments / 100)
on Linux (workers are forked), 1 elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import math
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING

from gate.judge.budget import Budget, Reservation
from gate.judge.journal import recover
from gate.model.cases import Case
from gate.model.errors import UsageError
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy
from gate.model.records import Record, RecordsError, RecordsFile
from gate.model.states import Finding, State
from gate.model.wording import plural
from gate.run.runner import JudgingTools, Runner, judge_all
from gate.run.signals import STOP_SIGNALS
from gate.run.worker_records import WorkerFile, read_worker, set_aside

if TYPE_CHECKING:
    from gate.judge import Evaluator, Judgment

EvaluatorMaker = Callable[[LoadedPolicy], "Evaluator"]

WORKERS_ENV = "GATE_WORKERS"
PER_PROCESS_CONCURRENCY = 16  # requests in flight one process drives comfortably (~3 ms CPU each)
MIN_JUDGMENTS_PER_WORKER = 100  # below this, forking costs more than it saves
PROGRESS_EVERY_S = 0.2  # how often the parent redraws the workers' progress


@dataclass(frozen=True)
class WorkersEnd:
    """What the workers leave the result: notes (a worker died) and blockers (a records file unreadable)."""

    notes: tuple[str, ...]
    findings: tuple[Finding, ...]


def worker_count(judgments: int, concurrency: int, env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    raw = env.get(WORKERS_ENV, "").strip()
    if raw:
        try:
            wanted = int(raw)
            if wanted < 1:
                raise ValueError
        except ValueError:
            raise UsageError(
                f"${WORKERS_ENV}={raw[:20]!r} must be a whole number of processes, at least 1; fix: unset it to "
                "choose from the cores and the policy's max_concurrency"
            ) from None
        return max(1, min(wanted, concurrency, judgments))
    if not sys.platform.startswith("linux"):
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    by_concurrency = math.ceil(concurrency / PER_PROCESS_CONCURRENCY)
    return max(1, min(cores, by_concurrency, judgments // MIN_JUDGMENTS_PER_WORKER))


class SharedBudget(Budget):
    """A `Budget` whose accounts live in shared memory behind one lock (fork-inherited)."""

    def __init__(self, limit: float | None) -> None:
        ctx = multiprocessing.get_context("fork")
        self._lock = ctx.Lock()
        self._cells = ctx.RawArray("d", 6)  # spent, reserved, exhausted, overruns, in flight, settles
        super().__init__(limit)

    @property
    def spent(self) -> float:
        return float(self._cells[0])

    @spent.setter
    def spent(self, value: float) -> None:
        self._cells[0] = value

    @property
    def reserved(self) -> float:
        return float(self._cells[1])

    @reserved.setter
    def reserved(self, value: float) -> None:
        self._cells[1] = value

    @property
    def exhausted(self) -> bool:
        return bool(self._cells[2])

    @exhausted.setter
    def exhausted(self, value: bool) -> None:
        self._cells[2] = 1.0 if value else 0.0

    @property
    def overruns(self) -> int:
        return int(self._cells[3])

    @overruns.setter
    def overruns(self, value: int) -> None:
        self._cells[3] = float(value)

    @property
    def in_flight(self) -> int:
        return int(self._cells[4])

    @in_flight.setter
    def in_flight(self, value: int) -> None:
        self._cells[4] = float(value)

    @property
    def settles(self) -> int:
        return int(self._cells[5])

    @settles.setter
    def settles(self, value: int) -> None:
        self._cells[5] = float(value)

    def reserve(self, amount: float) -> Reservation:
        with self._lock:
            return super().reserve(amount)

    def settle(self, reservation: Reservation, actual: float) -> None:
        with self._lock:
            super().settle(reservation, actual)


class WorkerTally:
    """Judgments done and errors of every worker, in shared memory: the parent shows one progress."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self._lock = ctx.Lock()
        self._cells = ctx.RawArray("q", 2)  # done, errors

    def add(self, errors: int) -> None:
        with self._lock:
            self._cells[0] += 1
            self._cells[1] += errors

    def read(self) -> tuple[int, int]:
        with self._lock:
            return int(self._cells[0]), int(self._cells[1])


def make_budget(limit: float | None, workers: int) -> Budget:
    return SharedBudget(limit) if workers > 1 else Budget(limit)


def with_concurrency(loaded: LoadedPolicy, concurrency: int) -> LoadedPolicy:
    """The same policy (hashes unchanged) with this process's share of `max_concurrency`."""
    ev = loaded.policy.evaluator.model_copy(update={"max_concurrency": concurrency})
    return dataclasses.replace(loaded, policy=loaded.policy.model_copy(update={"evaluator": ev}))


def _work(
    runner: Runner,
    new_evaluator: EvaluatorMaker,
    cases: Sequence[Case],
    path: Path,
    concurrency: int,
    tally: WorkerTally,
    channel: Connection,
) -> None:
    """A worker process: judge `cases` into `path` with its own evaluator and client.

    A failure of its own (a bug, its records file unwritable) is sent to the parent on `channel`
    as (kind, one-line reason): the parent stops the run on it, as one process would, rather than
    mistaking it for a dead worker."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    from gate.model.records import RecordWriter
    from gate.run.progress import Progress

    class WorkerProgress(Progress):
        """Counts into the shared tally; the parent draws the run's one bar (or plain line) from it."""

        def tick(self, judgment: Judgment, budget_used: float, reserved: float = 0.0) -> None:
            if judgment.status != "skipped":  # never sent: unrun, not done
                tally.add(judgment.status == "error")

    writer = RecordWriter(path)
    if runner.pacer is not None:
        runner.pacer.on_wait = None  # the parent shows the shared pacer's state (`show`)
    try:
        loaded = with_concurrency(runner.loaded, concurrency)
        plan = dataclasses.replace(runner.plan, eligible=tuple(cases), withheld=())
        tools = JudgingTools(
            evaluator=new_evaluator(loaded),
            budget=runner.budget,
            writer=writer,
            progress=WorkerProgress(len(cases) * plan.repeats, None),
            journal=runner.journal,
            pacer=runner.pacer,  # the parent's: every worker admits into the same windows
        )
        mine = runner.for_share(plan, tools, loaded=loaded, pairs=False)
        asyncio.run(judge_all(mine))
        if mine.failure is not None:
            channel.send((mine.failure_kind or "internal_error", mine.failure))
    except Exception as exc:  # outside any judgment (its evaluator, its records file): still a bug
        channel.send(("internal_error", f"a worker process failed: {type(exc).__name__}: {exc}"))
    finally:
        channel.close()
        writer.close()


@dataclass(frozen=True)
class _Worker:
    """One forked worker: its number k (1..count), its process, its records file, its share of cases."""

    k: int
    proc: BaseProcess
    path: Path
    share: tuple[Case, ...]
    channel: Connection  # the reading end: a failure of its own, reported by the worker


def judge_in_workers(
    runner: Runner, new_evaluator: EvaluatorMaker, count: int, out_dir: Path, log: IO[str] | None
) -> WorkersEnd:
    """Controls here, then the other cases in `count` forked workers; notes and findings for the result."""
    if not _judge_controls(runner):
        return WorkersEnd((), ())
    progress, budget = runner.progress, runner.budget
    start_done, start_errors = progress.done, progress.errors  # reused judgments and the controls
    progress.phase("cases", sum(not c.is_control for c in runner.plan.scheduled), f" in {count} processes")
    tally = WorkerTally()

    def show() -> None:
        done, errors = tally.read()
        progress.advance(start_done + done, start_errors + errors, budget.spent, budget.reserved)
        if runner.pacer is not None:  # the workers' shared windows: what they wait for, if anything
            progress.waiting(runner.pacer.status())

    workers: list[_Worker] = []
    with _forwarding_signals(workers) as received:
        try:
            _start_workers(workers, runner, new_evaluator, count, out_dir, tally, log)
            failures, stopped = _await_workers(workers, show)
            show()
        finally:
            for worker in workers:
                worker.channel.close()
    for k, kind, reason in failures:
        _say(log, f"gate: worker {k}/{count} stopped the run: {reason}")
        runner.fail(kind, reason)  # the first one is the run's failure; each unjudged case gets it
    progress.done, progress.errors = start_done, start_errors  # counted again from what was recorded
    # A worker that failed, or that was stopped because another did, did not die: the run's
    # failure (an internal_error blocker, the reason on each unjudged case) says what happened.
    quiet = {k for k, _kind, _reason in failures} | stopped
    ends = [_fold_worker(runner, worker, count, worker.k in quiet, log) for worker in workers]
    if received and runner.stop_reason is None:
        runner.stop_reason = "cancelled"
        runner.stopped_by = signal.Signals(received[0]).name
    notes = tuple(note for note, _finding in ends if note is not None)
    return WorkersEnd(notes, tuple(finding for _note, finding in ends if finding is not None))


def _judge_controls(runner: Runner) -> bool:
    """The controls, judged in this process first: whether the run goes on to the other cases."""
    plan = runner.plan
    head = runner.for_share(
        dataclasses.replace(
            plan,
            eligible=tuple(c for c in plan.eligible if c.is_control),
            withheld=tuple(c for c in plan.withheld if c.is_control),
        ),
        pairs=False,
    )
    asyncio.run(judge_all(head))  # the controls, on this process's evaluator (closed at the end)
    runner.absorb(head)
    if runner.stop_reason is None and head.controls_failed():
        runner.stop_reason = "control_failed"
    return runner.stop_reason is None


@contextlib.contextmanager
def _forwarding_signals(workers: Sequence[_Worker]) -> Iterator[list[int]]:
    """While the workers run, SIGINT/SIGTERM/SIGHUP to this process stop each of them (SIGTERM: they record
    what is in flight as interrupted); yields the signals received."""
    parent = os.getpid()
    received: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if os.getpid() != parent:
            return
        received.append(signum)
        for worker in workers:
            if worker.proc.pid is not None and worker.proc.exitcode is None:
                os.kill(worker.proc.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start_workers(
    workers: list[_Worker],
    runner: Runner,
    new_evaluator: EvaluatorMaker,
    count: int,
    out_dir: Path,
    tally: WorkerTally,
    log: IO[str] | None,
) -> None:
    """Fork `count` workers, each appended to `workers` as it starts (the signal forwarding sees it)."""
    others = [c for c in runner.plan.scheduled if not c.is_control]
    concurrency = max(1, runner.loaded.policy.evaluator.max_concurrency // count)
    ctx = multiprocessing.get_context("fork")
    for k in range(1, count + 1):
        path = out_dir / f"records.w{k}.jsonl"
        share = tuple(others[k - 1 :: count])  # interleaved: every worker gets critical slices first
        reader, sender = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=_work,
            args=(runner, new_evaluator, share, path, concurrency, tally, sender),
            daemon=False,
        )
        proc.start()
        sender.close()  # the worker holds the only sending end: its exit is the channel's end
        workers.append(_Worker(k, proc, path, share, reader))
        _say(log, f"gate: worker {k}/{count} pid {proc.pid}: {len(share) * runner.plan.repeats} judgments")


def _await_workers(workers: Sequence[_Worker], show: Callable[[], None]) -> tuple[list[tuple[int, str, str]], set[int]]:
    """Wait for every worker, showing their progress (`show`) a few times a second; the failures
    they reported, and the workers stopped because of them. On the first failure the others are
    stopped (SIGTERM: they record what is in flight as interrupted), as one process stops at a bug."""
    live = {worker.proc.sentinel: worker.proc for worker in workers}
    listening = {worker.channel: worker.k for worker in workers}
    failures: list[tuple[int, str, str]] = []
    stopped: set[int] = set()
    while live or listening:
        show()
        for ready in wait([*live, *listening], timeout=PROGRESS_EVERY_S):
            if isinstance(ready, int):
                live.pop(ready).join()
                continue
            assert isinstance(ready, Connection)
            k = listening.pop(ready)
            try:
                kind, reason = ready.recv()
            except (EOFError, OSError):  # ended without a word: a clean exit, or killed
                continue
            failures.append((k, str(kind), str(reason)))
            for other in workers:
                if other.k != k and other.proc.pid is not None and other.proc.exitcode is None:
                    stopped.add(other.k)
                    os.kill(other.proc.pid, signal.SIGTERM)
    return failures, stopped


def _fold_worker(
    runner: Runner, worker: _Worker, count: int, quiet: bool, log: IO[str] | None
) -> tuple[str | None, Finding | None]:
    """A worker's records into the run's: a note when it died (not `quiet`: it neither failed nor was
    stopped because another did), a blocker when its records file could not be read whole."""
    found = read_worker(worker.path, functools.partial(_take_record, runner))
    kept = None if found.problem is None else set_aside(worker.path)
    if found.problem is None:
        worker.path.unlink(missing_ok=True)
    label = f"{worker.k}/{count}"
    died = worker.proc.exitcode != 0 and not quiet
    # paid, in the journal, in no readable record
    billed = _bill_unrecorded(runner, worker.share) if died or found.problem is not None else []
    note = None
    if died:
        exitcode = worker.proc.exitcode
        how = f"signal {-exitcode}" if exitcode is not None and exitcode < 0 else f"exit {exitcode}"
        _say(
            log,
            f"gate: worker {label} pid {worker.proc.pid} died ({how}) after {plural(found.count, 'judgment')}",
        )
        note = (
            f"worker {label} died ({how}): its unfinished cases are unrun; resume with --resume "
            "(completed judgments are kept, nothing is paid twice)"
        )
    if found.problem is None:
        return note, None
    _say(log, f"gate: worker {label}: {found.problem}")
    return note, _unreadable(runner, found, kept or worker.path, worker.share, billed, label)


def _take_record(runner: Runner, record: Record, line: bytes) -> None:
    """One record of a worker's into the run's records file (its line as the worker wrote it), the
    checks mid-run and the progress count; then it leaves memory."""
    runner.emit(record, line)
    progress = runner.progress
    progress.done += record.status != "skipped"  # never sent: unrun, not done
    progress.errors += record.status == "error"
    if record.error_kind == "budget" and runner.stop_reason is None:
        runner.stop_reason = "budget"


def _bill_unrecorded(runner: Runner, share: Sequence[Case]) -> list[Record]:
    """Records (`cancelled`, never a verdict) for the attempts a worker sent and paid for that no
    readable record names: the attempt journal bills them now, as `--resume` would."""
    if runner.journal is None:
        return []
    from gate.run.resume import recovered_records

    # every record of the run so far (an earlier attempt's too), so nothing is billed twice
    try:
        unrecorded = recover(runner.journal.path, RecordsFile(runner.writer.path, tuple(runner.unwritten)))
    except RecordsError:
        unrecorded = recover(runner.journal.path, runner.unwritten)
    ids = {c.case_id for c in share}
    lost = [u for u in unrecorded if u.case_id in ids]
    billed, _unknown = recovered_records(
        lost, runner.dataset, runner.loaded, runner.lineage, runner.plan.lane, runner.judge
    )
    for r in billed:
        runner.keep(r)
    return billed


def _unreadable(
    runner: Runner, found: WorkerFile, kept: Path, share: Sequence[Case], billed: Sequence[Record], label: str
) -> Finding:
    """The blocker for a worker's records file that could not be read whole (`kept`: where it is
    now, read again for the judgments it holds): never a verdict."""
    judged = set(runner.reuse)
    read_worker(kept, lambda r, _line: judged.add((r.case_id, r.repeat_index)))
    repeats = runner.plan.repeats
    affected = tuple(c.case_id for c in share if any((c.case_id, i) not in judged for i in range(repeats)))
    where = f"; the file is kept as {shown_path(kept)}" if kept != found.path else ""
    return Finding(
        State.EVALUATION_INCOMPLETE,
        "worker_records_unreadable",
        f"worker {label}'s records file could not be read whole: {found.problem}; {plural(len(affected), 'case')} "
        f"unrun ({plural(len(billed), 'paid judgment')} billed from the attempt journal); not a verdict; fix: run again "
        f"with --resume (readable judgments are kept, the cache serves what was paid){where}",
        case_ids=affected,
    )


def _say(log: IO[str] | None, line: str) -> None:
    if log is not None:
        log.write(line + "\n")
        log.flush()
