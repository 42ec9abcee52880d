"""The judge, through real HTTP to the fake OpenAI server: request counts, metering, outcomes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import suite
from fake_openai import (
    FakeOpenAI,
    bad_request,
    drop,
    length,
    rate_limited,
    raw,
    reply,
    server_error,
    slow,
    status,
    unauthorized,
)

from gate.judge import Judgment, partial_judgment, resolve_base_url
from gate.judge.budget import Budget, Prices
from gate.judge.outcome import RetryTiming
from gate.judge.ragas_judge import JudgeConfigError, RagasEvaluator, make_evaluator
from gate.model.cases import Case
from gate.model.fingerprint import config_fingerprint
from gate.model.loading import canonical_json
from gate.model.policy import LoadedPolicy, load_policy

KEY = "sk-test-DO-NOT-LEAK-0123456789"
FAST = RetryTiming(base_s=0.01, cap_s=0.05, retry_after_cap_s=1.0, jitter=0.5)
PRICES = Prices(1.0, 2.0)  # suite.policy_dict's prices


def policy(tmp_path: Path, fake: FakeOpenAI | None, **overrides: Any) -> LoadedPolicy:
    ev: dict[str, Any] = {"base_url": fake.base_url if fake else None, **overrides.pop("evaluator", {})}
    path = suite.write_suite(tmp_path / "suite", evaluator=ev, **overrides)
    return load_policy(path)


def evaluator(
    loaded: LoadedPolicy, *, cache_dir: Path | None = None, timing: RetryTiming = FAST, **kw: Any
) -> RagasEvaluator:
    return make_evaluator(loaded, api_key=KEY, cache_dir=cache_dir, timing=timing, rng=random.Random(7), **kw)


def mkcase(case_id: str, **kw: Any) -> Case:
    return Case.model_validate(suite.case(case_id, **kw))


def judge_all(ev: RagasEvaluator, cases: list[Case], budget: Budget | None = None, repeat: int = 0) -> list[Judgment]:
    b = budget or Budget(None)

    async def main() -> list[Judgment]:
        try:
            return list(await asyncio.gather(*(ev.judge(c, repeat, b) for c in cases)))
        finally:
            await ev.aclose()

    return asyncio.run(main())


def judge_one(ev: RagasEvaluator, case: Case, budget: Budget | None = None, repeat: int = 0) -> Judgment:
    return judge_all(ev, [case], budget, repeat)[0]


def assert_metered(j: Judgment, fake: FakeOpenAI, match: str) -> None:
    """Tokens and cost are exactly what the server reported, summed over attempts."""
    pt, ct = fake.usage_totals(match)
    assert (j.input_tokens, j.output_tokens) == (pt, ct)
    assert sum(a.input_tokens for a in j.attempts) == pt
    assert sum(a.output_tokens for a in j.attempts) == ct
    assert j.cost == pytest.approx(PRICES.cost(pt, ct), rel=1e-12, abs=0)


# -- outcomes and exact request counts -------------------------------------------------------------


def test_pass_is_one_request_with_policy_sampling_on_the_wire(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-pass", reply("pass", reason="All facts present."))
    j = judge_one(evaluator(policy(tmp_path, fake_openai)), mkcase("c-pass"))
    assert (j.status, j.label, j.reason, j.error_kind, j.cache) == ("ok", "pass", "All facts present.", None, "off")
    assert fake_openai.count("c-pass") == 1
    req = fake_openai.requests_for("c-pass")[0]
    body = req.body
    assert req.path == "/v1/chat/completions"
    assert body["model"] == "gpt-4o-mini"
    assert body["temperature"] == 0 and body["seed"] == 7 and body["max_tokens"] == 64
    assert "max_completion_tokens" not in body
    assert body["response_format"] == {"type": "json_object"}
    assert req.headers["x-stainless-retry-count"] == "0"
    assert [(a.status_code, a.error_kind) for a in j.attempts] == [(200, None)]
    assert j.attempts[0].latency_ms > 0
    assert_metered(j, fake_openai, "c-pass")
    assert j.input_tokens > 0 and j.cost > 0


def test_fail_is_a_verdict_and_is_not_retried(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-fail", reply("fail", reason="Deadline wrong."))
    j = judge_one(
        evaluator(policy(tmp_path, fake_openai, evaluator={"retries": {"max_attempts": 3}})), mkcase("c-fail")
    )
    assert (j.status, j.label, j.reason) == ("ok", "fail", "Deadline wrong.")
    assert fake_openai.count("c-fail") == 1


def test_sampling_as_written_without_seed(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    loaded = policy(tmp_path, fake_openai, evaluator={"temperature": 0.3, "seed": None, "max_output_tokens": 200})
    j = judge_one(evaluator(loaded), mkcase("c-samp"))
    assert j.status == "ok"
    body = fake_openai.requests_for("c-samp")[0].body
    assert body["temperature"] == 0.3 and body["max_tokens"] == 200 and "seed" not in body


def test_429_with_retry_after_then_ok(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-429", rate_limited(retry_after=0.4), reply("pass"))
    j = judge_one(evaluator(policy(tmp_path, fake_openai, evaluator={"retries": {"max_attempts": 3}})), mkcase("c-429"))
    assert (j.status, j.label) == ("ok", "pass")
    reqs = fake_openai.requests_for("c-429")
    assert len(reqs) == 2
    assert reqs[1].arrival - reqs[0].finished >= 0.38  # Retry-After honoured (FAST backoff is 10 ms)
    assert [(a.status_code, a.error_kind) for a in j.attempts] == [(429, "rate_limit"), (200, None)]
    assert_metered(j, fake_openai, "c-429")


def test_retry_after_is_capped(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-cap", rate_limited(retry_after=3600), reply("pass"))
    timing = RetryTiming(base_s=0.01, cap_s=0.05, retry_after_cap_s=0.2)
    start = time.monotonic()
    j = judge_one(evaluator(policy(tmp_path, fake_openai), timing=timing), mkcase("c-cap"))
    assert j.status == "ok" and fake_openai.count("c-cap") == 2
    assert time.monotonic() - start < 60  # 0.2 s, not an hour (a loaded machine adds seconds, not 3600)


def test_500_three_times_is_exactly_three_requests(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-500", server_error())
    j = judge_one(evaluator(policy(tmp_path, fake_openai, evaluator={"retries": {"max_attempts": 3}})), mkcase("c-500"))
    assert (j.status, j.label, j.reason, j.error_kind) == ("error", None, None, "server_error")
    assert fake_openai.count("c-500") == 3
    assert [(a.status_code, a.error_kind) for a in j.attempts] == [(500, "server_error")] * 3
    assert "HTTP 500" in (j.error_message or "") and "3 attempts" in (j.error_message or "")
    assert (j.input_tokens, j.output_tokens, j.cost) == (0, 0, 0.0)


def test_max_attempts_one_means_one_request(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-one", server_error(503))
    j = judge_one(evaluator(policy(tmp_path, fake_openai, evaluator={"retries": {"max_attempts": 1}})), mkcase("c-one"))
    assert j.error_kind == "server_error" and fake_openai.count("c-one") == 1


def test_kinds_not_in_retry_on_are_not_retried(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-only429", server_error())
    loaded = policy(tmp_path, fake_openai, evaluator={"retries": {"max_attempts": 3, "retry_on": ["rate_limit"]}})
    j = judge_one(evaluator(loaded), mkcase("c-only429"))
    assert j.error_kind == "server_error" and fake_openai.count("c-only429") == 1


@pytest.mark.parametrize(
    ("behaviour", "kind"),
    [
        (unauthorized(), "auth"),
        (status(403), "auth"),
        (bad_request(), "bad_request"),
        (status(404), "bad_request"),
        (status(422), "bad_request"),
    ],
    ids=["401", "403", "400", "404", "422"],
)
def test_client_errors_are_one_request(tmp_path: Path, fake_openai: FakeOpenAI, behaviour: Any, kind: str) -> None:
    fake_openai.script("c-4xx", behaviour)
    j = judge_one(evaluator(policy(tmp_path, fake_openai, evaluator={"retries": {"max_attempts": 3}})), mkcase("c-4xx"))
    assert (j.status, j.label, j.error_kind) == ("error", None, kind)
    assert fake_openai.count("c-4xx") == 1


def test_timeout_on_slow_reply_is_retried_and_abandoned_attempts_stay_reserved(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script("c-slow", slow(30.0))  # far past the timeout: no busy machine blurs the two
    loaded = policy(tmp_path, fake_openai, evaluator={"timeout_s": 1.0, "retries": {"max_attempts": 2}})
    budget = Budget(1.0)
    start = time.monotonic()
    j = judge_one(evaluator(loaded), mkcase("c-slow"), budget)
    elapsed = time.monotonic() - start
    assert (j.status, j.label, j.error_kind) == ("error", None, "timeout")
    assert fake_openai.count("c-slow") == 2
    assert [(a.status_code, a.error_kind) for a in j.attempts] == [(None, "timeout")] * 2
    assert all(950 <= a.latency_ms < 15_000 for a in j.attempts)  # abandoned at the timeout, not answered
    assert elapsed < 30
    # nothing reported, so the record costs 0; the budget keeps both reservations (conservative)
    assert j.cost == 0.0 and budget.reserved == pytest.approx(0.0, abs=1e-15)
    assert budget.spent > 0


def test_slow_reply_within_timeout_is_ok(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-slowok", slow(0.2, reply("fail")))
    j = judge_one(evaluator(policy(tmp_path, fake_openai, evaluator={"timeout_s": 60})), mkcase("c-slowok"))
    assert (j.status, j.label) == ("ok", "fail") and j.attempts[0].latency_ms >= 190


def test_dropped_connection_is_retried(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-drop", drop(), reply("pass"))
    j = judge_one(evaluator(policy(tmp_path, fake_openai)), mkcase("c-drop"))
    assert (j.status, j.label) == ("ok", "pass")
    assert fake_openai.count("c-drop") == 2
    assert [(a.status_code, a.error_kind) for a in j.attempts] == [(None, "connection"), (200, None)]


def test_dropped_connection_exhausted_is_connection_error(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-drop2", drop())
    j = judge_one(evaluator(policy(tmp_path, fake_openai)), mkcase("c-drop2"))
    assert (j.status, j.label, j.error_kind) == ("error", None, "connection")
    assert fake_openai.count("c-drop2") == 2


BAD_REPLIES = {
    "uppercase-label": (reply("PASS"), "invalid_label"),
    "unknown-label": (reply("maybe"), "invalid_label"),
    "prose": (raw('Sure! Here it is: {"reason": "ok", "value": "pass"}'), "parse_error"),
    "fenced-json": (raw('```json\n{"reason": "ok", "value": "pass"}\n```'), "parse_error"),
    "bare-word": (raw("pass"), "parse_error"),
    "missing-reason": (raw('{"value": "pass"}'), "parse_error"),
    "empty-reason": (reply("pass", reason=""), "parse_error"),
    "blank-reason": (reply("fail", reason="   "), "parse_error"),
    "finish-length": (length(), "parse_error"),
    "finish-length-valid-json": (length('{"reason": "ok", "value": "pass"}'), "parse_error"),
    "empty-content": (raw(""), "parse_error"),
}


@pytest.mark.parametrize("name", list(BAD_REPLIES))
def test_unusable_replies_are_errors_never_labels_and_never_retried(
    tmp_path: Path, fake_openai: FakeOpenAI, name: str
) -> None:
    behaviour, kind = BAD_REPLIES[name]
    fake_openai.script("c-bad", behaviour)
    j = judge_one(evaluator(policy(tmp_path, fake_openai, evaluator={"retries": {"max_attempts": 3}})), mkcase("c-bad"))
    assert (j.status, j.label, j.reason, j.error_kind) == ("error", None, None, kind), j.error_message
    assert fake_openai.count("c-bad") == 1  # no re-ask, no retry
    assert [(a.status_code, a.error_kind) for a in j.attempts] == [(200, kind)]
    assert_metered(j, fake_openai, "c-bad")  # a failed attempt is still paid for
    assert j.cost > 0
    if name.startswith("finish-length"):
        assert "finish_reason length" in (j.error_message or "")


def test_label_aliases_map_only_when_declared(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-alias-ok", reply("PASS", reason="Looks right."))
    fake_openai.script("c-alias-bad", reply("Pass", reason="Looks right."))
    loaded = policy(tmp_path, fake_openai, metric={"label_aliases": {"PASS": "pass"}})
    j, j2 = judge_all(evaluator(loaded), [mkcase("c-alias-ok"), mkcase("c-alias-bad")])
    assert (j.status, j.label, j.reason, j.error_kind) == ("ok", "pass", "Looks right.", None)
    assert (j2.status, j2.label, j2.error_kind) == ("error", None, "invalid_label")
    assert fake_openai.count("c-alias-ok") == 1 and fake_openai.count("c-alias-bad") == 1


def test_review_required_is_a_label_when_allowed(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-abst", reply("review_required", reason="Ambiguous."))
    loaded = policy(tmp_path, fake_openai, metric={"allowed_values": ["pass", "fail", "review_required"]})
    j = judge_one(evaluator(loaded), mkcase("c-abst"))
    assert (j.status, j.label) == ("ok", "review_required")
    body = fake_openai.requests_for("c-abst")[0].body
    assert '"review_required"' in body["messages"][0]["content"]  # the schema lists the allowed values


# -- rendered-input contract ------------------------------------------------------------------------


def test_each_placeholder_gets_its_own_field(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    c = mkcase(
        "c-mark",
        user_input="MARK-UI-7f3a what is the window?",
        reference="MARK-REF-91bc refunds within 7 days.",
        response="MARK-RESP-22de within a week.",
    )
    j = judge_one(evaluator(policy(tmp_path, fake_openai)), c)
    assert j.status == "ok"
    prompt = fake_openai.requests_for("MARK-RESP-22de")[0].prompt
    lines = prompt.splitlines()
    assert "Question: MARK-UI-7f3a what is the window?" in lines
    assert "Reference: MARK-REF-91bc refunds within 7 days." in lines
    assert "Response: MARK-RESP-22de within a week." in lines
    for marker in ("MARK-UI-7f3a", "MARK-REF-91bc", "MARK-RESP-22de"):
        assert prompt.count(marker) == 1
    assert j.prompt_sha256 == hashlib.sha256(prompt.encode()).hexdigest()
    kwargs = {"user_input": c.user_input, "reference": c.reference, "response": c.response}
    assert j.input_sha256 == hashlib.sha256(canonical_json(kwargs).encode()).hexdigest()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("reference", None),
        ("reference", ""),
        ("reference", "  \n"),
        ("response", ""),
        ("response", " \t"),
        ("user_input", ""),
    ],
)
def test_missing_or_empty_placeholder_field_is_an_error_without_a_call(
    tmp_path: Path, fake_openai: FakeOpenAI, field: str, value: str | None
) -> None:
    data = suite.case("c-empty")
    data[field] = value
    j = judge_one(evaluator(policy(tmp_path, fake_openai)), Case.model_validate(data))
    assert (j.status, j.label, j.error_kind) == ("error", None, "bad_request")
    assert field in (j.error_message or "")
    assert fake_openai.count() == 0 and j.attempts == []


def test_cancelled_judgment_keeps_its_sent_attempts(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-cancel", slow(30.0))  # still in flight when cancelled, however busy the machine
    ev = evaluator(policy(tmp_path, fake_openai))
    budget = Budget(1.0)

    async def main() -> BaseException:
        task = asyncio.create_task(ev.judge(mkcase("c-cancel"), 0, budget))
        while fake_openai.count("c-cancel") == 0:
            await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError as exc:
            return exc
        finally:
            await ev.aclose()
        raise AssertionError("not cancelled")

    exc = asyncio.run(main())
    j = partial_judgment(exc)
    assert j is not None
    assert (j.status, j.label, j.error_kind) == ("error", None, "cancelled")
    assert [(a.status_code, a.error_kind) for a in j.attempts] == [(None, "cancelled")]
    assert budget.reserved == pytest.approx(0.0, abs=1e-15) and budget.spent > 0  # kept, conservatively


# -- budget ----------------------------------------------------------------------------------------


def test_budget_too_small_for_one_attempt_is_skipped_without_a_call(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    budget = Budget(0.0001)  # one attempt's bound is ~(1.5k bytes x $1 + 64 x $2) / 1M > $0.0001
    j = judge_one(evaluator(policy(tmp_path, fake_openai)), mkcase("c-poor"), budget)
    assert (j.status, j.label, j.error_kind) == ("skipped", None, "budget")
    assert fake_openai.count() == 0 and j.attempts == [] and budget.exhausted
    assert budget.spent == 0 and budget.reserved == pytest.approx(0.0, abs=1e-15)


def test_budget_stops_retries_after_a_sent_attempt(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-retry-poor", server_error())
    loaded = policy(tmp_path, fake_openai, evaluator={"retries": {"max_attempts": 3}})
    judge_one(evaluator(loaded), mkcase("c-retry-poor"))  # learn the request size from the wire
    reqs = fake_openai.requests_for("c-retry-poor")
    assert len(reqs) == 3
    sizes = {int(r.headers["content-length"]) for r in reqs}
    assert len(sizes) == 1
    bound = PRICES.cost(sizes.pop(), 64)  # body bytes as input tokens + max_output_tokens
    fake_openai.reset()
    # a timed-out attempt keeps its reservation (it may have been billed), so the retry does not fit
    fake_openai.script("c-retry-poor", slow(30.0))
    loaded = policy(tmp_path / "t", fake_openai, evaluator={"retries": {"max_attempts": 3}, "timeout_s": 1.0})
    budget = Budget(bound * 1.5)
    j = judge_one(evaluator(loaded), mkcase("c-retry-poor"), budget)
    assert (j.status, j.label, j.error_kind) == ("error", None, "budget")
    assert fake_openai.count("c-retry-poor") == 1
    assert [(a.status_code, a.error_kind) for a in j.attempts] == [(None, "timeout")]
    assert budget.spent == pytest.approx(bound) and budget.spent <= bound * 1.5


def test_budget_is_a_hard_cap_under_concurrency(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.latency = 0.02
    loaded = policy(tmp_path, fake_openai, evaluator={"max_concurrency": 8})
    cases = [mkcase(f"c-cap-{i:02d}") for i in range(30)]
    budget = Budget(0.01)
    js = judge_all(evaluator(loaded), cases, budget)
    ok = [j for j in js if j.status == "ok"]
    skipped = [j for j in js if j.status == "skipped"]
    assert ok and skipped and len(ok) + len(skipped) == 30
    assert all(j.error_kind == "budget" for j in skipped)
    assert fake_openai.count() == len(ok)  # a skipped judgment sent nothing
    assert budget.spent <= 0.01
    assert budget.spent == pytest.approx(math.fsum(j.cost for j in ok), rel=1e-9)


# -- concurrency -----------------------------------------------------------------------------------


def test_forty_judgments_in_flight_are_matched_to_their_cases(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.latency = 0.3  # replies overlap however slowly a busy machine sends the requests
    loaded = policy(tmp_path, fake_openai, evaluator={"max_concurrency": 16})
    labels = ["pass" if i % 3 else "fail" for i in range(40)]
    cases = [mkcase(f"c-par-{i:02d}", label=lab) for i, lab in enumerate(labels)]  # oracle markers
    for i in range(0, 40, 7):  # some cases get a per-case reason to check attribution
        fake_openai.script(f"c-par-{i:02d}:", reply(labels[i], reason=f"reason for c-par-{i:02d}"))
    js = judge_all(evaluator(loaded), cases)
    assert [j.label for j in js] == labels
    for i in range(0, 40, 7):
        assert js[i].reason == f"reason for c-par-{i:02d}"
    for i, j in enumerate(js):
        assert len(j.attempts) == 1
        assert_metered(j, fake_openai, f"c-par-{i:02d}:")
    assert fake_openai.count() == 40
    assert 1 < fake_openai.max_in_flight <= 16  # in flight together, as the provider saw them


# -- cache -----------------------------------------------------------------------------------------


def test_cache_hit_costs_nothing_and_sends_nothing(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    loaded = policy(tmp_path, fake_openai)
    cache = tmp_path / "cache"
    first = judge_one(evaluator(loaded, cache_dir=cache), mkcase("c-cache", label="fail"))
    assert (first.status, first.label, first.cache) == ("ok", "fail", "miss") and first.cost > 0
    assert fake_openai.count() == 1
    ev = evaluator(loaded, cache_dir=cache)
    cached = ev.cached(mkcase("c-cache", label="fail"), 0)
    assert cached is not None and cached.label == "fail"
    second = judge_one(ev, mkcase("c-cache", label="fail"))
    assert (second.status, second.label, second.reason, second.cache) == ("ok", "fail", first.reason, "hit")
    assert (second.cost, second.input_tokens, second.output_tokens, second.attempts) == (0.0, 0, 0, [])
    assert (second.prompt_sha256, second.input_sha256) == (first.prompt_sha256, first.input_sha256)
    assert fake_openai.count() == 1


def test_errors_are_not_cached(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-err-cache", reply("PASS"), reply("pass"))
    loaded = policy(tmp_path, fake_openai)
    cache = tmp_path / "cache"
    j1 = judge_one(evaluator(loaded, cache_dir=cache), mkcase("c-err-cache"))
    j2 = judge_one(evaluator(loaded, cache_dir=cache), mkcase("c-err-cache"))
    assert (j1.status, j1.cache) == ("error", "miss") and (j2.status, j2.cache) == ("ok", "miss")
    assert fake_openai.count() == 2


def test_repeats_have_distinct_cache_entries(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-rep", reply("pass"), reply("fail"), reply("pass"))
    loaded = policy(tmp_path, fake_openai, evaluator={"repeats": 3})
    cache = tmp_path / "cache"
    c = mkcase("c-rep")

    async def run(ev: RagasEvaluator) -> list[Judgment]:
        try:
            return [await ev.judge(c, r, Budget(None)) for r in range(3)]
        finally:
            await ev.aclose()

    first = asyncio.run(run(evaluator(loaded, cache_dir=cache)))
    assert [j.label for j in first] == ["pass", "fail", "pass"] and {j.cache for j in first} == {"miss"}
    again = asyncio.run(run(evaluator(loaded, cache_dir=cache)))
    assert [j.label for j in again] == ["pass", "fail", "pass"] and {j.cache for j in again} == {"hit"}
    assert fake_openai.count() == 3
    ev = evaluator(loaded, cache_dir=cache)
    assert len({ev.cache_key(c, r) for r in range(3)}) == 3
    asyncio.run(ev.aclose())


def _key(tmp_path: Path, name: str, c: Case, repeat: int = 0, **overrides: Any) -> str:
    ev_over = overrides.pop("evaluator", {})
    ev_over.setdefault("base_url", "http://127.0.0.1:9/v1")
    path = suite.write_suite(tmp_path / name, evaluator=ev_over, **overrides)
    ev = make_evaluator(load_policy(path), api_key=KEY, cache_dir=None)
    try:
        return ev.cache_key(c, repeat)
    finally:
        asyncio.run(ev.aclose())


KEY_PARTS: dict[str, dict[str, Any]] = {
    "metric-name": {"metric": {"name": "other_metric"}},
    "metric-version": {"metric": {"version": "2"}},
    "prompt-template": {"prompt": suite.PROMPT + "\nBe strict.\n"},
    "allowed-values": {"metric": {"allowed_values": ["pass", "fail", "review_required"]}},
    "label-aliases": {"metric": {"label_aliases": {"PASS": "pass"}}},
    "model": {"evaluator": {"model": "gpt-4o"}},
    "base-url-host": {"evaluator": {"base_url": "http://localhost:9/v1"}},
    "base-url-port": {"evaluator": {"base_url": "http://127.0.0.1:10/v1"}},
    "base-url-path": {"evaluator": {"base_url": "http://127.0.0.1:9/other"}},
    "temperature": {"evaluator": {"temperature": 0.5}},
    "seed": {"evaluator": {"seed": 8}},
    "seed-none": {"evaluator": {"seed": None}},
    "max-output-tokens": {"evaluator": {"max_output_tokens": 65}},
}


@pytest.mark.parametrize("part", list(KEY_PARTS))
def test_each_policy_key_part_changes_the_cache_key(tmp_path: Path, part: str) -> None:
    c = mkcase("c-key")
    assert _key(tmp_path, "base", c) != _key(tmp_path, part, c, **json.loads(json.dumps(KEY_PARTS[part])))


def test_cache_key_ignores_what_does_not_shape_a_verdict(tmp_path: Path) -> None:
    c = mkcase("c-key")
    base = _key(tmp_path, "base", c)
    assert _key(tmp_path, "slash", c, evaluator={"base_url": "HTTP://127.0.0.1:9/v1/"}) == base
    assert _key(tmp_path, "timeout", c, evaluator={"timeout_s": 9, "max_concurrency": 2}) == base
    assert _key(tmp_path, "again", c) == base


@pytest.mark.parametrize("field", ["user_input", "reference", "response"])
def test_each_rendered_input_changes_the_cache_key(tmp_path: Path, field: str) -> None:
    c = mkcase("c-key")
    changed = Case.model_validate({**c.model_dump(), field: getattr(c, field) + " (edited)"})
    assert _key(tmp_path, "a", c) != _key(tmp_path, "b", changed)
    # the case id, label and slice are not inputs: they do not change the key
    other = Case.model_validate({**c.model_dump(), "case_id": "zz", "slice": "general"})
    assert _key(tmp_path, "c", c) == _key(tmp_path, "d", other)


def test_repeat_index_changes_the_cache_key(tmp_path: Path) -> None:
    c = mkcase("c-key")
    assert _key(tmp_path, "a", c, 0) != _key(tmp_path, "b", c, 1)


def test_library_versions_are_key_parts(tmp_path: Path) -> None:
    from dataclasses import replace

    ev = make_evaluator(policy(tmp_path, None), api_key=KEY, cache_dir=None)
    try:
        parts = ev.key_parts(ev.render(mkcase("c-key")), 0)
        assert parts.instructor_version == "1.17.0"
        assert parts.config_fingerprint == config_fingerprint(ev.loaded, ev.base_url, "0.4.3")
        assert parts.config_fingerprint != config_fingerprint(ev.loaded, ev.base_url, "0.4.4")
        assert replace(parts, instructor_version="1.17.1").key() != parts.key()
    finally:
        asyncio.run(ev.aclose())


_WRITER = """
import sys
from pathlib import Path
from gate.judge.cache import CacheKeyParts, JudgmentCache
cache = JudgmentCache(Path(sys.argv[1]))
tag = sys.argv[2]
for i in range(150):
    parts = CacheKeyParts("f", "i", (("response", tag + str(i)),), 0)
    cache.put(parts.key(), parts, "pass", tag)
    cache.get(parts.key())
