"""The run's pacer (SPEC 15): the provider's rate-limit headers, a policy's `evaluator.rate_limit`,
and a 429 pausing every judgment. Through real HTTP to a fake provider that enforces a token
bucket (tests/fake_limits.py), with a clock the test controls: no test sleeps on wall time."""

from __future__ import annotations

import asyncio
import io
import json
import multiprocessing
import os
import random
from pathlib import Path
from typing import Any

import pytest
import suite
from fake_limits import BucketLimits, openai_duration
from fake_openai import FakeOpenAI, RecordedRequest, prompt_tokens_for, rate_limited, reply, status
from suite import case, controls, gate, write_suite

from gate.cli import main
from gate.commands.run import RunOptions, run
from gate.judge import Judgment
from gate.judge.budget import Budget
from gate.judge.outcome import RetryTiming
from gate.judge.pacing import LimitHeaders, Pacer, Ticket, pacing, parse_duration
from gate.judge.ragas_judge import make_evaluator
from gate.model.cases import Case
from gate.model.policy import load_policy
from gate.run.progress import Progress

KEY = "sk-test-pacer-0123456789"
FAST = RetryTiming(base_s=0.01, cap_s=0.05, retry_after_cap_s=1.0, jitter=0.5)


class Clock:
    """A clock the test moves: the pacer's sleep advances it, and the fake provider reads it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def paced(clock: Clock, rpm: float | None = None, tpm: float | None = None, **kw: Any) -> Pacer:
    return Pacer(rpm, tpm, clock=clock, sleep=clock.sleep, **kw)


def judge_cases(
    tmp_path: Path,
    fake: FakeOpenAI,
    pacer: Pacer | None,
    n: int,
    *,
    concurrency: int = 8,
    max_attempts: int = 3,
    timing: RetryTiming = FAST,
) -> list[Judgment]:
    ev = {"base_url": fake.base_url, "max_concurrency": concurrency, "retries": {"max_attempts": max_attempts}}
    loaded = load_policy(suite.write_suite(tmp_path / "suite", evaluator=ev))
    evaluator = make_evaluator(loaded, api_key=KEY, cache_dir=None, timing=timing, rng=random.Random(7))
    cases = [Case.model_validate(suite.case(f"c-{i:03d}")) for i in range(n)]
    budget = Budget(None)

    async def main() -> list[Judgment]:
        try:
            with pacing(pacer):
                return list(await asyncio.gather(*(evaluator.judge(c, 0, budget) for c in cases)))
        finally:
            await evaluator.aclose()

    return asyncio.run(main())


# -- the headers, as OpenAI and Azure write them --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("12ms", 0.012),
        ("1m30.5s", 90.5),
        ("2h0m0s", 7200.0),
        ("0.5", 0.5),
        ("-1", None),  # Azure: unknown
        ("0", None),
        ("", None),
        (None, None),
        ("soon", None),
        ("1s2", None),
        ("m", None),
    ],
)
def test_durations_in_openai_format(text: str | None, seconds: float | None) -> None:
    assert parse_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_the_fakes_durations_read_back() -> None:
    for s in (0.012, 0.5, 1.0, 59.25, 90.5, 360.0):
        assert parse_duration(openai_duration(s)) == pytest.approx(s, abs=0.001)


def test_azure_unknowns_and_retry_after_forms() -> None:
    azure = LimitHeaders.read(
        {"x-ratelimit-limit-requests": "0", "x-ratelimit-remaining-requests": "-1", "x-ratelimit-reset-tokens": "0"}
    )
    assert (azure.requests.limit, azure.requests.remaining, azure.tokens.reset_s) == (None, None, None)
    assert not azure.said_anything
    openai = LimitHeaders.read(
        {
            "X-RateLimit-Limit-Tokens": "150000",
            "x-ratelimit-remaining-tokens": "149000",
            "x-ratelimit-reset-tokens": "1m30.5s",
            "retry-after": "7",
        }
    )
    assert (openai.tokens.limit, openai.tokens.remaining, openai.tokens.reset_s) == (150000, 149000, 90.5)
    assert openai.retry_after_s == 7
    assert LimitHeaders.read({"retry-after-ms": "250", "retry-after": "9"}).retry_after_s == 0.25


# -- the arithmetic, on a controlled clock --------------------------------------------------------


def admit_times(pacer: Pacer, clock: Clock, n: int, prompt_chars: int = 400, max_out: int = 64) -> list[float]:
    async def go() -> list[float]:
        out = []
        for _ in range(n):
            await pacer.admit(prompt_chars, max_out)
            out.append(clock.now)
        return out

    return asyncio.run(go())


def test_a_policy_window_admits_a_full_bucket_then_the_refill_rate() -> None:
    clock = Clock()
    times = admit_times(paced(clock, rpm=60), clock, 90)
    assert times[:60] == [0.0] * 60  # the whole window at once
    assert times[60:] == pytest.approx([float(i) for i in range(1, 31)])  # then one a second


def test_the_token_window_binds_first_and_the_wait_is_shown() -> None:
    clock = Clock()
    pacer = paced(clock, rpm=600, tpm=6000)
    said: list[str] = []
    pacer.on_wait = said.append
    # each request: (400 + 2000 learned overhead) / 4 + 64 = 664 tokens: 9 fit a 6000-token window
    times = admit_times(pacer, clock, 12)
    assert times.count(0.0) == 9
    assert times[-1] == pytest.approx(3 * 664 / 100 - (6000 - 9 * 664) / 100, abs=0.01)  # never early
    assert said and said[0].startswith("waiting ") and said[0].endswith("for the token window")


def test_status_says_what_a_waiting_run_waits_for() -> None:
    clock = Clock()
    pacer = paced(clock, tpm=1000)
    seen: list[str | None] = []

    async def sleep(seconds: float) -> None:  # look at the pacer while it waits
        seen.append(pacer.status())
        clock.now += seconds

    pacer._sleep = sleep
    admit_times(pacer, clock, 3, prompt_chars=0, max_out=400)  # 900 tokens each
    assert seen[0] == "waiting 48 s for the token window"


# -- real HTTP: a provider enforcing a token bucket -----------------------------------------------


def test_paced_judgments_never_meet_the_limit_through_real_http(tmp_path: Path) -> None:
    clock = Clock()
    limits = BucketLimits(requests_per_minute=20, clock=clock)
    with FakeOpenAI(limiter=limits) as fake:
        judgments = judge_cases(tmp_path, fake, paced(clock), 50)
    assert [(j.status, j.error_message) for j in judgments] == [("ok", None)] * 50
    # The first 8 go out before any reply says a word; the headers pace every other one.
    assert limits.refused <= 8
    assert sum(len(j.attempts) for j in judgments) == fake.count() == 50 + limits.refused
    assert limits.most_in_any_window(60) <= 20 + 20  # a full bucket plus one minute's refill
    assert clock.now >= (50 - 20) / (20 / 60) * 0.95  # it took as long as the limit says


def test_unpaced_judgments_flood_the_same_provider(tmp_path: Path) -> None:
    """Today's behaviour (no pacer) against the same bucket: what the pacer prevents."""
    clock = Clock()
    limits = BucketLimits(requests_per_minute=20, clock=clock)
    with FakeOpenAI(limiter=limits) as fake:
        judgments = judge_cases(tmp_path, fake, None, 50, max_attempts=1)
    assert limits.refused == 30 and fake.count() == 50
    assert sum(j.error_kind == "rate_limit" for j in judgments) == 30


