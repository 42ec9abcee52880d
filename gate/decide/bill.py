"""The bill of a run's records, added up one record at a time (`Bill`), so that a decision over a
hundred thousand judgments never holds them to count what they cost.

`Bill.summary` is result.json's `cost` (and `gate.decide.core.cost_summary` of a list): every
figure is summed in the order the records come, exactly as a sum over a list of them would be.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from gate.model.records import Record


class Bill:
    """Every paid attempt of the records added, by slice (`add`); `summary` in a currency."""

    def __init__(self) -> None:
        self.total = 0.0
        self.by_slice: defaultdict[str, float] = defaultdict(float)
        self.input_tokens = 0
        self.output_tokens = 0
        self.http_attempts = 0
        self.retries = 0
        self.cached_calls = 0
        self.unanswered_attempts = 0
        self.usage_missing = 0
        self.held = 0.0
        self.over_reservation = 0
        self.rate_limited = 0

    def add(self, r: Record, slice_name: str | None = None) -> None:
        """One record, billed to its slice (or to `slice_name`: the case file's, as the decision reads it)."""
        self.total += r.cost
        self.by_slice[slice_name if slice_name is not None else r.slice] += r.cost
        self.input_tokens += r.input_tokens
        self.output_tokens += r.output_tokens
        self.http_attempts += len(r.attempts)
        self.retries += r.retries
        self.cached_calls += r.cache == "hit"
        for a in r.attempts:
            self.unanswered_attempts += a.status_code is None
            self.usage_missing += a.usage_missing
            self.held += a.held
            self.over_reservation += a.over_reservation
            self.rate_limited += a.status_code == 429

    def summary(self, currency: str) -> dict[str, Any]:
        return {
            "total": self.total,
            "currency": currency,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "http_attempts": self.http_attempts,
            "retries": self.retries,
            "cached_calls": self.cached_calls,
            # Sent but never answered (timeout, dropped, interrupted): no usage was reported, so they
            # add nothing to `total`, but a provider may still bill them.
            "unanswered_attempts": self.unanswered_attempts,
            # Answered without `usage`: each keeps its whole reservation as spent.
            "usage_missing": self.usage_missing,
            # What the cost boundary counted: `total` plus the reservations kept for the two kinds above.
            "budget_spent": self.total + self.held,
            "over_reservation": self.over_reservation,
            # Answered 429 (paid nothing, retried within max_attempts): how hard the run met the rate limit.
            "rate_limited": self.rate_limited,
            "by_slice": dict(sorted(self.by_slice.items())),
        }