cache.close()
"""


def test_cache_is_safe_for_concurrent_writer_processes(tmp_path: Path) -> None:
    from gate.judge.cache import JudgmentCache

    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), tag]) for tag in ("a", "b", "c")]
    assert [p.wait(60) for p in procs] == [0, 0, 0]
    cache = JudgmentCache(tmp_path)
    assert len(cache) == 450
    cache.close()


# -- configuration, imports, telemetry, secrets ----------------------------------------------------


def test_base_url_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env.example/v1")
    assert resolve_base_url("http://policy.example/v1") == "http://policy.example/v1"
    assert resolve_base_url(None) == "http://env.example/v1"
    assert resolve_base_url(None, None) == "https://api.openai.com/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert resolve_base_url(None) == "https://api.openai.com/v1"
    assert resolve_base_url(None, "http://given.example/v1") == "http://given.example/v1"


def test_base_url_from_env_reaches_the_fake(tmp_path: Path, fake_openai_env: FakeOpenAI) -> None:
    j = judge_one(evaluator(policy(tmp_path, None)), mkcase("c-env"))
    assert j.status == "ok" and fake_openai_env.count("c-env") == 1


def test_no_key_is_refused_before_any_call(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    with pytest.raises(JudgeConfigError, match="GATE_TEST_KEY"):
        make_evaluator(policy(tmp_path, fake_openai), api_key="", cache_dir=None)
    assert fake_openai.count() == 0


def test_reasoning_model_temperature_rewrite_is_refused(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    with pytest.raises(JudgeConfigError, match="temperature"):
        evaluator(policy(tmp_path / "a", fake_openai, evaluator={"model": "o3-mini", "temperature": 0}))
    ok = evaluator(policy(tmp_path / "b", fake_openai, evaluator={"model": "o3-mini", "temperature": 1}))
    j = judge_one(ok, mkcase("c-o3"))
    assert j.status == "ok"
    body = fake_openai.requests_for("c-o3")[0].body
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body and body["temperature"] == 1


def test_the_key_is_sent_but_never_recorded_or_logged(
    tmp_path: Path, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_openai.script("c-key-leak", unauthorized(message=f"Incorrect API key provided: {KEY}"))
    caplog.set_level(logging.DEBUG)
    j = judge_one(evaluator(policy(tmp_path, fake_openai)), mkcase("c-key-leak"))
    assert j.error_kind == "auth"
    req = fake_openai.requests_for("c-key-leak")[0]
    assert req.api_key_sha256 == hashlib.sha256(KEY.encode()).hexdigest()
    assert "authorization" not in req.headers
    assert KEY not in json.dumps([r.to_json() for r in fake_openai.requests])
    assert KEY not in repr(j) and KEY not in caplog.text


def test_import_contract() -> None:
    import inspect

    from ragas.llms import llm_factory
    from ragas.metrics import DiscreteMetric

    assert DiscreteMetric.__module__ == "ragas.metrics.discrete"
    params = inspect.signature(DiscreteMetric).parameters
    assert {"name", "allowed_values", "prompt"} <= set(params)
    assert inspect.iscoroutinefunction(DiscreteMetric.ascore)
    m = DiscreteMetric(name="n", allowed_values=["pass", "fail"], prompt="{response}")
    assert m.allowed_values == ["pass", "fail"]
    assert callable(llm_factory)


def test_evaluator_uses_the_contracted_classes(tmp_path: Path) -> None:
    from ragas.llms.base import InstructorLLM
    from ragas.metrics import DiscreteMetric

    ev = evaluator(policy(tmp_path, None))
    try:
        assert type(ev._metric) is DiscreteMetric
        assert ev._metric.allowed_values == ["pass", "fail"]
        assert isinstance(ev._llm, InstructorLLM)
        assert ev._llm.model_args["max_retries"] == 0
        assert ev._client.max_retries == 0
    finally:
        asyncio.run(ev.aclose())


def test_importing_the_gate_does_not_import_ragas() -> None:
    code = (
        "import sys, gate.judge, gate.judge.render, gate.judge.cache, gate.judge.outcome, "
        "gate.judge.metering, gate.judge.ragas_judge, gate.cli\n"
        "bad = sorted(m for m in ('ragas', 'instructor', 'openai', 'langchain_core') if m in sys.modules)\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


_AUDIT = """
import asyncio, json, os, random, socket, sys
sys.path.insert(0, sys.argv[2])
os.environ.pop("RAGAS_DO_NOT_TRACK", None)
os.environ["HOME"] = sys.argv[3]
os.environ.pop("XDG_DATA_HOME", None)
connects = []
def hook(event, args):
    if event == "socket.connect":
        connects.append(repr(args[1]))
    elif event == "socket.getaddrinfo":
        connects.append("getaddrinfo " + repr(args[0]))