def test_a_provider_without_headers_is_paced_by_the_policy_window(tmp_path: Path) -> None:
    clock = Clock()
    limits = BucketLimits(requests_per_minute=15, tokens_per_minute=None, headers=False, clock=clock)
    with FakeOpenAI(limiter=limits) as fake:
        judgments = judge_cases(tmp_path, fake, paced(clock, rpm=15), 40)
    assert [j.status for j in judgments] == ["ok"] * 40
    assert limits.refused == 0 and fake.count() == 40
    assert all("x-ratelimit-limit-requests" not in r.headers for r in fake.requests)


def test_a_token_window_that_binds_first_through_real_http(tmp_path: Path) -> None:
    clock = Clock()
    with FakeOpenAI() as probe:  # one request's real token cost on this provider
        judge_cases(tmp_path / "probe", probe, None, 1)
        body = probe.requests[0].body
    per_request = prompt_tokens_for(body) + body["max_tokens"]
    limits = BucketLimits(requests_per_minute=1000, tokens_per_minute=per_request * 5, clock=clock)
    with FakeOpenAI(limiter=limits) as fake:
        judgments = judge_cases(tmp_path, fake, paced(clock), 20, concurrency=2)
    assert [j.status for j in judgments] == ["ok"] * 20
    assert limits.refused == 0, "the first two fit; the headers pace the rest"
    # 5 requests' tokens a minute, 5 at once: 15 more take 3 minutes
    assert clock.now == pytest.approx(180, rel=0.1)
    assert fake.count() == 20


