"""Word shingles and their exact Jaccard similarity, in plain Python (no numpy).

`minhash.py` finds near-duplicates among many texts with numpy; a small dataset is compared
exactly here, all pairs, without paying numpy's import (a large share of `gate validate`'s start).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_NON_WORD = re.compile(r"[^\w\s]+")

Shingles = frozenset[tuple[str, ...]]


@dataclass(frozen=True)
class NearDuplicate:
    first: int
    second: int
    jaccard: float


def normalized_words(text: str) -> list[str]:
    """The reference normalisation: what the vectorised tokeniser computes, in plain Python."""
    return _NON_WORD.sub("", text.lower()).split()


def shingle_set(text: str, k: int) -> Shingles:
    """The exact set of word shingles of a text (empty for a text with no words)."""
    words = normalized_words(text)
    if not words:
        return frozenset()
    if len(words) < k:
        return frozenset([tuple(words)])
    return frozenset(tuple(words[i : i + k]) for i in range(len(words) - k + 1))


def jaccard(a: Shingles, b: Shingles) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def near_duplicates_exact(
    texts: Sequence[str],
    groups: Sequence[int],
    threshold: float,
    shingle_words: int,
    skip: Callable[[int, int], bool] | None = None,
) -> list[NearDuplicate]:
    """Every pair in different groups with shingle Jaccard >= threshold, all pairs compared (quadratic)."""
    sets = [shingle_set(t, shingle_words) for t in texts]
    out: list[NearDuplicate] = []
    for i in range(len(texts)):
        a, gi = sets[i], groups[i]
        if not a:
            continue
        for j in range(i + 1, len(texts)):
            if groups[j] == gi or (skip is not None and skip(i, j)):
                continue
            similarity = jaccard(a, sets[j])
            if similarity >= threshold:
                out.append(NearDuplicate(i, j, similarity))
    return out
