"""Near-duplicate detection: word shingles, one-permutation MinHash, LSH banding, exact check.

The pipeline is sub-quadratic and numpy-vectorised:

1. Normalise each text (lowercase, delete every character that is neither a word character nor
   whitespace, collapse whitespace) and cut it into word shingles of `shingle_words` words (a text
   shorter than that is one shingle of all its words). ASCII texts are tokenised and hashed on the
   raw bytes in numpy; other texts are normalised with the equivalent regular expression first.
2. Sign each text with one-permutation MinHash (one 64-bit hash per shingle, `n_bins` bins, the
   minimum per bin) and fill empty bins by optimal densification (Shrivastava, ICML 2017), so two
   texts agree on a bin with probability equal to their Jaccard similarity.
3. Band the signature (`bands` bands of `rows` bins, chosen from the threshold so that a pair at the
   threshold is missed with probability below 1e-4) and take every pair sharing a band bucket and
   allowed by the caller (e.g. from different partitions) as a candidate.
4. Verify every candidate with the exact Jaccard similarity of the word-shingle sets, so there are
   no false positives.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# The pure-Python half of the pipeline, re-exported.
from gate.validate.shingles import NearDuplicate as NearDuplicate
from gate.validate.shingles import jaccard as jaccard
from gate.validate.shingles import near_duplicates_exact as near_duplicates_exact
from gate.validate.shingles import normalized_words as normalized_words
from gate.validate.shingles import shingle_set as shingle_set

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

_NON_WORD = re.compile(r"[^\w\s]+")
_MAX_BINS = 256
_MISS_PROBABILITY = 1e-4
# Texts are processed in chunks of about 256 kB: the arrays stay small, are reused by the allocator
# and never page-fault in bulk, which costs more than the arithmetic on a small VM.
_CHUNK_BYTES = 1 << 18
_SEED = 0x5EED_6A7E

# Byte classes for ASCII text: 0 = deleted (punctuation, controls), 1 = whitespace, 2 = word byte.
_CLASS = np.zeros(256, dtype=np.uint8)
for _b in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_":
    _CLASS[_b] = 2
for _b in (9, 10, 11, 12, 13, 28, 29, 30, 31, 32):  # what str.split() and \s treat as whitespace
    _CLASS[_b] = 1
_CLASS[128:] = 2  # only in texts already normalised by the regular expression (UTF-8 word bytes)

_BASE = 0x100000001B3  # odd, hence invertible modulo 2**64
_BASE_INV = pow(_BASE, -1, 1 << 64)


def _mix(x: U64) -> U64:
    """splitmix64 finaliser, in place on a fresh array."""
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


@dataclass(frozen=True)
class Banding:
    bands: int
    rows: int

    @property
    def bins(self) -> int:
        return self.bands * self.rows

    def miss_probability(self, similarity: float) -> float:
        return float((1.0 - similarity**self.rows) ** self.bands)


def choose_banding(threshold: float) -> Banding:
    """The most selective banding (most rows per band) that still catches the threshold.

    A pair with Jaccard `threshold` becomes a candidate with probability >= 1 - 1e-4, within at
    most 256 bins; more rows per band means fewer dissimilar pairs to verify.
    """
    best = Banding(bands=_MAX_BINS, rows=1)
    for rows in range(1, 17):
        p = threshold**rows
        if p >= 1.0:
            return Banding(bands=1, rows=rows)
        bands = math.ceil(math.log(_MISS_PROBABILITY) / math.log1p(-p))
        if bands * rows > _MAX_BINS:
            break
        best = Banding(bands=bands, rows=rows)
    return best


def _chunks(texts: Sequence[str]) -> list[tuple[int, int]]:
    """Consecutive (start, end) ranges of about _CHUNK_BYTES characters (at least one text each)."""
    out: list[tuple[int, int]] = []
    start = 0
    while start < len(texts):
        end, size = start, 0
        while end < len(texts) and (size < _CHUNK_BYTES or end == start):
            size += len(texts[end]) + 1
            end += 1
        out.append((start, end))
        start = end
    return out


def shingle_hashes(texts: Sequence[str], k: int) -> tuple[U64, I64]:
    """64-bit hashes of every word shingle of every text, and the index of the text of each."""
    hashes: list[U64] = [np.zeros(0, dtype=np.uint64)]
    owners: list[I64] = [np.zeros(0, dtype=np.int64)]
    for start, end in _chunks(texts):
        h, owner = _chunk_shingles(texts[start:end], k)
        hashes.append(h)
        owners.append(owner + start)
    return np.concatenate(hashes), np.concatenate(owners)


def _prepare(text: str) -> str:
    """Lowercased text without newlines (the chunk uses them as separators)."""
    text = text.lower()
    if text.isascii():
        return text.replace("\n", " ")
    return " ".join(normalized_words(text))


_SHINGLE_WEIGHTS: U64 = np.random.default_rng(_SEED).integers(1, 1 << 62, size=16, dtype=np.uint64) * np.uint64(
    2
) + np.uint64(1)
_POWERS: dict[int, U64] = {}


def _powers(base: int, n: int) -> U64:
    """base**0 .. base**(n-1) modulo 2**64, cached and grown as needed."""
    have = _POWERS.get(base)
    if have is None or have.size < n:
        size = max(n, 2 * _CHUNK_BYTES)
        out = np.full(size, base, dtype=np.uint64)
        out[0] = 1
        have = _POWERS[base] = np.cumprod(out, dtype=np.uint64)
    return have[:n]


def _chunk_shingles(texts: Sequence[str], k: int) -> tuple[U64, I64]:
    """Shingle hashes of a few texts, and the index (within `texts`) of the text of each."""
    joined = "\n" + "\n".join(_prepare(t) for t in texts) + "\n"
    raw = np.frombuffer(joined.encode("utf-8"), dtype=np.uint8)
    kept = raw[_CLASS[raw] != 0]  # punctuation deleted; whitespace and word bytes remain
    del raw
    # Every text is followed by its separator newline, the only newlines left.
    text_end = np.flatnonzero(kept == 10)[1:]
    is_word = kept > 32  # kept whitespace bytes are <= 32, word bytes are >= 48
    word_start = np.flatnonzero(is_word[1:] > is_word[:-1]) + 1
    word_end = np.flatnonzero(is_word[:-1] > is_word[1:]) + 1  # exclusive
    del is_word
    words = word_start.size
    if words == 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)

    # Position-independent polynomial hash of every word from one prefix sum (mod 2**64):
    # sum(c_j * B**(last - j)) = B**last * (P[last] - P[start - 1]) with P = cumsum(c_j * B**-j).
    n = kept.size
    prefix = np.multiply(kept, _powers(_BASE_INV, n), dtype=np.uint64)
    np.cumsum(prefix, out=prefix)
    last = word_end - 1
    word_hash = _mix((prefix[last] - prefix[word_start - 1]) * _powers(_BASE, n)[last])
    del prefix, last

    owner = np.searchsorted(text_end, word_start, side="right").astype(np.int64)
    counts = np.bincount(owner, minlength=len(texts))
    ends = np.cumsum(counts)
    remaining = np.repeat(ends, counts) - np.arange(words, dtype=np.int64)  # words left in the text
    # A shingle starts at every word with k words left in its text; a text shorter than k words
    # is one shingle of all its words.
    shingle = word_hash * _SHINGLE_WEIGHTS[0]
    for t in range(1, k):
        contribution = np.zeros(words, dtype=np.uint64)
        np.multiply(word_hash[t:], _SHINGLE_WEIGHTS[t], out=contribution[:-t])
        contribution[remaining <= t] = 0
        shingle += contribution
    valid = remaining >= k
    short = np.flatnonzero((counts > 0) & (counts < k))
    valid[(ends - counts)[short]] = True
    return _mix(shingle[valid]), owner[valid]


_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_OFFSET = np.uint64(0x9E3779B97F4A7C15)


def signatures(hashes: U64, owners: I64, n_texts: int, n_bins: int) -> U64:
    """One-permutation MinHash signatures, shape (n_texts, n_bins), densified.

    Empty bins are filled by improved densification (Shrivastava and Li, UAI 2014): each bin has a
    fixed random direction and copies the nearest non-empty bin that way (circularly), plus an
    offset per step, which keeps P[two texts agree on a bin] equal to their Jaccard similarity.
    A text without shingles keeps an all-empty row (every bin = 2**64 - 1).
    """
    flat = np.full(n_texts * n_bins, _EMPTY, dtype=np.uint64)
    if hashes.size:
        bins = ((hashes >> np.uint64(32)) * np.uint64(n_bins)) >> np.uint64(32)
        np.minimum.at(flat, owners * n_bins + bins.astype(np.int64), hashes)
    sig: U64 = flat.reshape(n_texts, n_bins)
    nonempty = sig != _EMPTY
    if nonempty.all() or not nonempty.any():
        return sig
    pos = np.arange(n_bins, dtype=np.int32)
    far = np.int32(4 * n_bins)
    here = np.where(nonempty, pos, far)
    # Nearest non-empty bin at or to the right of each bin, circularly: a suffix minimum over two laps.
    right = np.minimum.accumulate(np.concatenate((here, here + n_bins), axis=1)[:, ::-1], axis=1)[:, ::-1]
    right = right[:, :n_bins] - pos
    here = np.where(nonempty, pos, -far)
    left = np.maximum.accumulate(np.concatenate((here - n_bins, here), axis=1), axis=1)[:, n_bins:]
    left = pos - left
    use_right = _directions(n_bins)
    step = np.where(use_right, right, left)
    source = np.where(use_right, pos + step, pos - step) % n_bins
    rows = np.arange(n_texts)[:, None]
    filled: U64 = sig[rows, source] + step.astype(np.uint64) * _OFFSET
    empty_row = ~nonempty.any(axis=1)
    filled[empty_row] = _EMPTY
    return filled


def _directions(n_bins: int) -> npt.NDArray[np.bool_]:
    return np.random.default_rng(_SEED + n_bins).integers(0, 2, size=n_bins).astype(bool)


def band_keys(sig: U64, banding: Banding) -> U64:
    """A 64-bit bucket key per (band, text), shape (bands, n_texts)."""
    n_texts = sig.shape[0]
    blocks = sig[:, : banding.bins].reshape(n_texts, banding.bands, banding.rows)
    weights = np.resize(_SHINGLE_WEIGHTS, banding.rows)
    acc = (blocks * weights).sum(axis=2, dtype=np.uint64)
    acc += np.arange(1, banding.bands + 1, dtype=np.uint64) * _OFFSET
    return np.ascontiguousarray(_mix(acc).T)


def _cross_pairs(ids: I64, groups: I64, n_texts: int) -> list[I64]:
    """The pairs of one bucket whose texts are in different groups, as codes `lo * n_texts + hi`.
    Built group against group, never every pair of the bucket: thousands of templated cases of one
    partition share a bucket with a few of another, and only those few times the thousands count."""
    by_group = np.argsort(groups[ids], kind="stable")
    ids = ids[by_group]
    parts = np.split(ids, np.flatnonzero(np.diff(groups[ids])) + 1)
    out: list[I64] = []
    for x, left in enumerate(parts):
        for right in parts[x + 1 :]:
            i, j = np.repeat(left, right.size), np.tile(right, left.size)
            out.append(np.minimum(i, j) * n_texts + np.maximum(i, j))
    return out


def candidate_pairs(keys: U64, usable: npt.NDArray[np.bool_], groups: I64) -> I64:
    """Unique (i, j), i < j, sharing a bucket in some band, both usable, groups[i] != groups[j]."""
    n_texts = keys.shape[1]
    index = np.flatnonzero(usable)
    found: list[I64] = []
    for band in keys:
        k = band[index]
        order = np.argsort(k)
        sk = k[order]
        members = index[order]
        boundary = np.flatnonzero(np.diff(sk) != 0) + 1
        starts = np.concatenate(([0], boundary))
        ends = np.concatenate((boundary, [sk.size]))
        multi = np.flatnonzero(ends - starts >= 2)
        for s, e in zip(starts[multi].tolist(), ends[multi].tolist(), strict=True):
            found.extend(_cross_pairs(members[s:e], groups, n_texts))
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    codes = np.unique(np.concatenate(found))
    return np.stack((codes // n_texts, codes % n_texts), axis=1)


def near_duplicates(
    texts: Sequence[str],
    groups: Sequence[int],
    threshold: float,
    shingle_words: int,
    skip: Callable[[int, int], bool] | None = None,
) -> list[NearDuplicate]:
    """Every pair of texts in different groups with exact shingle Jaccard >= threshold.

    `groups` is an integer per text (e.g. its partition); pairs within one group are ignored, and so
    are pairs for which `skip(i, j)` is true. Sorted by (first, second).
    """
    n = len(texts)
    if n < 2:
        return []
    banding = choose_banding(threshold)
    keys = np.empty((banding.bands, n), dtype=np.uint64)
    usable = np.empty(n, dtype=bool)
    for start, end in _chunks(texts):
        hashes, owners = _chunk_shingles(texts[start:end], shingle_words)
        sig = signatures(hashes, owners, end - start, banding.bins)
        usable[start:end] = sig[:, 0] != _EMPTY
        keys[:, start:end] = band_keys(sig, banding)
    pairs = candidate_pairs(keys, usable, np.asarray(groups, dtype=np.int64))
    del keys
    sets: dict[int, frozenset[tuple[str, ...]]] = {}

    def shingles_of(i: int) -> frozenset[tuple[str, ...]]:
        got = sets.get(i)
        if got is None:
            got = sets[i] = shingle_set(texts[i], shingle_words)
        return got

    out: list[NearDuplicate] = []
    for i, j in pairs.tolist():
        if skip is not None and skip(i, j):
            continue
        similarity = jaccard(shingles_of(i), shingles_of(j))
        if similarity >= threshold:
            out.append(NearDuplicate(i, j, similarity))
    return out


def near_duplicates_naive(
    texts: Sequence[str], groups: Sequence[int], threshold: float, shingle_words: int
) -> list[NearDuplicate]:
    """The all-pairs exact reference (quadratic): for tests and the benchmark only."""
    return near_duplicates_exact(texts, groups, threshold, shingle_words)
