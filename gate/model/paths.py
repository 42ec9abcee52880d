"""The working directory, and paths as a person reads them in messages.

The working directory is the process's current directory, unless the caller names another for a
stretch of work with `working_in(directory)`: the Action runs in its `working-directory` input
that way, as `cd DIR && gate run` would, without changing the process's current directory (a
process-wide `os.chdir` would move every thread's and library's relative paths with it). Inside,
a relative path a user wrote (`--policy`, the default cache) is read from that directory
(`from_working_directory`), and messages name paths relative to it.

A PR comment, a log or an error then says `evals/cases.jsonl`, never `/github/workspace/evals/...`;
a path outside the working directory stays as it is (absolute), so it is never ambiguous.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# None: the process's current directory. A context variable, not a global: asyncio tasks and the
# forked workers of a run inherit it, and it ends with the `with` block on every path out.
_WORKING_DIRECTORY: contextvars.ContextVar[Path | None] = contextvars.ContextVar("gate_working_directory", default=None)


@contextmanager
def working_in(directory: Path) -> Iterator[None]:
    """Read relative paths from, and show paths relative to, `directory` until the block ends."""
    # Resolved, as the current directory after a chdir is (os.getcwd() names no symbolic link).
    token = _WORKING_DIRECTORY.set(directory.resolve())
    try:
        yield
    finally:
        _WORKING_DIRECTORY.reset(token)


def working_directory() -> Path:
    return _WORKING_DIRECTORY.get() or Path.cwd()


def from_working_directory(path: Path | str) -> Path:
    """The path to open for `path` as a user wrote it: a relative one from the working directory."""
    p = Path(path)
    base = _WORKING_DIRECTORY.get()
    return p if base is None or p.is_absolute() else base / p


def shown_path(path: Path | str) -> str:
    p = Path(path)
    try:
        return str(Path(os.path.abspath(from_working_directory(p))).relative_to(working_directory().resolve())) or "."
    except (ValueError, OSError):
        return str(p)


def run_file(path: Path | str, name: str) -> Path:
    """A run's file as the user named it: `name` inside a run's --out directory, else the path itself
    (so `--records gate-out` and `--records gate-out/records.jsonl` read the same file)."""
    p = Path(path)
    return p / name if from_working_directory(p).is_dir() else p


def run_directory(path: Path | str) -> Path:
    """A run's --out directory as the user named it: the directory itself, or the directory of one of
    its files (`--result gate-out/result.json` is `gate-out`)."""
    p = Path(path)
    return p.parent if from_working_directory(p).is_file() else p
