"""Every number in a policy is finite (issue 10, defect 4): `.inf` in `max_total_cost` turned the hard
cost cap off while `--max-cost inf` was refused. YAML spells them `.inf`, `-.inf` and `.nan`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from suite import write_suite

from gate.cli import main

NUMBERS: list[tuple[str, dict[str, Any]]] = [
    ("limits.max_total_cost", {"limits": {"max_total_cost": "X"}}),
    ("limits.max_evaluator_errors", {"limits": {"max_evaluator_errors": "X"}}),
    ("evaluator.timeout_s", {"evaluator": {"timeout_s": "X"}}),
    ("evaluator.temperature", {"evaluator": {"temperature": "X"}}),
    ("evaluator.seed", {"evaluator": {"seed": "X"}}),
    ("evaluator.max_output_tokens", {"evaluator": {"max_output_tokens": "X"}}),
    ("evaluator.max_concurrency", {"evaluator": {"max_concurrency": "X"}}),
    ("evaluator.repeats", {"evaluator": {"repeats": "X"}}),
    ("evaluator.retries.max_attempts", {"evaluator": {"retries": {"max_attempts": "X"}}}),
    ("evaluator.rate_limit.requests_per_minute", {"evaluator": {"rate_limit": {"requests_per_minute": "X"}}}),
    ("evaluator.rate_limit.tokens_per_minute", {"evaluator": {"rate_limit": {"tokens_per_minute": "X"}}}),
    (
        "evaluator.price.input_per_mtok",
        {"evaluator": {"price": {"input_per_mtok": "X", "output_per_mtok": 1.0, "currency": "USD"}}},
    ),
    (
        "evaluator.price.output_per_mtok",
        {"evaluator": {"price": {"input_per_mtok": 1.0, "output_per_mtok": "X", "currency": "USD"}}},
    ),
    ("slices.critical.max_false_passes", {"slices": {"critical": {"max_false_passes": "X"}}}),
    ("slices.critical.max_false_fails", {"slices": {"critical": {"max_false_passes": 0, "max_false_fails": "X"}}}),
    ("slices.critical.priority", {"slices": {"critical": {"max_false_passes": 0, "priority": "X"}}}),
    ("leakage.jaccard_threshold", {"leakage": {"jaccard_threshold": "X"}}),
    ("leakage.shingle_words", {"leakage": {"shingle_words": "X"}}),
]


def _put(tree: Any, value: float) -> Any:
    if isinstance(tree, dict):
        return {k: _put(v, value) for k, v in tree.items()}
    return value if tree == "X" else tree


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize(("key", "shape"), NUMBERS, ids=[n[0] for n in NUMBERS])
def test_a_non_finite_number_is_refused_naming_the_key(
    tmp_path: Path, key: str, shape: dict[str, Any], value: float, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path, **_put(shape, value))
    assert main(["validate", "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if f"`{key}`" in x]
    assert "finite" in line.split(f"`{key}`", 1)[1], err  # the problem is said, not another bound
    assert "Traceback" not in err


def test_the_reported_defect_an_infinite_cost_cap_does_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path, limits={"max_total_cost": float("inf")})
    assert ".inf" in policy.read_text()
    assert main(["run", "--policy", str(policy), "--dry-run"]) == 2
    assert "`limits.max_total_cost`" in capsys.readouterr().err
