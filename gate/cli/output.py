"""What a command prints of a decision: the findings for a person, and the outcome (or, with
--format json, result.json's content)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from gate.model.escape import log_text
from gate.model.states import Finding

if TYPE_CHECKING:
    from gate.model.result import Result


def format_findings_text(
    findings: Sequence[Finding], out: IO[str], header: str | None = None, summary: str | None = None
) -> None:
    """The findings for a person; with `summary` (`gate validate`) that line first, linter-style."""
    heads = [log_text(line) for line in (summary, header) if line is not None]
    if not findings and not out.isatty() and summary is not None:
        # Piped or in CI rich would write these lines as they are: not loading it is ~15 ms of
        # `gate validate`'s start (tests/cli/test_startup.py pins the bytes to rich's).
        out.write("".join(f"{line}\n" for line in heads))
        return
    from rich.text import Text

    from gate.report.terminal import make_console, print_findings

    shown = Text("\n".join(heads)) if heads else None
    print_findings([f.to_dict() for f in findings], make_console(out), shown, lint=summary is not None)


def show_outcome(
    result: Result | None,
    out_dir: Path | None,
    fmt: str = "text",
    policy: str | None = None,
    run_dir: Path | None = None,
    cache: tuple[str, str] | None = None,
) -> None:
    """The decision for a person (or, with --format json, result.json's content; `{}` for a plan)."""
    if fmt == "json":
        json.dump(result.written() if result is not None else {}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from gate.report.terminal import make_console, print_outcome

    if result is not None:
        print_outcome(result, out_dir, make_console(sys.stdout), policy, run_dir, cache)


@contextlib.contextmanager
def stdout_for(fmt: str) -> Iterator[None]:
    """With --format json, stdout carries the JSON only: anything else the command says goes to stderr."""
    if fmt != "json":
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield
