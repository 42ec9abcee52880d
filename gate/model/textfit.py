"""Fitting text: into a byte limit (GitHub's comment, check-run and step-summary caps) without
splitting a UTF-8 character, and onto a terminal without breaking a word (`say`)."""

from __future__ import annotations

from typing import IO


def head_bytes(text: str, limit: int) -> str:
    """The longest head of `text` within `limit` UTF-8 bytes; a character cut in two is dropped."""
    return text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")


def fit_bytes(text: str, limit: int, note: str) -> str:
    """`text` if it fits in `limit` UTF-8 bytes, else its head followed by `note`, all within `limit`."""
    if len(text.encode("utf-8")) <= limit:
        return text
    room = limit - len(note.encode("utf-8"))
    if room <= 0:
        return head_bytes(note, limit)
    return head_bytes(text, room) + note


# ---- words on a terminal -------------------------------------------------------------------------
# Every message, note and error the CLI prints outside rich goes through `say`: on a terminal it is
# wrapped between words at the terminal's width (a line the terminal wrapped itself would break a
# word in two: `refuses t` / `hem`); piped or in a CI log a line stays one line, as it was written.
HANG = 2  # a wrapped line continues this many columns right of its first line's indent


def wrap(text: str, width: int, hang: int = HANG) -> str:
    """`text` wrapped between words to `width` columns, each of its lines a paragraph of its own.

    A word is never broken, nor split at a hyphen (a path, a flag or a URL stays whole: one longer
    than the width stands alone on its line); a continued line hangs `hang` columns right of its
    paragraph's own indent, so a wrapped note never reads as the next one.
    """
    import textwrap

    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip(" "))
        out += textwrap.wrap(
            line,
            width,
            subsequent_indent=" " * (indent + hang),
            break_long_words=False,
            break_on_hyphens=False,
        ) or [line]
    return "\n".join(out)


def terminal_width(stream: object) -> int | None:
    """The columns of the terminal `stream` writes to (COLUMNS first, as rich reads it); None when it
    is not a terminal."""
    try:
        tty = bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return None
    if not tty:
        return None
    import shutil

    return max(20, shutil.get_terminal_size((100, 24)).columns)


def say(stream: IO[str], text: str, hang: int = HANG) -> None:
    """Write `text` and a newline: wrapped between words on a terminal, as it is anywhere else."""
    width = terminal_width(stream)
    stream.write((wrap(text, width, hang) if width is not None else text) + "\n")
