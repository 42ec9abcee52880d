"""The steps of `run` and `merge` into an output directory, shared by the CLI and the Action.

No printing and no exit codes here: the edges (`gate.cli`, `gate.action`) report the outcome
and map errors to exit codes in their own way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gate.model.errors import GateError, UsageError
from gate.model.escape import log_text
from gate.model.states import USAGE_ERROR_EXIT, State
from gate.model.textfit import say
from gate.run import outdir
from gate.run.outdir import OutputWriteError, check_out_dir, clear_outputs

if TYPE_CHECKING:
    from gate.commands.merge import Merged
    from gate.commands.run import RunOptions
    from gate.decide.core import Decision


def run_into(policy: str | Path, opts: RunOptions) -> Decision:
    """Judge the lane and decide, writing into `opts.out_dir` (nothing written on a dry run)."""
    from gate.commands.run import run

    if opts.base_result is not None and opts.base_result.resolve() == opts.out_dir.resolve():
        raise UsageError(
            f"--base-result {opts.base_result} is the --out directory this run replaces; "
            "fix: pass the base run's own directory"
        )
    if not opts.dry_run:
        check_out_dir(opts.out_dir)  # exit 2 before anything is paid when --out cannot be written
    # The earlier run's outputs are cleared once the run can no longer be refused (`begin_run`): a
    # usage error changes nothing in --out.
    outdir.forget(opts.out_dir)
    try:
        with sigterm_interrupts():
            if opts.batch is not None:
                from gate.commands.batch import run_batch

                return run_batch(policy, opts)
            return run(policy, opts)
    except GateError:
        raise
    except BaseException:
        if not opts.dry_run and not outdir.begun(opts.out_dir):
            _begin_stopped(opts)
        raise


def _begin_stopped(opts: RunOptions) -> None:
    """A run interrupted (or crashed) before it began to change --out: nothing there is this run's,
    and its result (written next, from the records it finds) must not be built from the earlier
    run's evidence. So it begins as the run would have: the earlier outputs go, and a fresh run's
    evidence too (kept on --resume, on the drift lane and for a batch already submitted from this --out)."""
    from gate.commands.batch_file import BATCH_FILE
    from gate.commands.run import begin_run
    from gate.model.traces import DRIFT_LANE

    # The drift lane keeps an unfinished run's journal to bill it (gate.measure.drift.lane).
    keep = opts.resume or opts.lane == DRIFT_LANE or (opts.batch is not None and (opts.out_dir / BATCH_FILE).exists())
    with contextlib.suppress(Exception):  # never hides the interruption being reported
        begin_run(opts.out_dir, keep_evidence=keep)


def merge_into(
    policy: str | Path,
    shards: Sequence[Path],
    out_dir: Path,
    responses: Path | None = None,
    base_result: Path | None = None,
    audit: Path | None = None,
    audit_queue: Path | None = None,
) -> Merged:
    """Merge the shards' output directories into one decision written into `out_dir`.

    Refused (a usage error): --out stays as it was. Crashed or stopped (SIGTERM and SIGHUP interrupt
    as SIGINT does), whenever it happens: no result.json is left there, neither the last merge's (it
    would read as this one's) nor a part of this one's, and the exit is the interruption's or the
    crash's, never a verdict's."""
    from gate.commands.merge import MERGED_EVIDENCE, merge, write_merged

    if any(out_dir.resolve() == d.resolve() for d in shards):
        raise UsageError(f"gate merge: --out {out_dir} is one of the shard directories; fix: merge into a new one")
    outdir.forget(out_dir)
    try:
        with sigterm_interrupts():
            merged = merge(
                policy,
                shards,
                responses=responses,
                base_result=base_result,
                audit=audit,
                audit_queue=audit_queue,
                out_dir=out_dir,
            )
            clear_outputs(out_dir)
            return dataclasses.replace(merged, decision=write_merged(out_dir, merged))
    except GateError:
        if outdir.begun(out_dir):
            _clear_stopped_merge(out_dir, MERGED_EVIDENCE)  # result.json could not be written: no part stays
        raise  # before it began: refused (a usage error), the last merge in --out stays as it was
    except BaseException:
        _clear_stopped_merge(out_dir, MERGED_EVIDENCE if outdir.begun(out_dir) else ())
        raise


def _clear_stopped_merge(out_dir: Path, evidence: Sequence[str]) -> None:
    """A merge that crashed or was stopped: no earlier result reads as this one's, and the evidence it
    had begun to copy (records, trend, the shards' journals: copies, the shards keep theirs) goes too,
    so `gate decide` never reads a part of it as whole."""
    with contextlib.suppress(OSError):  # never hides the crash being reported
        clear_outputs(out_dir)
        for name in evidence:
            (out_dir / name).unlink(missing_ok=True)


def exit_on_error(
    exc: BaseException,
    stream: TextIO,
    what: str,
    write_result: Callable[[BaseException], str | None] | None = None,
    *,
    resumable: bool = False,
) -> int:
    """The exit code of a command that raised, and its message on `stream` (the CLI's and the Action's).

    Bad input is a usage error (2); a failed write, an interruption or a bug is never a verdict (3).
    An interruption or a bug of a command that writes a result (`write_result`, e.g. `gate run`)
    still writes one (gate.commands.crash), its blocker naming the cases left unjudged.
    """
    from gate.commands import crash

    known = report_known_error(exc, stream)
    if known is not None:
        if isinstance(exc, KeyboardInterrupt) and write_result is not None:
            written = write_result(exc)
            if written:
                say(stream, written)
        return known
    written = write_result(exc) if write_result is not None else None
    crash.print_traceback_if_debug(exc, stream)
    say(stream, f"error: {crash.crash_message(what, exc, written, resumable=resumable)}")
    return crash.INTERNAL_ERROR_EXIT


def interruption(signal_name: str) -> KeyboardInterrupt:
    """What a stop signal raises: SIGINT a bare KeyboardInterrupt (Ctrl-C), the others naming themselves."""
    from gate.commands import crash

    return KeyboardInterrupt() if signal_name == "SIGINT" else crash.Interrupted(signal_name)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM (a cancelled CI job) and SIGHUP (what the docker CLI forwards when a runner kills
    the step, as nektos/act does on cancel) interrupt like SIGINT: the run stops and still writes
    a result saying so, naming the signal. The runner installs its own handlers while it judges
    (gate.run.runner).

    Each signal is written down before its handler raises (gate.run.signals): when Python drops
    the exception (the handler ran inside a weakref callback or a `__del__`), the runner stops
    before it judges, or the command stops here as it ends, never going on to a verdict."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from gate.run import signals

    def interrupt(signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        signals.note(name)
        raise interruption(name)

    def drop_noted(unraisable: Any) -> None:
        # the interruption Python dropped: noted above and acted on later, so no stray traceback
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and signals.pending()):
            previous_hook(unraisable)

    signals.forget()
    previous = {sig: signal.signal(sig, interrupt) for sig in signals.STOP_SIGNALS}
    previous_hook, sys.unraisablehook = sys.unraisablehook, drop_noted
    try:
        yield
        lost = signals.take()
        if lost is not None:
            raise interruption(lost)
    finally:
        sys.unraisablehook = previous_hook
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def report_known_error(exc: BaseException, stream: TextIO) -> int | None:
    """An expected error's message on `stream` and its exit code; None for an unexpected one.

    A write that failed mid-run or an interruption is never a verdict (3); bad input is a usage
    error (2). One visible line per line of the message: file content can never start a log line.
    """
    if isinstance(exc, KeyboardInterrupt):
        from gate.commands.crash import signal_name

        say(stream, f"error: interrupted ({signal_name(exc)})")
        return State.EVALUATION_INCOMPLETE.exit_code
    if isinstance(exc, OutputWriteError):
        say(stream, f"error: {exc.message}")
        return State.EVALUATION_INCOMPLETE.exit_code
    if isinstance(exc, GateError):
        shown = "\n".join(log_text(line) for line in exc.message.split("\n"))
        say(stream, f"error: {shown}")
        return USAGE_ERROR_EXIT
    return None
