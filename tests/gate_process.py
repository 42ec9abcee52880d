"""`gate` in an OS process of its own, without paying the interpreter's and ragas's start each time.

A fresh `python -m gate.cli run` spends seconds of CPU importing ragas (and its datasets, pandas,
langchain and openai) before it sends anything; a suite that starts dozens of them spends most of
its time there. A test that needs gate in a separate process (to SIGKILL or signal it, read its
stderr while it runs, let it fork its workers, or share nothing with pytest's process) but is not
about how that process starts, starts it here instead: a child forked from a server process
(multiprocessing's forkserver, one per pytest process) that has imported gate and ragas once.

The child is a real process: its own pid, its own file descriptors (the pipes or files given for
stdin, stdout and stderr), the environment and working directory given, default signal handlers;
it runs `gate.cli.main_entry()` with the arguments given and exits with its code, or dies of the
signal it was sent (returncode -N, as with `subprocess`). The one difference from a fresh
interpreter is what was imported before `main` ran. So tests about the start itself (what is
imported, PYTHON* variables, `-P`, resource limits, a closed stdout at startup) keep
`subprocess` with `sys.executable`.

    proc = gate_process.popen(["run", "--policy", p, "--out", o], env=env, stderr=subprocess.PIPE, text=True)
    done = gate_process.run(["run", ...], env=env, capture_output=True, text=True, timeout=120)

The argument list may also start with `sys.executable, "-m", "gate.cli"` (as a subprocess
command would), which is dropped; `[sys.executable, "-m", "gate.action"]` runs the Action's entry
point (`python -m gate.action`, the container's process) instead, and `[sys.executable,
"scripts/x.py", ...]` runs a script of the project as `python scripts/x.py` would (its `__main__`). `rlimits={resource.RLIMIT_FSIZE:
(n, n)}` sets resource limits in the child before gate starts (what a `preexec_fn` would).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from multiprocessing import forkserver, reduction, resource_tracker
from pathlib import Path
from typing import IO, Any

# What a `gate run` imports, in the server once; every child inherits it.
PRELOAD = [
    "gate.cli",
    "gate.action",
    "gate.commands.run",
    "gate.commands.steps",
    "gate.report.terminal",
    "gate.judge.ragas_judge",
    "gate.judge.discrete",
    "ragas",
    "ragas.metrics",
    "ragas.llms.adapters.instructor",
    # What the judge's first call loads (the openai client's resources alone are seconds of models).
    "openai.resources",
    "instructor.v2.providers.openai",
    "jinja2",
    "docstring_parser",
    "anyio._backends._asyncio",
    "rich.table",
]
_CTX = multiprocessing.get_context("forkserver")
_CTX.set_forkserver_preload(PRELOAD)
_LIVE: list[GateProcess] = []
# The address of a server the pytest-xdist controller started for all its workers (`share_server`).
SHARED_SERVER_ENV = "GATE_TEST_PROCESS_SERVER"


def share_server() -> None:
    """Start the server now, in pytest-xdist's controller, and name its socket in the environment
    the workers are started with: every worker then forks from this one server, and the suite pays
    the server's imports (seconds of CPU) once instead of once per worker."""
    forkserver._forkserver.ensure_running()
    os.environ[SHARED_SERVER_ENV] = str(forkserver._forkserver._forkserver_address)


def use_server(address: str) -> None:
    """Connect to the controller's server instead of starting one. The server lives as long as the
    controller, which outlives its workers. The fd every request carries as the server's 'alive'
    pipe is only kept open by the child; any fd will do."""
    server = forkserver._forkserver
    server._forkserver_address = address
    server._forkserver_alive_fd = os.open(os.devnull, os.O_RDONLY)
    server.__dict__["ensure_running"] = resource_tracker.ensure_running  # never start one of our own


if os.environ.get(SHARED_SERVER_ENV) and os.environ.get("PYTEST_XDIST_WORKER"):
    use_server(os.environ[SHARED_SERVER_ENV])


