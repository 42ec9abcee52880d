"""The output directory: checked before the first model call, and failures to write into it.

`gate run` pays for judgments; evidence it cannot write is money lost. So `--out` is proven
writable (created if missing, a probe file written and removed) before anything is sent, and a
write that fails mid-run stops scheduling at once (see `gate.run.runner.Runner`) and ends in
`OutputWriteError`: exit 3 with a message, never a verdict.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from gate.model.errors import GateError, UsageError


class OutputDirError(UsageError):
    """`--out` cannot be used (not a directory, cannot be created, not writable): exit 2."""


class OutputWriteError(GateError):
    """Writing the run's outputs failed after it started (a full disk, an I/O error): exit 3."""


def describe(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_out_dir(path: Path, flag: str = "--out") -> None:
    """Raise OutputDirError unless `path` is (or can be made) a directory we can write into."""
    if path.exists() and not path.is_dir():
        raise OutputDirError(
            f"{flag} {path}: exists and is not a directory, so the run's outputs cannot be written there; "
            f"fix: pass a directory path to {flag} (it is created if missing)"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(
            f"{flag} {path}: the directory cannot be created ({describe(exc)}); nothing was judged or paid; "
            f"fix: pass a writable location to {flag}"
        ) from None
    probe = path / f".gate-write-probe-{os.getpid()}"
    try:
        with probe.open("wb") as fh:
            fh.write(b"probe\n")
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        raise OutputDirError(
            f"{flag} {path}: cannot write into the directory ({describe(exc)}); nothing was judged or paid; "
            f"fix: make it writable or pass another directory to {flag}"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


# Every file a run or a merge writes that a reader takes as its verdict.
OUTPUT_FILES = (
    "result.json",
    "report.md",
    "summary.md",
    "junit.xml",
    "certification-entry.json",
    "rollback.json",
    "product.svg",
)


def clear_outputs(out_dir: Path) -> None:
    """Remove a result left by an earlier run: it must never be read (or published) as this one's.
    Called once the command can no longer be refused: a usage error changes nothing in --out."""
    for name in OUTPUT_FILES:
        (out_dir / name).unlink(missing_ok=True)
    _BEGUN.add(_key(out_dir))


# The --out directories this process has begun to change (`clear_outputs`): an interruption before
# that (a signal while the judge loads) leaves an earlier run's files there, which are not this run's.
_BEGUN: set[str] = set()


def _key(out_dir: Path) -> str:
    return os.path.abspath(out_dir)


def begun(out_dir: Path) -> bool:
    """Whether this process has begun to change `out_dir` (cleared the earlier run's outputs)."""
    return _key(out_dir) in _BEGUN


def forget(out_dir: Path) -> None:
    """A new command into `out_dir` starts: it has changed nothing yet."""
    _BEGUN.discard(_key(out_dir))
