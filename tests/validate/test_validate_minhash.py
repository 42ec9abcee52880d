"""The near-duplicate engine: vectorised tokenisation, MinHash/LSH recall, exact verification."""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest

from gate.validate.minhash import (
    choose_banding,
    jaccard,
    near_duplicates,
    near_duplicates_naive,
    shingle_hashes,
    shingle_set,
    signatures,
)

TRICKY = [
    "Hello, World!",
    "hello world",
    "  multiple   spaces\tand\nnewlines\r\nhere ",
    "don't stop-believing... (really)",
    "Ça va? très—bien «merci»",
    "naïve café\u00a0crème brûlée",
    "",
    "!!! ???",
    "one",
    "two words",
    "snake_case and CamelCase 42 times",
    "\x00control\x07chars\x1fend",
]


def _random_text(rng: random.Random, vocab: list[str], n: int) -> str:
    return " ".join(rng.choice(vocab) + rng.choice(["", ",", ".", "!", ""]) for _ in range(n))


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_vectorised_shingles_match_the_reference(k: int) -> None:
    rng = random.Random(k)
    vocab = ["Alpha", "beta", "GAMMA", "délta", "e-mail", "x"]
    texts = TRICKY + [_random_text(rng, vocab, rng.randint(0, 12)) for _ in range(200)]
    hashes, owners = shingle_hashes(texts, k)
    for i, text in enumerate(texts):
        assert len(set(hashes[owners == i].tolist())) == len(shingle_set(text, k)), text


def test_normalisation_ignores_case_punctuation_and_spacing() -> None:
    assert shingle_set("Hello, World!", 3) == shingle_set("  hello   world ", 3)
    assert jaccard(shingle_set("Hello, World!", 3), shingle_set("hello world", 3)) == 1.0
    assert jaccard(shingle_set("", 3), shingle_set("", 3)) == 0.0


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.8, 0.9, 0.95, 1.0])
def test_banding_catches_the_threshold(threshold: float) -> None:
    banding = choose_banding(threshold)
    assert banding.bins <= 256
    assert banding.miss_probability(threshold) <= 1e-4


def test_identical_texts_get_identical_signatures() -> None:
    texts = ["a b c d e f g", "A, b c. d e f g!", "one two", "one two", ""]
    hashes, owners = shingle_hashes(texts, 3)
    sig = signatures(hashes, owners, len(texts), 64)
    assert (sig[0] == sig[1]).all() and (sig[2] == sig[3]).all() and not (sig[0] == sig[2]).any()


def test_lsh_finds_exactly_what_all_pairs_finds() -> None:
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(500)]
    texts = [_random_text(rng, vocab, rng.randint(5, 80)) for _ in range(600)]
    groups = [rng.randrange(3) for _ in texts]
    for _ in range(25):  # plant near-copies in another group, some above and some below 0.8
        i, j = rng.sample(range(len(texts)), 2)
        w = texts[i].split()
        for _ in range(rng.randint(0, 4)):
            w[rng.randrange(len(w))] = "edit"
        texts[j] = " ".join(w).upper()
        groups[j] = (groups[i] + 1) % 3
    fast = near_duplicates(texts, groups, 0.8, 3)
    assert fast == near_duplicates_naive(texts, groups, 0.8, 3)
    assert len(fast) >= 10
    assert all(groups[h.first] != groups[h.second] and h.jaccard >= 0.8 for h in fast)


def test_skip_and_same_group_pairs_are_not_reported() -> None:
    texts = ["the same words in every text here"] * 3
    assert near_duplicates(texts, [0, 0, 0], 0.8, 3) == []
    hits = near_duplicates(texts, [0, 1, 1], 0.8, 3, skip=lambda i, j: j == 2)
    assert [(h.first, h.second) for h in hits] == [(0, 1)]


def test_no_shingles_no_match() -> None:
    assert near_duplicates(["", "...", "!!!"], [0, 1, 2], 0.5, 3) == []
    assert signatures(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64), 2, 8).shape == (2, 8)


def test_a_bucket_of_one_partition_beside_a_few_of_another_costs_only_their_cross_pairs() -> None:
    """3,000 templated texts of one partition, all near-duplicates of each other, share their buckets
    with 2 texts of another: the candidates are those 6,000 cross pairs. Every pair of the bucket was
    built first (4.5 million, ~250 MB here): a release lane of 20,000 templated cases beside its six
    controls took 7.5 GB in gate run's validators, and 100,000 cases ran the machine out of memory."""
    texts = [
        f"Question for c-{i:06d}: when can I get a refund? Refunds within 7 days of purchase." for i in range(3000)
    ]
    texts += [f"Question for ctl-{n}: when can I get a refund? Refunds within 7 days of purchase." for n in "ab"]
    groups = [0] * 3000 + [1, 1]
    tracemalloc.start()
    try:
        hits = near_duplicates(texts, groups, 0.5, 3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    controls = [shingle_set(t, 3) for t in texts[3000:]]
    expected = sorted(
        (i, 3000 + c, jaccard(shingle_set(texts[i], 3), s))
        for i in range(3000)
        for c, s in enumerate(controls)
        if jaccard(shingle_set(texts[i], 3), s) >= 0.5
    )
    assert [(h.first, h.second, h.jaccard) for h in hits] == expected and len(expected) == 6000
    assert peak < 60_000_000  # ~31 MB is the signatures alone; every pair of the bucket took 226 MB
