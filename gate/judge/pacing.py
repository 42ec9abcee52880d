"""One pacer per run: every request of every concurrent judgment waits here until it fits the
provider's rate limits.

The provider's windows are two token buckets, one of requests and one of tokens, each with a
capacity (the per-minute limit) refilled at capacity / 60 per second. They are learned from:
- every reply's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` headers (OpenAI, Azure;
  `-1`, `0` or absent mean unknown): the limit sets the capacity, `remaining` the level;
- `evaluator.rate_limit: {requests_per_minute, tokens_per_minute}` for a provider that sends none
  (with both, the smaller limit holds);
- nothing at all: a window never heard of admits at once (`max_concurrency` still bounds what is
  in flight), until a reply or a 429 says more.

A request is admitted when one request and its estimated tokens fit both windows: the characters
of everything sent (every message, the response schema) / 4, scaled by what replies' `usage`
reported for earlier requests, plus `max_output_tokens`. The estimate is made before the body
exists (the prompt plus the overhead learned from earlier bodies) and corrected when the body is
sent (`resize`). A reply's `remaining` is the provider's count when it answered: a request still
unanswered may not be in it yet, so every one is taken off again: those admitted after the one it
answers, and those admitted before it that are still on their way (requests overtake each other on
the wire; one admitted first can reach the provider last). Older news is ignored: a reply that
arrives after a later request's, and a reply whose count says the window is whole again sooner
than a reading already taken said (a provider's count only grows; the reply is of an earlier
moment, whatever its order).

No wait is longer than the provider says or than `max_pause_s` (a minute: a per-minute window is
whole again after one), whatever the arithmetic believes:
- a window's `reset` header bounds a wait for it: by then the provider's window is whole again
  (less what was admitted after the reply that said so);
- a limit below the request it just answered (`x-ratelimit-limit-tokens: 1` on a 400-token
  request) is not the provider's window but a wrong header: that reading is ignored;
- an admission that has waited `max_pause_s` for a window goes (the window cannot still be full).

A 429 pauses ALL sending (`paused_until`) until the provider says a request fits again:
`retry-after-ms`, `retry-after` (seconds or an HTTP date; read by `gate.judge.outcome.
parse_retry_after`, as the retry path reads it), else the reset header of the window that ran out
(capped at `max_pause_s`). The evaluator still counts the 429 as one of `max_attempts` (it was
paid nothing).

Waiters are served in turn (an asyncio lock per event loop): the first in line sleeps until its
request fits, the others queue behind it, so a large request is never starved by small ones. A
waiter asks the run at every step whether its request is still wanted (`admit(wanted=...)`): a lane
that stopped while it waited (a decided verdict, a failed control) sends nothing more.

Worker processes SHARE the parent's windows rather than split them: the pacer's numbers live in
shared memory behind one lock (`shared=True`; forked workers inherit it), because the provider
counts one key's requests wherever they come from. Split windows would each believe the
provider's `remaining` (which already counts every worker's requests) and overshoot it K times,
or, divided by K, strand capacity whenever one worker's share runs dry before the others'.

The clock and the sleep are injectable: tests drive the pacer with a clock they control.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import multiprocessing
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gate.judge.outcome import MAX_PAUSE_S, parse_retry_after

PERIOD_S = 60.0  # OpenAI and Azure state limits per minute
MAX_STEP_S = 1.0  # a waiter looks again at least this often (another process may have news)
DEFAULT_OVERHEAD_CHARS = 2000  # the request body beyond the prompt, until a body has been seen
FALLBACK_PAUSE_S = 1.0  # a 429 that says nothing about when to come back
MIN_WAIT_S = 0.001  # the shortest sleep: a shorter one may not move a clock at all (a float's last bit)

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}

# Cells of the shared state (floats): one list in one process, a RawArray across workers.
_REQ, _TOK = 0, 4  # each window: capacity, rate per second, level, as-of time
_CAP, _RATE, _LEVEL, _AT = 0, 1, 2, 3
_PAUSED_UNTIL = 8
_SEQ = 9  # requests admitted so far (a ticket's sequence number)
_CUM_TOKENS = 10  # tokens admitted so far
_OBSERVED_SEQ = 11  # the newest ticket whose reply set the windows
_RATE_LIMITED = 12  # 429s seen
_EST_PROMPT = 13  # estimated prompt tokens (chars / 4) of replies with usage ...
_USED_PROMPT = 14  # ... and the prompt tokens they reported
_OVERHEAD = 15  # characters of a body beyond its prompt, learned from bodies
_WAIT_UNTIL = 16  # when the current wait ends (0: nobody waits)
_WAIT_WHY = 17  # 1 request window, 2 token window, 3 paused after a 429
_RESET_AT = {_REQ: 18, _TOK: 19}  # when the newest reply said the window is whole again (0: unknown)
_RESET_BASE = {_REQ: 20, _TOK: 21}  # admitted (requests, tokens) that reply's count holds
_COUNTER = {_REQ: _SEQ, _TOK: _CUM_TOKENS}  # what each window counts
_OUTSTANDING = {_REQ: 22, _TOK: 23}  # admitted and not yet answered, released or given up on
_FULL_AT = {_REQ: 24, _TOK: 25}  # the latest "whole again at" a reading implied (never cleared)
_CELLS = 26

_WHY = {1: "the request window", 2: "the token window", 3: "the provider's retry-after (after a 429)"}


def parse_duration(text: str | None) -> float | None:
    """Seconds from an OpenAI duration (`1s`, `6m0s`, `12ms`, `1m30.5s`) or plain seconds (`0.5`).
    `-1`, `0`, empty, absent or unreadable: None (unknown, as Azure sends them)."""
    if text is None:
        return None
    text = text.strip().lower()
    try:
        plain = float(text)
    except ValueError:
        pass
    else:
        return plain if math.isfinite(plain) and plain > 0 else None
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or pos == 0:
        return None
    return total if total > 0 else None


def _count(text: str | None) -> float | None:
    """A whole count >= 0 from a header; `-1`, absent or unreadable: None."""
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


@dataclass(frozen=True)
class WindowReading:
    limit: float | None  # None or 0: unknown
    remaining: float | None
    reset_s: float | None


@dataclass(frozen=True)
class LimitHeaders:
    """What one reply says about the provider's windows (every field may be unknown)."""

    requests: WindowReading
    tokens: WindowReading
    retry_after_s: float | None

    @classmethod
    def read(cls, headers: Mapping[str, str], wall_now: float | None = None) -> LimitHeaders:
        """`wall_now`: the wall clock an HTTP-date `retry-after` is read against (default now)."""
        h = {k.lower(): v for k, v in headers.items()}

        def window(kind: str) -> WindowReading:
            limit = _count(h.get(f"x-ratelimit-limit-{kind}"))
            return WindowReading(
                limit if limit else None,  # 0 is Azure's "unknown"
                _count(h.get(f"x-ratelimit-remaining-{kind}")),
                parse_duration(h.get(f"x-ratelimit-reset-{kind}")),
            )

        return cls(window("requests"), window("tokens"), parse_retry_after(h, wall_now))

    @property
    def said_anything(self) -> bool:
        return (
            any(v is not None for w in (self.requests, self.tokens) for v in (w.limit, w.remaining, w.reset_s))
            or self.retry_after_s is not None
        )


