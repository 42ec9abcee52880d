"""Counted nouns in messages: "1 case", "3 cases", and the verb that agrees, never "case(s)"."""

from __future__ import annotations

from collections.abc import Sequence


def plural(n: int, word: str, many: str | None = None) -> str:
    """`n` and `word`, in the plural (`many`, else `word` + "s") unless `n` is 1."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def listed(ids: Sequence[str], most: int = 10) -> str:
    """The first `most` of `ids`, comma-separated, then how many more (plain text; in Markdown,
    gate.model.escape.id_list)."""
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def agree(n: int, one: str, many: str) -> str:
    """The verb form that agrees with a count of `n` ("has"/"have", "was"/"were")."""
    return one if n == 1 else many
