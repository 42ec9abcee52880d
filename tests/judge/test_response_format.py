"""`evaluator.response_format` and `evaluator.top_p`: what the judge asks the provider for, on the
wire, in the records and in the configuration fingerprint.

json_object (the default) is JSON mode with the verdict's schema in a system message; json_schema
sends the schema as `response_format: {type: json_schema}`, which OpenAI, Azure, vLLM and llama.cpp
use to constrain decoding (a small local model then cannot copy the schema back instead of a
verdict). The real gate, ragas and openai client, over real HTTP to the fake provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import write_suite

from gate.cli import main
from gate.model.fingerprint import config_fingerprint
from gate.model.policy import load_policy


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-response-format")


def _suite(root: Path, fake: FakeOpenAI, **evaluator: Any) -> Path:
    return write_suite(root, evaluator={"base_url": fake.base_url, **evaluator})


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line]


def test_json_schema_asks_the_provider_to_constrain_the_reply(tmp_path: Path, fake_openai_env: FakeOpenAI) -> None:
    policy = _suite(tmp_path / "s", fake_openai_env, response_format="json_schema", top_p=0.9)
    assert main(["run", "--policy", str(policy), "--out", str(tmp_path / "out"), "--no-cache"]) == 0
    bodies = [r.body for r in fake_openai_env.requests]
    assert bodies
    for body in bodies:
        fmt = body["response_format"]
        assert fmt["type"] == "json_schema"
        schema = fmt["json_schema"]["schema"]
        assert schema["properties"]["value"]["enum"] == ["pass", "fail"]
        assert set(schema["required"]) == {"value", "reason"}
        # no other key: a constrained decoder cannot let a small model add keys until the cut
        assert schema["additionalProperties"] is False
        # the schema travels in response_format, not as a system message the model could echo
        assert all(m["role"] != "system" for m in body["messages"])
        assert body["top_p"] == 0.9
    for record in _records(tmp_path / "out"):
        assert (record["sampling"]["response_format"], record["sampling"]["top_p"]) == ("json_schema", 0.9)


def test_the_default_is_json_mode_and_top_p_is_what_the_policy_says(
    tmp_path: Path, fake_openai_env: FakeOpenAI
) -> None:
    policy = _suite(tmp_path / "s", fake_openai_env)
    assert main(["run", "--policy", str(policy), "--out", str(tmp_path / "out"), "--no-cache"]) == 0
    for request in fake_openai_env.requests:
        assert request.body["response_format"] == {"type": "json_object"}
        assert request.body["top_p"] == 0.1  # sent, and now stated in the records
        assert request.body["messages"][0]["role"] == "system"
    for record in _records(tmp_path / "out"):
        assert (record["sampling"]["response_format"], record["sampling"]["top_p"]) == ("json_object", 0.1)


def test_both_enter_the_fingerprint_and_a_cached_verdict_of_the_other_format_is_not_reused(
    tmp_path: Path, fake_openai_env: FakeOpenAI
) -> None:
    plain = _suite(tmp_path / "a", fake_openai_env)
    schema = _suite(tmp_path / "b", fake_openai_env, response_format="json_schema")
    nucleus = _suite(tmp_path / "c", fake_openai_env, top_p=0.5)
    prints = {config_fingerprint(load_policy(p), fake_openai_env.base_url, "0.4.3") for p in (plain, schema, nucleus)}
    assert len(prints) == 3
    cache = tmp_path / "cache"
    assert main(["run", "--policy", str(plain), "--out", str(tmp_path / "o1"), "--cache-dir", str(cache)]) == 0
    sent = fake_openai_env.count()
    assert main(["run", "--policy", str(schema), "--out", str(tmp_path / "o2"), "--cache-dir", str(cache)]) == 0
    assert fake_openai_env.count() == 2 * sent  # judged again: another judge's verdicts are not this one's


def test_gate_decide_names_the_response_format_when_records_were_judged_with_another(
    tmp_path: Path, fake_openai_env: FakeOpenAI, capsys: Any
) -> None:
    schema = _suite(tmp_path / "b", fake_openai_env, response_format="json_schema")
    assert main(["run", "--policy", str(schema), "--out", str(tmp_path / "out"), "--no-cache"]) == 0
    plain = _suite(tmp_path / "a", fake_openai_env)
    capsys.readouterr()
    code = main(["decide", "--policy", str(plain), "--records", str(tmp_path / "out")])
    text = capsys.readouterr().out
    assert code != 0
    assert "response_format: json_schema vs json_object" in text
