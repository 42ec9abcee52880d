"""No wait of the run's pacer is longer than the provider says or than a minute (issue 28, defects 5
and 6 and the pacer's surviving mutations of item 11). Real HTTP to the fake provider where a reply
header is the input; the clock is the test's (the pacer's sleep moves it), so nothing waits on
wall time and a hang shows as a failure, not a stuck run."""

from __future__ import annotations

import asyncio
import email.utils
import random
from pathlib import Path
from typing import Any

import pytest
import suite
from fake_openai import FakeOpenAI, RecordedRequest, rate_limited, reply

from gate.judge import Judgment
from gate.judge.budget import Budget
from gate.judge.outcome import RetryTiming, backoff_delay, parse_retry_after
from gate.judge.pacing import LimitHeaders, Pacer, Ticket, pacing
from gate.judge.ragas_judge import make_evaluator
from gate.model.cases import Case
from gate.model.policy import load_policy

KEY = "sk-test-pacer-bounds-0123456789"
FAST = RetryTiming(base_s=0.01, cap_s=0.05, retry_after_cap_s=1.0, jitter=0.5)
EPOCH = 1_900_000_000.0  # the pacer's wall clock in these tests (an HTTP date is read against it)
DAY = 86_400.0


class Hung(Exception):
    """The pacer slept more than a day of the test's clock: on a real run, a hang."""


