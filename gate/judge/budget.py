"""The hard cost boundary.

Every attempt reserves an upper bound of its cost before it is sent; the reservation is
replaced by the real cost when the provider reports usage. Because in-flight attempts hold
reservations, `spent` can never pass the limit, whatever the concurrency.

The bound is true for an honest provider (request bytes bound prompt tokens; `max_tokens` bounds
the completion). A reply that reports more than its reservation breaks that premise: the real
cost is counted, `overruns` goes up and no further attempt is reserved, so scheduling stops. Spend
can then pass the limit by at most the excess of the attempts already in flight.

A reservation is a bound, not a cost: most attempts cost a fraction of it. So when the next
reservation does not fit while other attempts are in flight, the refusal is `BudgetBusy`, not the
end: the attempt waits until one of them settles (`settled_since`) and asks again. Only when
nothing is in flight and it still does not fit is the boundary reached (`BudgetExhausted`), so a
run stopped by the boundary has spent at least the limit minus the reservation it was refused.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gate.model.wording import plural

SETTLE_POLL_S = 0.01  # how often a refused attempt looks whether an attempt in flight settled


@dataclass(frozen=True)
class Prices:
    input_per_mtok: float
    output_per_mtok: float
    currency: str = "USD"

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        # Unrounded on purpose: reports round for display only.
        return input_tokens * self.input_per_mtok / 1_000_000 + output_tokens * self.output_per_mtok / 1_000_000


class BudgetExhausted(Exception):
    """The next attempt's reservation does not fit under the boundary."""


class BudgetBusy(BudgetExhausted):
    """The next reservation does not fit now, but attempts in flight hold reservations that will
    settle (mostly for less): wait for one (`Budget.settled_since(settles)`), then ask again."""

    def __init__(self, message: str, settles: int) -> None:
        super().__init__(message)
        self.settles = settles


@dataclass
class Reservation:
    amount: float
    settled: bool = False


class Budget:
    """Single event-loop accounting: `reserve` and `settle` are synchronous and non-blocking."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.spent = 0.0
        self.reserved = 0.0
        self.exhausted = False
        self.overruns = 0
        self.in_flight = 0  # reservations not settled yet
        self.settles = 0  # reservations settled so far (a refused attempt waits for it to move)

    def reserve(self, amount: float) -> Reservation:
        if self.overruns:
            self.exhausted = True
            raise BudgetExhausted(
                f"{plural(self.overruns, 'attempt')} reported a cost above their reserved upper bound, so the boundary "
                "can no longer be guaranteed; no further attempt is sent"
            )
        if self.limit is not None and self.spent + self.reserved + amount > self.limit:
            message = (
                f"the next attempt may cost up to {amount:.6f}, and {self.spent:.6f} is spent with "
                f"{self.reserved:.6f} reserved under a boundary of {self.limit:.6f}"
            )
            if self.in_flight > 0:
                raise BudgetBusy(message, self.settles)
            self.exhausted = True
            raise BudgetExhausted(message)
        self.reserved += amount
        self.in_flight += 1
        return Reservation(amount)

    def settle(self, reservation: Reservation, actual: float) -> None:
        """Replace a reservation with what the attempt really cost (0 when nothing was billed)."""
        if reservation.settled:
            return
        reservation.settled = True
        # Float subtraction leaves dust (-1e-19) once every reservation is settled; never below 0.
        self.reserved = max(0.0, self.reserved - reservation.amount)
        self.in_flight = max(0, self.in_flight - 1)
        self.settles += 1
        self.spent += actual
        if actual > reservation.amount * (1 + 1e-9):
            self.overruns += 1

    @property
    def remaining(self) -> float | None:
        return None if self.limit is None else self.limit - self.spent - self.reserved

    async def settled_since(self, settles: int, limit_s: float) -> bool:
        """Wait until a reservation settles after `settles` were (True), or `limit_s` passed
        without one (False: an attempt in flight outlived every timeout; the caller stops)."""
        deadline = time.monotonic() + limit_s
        while self.settles == settles:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(SETTLE_POLL_S)
        return True


@dataclass
class SendGate:
    """The run's say over one judgment that waited for budget room: the lane may have stopped
    meanwhile (a decided verdict, a failed control, the boundary), and then the request it was
    about to send is not wanted. Set per judgment by the runner (`SEND_GATE`); `may_send` is asked
    after the wait, before sending; `sent` is told of each request that goes out."""

    may_send: Callable[[], bool]
    sent: Callable[[], None] = field(default=lambda: None)
    refused: bool = False  # the judgment was not sent because the lane had stopped


SEND_GATE: contextvars.ContextVar[SendGate | None] = contextvars.ContextVar("gate_send_gate", default=None)
