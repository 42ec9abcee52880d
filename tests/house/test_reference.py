"""The reference that ships (issue 29): docs/POLICY.md's key tables and schemas/*.json are made from
the pydantic models by scripts/reference.py, and fail here when they drift.

The schemas accept the example suite (policy, every case line, the evidence) and reject every
policy of the hostile corpus (tests/hostile_corpus.py's tree edits) whose error is a key's type or
name: a key deleted, renamed, or given a value of the wrong type.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hostile_corpus import HOSTILE_VALUES, _edit_tree, _paths
from pydantic import ValidationError
from suite import policy_dict

from gate.model.policy import Policy
from gate.model.policy_keys import CASE_RULES, RULES, case_keys, policy_keys
from gate.model.yaml12 import load_yaml12 as load_yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "policies" / "example"
SCHEMAS = ROOT / "schemas"
RENAMES = ("\u200b", "_x", "\u00a0", "\n::warning::k", "|", ".")
# pydantic error types that say a key is missing or unknown, or its value has the wrong type
TYPE_OR_NAME = {"missing", "extra_forbidden", "literal_error", "enum", "model_type", "model_attributes_type"}


def schema(name: str) -> jsonschema.Draft202012Validator:
    loaded = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(loaded)
    return jsonschema.Draft202012Validator(loaded, format_checker=jsonschema.FormatChecker())


def as_json(tree: Any) -> Any:
    """What an editor validates: YAML keys are text (a date is text in YAML 1.2 as the gate reads it)."""
    return json.loads(json.dumps(tree, default=str))


def test_generated_files_are_current() -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/reference.py", "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_every_key_has_a_rule_and_an_example_and_every_rule_a_key() -> None:
    keys = policy_keys()
    paths = [k.path for k in keys]
    assert [p for p in paths if p not in RULES] == []
    assert [p for p in RULES if p not in paths] == []
    assert all(k.rule and k.example for k in keys)
    doc = (ROOT / "docs" / "POLICY.md").read_text(encoding="utf-8")
    assert all(f"`{p}`" in doc for p in paths)
    # what the models say is in the table: a required key, a bound and a default
    assert "| `slices.<slice>.max_false_passes` | yes | integer, >= 0 |" in doc
    assert "| `evaluator.max_output_tokens` | no | integer, >= 16 | 256 |" in doc
    assert "| `evaluator.price` | yes: a policy without it is refused | mapping |" in doc


def test_every_case_field_has_a_rule_in_docs_cases() -> None:
    keys = case_keys()
    assert sorted(k.path for k in keys) == sorted(CASE_RULES)
    doc = (ROOT / "docs" / "CASES.md").read_text(encoding="utf-8")
    assert all(f"| `{k.path}` |" in doc for k in keys)
    assert "| `human_adjudication.label` | yes | text |" in doc


def test_the_example_carries_the_schema_line_and_validates() -> None:
    first = (EXAMPLE / "policy.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../schemas/policy.schema.json"
    assert (EXAMPLE / "../../schemas/policy.schema.json").resolve() == (SCHEMAS / "policy.schema.json").resolve()
    policy = load_yaml((EXAMPLE / "policy.yaml").read_text(encoding="utf-8"))
    assert list(schema("policy").iter_errors(as_json(policy))) == []
    cases = schema("case")
    for line in (EXAMPLE / "cases" / "support.jsonl").read_text(encoding="utf-8").splitlines():
        assert list(cases.iter_errors(json.loads(line))) == []
    evidence = load_yaml((EXAMPLE / "evidence" / "support.yaml").read_text(encoding="utf-8"))
    assert list(schema("evidence").iter_errors(as_json(evidence))) == []


def test_the_schemas_name_a_mistyped_key() -> None:
    tree = policy_dict()
    tree["evaluator"]["temprature"] = 0
    errors = list(schema("policy").iter_errors(as_json(tree)))
    assert any("temprature" in e.message for e in errors)
    described = json.loads((SCHEMAS / "policy.schema.json").read_text(encoding="utf-8"))
    assert "hard cost boundary" in described["$defs"]["Limits"]["properties"]["max_total_cost"]["description"]


def _type_or_name_error(tree: Any) -> bool:
    try:
        Policy.model_validate(tree)
    except ValidationError as exc:
        kinds = {e["type"] for e in exc.errors()}
        return all(k in TYPE_OR_NAME or k.endswith(("_type", "_parsing")) for k in kinds)
    return False


def hostile_policies() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for path in _paths(policy_dict()):
        edits: list[tuple[str, Any]] = [("delete", None), *(("set", v) for v in HOSTILE_VALUES)]
        edits += [("rename", r) for r in RENAMES]
        for op, value in edits:
            tree = copy.deepcopy(policy_dict())
            _edit_tree(tree, path, op, value)
            if _type_or_name_error(tree):
                out.append((f"{'.'.join(map(str, path))} {op} {value!r:.30}", tree))
    return out


def test_the_schema_rejects_each_hostile_policy_whose_error_is_a_key_type_or_name() -> None:
    policies = hostile_policies()
    assert len(policies) > 200  # the corpus reached the keys
    validator = schema("policy")
    accepted = [name for name, tree in policies if validator.is_valid(as_json(tree))]
    assert accepted == []


@pytest.mark.parametrize("name", ["policy", "case", "evidence"])
def test_each_schema_is_a_valid_json_schema(name: str) -> None:
    schema(name)