class Clock:
    """A clock the test moves: the pacer's sleep advances it; a day of sleeping is a hang."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.now > DAY:
            raise Hung(f"still waiting after {self.now:.0f} s")
        await asyncio.sleep(0)


def paced(clock: Clock, rpm: float | None = None, tpm: float | None = None) -> Pacer:
    return Pacer(rpm, tpm, clock=clock, sleep=clock.sleep, wall=lambda: EPOCH)


def judge_in_turn(tmp_path: Path, fake: FakeOpenAI, pacer: Pacer, n: int) -> list[Judgment]:
    """`n` judgments one at a time (concurrency 1), paced, through the real ragas judge."""
    ev = {"base_url": fake.base_url, "max_concurrency": 1, "retries": {"max_attempts": 3}}
    loaded = load_policy(suite.write_suite(tmp_path / "suite", evaluator=ev))
    evaluator = make_evaluator(loaded, api_key=KEY, cache_dir=None, timing=FAST, rng=random.Random(7))
    cases = [Case.model_validate(suite.case(f"c-{i:03d}")) for i in range(n)]
    budget = Budget(None)

    async def main() -> list[Judgment]:
        try:
            with pacing(pacer):
                return list(await asyncio.gather(*(evaluator.judge(c, 0, budget) for c in cases)))
        finally:
            await evaluator.aclose()

    return asyncio.run(main())


def first_reply_says(headers: dict[str, str]) -> Any:
    """A provider whose first answer carries `headers`, and every later one none."""
    served: list[int] = []

    def provider(_req: RecordedRequest) -> Any:
        served.append(1)
        return reply("pass", headers=tuple(headers.items()) if len(served) == 1 else ())

    return provider


# -- defect 5: one header must not hold a slot for hours ---------------------------------------


def test_a_token_limit_below_the_request_it_answered_is_not_believed(tmp_path: Path) -> None:
    """`x-ratelimit-limit-tokens: 1` on a reply to a ~400-token request made the third request wait
    6.5 hours (and 14 hours on a larger prompt), holding its slot, outside every timeout."""
    clock = Clock()
    with FakeOpenAI(default=first_reply_says({"x-ratelimit-limit-tokens": "1"})) as fake:
        judgments = judge_in_turn(tmp_path, fake, paced(clock), 4)
        assert fake.count() == 4
    assert [j.status for j in judgments] == ["ok"] * 4
    assert clock.now == 0.0, "no window was ever known, so nothing waits"


def test_an_empty_window_that_resets_in_20ms_costs_20ms(tmp_path: Path) -> None:
    """`remaining-tokens: 0, reset-tokens: 20ms`: the bucket arithmetic (a ~400-token request at
    1000 tokens a minute) said 25 s; the provider says its window is whole again in 20 ms."""
    clock = Clock()
    said = {"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "20ms"}
    with FakeOpenAI(default=first_reply_says(said)) as fake:
        judgments = judge_in_turn(tmp_path, fake, paced(clock), 3)
    assert [j.status for j in judgments] == ["ok"] * 3
    assert 0.0 < clock.now <= 0.021 + 1e-9


def admit_times(pacer: Pacer, clock: Clock, sizes: list[int], max_out: int = 64) -> list[float]:
    async def go() -> list[float]:
        out = []
        for chars in sizes:
            await pacer.admit(chars, max_out)
            out.append(clock.now)
        return out

    return asyncio.run(go())


def test_a_request_larger_than_the_window_goes_when_the_window_is_whole() -> None:
    """(8000 + 2000 overhead) / 4 + 64 = 2564 tokens against a 1000-token window: it can never fit
    whole, so it waits for a full window only (item 11: without that, it waited forever)."""
    clock = Clock()
    assert admit_times(paced(clock, tpm=1000), clock, [8000]) == [0.0]


def test_a_window_wait_ends_after_the_longest_pause() -> None:
    """After that 2564-token request the window is 1564 tokens below empty: the arithmetic says
    154 s for the next one, but a per-minute window is whole again after a minute."""
    clock = Clock()
    pacer = paced(clock, tpm=1000)
    assert pacer.max_pause_s == 60.0
    assert admit_times(pacer, clock, [8000, 8000]) == [0.0, pytest.approx(60.0)]


# -- defect 6: one Retry-After parser, for the retry path and the pacer --------------------------


def test_a_429_with_an_http_date_pauses_every_judgment_until_that_date(tmp_path: Path) -> None:
    """The pacer read `Retry-After: <HTTP date>` as nothing and paused everyone 1 s."""
    clock = Clock()
    arrivals: list[float] = []
    when = email.utils.formatdate(EPOCH + 40, usegmt=True)

    def provider(_req: RecordedRequest) -> Any:
        arrivals.append(clock.now)
        return rate_limited(retry_after=when) if len(arrivals) == 1 else reply("pass")

    pacer = paced(clock)
    with FakeOpenAI(default=provider) as fake:
        judgments = judge_in_turn(tmp_path, fake, pacer, 3)
    assert [j.status for j in judgments] == ["ok"] * 3
    assert pacer.rate_limited == 1 and arrivals[0] == 0.0
    assert min(arrivals[1:]) == pytest.approx(40.0)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": email.utils.formatdate(EPOCH + 40, usegmt=True)}, 40.0),
        ({"retry-after": email.utils.formatdate(EPOCH - 40, usegmt=True)}, 0.0),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after-ms": "nan", "retry-after": "3"}, 3.0),
    ],
)
def test_the_pacer_and_the_retry_path_read_retry_after_alike(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers, now=EPOCH) == seconds
    assert LimitHeaders.read(headers, EPOCH).retry_after_s == seconds


def test_the_retry_path_and_the_pacer_cap_a_retry_after_alike() -> None:
    """A 45 s Retry-After was 30 s for a judgment and 45 s for the pacer."""
    asked = parse_retry_after({"retry-after": "45"})
    clock = Clock()
    pacer = paced(clock)
    pacer.observe(None, 429, {"retry-after": "45"}, None)
    assert backoff_delay(RetryTiming(), 1, asked, random.Random(1)) == 45.0
    assert admit_times(pacer, clock, [0]) == [45.0]
    pacer.observe(None, 429, {"retry-after": "600"}, None)
    assert backoff_delay(RetryTiming(), 1, 600.0, random.Random(1)) == pacer.max_pause_s
    assert admit_times(pacer, clock, [0]) == [45.0 + pacer.max_pause_s]


# -- item 11: the pacer's surviving mutations -----------------------------------------------------


def test_a_retry_after_of_a_day_pauses_the_run_for_a_minute(tmp_path: Path) -> None:
    clock = Clock()
    served: list[float] = []

    def provider(_req: RecordedRequest) -> Any:
        served.append(clock.now)
        return rate_limited(retry_after="86400") if len(served) == 1 else reply("pass")

    pacer = paced(clock)
    with FakeOpenAI(default=provider) as fake:
        judgments = judge_in_turn(tmp_path, fake, pacer, 2)
    assert [j.status for j in judgments] == ["ok"] * 2
    assert served[1] == pytest.approx(pacer.max_pause_s) and clock.now < 2 * pacer.max_pause_s


class Full(Exception):
    pass


def admitted_before_waiting(pacer: Pacer, prompt_chars: int = 0, max_out: int = 0) -> list[Ticket]:
    """Admit until the pacer would wait (time stands still): what it let through."""

    async def never(_seconds: float) -> None:
        raise Full

    pacer._sleep = never
    got: list[Ticket] = []

    async def go() -> None:
        while True:
            got.append(await pacer.admit(prompt_chars, max_out))

    with pytest.raises(Full):
        asyncio.run(go())
    return got


def test_requests_sent_after_the_reply_are_taken_off_its_remaining() -> None:
    """Five requests out before any reply; the first one's reply says 9 of 10 remain. Four of those
    nine are already taken: 5 more fit, not 9 (14 in a 10-request window, four 429s)."""
    pacer = Pacer(clock=lambda: 0.0)
    first = [asyncio.run(pacer.admit(0, 0)) for _ in range(5)]
    said = {
        "x-ratelimit-limit-requests": "10",
        "x-ratelimit-remaining-requests": "9",
        "x-ratelimit-reset-requests": "6s",
    }
    pacer.observe(first[0], 200, said, None)
    assert len(first) + len(admitted_before_waiting(pacer)) == 10


def test_the_token_estimate_stays_one_percent_above_what_replies_report() -> None:
    """A provider rounds each request's count up; the mean of what it reported does not. After a
    reply reporting exactly the estimate (500 tokens), each request counts 505: ten fit in the
    5500 tokens left, not eleven (the eleventh would be refused 429 by such a provider)."""
    pacer = Pacer(None, 6000, clock=lambda: 0.0)
    probe = asyncio.run(pacer.admit(0, 0))  # (0 + 2000 overhead) / 4 = 500 tokens
    assert probe.tokens == 500.0
    pacer.observe(probe, 200, {}, 500)
    got = admitted_before_waiting(pacer)
    assert len(got) == 10 and got[0].tokens == pytest.approx(505.0)