def test_a_429_pauses_every_judgment_until_the_provider_says(tmp_path: Path) -> None:
    clock = Clock()
    arrivals: list[tuple[float, str]] = []
    answered_429 = []

    def provider(req: RecordedRequest) -> Any:
        arrivals.append((clock.now, req.prompt))
        if not answered_429:
            answered_429.append(clock.now)
            return rate_limited(retry_after="30")
        return reply("pass")

    pacer = paced(clock)
    with FakeOpenAI(default=provider) as fake:
        judgments = judge_cases(tmp_path, fake, pacer, 12, concurrency=4)
    assert [j.status for j in judgments] == ["ok"] * 12
    assert fake.count() == 13 and pacer.rate_limited == 1
    # Four were in flight when the 429 came; nothing was sent after it until 30 s had passed.
    later = [t for t, _ in arrivals[4:]]
    assert later and min(later) >= 30.0
    (paid_nothing,) = [a for j in judgments for a in j.attempts if a.status_code == 429]
    assert paid_nothing.input_tokens == 0


def test_a_burst_of_429s_is_retried_within_max_attempts(tmp_path: Path) -> None:
    clock = Clock()
    seen: set[str] = set()

    def provider(req: RecordedRequest) -> Any:
        # Each case's first request is answered 429, whichever order they arrive in: counting the first six
        # requests served instead failed under load, where one case's retry came before another's first try.
        first = req.prompt not in seen
        seen.add(req.prompt)
        return status(429, retry_after=None) if first else reply("pass")

    pacer = paced(clock)
    with FakeOpenAI(default=provider) as fake:
        judgments = judge_cases(tmp_path, fake, pacer, 6, concurrency=6, max_attempts=2)
    # All six were answered 429 at once (nothing said when to come back): one pause for everyone,
    # then each second attempt passes; none gave up, none took a third attempt.
    assert [j.status for j in judgments] == ["ok"] * 6
    assert [len(j.attempts) for j in judgments] == [2] * 6
    assert fake.count() == 12 and pacer.rate_limited == 6
    assert clock.now >= 1.0  # the fallback pause when a 429 says nothing


# -- worker processes share one window ------------------------------------------------------------


class Full(Exception):
    pass


def _admit_until_full(pacer: Pacer, out: Any) -> None:
    async def never(_seconds: float) -> None:
        raise Full

    pacer._sleep = never
    n = 0

    async def go() -> None:
        nonlocal n
        while True:
            await pacer.admit(0, 1)
            n += 1

    try:
        asyncio.run(go())
    except Full:
        out.send(n)
    out.close()


def test_forked_workers_share_the_parents_window() -> None:
    pacer = Pacer(10, None, shared=True, clock=lambda: 0.0)  # time stands still: no refill
    ctx = multiprocessing.get_context("fork")
    got = []
    procs = []
    for _ in range(2):
        reader, writer = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_admit_until_full, args=(pacer, writer))
        proc.start()
        writer.close()
        procs.append((proc, reader))
    for proc, reader in procs:
        got.append(reader.recv())
        proc.join(10)
    assert sum(got) == 10, "two workers together take one window of 10, not 10 each"


# -- the policy key, and what a run reports -------------------------------------------------------


