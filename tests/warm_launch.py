"""`python` and `gate` of a scratch checkout, started warm (tests/gate_process.py) from a shell.

The doc pages' commands (tests/house/test_readme.py) and the make targets the example tests run
(`make demo`, `make demo-product`, ...) are typed into bash as a newcomer types them; each would
start a fresh interpreter that spends seconds of CPU importing ragas before it judges anything.
The scratch checkout's `.venv/bin/python` and `.venv/bin/gate` are this launcher instead: it
forks the command from the suite's warm process server, with this process's streams,
environment and working directory, waits, and exits as the command did (its code, or its signal).
What it runs is what the shell asked for: `gate ARGS`, `python -m gate.cli ARGS`, `python [-P] -m
gate.action` (the container's entry point, which tests/stub_docker.py runs as the container would),
or `python SCRIPT.py ARGS`; any other `python` command line (`-c`, `-m pip`, no script) is handed
to the real interpreter. How a fresh interpreter starts is tested elsewhere (test_startup, test_cached_path).

    write_launcher(checkout / ".venv/bin/gate", "gate", gate_process.server_address())
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import gate_process

TESTS = Path(__file__).resolve().parent


def write_launcher(path: Path, kind: str, server: str) -> Path:
    """An executable at `path` that is `python` (kind "python") or `gate` (kind "gate"), forking
    from the process server at `server` (`gate_process.server_address()`)."""
    # `-c`, not a file: multiprocessing would run a main module's file again in every child.
    code = f"import sys; sys.path.insert(0, {str(TESTS)!r}); import warm_launch; warm_launch.main({kind!r}, {server!r})"
    path.write_text(f'#!/bin/sh\nexec {sys.executable} -c "{code}" "$@"\n', encoding="utf-8")
    path.chmod(0o755)
    return path


def launch(kind: str, args: list[str]) -> list[str] | None:
    """The argument list for `gate_process.popen`, or None for a command line the real interpreter takes."""
    if kind == "gate":
        return args
    if args[:1] == ["-P"]:  # no directory put first on sys.path: the warm process imported what it runs
        args = args[1:]
    if args[:2] == ["-m", "gate.cli"]:
        return args[2:]
    if args[:2] == ["-m", "gate.action"]:
        return [sys.executable, *args]
    if args[:1] and args[0].endswith(".py") and Path(args[0]).is_file():
        return [sys.executable, *args]
    return None


def main(kind: str, server: str) -> None:
    argv = launch(kind, sys.argv[1:])
    if argv is None:
        os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
    gate_process.use_server(server)
    proc = gate_process.popen(argv)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _frame: proc.send_signal(n))
    code = proc.wait()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)