sys.addaudithook(hook)
from gate.judge.budget import Budget
from gate.model.cases import Case
from gate.judge.ragas_judge import make_evaluator
from gate.model.policy import load_policy
import suite
loaded = load_policy(sys.argv[1])
ev = make_evaluator(loaded, api_key="sk-audit", cache_dir=None)
async def main():
    try:
        return await ev.judge(Case.model_validate(suite.case("c-audit")), 0, Budget(None))
    finally:
        await ev.aclose()
j = asyncio.run(main())
print(json.dumps({"status": j.status, "connects": connects, "track": os.environ.get("RAGAS_DO_NOT_TRACK")}))
"""


def test_no_socket_to_any_host_but_the_base_url(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """A fresh process (ragas imported under the hook): telemetry is off, only the fake is contacted."""
    path = suite.write_suite(tmp_path / "suite", evaluator={"base_url": fake_openai.base_url})
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", _AUDIT, str(path), str(Path(__file__).parents[1]), str(home)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok"
    assert result["connects"], "the judgment made no connection at all?"
    for c in result["connects"]:
        assert "127.0.0.1" in c and (c.startswith("getaddrinfo") or str(fake_openai.port) in c), c
    assert fake_openai.count("c-audit") == 1
    assert not (home / ".local" / "share" / "ragas").exists()  # ragas' uuid.json went to a private dir