class _Fd:
    """A file descriptor that travels to the child with it (sent over the server's unix socket)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return _rebuild_fd, (reduction.DupFd(self.fd),)


def _rebuild_fd(dup: Any) -> int:
    return int(dup.detach())


def _stdio(fd: int, write: bool, unbuffered: bool, encoding: str) -> IO[str]:
    """A text stream over fd 0, 1 or 2 as the interpreter makes one at start."""
    raw = io.FileIO(fd, "w" if write else "r", closefd=False)
    if not write:
        return io.TextIOWrapper(io.BufferedReader(raw), encoding=encoding)
    return io.TextIOWrapper(
        raw if unbuffered else io.BufferedWriter(raw),  # type: ignore[arg-type]
        encoding=encoding,
        errors="backslashreplace" if fd == 2 else "strict",
        line_buffering=fd == 2 or os.isatty(fd),
        write_through=unbuffered,
    )


def _child(
    entry: str, argv: list[str], env: dict[str, str], cwd: str, fds: tuple[int, int, int], rlimits: dict[int, Any]
) -> None:
    """In the forked child: become `gate ARGV` (or `python -m gate.action`, `entry`) with these
    streams, environment, directory and resource limits."""
    high = [os.dup(fd) for fd in fds]  # out of 0-2 first, whatever numbers the fds arrived with
    for fd in fds:
        if fd > 2:
            os.close(fd)
    for target, fd in enumerate(high):
        os.dup2(fd, target)
        os.close(fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    tempfile.tempdir = None  # TMPDIR is read again from this environment
    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    encoding = env.get("PYTHONIOENCODING", "").split(":")[0] or "utf-8"
    sys.stdin = sys.__stdin__ = _stdio(0, False, unbuffered, encoding)
    sys.stdout = sys.__stdout__ = _stdio(1, True, unbuffered, encoding)
    sys.stderr = sys.__stderr__ = _stdio(2, True, unbuffered, encoding)
    for which, limit in rlimits.items():
        resource.setrlimit(which, limit)
    sys.argv = [entry if entry.endswith(".py") else "gate", *argv]
    code = 1
    try:
        if entry.endswith(".py"):
            import runpy

            sys.path[0] = str(Path(entry).resolve().parent)  # what `python script.py` puts first
            runpy.run_path(entry, run_name="__main__")
            sys.exit(0)
        if entry == ACTION:
            from gate.action import main

            sys.exit(main())
        from gate.cli import main_entry

        main_entry()
        code = 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
    os._exit(code)


CLI, ACTION = "gate.cli", "gate.action"


def _entry_and_args(argv: Sequence[str | Path]) -> tuple[str, list[str]]:
    args = [str(a) for a in argv]
    if args[:2] == [sys.executable, "-m"] and args[2:3] in ([CLI], [ACTION]):
        return args[2], args[3:]
    if args[:1] == [sys.executable] and args[1:2] and args[1].endswith(".py"):
        return args[1], args[2:]
    return CLI, args


class GateProcess:
    """The subset of `subprocess.Popen` the tests use."""

    def __init__(
        self,
        argv: Sequence[str | Path],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        stdin: int | None = None,
        stdout: int | None = None,
        stderr: int | None = None,
        text: bool = False,
        rlimits: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        opened: list[int] = []  # the parent's copies of the child's ends, closed once it has them
        parent_ends: list[int | None] = [None, None, None]
        child_fds: list[int] = []
        for n, how in enumerate((stdin, stdout, stderr)):
            if how == subprocess.PIPE:
                r, w = os.pipe()
                child, mine = (r, w) if n == 0 else (w, r)
                parent_ends[n] = mine
                opened.append(child)
            elif how == subprocess.DEVNULL:
                child = os.open(os.devnull, os.O_RDONLY if n == 0 else os.O_WRONLY)
                opened.append(child)
            elif how == subprocess.STDOUT and n == 2:
                child = child_fds[1]
            elif how is None:
                child = n
            else:
                raise ValueError(f"stream {n}: {how!r} is not PIPE, DEVNULL, STDOUT or None")
            child_fds.append(child)
        entry, self.args = _entry_and_args(argv)
        self._process = _CTX.Process(
            target=_child,
            args=(
                entry,
                self.args,
                dict(os.environ if env is None else env),
                str(cwd or os.getcwd()),
                tuple(map(_Fd, child_fds)),
                dict(rlimits or {}),
            ),
            daemon=False,
        )
        try:
            self._process.start()
        finally:
            for fd in opened:
                os.close(fd)
        self.pid: int = self._process.pid or 0
        self.returncode: int | None = None

        def wrap(fd: int | None, write: bool) -> Any:
            if fd is None:
                return None
            f = os.fdopen(fd, "wb" if write else "rb")
            return io.TextIOWrapper(f, encoding="utf-8", write_through=True) if text else f

        self.stdin = wrap(parent_ends[0], True)
        self.stdout = wrap(parent_ends[1], False)
        self.stderr = wrap(parent_ends[2], False)
        _LIVE.append(self)

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._process.exitcode
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Both outputs read to their end (as `Popen.communicate`), then the exit."""
        got: dict[int, Any] = {}
        readers = [
            threading.Thread(target=lambda n=n, s=s: got.__setitem__(n, s.read()), daemon=True)
            for n, s in ((1, self.stdout), (2, self.stderr))
            if s is not None
        ]
        if self.stdin is not None:
            self.stdin.close()
        for t in readers:
            t.start()
        end = None if timeout is None else time.monotonic() + timeout
        for t in readers:
            t.join(None if end is None else max(0.0, end - time.monotonic()))
            if t.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if end is None else max(0.0, end - time.monotonic()))
        for s in (self.stdout, self.stderr):
            if s is not None:
                s.close()
        return got.get(1), got.get(2)

    def __enter__(self) -> GateProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.poll() is None:
            self.kill()
        self.wait()


def popen(argv: Sequence[str | Path], **kw: Any) -> GateProcess:
    return GateProcess(argv, **kw)


def run(
    argv: Sequence[str | Path],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    capture_output: bool = False,
    text: bool = False,
    timeout: float | None = None,
    stdout: int | None = None,
    stderr: int | None = None,
    rlimits: Mapping[int, tuple[int, int]] | None = None,
) -> subprocess.CompletedProcess[Any]:
    if capture_output:
        stdout = stderr = subprocess.PIPE
    proc = GateProcess(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, text=text, rlimits=rlimits
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode or 0, out, err)


def server_address() -> str:
    """The address of this process's server (the shared one, or its own, started now): what a
    launcher outside pytest (tests/warm_launch.py) connects to."""
    forkserver._forkserver.ensure_running()
    return str(forkserver._forkserver._forkserver_address)


def reap() -> None:
    """Kill and collect every child a test left running (its pytest-timeout, a failed assertion)."""
    while _LIVE:
        proc = _LIVE.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)
