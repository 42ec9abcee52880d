"""Policy loading errors: each names the file, the key path or line, and the fix; never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from validate_factory import Suite

from gate.model.errors import MAX_PROBLEMS_SHOWN, PolicyError, UsageError
from gate.model.policy import load_policy


def policy_error(suite: Suite) -> PolicyError:
    with pytest.raises(PolicyError) as info:
        load_policy(suite.write())
    err = info.value
    assert isinstance(err, UsageError)  # exit 2
    text = str(err)
    assert str(suite.policy_path) in text
    assert "Traceback" not in text and "errors.pydantic.dev" not in text
    assert all("fix" in p for p in err.problems), err.problems
    return err


def test_valid_policy_loads(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    loaded = load_policy(suite.write())
    assert loaded.placeholders == ("user_input", "reference", "response")
    assert len(loaded.sha256) == 64 and len(loaded.prompt_sha256) == 64


def test_hash_ignores_comments_and_key_order_but_not_content(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    first = load_policy(suite.write()).sha256
    suite.raw["policy.yaml"] = "# a comment\n" + suite.policy_path.read_text()
    assert load_policy(suite.write()).sha256 == first
    suite.raw.clear()
    suite.policy["limits"]["max_total_cost"] = 2.0
    assert load_policy(suite.write()).sha256 != first
    suite.policy["limits"]["max_total_cost"] = 1.0
    suite.prompt += "Be strict.\n"
    assert load_policy(suite.write()).sha256 != first


def test_unknown_top_level_key(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.policy["slicez"] = {}
    err = policy_error(suite)
    assert any("`slicez`" in p and "unknown key" in p and "remove" in p for p in err.problems)


def test_unknown_nested_key(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.policy["evaluator"]["retries"] = {"max_attempt": 3}
    err = policy_error(suite)
    assert any("`evaluator.retries.max_attempt`" in p and "unknown key" in p for p in err.problems)


def test_unknown_key_in_a_slice(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.policy["slices"]["general"]["max_false_pass"] = 1
    err = policy_error(suite)
    assert any("`slices.general.max_false_pass`" in p for p in err.problems)


def test_wrong_type(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.policy["limits"]["max_total_cost"] = "two dollars"
    err = policy_error(suite)
    assert any("`limits.max_total_cost`" in p and "write a number" in p for p in err.problems)


def test_missing_required_key(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    del suite.policy["rubrics"]
    err = policy_error(suite)
    assert any("`rubrics`" in p and "add `rubrics`" in p for p in err.problems)


def test_every_problem_is_reported(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.policy["slicez"] = {}
    suite.policy["evaluator"]["temperature"] = "hot"
    suite.policy["lanes"]["pr"]["controls"] = "sometimes"
    err = policy_error(suite)
    joined = "\n".join(err.problems)
    for key in ("`slicez`", "`evaluator.temperature`", "`lanes.pr.controls`"):
        assert key in joined
    assert len(err.problems) >= 3


def test_problem_list_is_capped(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    for i in range(MAX_PROBLEMS_SHOWN + 10):
        suite.policy[f"unknown_{i}"] = i
    err = policy_error(suite)
    assert len(err.problems) == MAX_PROBLEMS_SHOWN + 10
    assert "and 10 more" in str(err)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(info.value) and "does not exist" in str(info.value) and "fix" in str(info.value)


def test_empty_file(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.raw["policy.yaml"] = "  \n"
    err = policy_error(suite)
    assert "is empty" in str(err)


def test_not_a_mapping(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.raw["policy.yaml"] = "- a\n- b\n"
    assert "must be a YAML mapping" in str(policy_error(suite))


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.raw["policy.yaml"] = "version: 1\npolicy_id: x\nmetric: {name: [unclosed\nother: 2\n"
    err = policy_error(suite)
    assert "not valid YAML at line" in str(err) and "fix: correct the YAML syntax" in str(err)


def test_malformed_yaml_line_number_is_right(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.raw["policy.yaml"] = "version: 1\npolicy_id: x\n  bad: indent\n"
    assert "line 3" in str(policy_error(suite))


def test_missing_prompt_file(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.policy["metric"]["prompt_file"] = "prompts/missing.txt"
    err = policy_error(suite)
    assert "missing.txt" in str(err) and "prompt_file" in str(err) and "does not exist" in str(err)


def test_inline_prompt(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    del suite.policy["metric"]["prompt_file"]
    suite.policy["metric"]["prompt"] = "Answer: {response}"
    assert load_policy(suite.write()).placeholders == ("response",)


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Q: {user_input}\nLabel: {human_adjudication}\nA: {response}", "label leak"),
        ("Q: {user_input}\nRole: {expected_control_role}\nA: {response}", "label leak"),
        ("Q: {user_input}\nR: {reference}", "no `{response}` placeholder"),
        ("A: {response:.200}", "format spec"),
        ("A: {response!r}", "format spec or conversion"),
        ("A: {response}\nExtra: {case_notes}", "not a case field"),
        ("A: {}", "positional placeholder"),
        ("A: {response.text}", "attribute or index access"),
        ("A: {response", "not a valid format string"),
    ],
)
def test_prompt_placeholder_rules(tmp_path: Path, prompt: str, expected: str) -> None:
    suite = Suite(tmp_path)
    suite.prompt = prompt
    err = policy_error(suite)
    assert any(expected in p and "`metric.prompt_file` (" in p for p in err.problems), err.problems


def test_missing_price_is_refused(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    del suite.policy["evaluator"]["price"]
    err = policy_error(suite)
    assert any("`evaluator.price`" in p and "input_per_mtok" in p for p in err.problems)


def test_prompt_and_price_problems_reported_together(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    del suite.policy["evaluator"]["price"]
    suite.prompt = "Label: {human_adjudication}"
    err = policy_error(suite)
    assert len(err.problems) == 3  # label leak, no {response}, no price


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("metric", "allowed_values"), ["pass"], "must contain pass and fail"),
        (("metric", "allowed_values"), ["pass", "fail", "maybe"], "may only add review_required"),
        (("evaluator", "repeats"), 2, "repeats must be odd"),
        (("lanes", "pr", "partitions"), ["staging"], "names unknown partition staging; fix"),
        (("version",), 2, "`version`"),
    ],
)
def test_semantic_rules(tmp_path: Path, path: tuple[str, ...], value: object, expected: str) -> None:
    suite = Suite(tmp_path)
    target = suite.policy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    err = policy_error(suite)
    assert expected in str(err)
