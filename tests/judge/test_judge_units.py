"""Pure rules of the judge (no network): statuses, Retry-After, backoff, reply reading, rendering."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from pathlib import Path

import pytest
import suite
from fake_openai import FakeOpenAI

from gate.judge.metering import OutsideJudgment, WireExpectations, check_wire
from gate.judge.outcome import RetryTiming, backoff_delay, interpret_reply, kind_for_status, parse_retry_after
from gate.judge.ragas_judge import make_evaluator
from gate.judge.render import RenderError, render_case, render_fields
from gate.model.cases import Case
from gate.model.policy import load_policy


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (200, None),
        (429, "rate_limit"),
        (408, "timeout"),
        (401, "auth"),
        (403, "auth"),
        (400, "bad_request"),
        (404, "bad_request"),
        (422, "bad_request"),
        (500, "server_error"),
        (502, "server_error"),
        (503, "server_error"),
    ],
)
def test_kind_for_status(code: int, kind: str | None) -> None:
    assert kind_for_status(code) == kind


def test_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "soon"}) is None
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= (parse_retry_after({"Retry-After": date}, now=now) or 0) <= 31
    assert parse_retry_after({"Retry-After": "-5"}) == 0.0


def test_backoff_is_capped_exponential_with_jitter() -> None:
    t = RetryTiming(base_s=1.0, cap_s=4.0, retry_after_cap_s=10.0, jitter=0.5)
    rng = random.Random(1)
    for n, top in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 4.0), (9, 4.0)]:
        for _ in range(50):
            d = backoff_delay(t, n, None, rng)
            assert top * 0.5 <= d <= top
    assert backoff_delay(t, 1, 3.0, rng) == 3.0  # Retry-After wins over backoff
    assert backoff_delay(t, 1, 99.0, rng) == 10.0  # ...capped
    assert backoff_delay(t, 1, 0.0, rng) == 0.0


ALLOWED = ["pass", "fail"]


@pytest.mark.parametrize(
    ("content", "aliases", "expected"),
    [
        ('{"reason": "ok", "value": "pass"}', {}, ("pass", None)),
        ('{"value": "fail", "reason": "no"}', {}, ("fail", None)),
        ('{"reason": "ok", "value": "PASS"}', {}, (None, "invalid_label")),
        ('{"reason": "ok", "value": "PASS"}', {"PASS": "pass"}, ("pass", None)),
        ('{"reason": "ok", "value": "pass "}', {}, (None, "invalid_label")),
        ('{"reason": "ok", "value": "review_required"}', {}, (None, "invalid_label")),
        ('{"reason": "", "value": "pass"}', {}, (None, "parse_error")),
        ('{"reason": "  ", "value": "pass"}', {}, (None, "parse_error")),
        ('{"value": "pass"}', {}, (None, "parse_error")),
        ('{"reason": 3, "value": "pass"}', {}, (None, "parse_error")),
        ('{"reason": "ok", "value": true}', {}, (None, "parse_error")),
        ('{"reason": "ok"}', {}, (None, "parse_error")),
        ('["pass"]', {}, (None, "parse_error")),
        ("pass", {}, (None, "parse_error")),
        ('```json\n{"reason": "ok", "value": "pass"}\n```', {}, (None, "parse_error")),
        ('Sure: {"reason": "ok", "value": "pass"}', {}, (None, "parse_error")),
        ("", {}, (None, "parse_error")),
        (None, {}, (None, "parse_error")),
    ],
)
def test_interpret_reply_is_strict(
    content: str | None, aliases: dict[str, str], expected: tuple[str | None, str | None]
) -> None:
    r = interpret_reply(content, ALLOWED, aliases)
    assert (r.label, r.error_kind) == expected
    if r.error_kind is not None:
        assert r.label is None and r.reason is None and r.message


def test_render_matches_ragas_and_hashes() -> None:
    from ragas.prompt.simple_prompt import Prompt

    template = "Q: {user_input}\nR: {reference}\nA: {response}\n{{literal}}"
    c = Case.model_validate(suite.case("c-r", response="x {not a placeholder} y"))
    r = render_case(template, ("user_input", "reference", "response"), c)
    assert r.prompt == Prompt(template).format(**r.kwargs)
    assert "{literal}" in r.prompt and "x {not a placeholder} y" in r.prompt
    assert set(r.field_sha256) == {"user_input", "reference", "response"}


@pytest.mark.parametrize(
    ("template", "placeholders", "fields", "needle"),
    [
        ("{response}", ("response",), {"response": None}, "no value"),
        ("{response}", ("response",), {"response": ""}, "blank"),
        ("{response}", ("response",), {"response": "a", "reference": "b"}, "input field reference has no placeholder"),
        ("{response} {reference}", ("response",), {"response": "a"}, "differ"),
        ("{response}", ("response", "reference"), {"response": "a", "reference": "b"}, "differ"),
        ("{response:.3}", ("response",), {"response": "abcdefgh"}, "format spec"),
        ("{response!r}", ("response",), {"response": "abc'def"}, "conversion"),
        ("{response.x}", ("response",), {"response": "abc"}, "attribute"),
        ("{response} {", ("response",), {"response": "abc"}, "not a valid format"),
    ],
)
def test_render_refuses(
    template: str, placeholders: tuple[str, ...], fields: dict[str, str | None], needle: str
) -> None:
    with pytest.raises(RenderError, match=needle):
        render_fields(template, placeholders, fields)


def test_wire_contract_check() -> None:
    exp = WireExpectations(prompt="P", temperature=0.0, seed=7, max_output_tokens=64)
    good = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "P"}]}
    good |= {"temperature": 0, "seed": 7, "max_tokens": 64}
    assert check_wire(good, exp) is None
    renamed = {k: v for k, v in good.items() if k != "max_tokens"} | {"max_completion_tokens": 64}
    assert check_wire(renamed, exp) is None
    assert "user message" in (check_wire({**good, "messages": [{"role": "user", "content": "Q"}]}, exp) or "")
    assert "temperature" in (check_wire({**good, "temperature": 0.01}, exp) or "")
    assert "seed" in (check_wire({k: v for k, v in good.items() if k != "seed"}, exp) or "")
    assert "max tokens" in (check_wire({**good, "max_tokens": 1024}, exp) or "")
    assert check_wire(None, exp) is not None


def test_the_judge_client_refuses_requests_outside_a_judgment(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    path = suite.write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    ev = make_evaluator(load_policy(path), api_key="sk-x", cache_dir=None)

    async def main() -> None:
        try:
            with pytest.raises(Exception) as info:
                await ev._client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            chain = [info.value, info.value.__cause__, info.value.__context__]
            assert any(isinstance(e, OutsideJudgment) for e in chain)
        finally:
            await ev.aclose()

    asyncio.run(main())
    assert fake_openai.count() == 0
