"""Fitting text into a byte limit (GitHub's comment, check-run and step-summary caps) without
splitting a UTF-8 character."""

from __future__ import annotations


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