@pytest.mark.parametrize(
    ("rate_limit", "says"),
    [
        ({"requests_per_minute": 0}, "greater than 0"),
        ({"requests_per_minte": 500}, "requests_per_minte"),
        ({}, "sets neither"),
    ],
)
def test_a_bad_rate_limit_is_a_usage_error_naming_the_key(
    tmp_path: Path, rate_limit: dict[str, Any], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path, evaluator={"rate_limit": rate_limit})
    assert main(["validate", "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert "rate_limit" in err and says in err and "Traceback" not in err


def test_a_run_counts_429s_in_its_cost_and_its_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", KEY)
    clock = Clock()
    with FakeOpenAI() as fake:
        fake.script("c-1", rate_limited(retry_after="0.5"), reply("pass"))
        cases = [*controls(), case("c-1"), case("c-2", label="fail"), case("g-1", slice="general")]
        fake.script("c-2", reply("fail"))
        policy = write_suite(
            tmp_path / "s",
            cases,
            evaluator={"base_url": fake.base_url, "rate_limit": {"requests_per_minute": 600}},
        )
        out = tmp_path / "out"
        progress = io.StringIO()
        opts = RunOptions(lane="pr", out_dir=out, use_cache=False, progress=progress, pacer=paced(clock, rpm=600))
        decision = run(policy, opts)
    assert decision.state.value == "passed"
    res = json.loads((out / "result.json").read_text())
    assert res["cost"]["rate_limited"] == 1
    assert "1 attempt was answered 429" in (out / "report.md").read_text()
    assert clock.now >= 0.5  # the 429's retry-after paused the run (on the run's clock)


def test_progress_shows_the_pacers_wait_in_a_log() -> None:
    stream = io.StringIO()
    progress = Progress(10, stream)
    progress.waiting("waiting 12 s for the token window")
    progress.waiting("waiting 11 s for the token window")  # not again within 15 s
    progress.waiting(None)
    assert stream.getvalue() == "gate: 0/10 judgments, waiting 12 s for the token window\n"


def test_the_cli_runs_a_policy_with_a_rate_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", KEY)
    with FakeOpenAI() as fake:
        policy = write_suite(
            tmp_path / "s", evaluator={"base_url": fake.base_url, "rate_limit": {"tokens_per_minute": 10_000_000}}
        )
        assert gate("run", "--policy", policy, "--out", tmp_path / "out", "--no-cache") == 0
    assert os.path.exists(tmp_path / "out" / "result.json")


def test_a_request_overtaken_on_the_wire_is_still_taken_off_the_window() -> None:
    """Two requests admitted at once; the provider sees the second first and answers it with a
    `remaining` that does not hold the first, still on its way. The first is taken off too, so the
    third waits for the refill instead of meeting a window the first has emptied (a 429 seen at
    load 8 in make test)."""
    clock = Clock()
    pacer = paced(clock, tpm=1000)
    # (0 + 2000 overhead) / 4 + 0 = 500 tokens a request: two fill the window
    first, second = asyncio.run(_admit_two(pacer))
    headers = {"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "500"}
    pacer.observe(second, 200, headers, None)  # the provider has counted the second only
    assert admit_times(pacer, clock, 1, prompt_chars=0, max_out=0) == [pytest.approx(30.0)]
    pacer.observe(first, 200, {**headers, "x-ratelimit-remaining-tokens": "0"}, None)  # older news


async def _admit_two(pacer: Pacer) -> tuple[Ticket, Ticket]:
    return await pacer.admit(0, 0), await pacer.admit(0, 0)


def test_a_request_given_up_on_no_longer_holds_the_window() -> None:
    """A request that timed out is never answered: once given up on, it no longer counts against
    what later replies say is left, or the run would slow down for good after each timeout."""
    clock = Clock()
    pacer = paced(clock, tpm=1000)
    lost, answered = asyncio.run(_admit_two(pacer))
    pacer.give_up(lost)
    pacer.observe(answered, 200, {"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "500"}, None)
    assert admit_times(pacer, clock, 1, prompt_chars=0, max_out=0) == [0.0]


def test_a_reply_of_an_earlier_count_is_older_news_whatever_its_order() -> None:
    """Two requests in flight; the provider counts the second first and answers it with the window
    holding only that one; the first's answer (both counted) is read before it. The second's answer
    is older news even though its request is the later one: believing it would admit a third
    request into the room the first already took (a 429 seen at load 8 in make test)."""
    clock = Clock()
    pacer = paced(clock, tpm=2000)  # 500 tokens a request, as below: four fit
    first, second = asyncio.run(_admit_two(pacer))
    limit = {"x-ratelimit-limit-tokens": "2000"}
    pacer.observe(first, 200, {**limit, "x-ratelimit-remaining-tokens": "1000"}, None)  # both counted
    pacer.observe(second, 200, {**limit, "x-ratelimit-remaining-tokens": "1500"}, None)  # only itself
    times = admit_times(pacer, clock, 3, prompt_chars=0, max_out=0)
    assert sum(t < 15.0 for t in times) <= 2  # 1000 tokens are left: two fit, the third waits 15 s
