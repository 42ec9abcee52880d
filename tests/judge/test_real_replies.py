"""The reply contract on replies a real server sent (tests/fixtures/real_replies/, captured by
`scripts/real_judge.py --capture` from llama.cpp's server and a small model; the README there says
where each came from). Each body is served verbatim by the fake provider over real HTTP and read by
the real openai client, instructor and ragas, in the response format it was captured under: it
must become a label or the right evaluator error, never a crash; a parse error keeps what the model
sent (finish_reason and an escaped excerpt); and the tokens billed are the ones the body reports,
whatever else it carries (`timings`, `system_fingerprint`, `usage.prompt_tokens_details`)."""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
import suite
from fake_openai import FakeOpenAI, body

from gate.judge import Judgment
from gate.judge.budget import Budget, Prices
from gate.judge.outcome import RetryTiming, interpret_reply, reply_evidence
from gate.judge.ragas_judge import make_evaluator
from gate.model.cases import Case
from gate.model.policy import load_policy

REPLIES = Path(__file__).parents[1] / "fixtures" / "real_replies"
PRICES = Prices(1.0, 2.0)  # suite.policy_dict's prices
FAST = RetryTiming(base_s=0.01, cap_s=0.05, retry_after_cap_s=1.0, jitter=0.5)


@dataclass(frozen=True)
class Expected:
    """What the gate must make of one captured reply."""

    response_format: str  # the policy setting the request was sent under
    status: int = 200
    label: str | None = None
    error_kind: str | None = None
    finish_reason: str | None = None  # for a parse error: what the record must name
    shows: str = ""  # for an error: text its message must carry (an escaped excerpt of the reply)


EXPECTED = {
    # JSON mode: the model copies back the schema from instructor's system message, until the cut.
    "json-object-schema-echo-cut-at-length.json": Expected(
        "json_object", error_kind="parse_error", finish_reason="length", shows='{\\n  \\"properties\\": {'
    ),
    # json_schema: decoding constrained to the verdict's schema; a label.
    "json-schema-pass.json": Expected("json_schema", label="pass"),
    # json_schema, captured while the schema allowed more keys: the model adds them until the cut
    # (the schema sent now forbids them; a server that does not enforce it may still answer so).
    "json-schema-extra-keys-cut-at-length.json": Expected(
        "json_schema", error_kind="parse_error", finish_reason="length", shows='\\"type_hint\\"'
    ),
    # json_schema: a verdict with a key the schema does not name: the verdict counts.
    "json-schema-extra-key-pass.json": Expected("json_schema", label="pass"),
    # json_schema: the reason copies the reference and is cut before any `value`.
    "json-schema-long-reason-cut-at-length.json": Expected(
        "json_schema",
        error_kind="parse_error",
        finish_reason="length",
        shows='{\\n  \\"reason\\": \\"Charges for a paid',
    ),
    # llama.cpp's 401 body for a key it does not know (`--api-key` set on the server).
    "wrong-key-401.json": Expected("json_object", status=401, error_kind="auth", shows="Invalid API Key"),
}


def judge_reply(tmp_path: Path, fake: FakeOpenAI, text: str, expected: Expected) -> Judgment:
    """One judgment of one case through the real evaluator, the fake serving `text` as is."""
    fake.script("c-real", body(text, code=expected.status))
    evaluator = {"base_url": fake.base_url, "max_output_tokens": 96, "response_format": expected.response_format}
    loaded = load_policy(suite.write_suite(tmp_path / "suite", evaluator=evaluator))
    ev = make_evaluator(loaded, api_key="sk-test-real-replies", cache_dir=None, timing=FAST, rng=random.Random(7))
    case = Case.model_validate(suite.case("c-real"))

    async def main() -> Judgment:
        try:
            return await ev.judge(case, 0, Budget(None))
        finally:
            await ev.aclose()

    return asyncio.run(main())


def test_every_captured_reply_has_an_expectation_and_a_provenance_line() -> None:
    captured = sorted(p.name for p in REPLIES.glob("*.json"))
    assert captured == sorted(EXPECTED)
    readme = (REPLIES / "README.md").read_text(encoding="utf-8")
    assert [name for name in captured if f"`{name}`" not in readme] == []


def test_the_captures_carry_what_a_real_server_adds() -> None:
    """The set covers what the fakes never sent: llama.cpp's extra fields, a length cut, a 401."""
    bodies = {name: json.loads((REPLIES / name).read_text(encoding="utf-8")) for name in EXPECTED}
    answered = [b for name, b in bodies.items() if EXPECTED[name].status == 200]
    assert all({"timings", "system_fingerprint"} <= set(b) for b in answered)
    assert all("cached_tokens" in b["usage"]["prompt_tokens_details"] for b in answered)
    assert {b["choices"][0]["finish_reason"] for b in answered} == {"stop", "length"}
    assert bodies["wrong-key-401.json"]["error"]["type"] == "authentication_error"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_captured_reply_is_a_label_or_an_evaluator_error_and_is_metered(
    tmp_path: Path, fake_openai: FakeOpenAI, name: str
) -> None:
    expected = EXPECTED[name]
    text = (REPLIES / name).read_text(encoding="utf-8")
    j = judge_reply(tmp_path, fake_openai, text, expected)
    assert fake_openai.count("c-real") == 1  # a verdict, a parse error and a 401 are never re-sent
    assert (j.label, j.error_kind) == (expected.label, expected.error_kind), j.error_message
    assert j.status == ("ok" if expected.label else "error")
    if expected.label is not None:
        assert j.reason
    else:
        assert expected.shows in (j.error_message or "")
    if expected.finish_reason is not None:
        assert f"finish_reason: {json.dumps(expected.finish_reason)}" in (j.error_message or "")
        assert "\n" not in (j.error_message or "")
    if expected.finish_reason == "length":  # the advice fits the format: json_schema is already in use there
        advice = (
            "try evaluator.response_format: json_schema"
            if expected.response_format == "json_object"
            else "short reason"
        )
        assert advice in (j.error_message or "")
    usage = json.loads(text).get("usage") or {}
    billed = (usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
    assert (j.input_tokens, j.output_tokens) == billed
    assert [(a.status_code, a.input_tokens, a.output_tokens) for a in j.attempts] == [(expected.status, *billed)]
    assert j.cost == pytest.approx(PRICES.cost(*billed), rel=1e-12, abs=0)


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e.status == 200))
def test_the_pure_reading_of_a_captured_reply_never_invents_a_label(name: str) -> None:
    """gate.judge.outcome on the message content alone: the same label, or an error, never a
    label for a reply cut short; and the evidence a record keeps names finish_reason."""
    choice = json.loads((REPLIES / name).read_text(encoding="utf-8"))["choices"][0]
    content, finish = choice["message"]["content"], choice["finish_reason"]
    reading = interpret_reply(content, ["pass", "fail"], {})
    if finish == "length":
        assert reading.label is None and reading.error_kind == "parse_error"
    else:
        assert (reading.label, reading.error_kind) == (EXPECTED[name].label, EXPECTED[name].error_kind)
    evidence = reply_evidence(content, finish)
    assert f"finish_reason: {json.dumps(finish)}" in evidence and "\n" not in evidence
