"""A provider's rate limit for the fake OpenAI server: token buckets on requests and tokens.

    limits = BucketLimits(requests_per_minute=600, tokens_per_minute=None, clock=clock)
    with FakeOpenAI(limiter=limits) as fake: ...

Each bucket holds its per-minute limit and refills at limit / `period_s` per second (a bench may
compress the minute: `period_s=6` is the same limit ten times faster). A request takes one request
and `prompt_tokens_for(body) + max_tokens` tokens when it ARRIVES (as OpenAI counts); one that does
not fit both is answered 429 and takes nothing. With `headers=True` every answer carries OpenAI's
`x-ratelimit-{limit,remaining,reset}-{requests,tokens}` (durations like `1m30.5s`, `12ms`) and a
429 `retry-after-ms` and `retry-after`; with `headers=False` nothing at all, a 429 included (a
provider that says nothing). `clock` is injectable: a test drives it and never sleeps.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def openai_duration(seconds: float) -> str:
    """A duration as OpenAI writes it: `12ms`, `1s`, `6m0s`, `1m30.5s`."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    secs = f"{rest:.3f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{secs}s" if minutes else f"{secs}s"


@dataclass
class _Bucket:
    capacity: float
    rate: float
    level: float
    at: float

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + self.rate * max(0.0, now - self.at))
        self.at = now

    def wait(self, amount: float) -> float:
        return max(0.0, (min(amount, self.capacity) - self.level) / self.rate)

    def reset(self) -> float:
        return (self.capacity - self.level) / self.rate


@dataclass
class BucketLimits:
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    headers: bool = True
    clock: Callable[[], float] = time.monotonic
    period_s: float = 60.0
    accepted: list[float] = field(default_factory=list)  # arrival times of requests it served
    refused: int = 0  # requests answered 429
    accepted_tokens: float = 0.0  # tokens of the requests it served
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        now = self.clock()
        self._buckets: dict[str, _Bucket] = {}
        for kind, limit in (("requests", self.requests_per_minute), ("tokens", self.tokens_per_minute)):
            if limit:
                self._buckets[kind] = _Bucket(limit, limit / self.period_s, limit, now)

    def take(self, body: Any) -> tuple[bool, dict[str, str]]:
        """Whether this request fits (it is counted if so), and the headers of its answer."""
        from fake_openai import prompt_tokens_for

        max_tokens = body.get("max_tokens", body.get("max_completion_tokens", 0)) if isinstance(body, dict) else 0
        cost = {"requests": 1.0, "tokens": float(prompt_tokens_for(body) + (max_tokens or 0))}
        with self._lock:
            now = self.clock()
            for b in self._buckets.values():
                b.refill(now)
            fits = all(b.level >= cost[k] for k, b in self._buckets.items())
            wait = 0.0 if fits else max(b.wait(cost[k]) for k, b in self._buckets.items())
            if fits:
                for k, b in self._buckets.items():
                    b.level -= cost[k]
                self.accepted.append(now)
                self.accepted_tokens += cost["tokens"]
            else:
                self.refused += 1
            if not self.headers:
                return fits, {}
            out: dict[str, str] = {}
            for k, b in self._buckets.items():
                out[f"x-ratelimit-limit-{k}"] = str(int(b.capacity))
                out[f"x-ratelimit-remaining-{k}"] = str(max(0, math.floor(b.level)))
                out[f"x-ratelimit-reset-{k}"] = openai_duration(b.reset())
            if not fits:
                out["retry-after-ms"] = str(math.ceil(wait * 1000))
                out["retry-after"] = str(math.ceil(wait))
            return fits, out

    def most_in_any_window(self, window_s: float | None = None) -> int:
        """The most requests it served in any `window_s` (default: one period) of its clock."""
        span = self.period_s if window_s is None else window_s
        times = sorted(self.accepted)
        best, lo = 0, 0
        for hi, t in enumerate(times):
            while times[lo] <= t - span:
                lo += 1
            best = max(best, hi - lo + 1)
        return best