@dataclass
class Ticket:
    """One admitted request: what it took from the windows, and where it stood in the sequence."""

    seq: int
    tokens: float  # its token estimate (prompt + max_output_tokens)
    prompt_estimate: float  # chars / 4 of its body (before scaling)
    cum_tokens: float  # tokens admitted up to and including this one
    released: bool = False
    settled: bool = False  # answered, released or given up on: no longer outstanding


class Pacer:
    """Admits requests into the provider's windows; see the module doc."""

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        shared: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        max_pause_s: float = MAX_PAUSE_S,
        period_s: float = PERIOD_S,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.clock = clock
        self.wall = wall  # an HTTP-date retry-after is wall time
        self._sleep = sleep
        self.max_pause_s = max_pause_s
        self.period_s = period_s
        self.policy_limits = (requests_per_minute, tokens_per_minute)
        self._lock: Any
        self._cells: Any
        if shared:
            ctx = multiprocessing.get_context("fork")
            self._lock = ctx.Lock()
            self._cells = ctx.RawArray("d", _CELLS)
        else:
            self._lock = contextlib.nullcontext()
            self._cells = [0.0] * _CELLS
        self._cells[_OVERHEAD] = DEFAULT_OVERHEAD_CHARS
        now = clock()
        for base, limit in ((_REQ, requests_per_minute), (_TOK, tokens_per_minute)):
            if limit:
                self._set_capacity(base, float(limit), now)
                self._cells[base + _LEVEL] = float(limit)  # a run starts with the whole window
        self._turns: dict[int, asyncio.Lock] = {}
        self.on_wait: Callable[[str], None] | None = None  # told when a wait of a second or more begins

    # -- reading --------------------------------------------------------------------------------
    @property
    def rate_limited(self) -> int:
        """429s seen by this run (every process)."""
        return int(self._cells[_RATE_LIMITED])

    def status(self) -> str | None:
        """What a waiting run is waiting for ("waiting 12 s for the token window"), or None."""
        with self._lock:
            until, why = self._cells[_WAIT_UNTIL], int(self._cells[_WAIT_WHY])
        left = until - self.clock()
        if why == 0 or left <= 0:
            return None
        return f"waiting {math.ceil(left)} s for {_WHY.get(why, 'the provider')}"

    def estimate(self, prompt_chars: int, max_output_tokens: int) -> tuple[float, float]:
        """(tokens to admit, the unscaled prompt estimate) for a body of the prompt plus the learned overhead."""
        with self._lock:
            raw = (prompt_chars + self._cells[_OVERHEAD]) / 4.0
            return raw * self._ratio() + max_output_tokens, raw

    # -- admitting ------------------------------------------------------------------------------
    async def admit(
        self, prompt_chars: int, max_output_tokens: int, wanted: Callable[[], bool] | None = None
    ) -> Ticket | None:
        """Wait (in turn) until one request of this size fits every known window; take it. `wanted`
        is asked before the request is taken and at every step of a wait: once it says no (the lane
        stopped while this request waited), nothing is taken and None is returned."""
        tokens, raw = self.estimate(prompt_chars, max_output_tokens)
        async with self._turn():
            started: float | None = None
            while True:
                if wanted is not None and not wanted():
                    if started is not None:  # the wait it announced is over
                        with self._lock:
                            self._cells[_WAIT_UNTIL] = self._cells[_WAIT_WHY] = 0.0
                    return None
                with self._lock:
                    now = self.clock()
                    started = now if started is None else started
                    wait, why = self._wait(tokens, now)
                    if why in (1, 2):  # a window wait ends by max_pause_s after this admission began
                        wait = min(wait, started + self.max_pause_s - now)
                        if wait <= 0:
                            self._whole_again(tokens, now)
                    if wait <= 0:
                        self._cells[_WAIT_UNTIL] = self._cells[_WAIT_WHY] = 0.0
                        return self._take(tokens, raw, now)
                    self._cells[_WAIT_UNTIL], self._cells[_WAIT_WHY] = now + wait, float(why)
                if wait >= 1.0 and self.on_wait is not None:
                    self.on_wait(f"waiting {math.ceil(wait)} s for {_WHY[why]}")
                await self._sleep(min(max(wait, MIN_WAIT_S), MAX_STEP_S))

    def _turn(self) -> asyncio.Lock:
        # One lock per event loop: a run opens several (controls, workers, the trend).
        loop = asyncio.get_running_loop()
        turn = self._turns.get(id(loop))
        if turn is None:
            self._turns = {id(loop): (turn := asyncio.Lock())}
        return turn

    def resize(self, ticket: Ticket, body_chars: int, prompt_chars: int, max_output_tokens: int) -> None:
        """The body is known now: correct the ticket's estimate and learn the overhead beyond the prompt."""
        with self._lock:
            self._cells[_OVERHEAD] = max(0.0, float(body_chars - prompt_chars))
            raw = body_chars / 4.0
            tokens = raw * self._ratio() + max_output_tokens
            delta = tokens - ticket.tokens
            ticket.tokens, ticket.prompt_estimate = tokens, raw
            self._cells[_TOK + _LEVEL] -= delta
            self._cells[_CUM_TOKENS] += delta
            if not ticket.settled:
                self._cells[_OUTSTANDING[_TOK]] += delta

    def release(self, ticket: Ticket) -> None:
        """A request admitted but never sent (refused before the wire): give its share back."""
        with self._lock:
            if ticket.released:
                return
            ticket.released = True
            self._cells[_REQ + _LEVEL] += 1.0
            self._cells[_TOK + _LEVEL] += ticket.tokens
            self._settle(ticket)

    def give_up(self, ticket: Ticket) -> None:
        """A request sent that will get no reply (a timeout, a dropped connection): no longer
        outstanding. Whether the provider counted it, its own window will say in later replies."""
        with self._lock:
            self._settle(ticket)

    def _settle(self, ticket: Ticket) -> None:
        if not ticket.settled:
            ticket.settled = True
            self._cells[_OUTSTANDING[_REQ]] -= 1.0
            self._cells[_OUTSTANDING[_TOK]] -= ticket.tokens

    def observe(
        self, ticket: Ticket | None, status: int, headers: Mapping[str, str], prompt_tokens: int | None
    ) -> None:
        """A reply: its headers set the windows, its usage the token estimate, a 429 pauses everyone."""
        said = LimitHeaders.read(headers, self.wall())
        with self._lock:
            now = self.clock()
            if ticket is not None:
                self._settle(ticket)
            if prompt_tokens is not None and ticket is not None and ticket.prompt_estimate > 0:
                self._cells[_EST_PROMPT] += ticket.prompt_estimate
                self._cells[_USED_PROMPT] += prompt_tokens
            newest = ticket is None or ticket.seq > self._cells[_OBSERVED_SEQ]
            if newest and said.said_anything:
                if ticket is not None:
                    self._cells[_OBSERVED_SEQ] = ticket.seq
                # What this reply counts: the requests and tokens admitted up to its own request.
                seq = float(ticket.seq) if ticket is not None else self._cells[_SEQ]
                cum = ticket.cum_tokens if ticket is not None else self._cells[_CUM_TOKENS]
                self._learn(_REQ, said.requests, seq, 1.0, now)
                self._learn(_TOK, said.tokens, cum, ticket.tokens if ticket is not None else 0.0, now)
            if status == 429:
                self._cells[_RATE_LIMITED] += 1
                self._pause(self._pause_for(said), now)

    def pause(self, seconds: float) -> None:
        """No request is admitted for `seconds` (capped at `max_pause_s`), whoever asks."""
        with self._lock:
            self._pause(seconds, self.clock())

    def _pause(self, seconds: float, now: float) -> None:
        if seconds > 0:
            until = now + min(seconds, self.max_pause_s)
            self._cells[_PAUSED_UNTIL] = max(self._cells[_PAUSED_UNTIL], until)

    # -- the arithmetic (under `_lock`) --------------------------------------------------------
    def _ratio(self) -> float:
        est, used = self._cells[_EST_PROMPT], self._cells[_USED_PROMPT]
        # The mean ratio, 1% high: a provider rounds each request's count up, the mean does not.
        return min(4.0, max(0.25, used / est * 1.01)) if est > 0 and used > 0 else 1.0

    def _set_capacity(self, base: int, limit: float, now: float) -> None:
        policy = self.policy_limits[0 if base == _REQ else 1]
        capacity = min(limit, float(policy)) if policy else limit
        if self._cells[base + _CAP] == 0:
            self._cells[base + _AT] = now
            self._cells[base + _LEVEL] = capacity
        self._cells[base + _CAP] = capacity
        self._cells[base + _RATE] = capacity / self.period_s

    def _refill(self, base: int, now: float) -> float:
        cap, rate = self._cells[base + _CAP], self._cells[base + _RATE]
        level = self._cells[base + _LEVEL]
        at = self._cells[base + _AT]
        if cap > 0 and now > at:
            level = min(cap, level + rate * (now - at))
            self._cells[base + _LEVEL], self._cells[base + _AT] = level, now
        return float(level)

    def _learn(self, base: int, reading: WindowReading, counted: float, one_request: float, now: float) -> None:
        """A reply's reading of one window; `counted`: admitted up to its request, `one_request`: its size."""
        if reading.limit is not None and reading.limit < one_request:
            return  # the provider just served more than this "limit": the header is wrong, not the window
        if reading.limit is not None:
            self._set_capacity(base, reading.limit, now)
        if self._cells[base + _CAP] <= 0 or self._older_news(base, reading, now):
            return
        # What may not be in its count yet: every request still unanswered, whether admitted after
        # the one it answers or before it (and overtaken on the wire); and those admitted after it
        # that were answered without a word on the windows.
        unseen = max(self._cells[_COUNTER[base]] - counted, self._cells[_OUTSTANDING[base]])
        if reading.remaining is not None:
            self._cells[base + _LEVEL] = min(self._cells[base + _CAP], reading.remaining) - unseen
            self._cells[base + _AT] = now
        if reading.reset_s is not None:
            self._cells[_RESET_AT[base]] = now + reading.reset_s
            self._cells[_RESET_BASE[base]] = self._cells[_COUNTER[base]] - unseen

    def _older_news(self, base: int, reading: WindowReading, now: float) -> bool:
        """Whether this reading is of an earlier moment than one already taken: it implies the
        window is whole again sooner (by more than the rounding of a count) than that one did. The
        time a window is whole again only moves later as the provider counts requests."""
        cap, rate = self._cells[base + _CAP], self._cells[base + _RATE]
        if reading.remaining is not None:
            full_at = now + (cap - min(cap, reading.remaining)) / rate
        elif reading.reset_s is not None:
            full_at = now + reading.reset_s
        else:
            return False
        latest = self._cells[_FULL_AT[base]]
        if full_at < latest - 1.0 / rate:  # a whole count (remaining is floored) is the rounding
            return True
        self._cells[_FULL_AT[base]] = max(latest, full_at)
        return False

    def _level(self, base: int, now: float) -> float:
        """The window's level now; once the provider's reset time has passed, whole again but for
        what was admitted after the reply that gave it."""
        level = self._refill(base, now)
        reset_at = self._cells[_RESET_AT[base]]
        if 0 < reset_at <= now:
            since = self._cells[_COUNTER[base]] - self._cells[_RESET_BASE[base]]
            level = max(level, self._cells[base + _CAP] - since)
            self._cells[base + _LEVEL], self._cells[_RESET_AT[base]] = level, 0.0
        return level

    def _whole_again(self, tokens: float, now: float) -> None:
        """An admission waited `max_pause_s` for a window: whatever the arithmetic says, it fits now."""
        for base, need in ((_REQ, 1.0), (_TOK, tokens)):
            if self._cells[base + _CAP] > 0:
                level = self._level(base, now)
                self._cells[base + _LEVEL] = max(level, min(need, self._cells[base + _CAP]))

    def _wait(self, tokens: float, now: float) -> tuple[float, int]:
        """Seconds until a request of `tokens` fits, and which wait binds (0 when it fits now)."""
        paused = self._cells[_PAUSED_UNTIL] - now
        if paused > 0:
            return paused, 3
        worst, why = 0.0, 0
        for base, need, kind in ((_REQ, 1.0, 1), (_TOK, tokens, 2)):
            cap, rate = self._cells[base + _CAP], self._cells[base + _RATE]
            if cap <= 0 or rate <= 0:
                continue  # never heard of: admit
            level = self._level(base, now)
            need = min(need, cap)  # a request larger than the window waits for a full window
            if level < need:
                wait = (need - level) / rate
                reset_at = self._cells[_RESET_AT[base]]
                if reset_at > now:  # the provider said when its window is whole again
                    wait = min(wait, reset_at - now)
                if wait > worst:
                    worst, why = wait, kind
        return worst, why

    def _take(self, tokens: float, raw: float, now: float) -> Ticket:
        for base, amount in ((_REQ, 1.0), (_TOK, tokens)):
            if self._cells[base + _CAP] > 0:
                self._refill(base, now)
            self._cells[base + _LEVEL] -= amount
        self._cells[_SEQ] += 1
        self._cells[_CUM_TOKENS] += tokens
        self._cells[_OUTSTANDING[_REQ]] += 1.0
        self._cells[_OUTSTANDING[_TOK]] += tokens
        return Ticket(int(self._cells[_SEQ]), tokens, raw, float(self._cells[_CUM_TOKENS]))

    def _pause_for(self, said: LimitHeaders) -> float:
        if said.retry_after_s is not None:
            return said.retry_after_s
        out = [w.reset_s for w in (said.requests, said.tokens) if w.remaining == 0 and w.reset_s is not None]
        if not out:
            out = [w.reset_s for w in (said.requests, said.tokens) if w.reset_s is not None]
        return max(out) if out else FALLBACK_PAUSE_S


# The run's pacer, for the judgments of this context (set by the runner; the metering hooks and
# the evaluator read it). None: no pacing (a judge used on its own, as in unit tests).
PACER: contextvars.ContextVar[Pacer | None] = contextvars.ContextVar("gate_pacer", default=None)


@contextlib.contextmanager
def pacing(pacer: Pacer | None) -> Iterator[None]:
    """Judgments started inside this block are paced by `pacer` (asyncio tasks copy the context)."""
    token = PACER.set(pacer)
    try:
        yield
    finally:
        PACER.reset(token)


def pacer_for(rate_limit: Any, *, shared: bool = False) -> Pacer:
    """The run's pacer from the policy's optional `evaluator.rate_limit`."""
    rpm = getattr(rate_limit, "requests_per_minute", None)
    tpm = getattr(rate_limit, "tokens_per_minute", None)
    return Pacer(rpm, tpm, shared=shared)
