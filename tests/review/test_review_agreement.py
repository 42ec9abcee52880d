"""Agreement among reviewers: alpha against the literature's worked example and the reference
implementation (the `krippendorff` package), its bootstrap interval, and Cohen's kappa by hand."""

from __future__ import annotations

import random

import krippendorff
import pytest

from gate.review.agreement import alpha, alpha_interval, cohen_kappa

# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the nominal example: four
# observers, twelve units, missing values; alpha = 0.743.
ROWS = {
    "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
}


def units_of(rows: dict[str, list[int | None]]) -> dict[str, dict[str, str]]:
    n = len(next(iter(rows.values())))
    return {f"u{i}": {r: str(v[i]) for r, v in rows.items() if v[i] is not None} for i in range(n)}


def test_alpha_is_the_worked_example_of_the_literature() -> None:
    assert alpha(units_of(ROWS)) == pytest.approx(0.743, abs=5e-4)


def test_alpha_agrees_with_the_reference_implementation_on_random_labels_with_gaps() -> None:
    rng = random.Random(7)
    for _ in range(20):
        rows = {r: [rng.choice([None, 1, 2, 2, 3]) if rng.random() < 0.9 else None for _ in range(30)] for r in "ABCD"}
        ours = alpha(units_of(rows))
        data = [[float("nan") if v is None else v for v in row] for row in rows.values()]
        theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert ours == pytest.approx(theirs, abs=1e-9)


def test_alpha_is_undefined_when_nobody_could_disagree_and_one_when_all_agree() -> None:
    assert alpha({"u1": {"a": "pass", "b": "pass"}, "u2": {"a": "pass", "b": "pass"}}) is None
    assert alpha({"u1": {"a": "pass"}}) is None
    assert alpha({"u1": {"a": "pass", "b": "pass"}, "u2": {"a": "fail", "b": "fail"}}) == pytest.approx(1.0)


def test_the_bootstrap_interval_holds_alpha_and_narrows_with_more_units() -> None:
    rng = random.Random(3)

    def labelled(n: int) -> dict[str, dict[str, str]]:
        out = {}
        for i in range(n):
            truth = rng.choice(["pass", "fail"])
            out[f"u{i}"] = {r: truth if rng.random() < 0.85 else rng.choice(["pass", "fail"]) for r in "ab"}
        return out

    small, large = labelled(40), labelled(400)
    lo_s, hi_s = alpha_interval(small) or (0, 0)
    lo_l, hi_l = alpha_interval(large) or (0, 0)
    assert lo_s <= (alpha(small) or 0) <= hi_s and lo_l <= (alpha(large) or 0) <= hi_l
    assert hi_l - lo_l < hi_s - lo_s
    assert alpha_interval(small) == alpha_interval(small)  # seeded: the same labels show the same interval


def test_cohen_kappa_by_hand() -> None:
    # 50 items: both yes 20, A yes B no 5, A no B yes 10, both no 15: p_o 0.7, p_e 0.5, kappa 0.4.
    pairs = [("y", "y")] * 20 + [("y", "n")] * 5 + [("n", "y")] * 10 + [("n", "n")] * 15
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([("y", "y")] * 3) is None


def test_the_interval_holds_95_percent_of_alphas_bootstrap_distribution() -> None:
    """The interval is the middle 95% of alpha over units resampled with replacement: a bootstrap of our
    own (another generator, alpha recomputed from scratch) falls inside it 95% of the time, not 90%."""
    rng = random.Random(3)
    units: dict[str, dict[str, str]] = {}
    for i in range(60):
        truth = "fail" if i % 4 == 0 else "pass"
        units[f"u{i}"] = {r: truth if rng.random() < 0.85 else {"pass": "fail", "fail": "pass"}[truth] for r in "ab"}
    low, high = alpha_interval(units) or (1.0, 0.0)
    draw = random.Random(11)
    keys = list(units)
    found = [alpha({str(i): units[draw.choice(keys)] for i in range(len(keys))}) for _ in range(1500)]
    alphas = [a for a in found if a is not None]
    inside = sum(low <= a <= high for a in alphas) / len(alphas)
    assert 0.93 <= inside <= 0.97, inside
