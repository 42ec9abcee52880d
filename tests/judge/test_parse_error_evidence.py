"""A parse error's record shows what the model sent (issue 30, item 2): "the reply has no `value`
string" was a small model echoing the response schema back, and only a wire capture showed it.
The record's error_message now keeps an escaped, clipped excerpt of the reply, its top-level keys
and finish_reason. Real CLI, real ragas, real HTTP to the fake provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, raw
from suite import case, gate, write_suite

SCHEMA_ECHO = json.dumps(
    {"properties": {"reason": {"type": "string"}, "value": {"enum": ["pass", "fail"]}}, "required": ["value"]}
)


def record_of(out: Path, case_id: str) -> dict[str, object]:
    rows = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line]
    (row,) = [r for r in rows if r["case_id"] == case_id]
    return row


@pytest.mark.parametrize(
    ("content", "keys"),
    [(SCHEMA_ECHO, '"properties", "required"'), ("Sure!\nThe answer passes.\u0007" + "x" * 400, None)],
    ids=["schema-echo", "prose"],
)
def test_a_parse_error_record_keeps_an_excerpt_keys_and_finish_reason(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, content: str, keys: str | None
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-parse-evidence")
    fake_openai.script("c-1", raw(content), raw(content))
    policy = write_suite(tmp_path / "s", [case("c-1"), case("c-2")], evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--lane", "nocontrols", "--out", out, "--no-cache") == 3
    rec = record_of(out, "c-1")
    assert rec["error_kind"] == "parse_error"
    message = str(rec["error_message"])
    assert 'finish_reason: "stop"' in message
    assert "the reply: " in message and "\n" not in message and "\u0007" not in message
    if keys is not None:
        assert f"top-level keys: {keys}" in message and '\\"properties\\"' in message
    else:
        assert "top-level keys" not in message and "Sure!\\nThe answer passes." in message
        assert len(message) <= 500
