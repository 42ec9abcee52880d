"""Read a step log the way the GitHub Actions runner does, to find every workflow command in it.

The runner (actions/runner, `ActionCommandManager.TryProcessCommand`) splits the output into lines
at CR, LF or CRLF and tries each line twice:
- the `::` syntax: the line's leading whitespace is trimmed, then a line starting with `::` and
  holding another `::` is the command named by the text between them, up to a space
  (`::error file=a::data`);
- the old `##[` syntax, anywhere in the line: `##[name props]data`.
Command names are matched case-insensitively. After `::stop-commands::TOKEN` nothing is a command
until a line `::TOKEN::`.

This reader is stricter than the runner in one way: any name counts, not only the ones the runner
knows today, so a test that finds no command here would find none on any runner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINES = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Command:
    name: str  # lower-cased
    data: str
    line: str


def _parse_line(line: str) -> Command | None:
    trimmed = line.lstrip()
    if trimmed.startswith("::"):
        end = trimmed.find("::", 2)
        if end > 2:
            info = trimmed[2:end]
            return Command(info.split(" ", 1)[0].lower(), trimmed[end + 2 :], line)
    start = line.find("##[")
    if start >= 0:
        end = line.find("]", start)
        if end > start + 3:
            info = line[start + 3 : end]
            return Command(info.split(" ", 1)[0].lower(), line[end + 1 :], line)
    return None


def commands(log: str) -> list[Command]:
    """Every workflow command the runner would act on in `log`, in order (stop-commands honoured)."""
    found: list[Command] = []
    resume: str | None = None
    for line in _LINES.split(log):
        cmd = _parse_line(line)
        if cmd is None:
            continue
        if resume is not None:
            if cmd.name == resume:
                resume = None
            continue
        found.append(cmd)
        if cmd.name == "stop-commands":
            resume = cmd.data.lower()
    return found


def forged(log: str, own: tuple[str, ...] = ()) -> list[Command]:
    """The commands in `log` other than the gate's own (`own`: the exact lines it printed)."""
    return [c for c in commands(log) if c.line not in own]
