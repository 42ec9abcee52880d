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
import dataclasses
import math
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING

from gate.budget import Budget, Reservation
from gate.cases import Case
from gate.errors import UsageError
from gate.policy import LoadedPolicy
from gate.records import Record, RecordsError, read_records

if TYPE_CHECKING:
    from gate.judge import Evaluator
    from gate.run import Runner

EvaluatorMaker = Callable[[LoadedPolicy], "Evaluator"]

WORKERS_ENV = "GATE_WORKERS"
PER_PROCESS_CONCURRENCY = 16  # requests in flight one process drives comfortably (~3 ms CPU each)
MIN_JUDGMENTS_PER_WORKER = 100  # below this, forking costs more than it saves
WORKER_RECORDS_GLOB = "records.w*.jsonl"


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
        self._cells = ctx.RawArray("d", 4)  # spent, reserved, exhausted, overruns
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

    def reserve(self, amount: float) -> Reservation:
        with self._lock:
            return super().reserve(amount)

    def settle(self, reservation: Reservation, actual: float) -> None:
        with self._lock:
            super().settle(reservation, actual)


def make_budget(limit: float | None, workers: int) -> Budget:
    return SharedBudget(limit) if workers > 1 else Budget(limit)


def fold_worker_records(out_dir: Path, records_path: Path) -> int:
    """Append every worker's records file to records.jsonl and remove it; the number of records moved.

    A torn last line (a worker killed mid-write) is dropped: that judgment is unrun, not half-read.
    """
    moved = 0
    for path in sorted(out_dir.glob(WORKER_RECORDS_GLOB)):
        records = _read_worker(path)
        if records:
            from gate.records import RecordWriter

            with RecordWriter(records_path) as writer:
                for r in records:
                    writer.write(r)
            moved += len(records)
        path.unlink()
    return moved


def discard_worker_records(out_dir: Path) -> None:
    """A fresh run never mixes with an older run's worker files."""
    for path in out_dir.glob(WORKER_RECORDS_GLOB):
        path.unlink()


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
    label: str,
    channel: Connection,
) -> None:
    """A worker process: judge `cases` into `path` with its own evaluator and client.

    A failure of its own (a bug, its records file unwritable) is sent to the parent on `channel`
    as (kind, one-line reason): the parent stops the run on it, as one process would, rather than
    mistaking it for a dead worker."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from gate.progress import Progress
    from gate.records import RecordWriter
    from gate.run import _judge_all

    class WorkerProgress(Progress):
        """A plain line every ~10% or 15 s, naming the worker (a terminal's live line is the parent's)."""

        def __init__(self, name: str, total: int, stream: IO[str] | None, currency: str) -> None:
            super().__init__(total, stream, currency)
            self.tty = False
            self.name = name

        def line(self, budget_used: float) -> str:
            return super().line(budget_used).replace("gate:", f"gate: worker {self.name}:", 1)

    parent_stream = None if runner.progress.tty else runner.progress.stream
    writer = RecordWriter(path)
    try:
        loaded = with_concurrency(runner.loaded, concurrency)
        plan = dataclasses.replace(runner.plan, eligible=tuple(cases), withheld=())
        mine = dataclasses.replace(
            runner,
            loaded=loaded,
            plan=plan,
            evaluator=new_evaluator(loaded),
            writer=writer,
            progress=WorkerProgress(label, len(cases) * plan.repeats, parent_stream, runner.progress.currency),
            emitted=[],
            ok_labels={},
            pair_members={},
            tasks=set(),
            stop_reason=None,
        )
        asyncio.run(_judge_all(mine))
        if mine.failure is not None:
            channel.send((mine.failure_kind or "internal_error", mine.failure))
    except Exception as exc:  # outside any judgment (its evaluator, its records file): still a bug
        channel.send(("internal_error", f"a worker process failed: {type(exc).__name__}: {exc}"))
    finally:
        channel.close()
        writer.close()


def judge_in_workers(
    runner: Runner, new_evaluator: EvaluatorMaker, count: int, out_dir: Path, log: IO[str] | None
) -> list[str]:
    """Controls here, then the other cases in `count` forked workers; notes for the result."""
    from gate.run import _judge_all

    plan = runner.plan
    controls = tuple(c for c in plan.eligible if c.is_control)
    head = dataclasses.replace(
        runner,
        plan=dataclasses.replace(plan, eligible=controls, withheld=tuple(c for c in plan.withheld if c.is_control)),
        pair_members={},
        tasks=set(),
    )
    asyncio.run(_judge_all(head))  # the controls, on this process's evaluator (closed at the end)
    runner.stop_reason = head.stop_reason
    if runner.stop_reason is None and head.controls_failed():
        runner.stop_reason = "control_failed"
    if runner.stop_reason is not None:
        return []
    others = [c for c in plan.scheduled if not c.is_control]
    concurrency = max(1, runner.loaded.policy.evaluator.max_concurrency // count)
    ctx = multiprocessing.get_context("fork")
    procs: list[tuple[int, BaseProcess, Path]] = []
    parent = os.getpid()
    stopping: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        if os.getpid() != parent:
            return
        stopping.append(signum)
        for _k, proc, _path in procs:
            if proc.pid is not None and proc.exitcode is None:
                os.kill(proc.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    channels: dict[Connection, int] = {}
    failures: list[tuple[int, str, str]] = []
    stopped: set[int] = set()
    try:
        for k in range(1, count + 1):
            path = out_dir / f"records.w{k}.jsonl"
            share = others[k - 1 :: count]  # interleaved: every worker gets critical slices first
            reader, sender = ctx.Pipe(duplex=False)
            worker = ctx.Process(
                target=_work,
                args=(runner, new_evaluator, share, path, concurrency, f"{k}/{count}", sender),
                daemon=False,
            )
            worker.start()
            sender.close()  # the worker holds the only sending end: its exit is the channel's end
            procs.append((k, worker, path))
            channels[reader] = k
            _say(log, f"gate: worker {k}/{count} pid {worker.pid}: {len(share) * plan.repeats} judgments")
        failures, stopped = _await_workers(procs, channels)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for reader in channels:
            reader.close()
    for k, kind, reason in failures:
        _say(log, f"gate: worker {k}/{count} stopped the run: {reason}")
        runner.fail(kind, reason)  # the first one is the run's failure; each unjudged case gets it
    notes: list[str] = []
    for k, proc, path in procs:
        records = _read_worker(path)
        for r in records:
            runner.writer.write(r)
            runner.emitted.append(r)
            runner.remember(r)
            runner.progress.done += 1
            runner.progress.errors += r.status == "error"
            if r.error_kind == "budget" and runner.stop_reason is None:
                runner.stop_reason = "budget"
        path.unlink(missing_ok=True)
        # A worker that failed, or that was stopped because another did, did not die: the run's
        # failure (an internal_error blocker, the reason on each unjudged case) says what happened.
        if proc.exitcode != 0 and k not in {f[0] for f in failures} | stopped:
            how = (
                f"signal {-proc.exitcode}"
                if proc.exitcode is not None and proc.exitcode < 0
                else f"exit {proc.exitcode}"
            )
            _say(log, f"gate: worker {k}/{count} pid {proc.pid} died ({how}) after {len(records)} judgment(s)")
            notes.append(
                f"worker {k}/{count} died ({how}): its unfinished cases are unrun; resume with --resume "
                "(completed judgments are kept, nothing is paid twice)"
            )
    if stopping and runner.stop_reason is None:
        runner.stop_reason = "cancelled"
    return notes


def _await_workers(
    procs: Sequence[tuple[int, BaseProcess, Path]], channels: dict[Connection, int]
) -> tuple[list[tuple[int, str, str]], set[int]]:
    """Wait for every worker; the failures they reported, and the workers stopped because of them.
    On the first failure the others are stopped (SIGTERM: they record what is in flight as
    interrupted), as one process stops at a bug."""
    live = {proc.sentinel: proc for _k, proc, _path in procs}
    listening = dict(channels)
    failures: list[tuple[int, str, str]] = []
    stopped: set[int] = set()
    while live or listening:
        for ready in wait([*live, *listening]):
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
            for other, proc, _path in procs:
                if other != k and proc.pid is not None and proc.exitcode is None:
                    stopped.add(other)
                    os.kill(proc.pid, signal.SIGTERM)
    return failures, stopped


def _read_worker(path: Path) -> list[Record]:
    try:
        return read_records(path) if path.exists() and path.stat().st_size else []
    except RecordsError:
        return []


def _say(log: IO[str] | None, line: str) -> None:
    if log is not None:
        log.write(line + "\n")
        log.flush()
