"""Metering every HTTP attempt through httpx event hooks on the provider client.

The evaluator's `httpx.AsyncClient` carries two hooks. Each judgment sets its own `JudgmentSink`
in the `SINK` context variable (asyncio tasks copy the context, so concurrent judgments never see
each other's sink; an attempt's timeout scope runs in the judgment's own task, so the hooks write into its sink).

- request hook, before anything is sent:
  1. the wire contract: the user message must be the prompt we rendered, and `temperature`,
     `seed` and the max-tokens field must be the policy's values, or the request is refused;
  2. the budget: it reserves an upper bound of the attempt's cost, `len(request body in bytes)`
     input tokens (a byte count bounds the token count) plus `max_output_tokens` output tokens, at
     the policy's prices. `BudgetExhausted` is raised from the hook, so nothing is sent
     (`BudgetBusy`, when attempts in flight hold the room: the judgment waits for one to settle
     and sends again, see gate/judge/budget.py).
- response hook: reads the body, records status, latency and the provider's `usage`, and settles
  the reservation at the real cost (tokens x prices, unrounded). A 2xx reply without a usable
  `usage` is `usage_missing`: its whole reservation stays spent (`held`), since the provider
  billed it by an amount we cannot know. An error status without usage is settled at 0.
- the run's pacer (gate/judge/pacing.py), when one is set: the request hook corrects the
  attempt's admitted token estimate from the real body (or gives it back when nothing is sent);
  the response hook hands it every reply's rate-limit headers, usage and status (a 429 pauses
  every judgment of the run).

An attempt abandoned without a response (timeout, dropped connection, cancellation) keeps its full
reservation as spent (`settle(reservation, reservation.amount)`): the provider may have billed it
and the hard cap must hold. Its record shows 0 tokens and 0 cost because nothing was reported, so
a budget's `spent` can exceed the sum of the records' costs by those reservations, never the cap.
"""

from __future__ import annotations

import contextvars
import json
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2 as httpx

from gate.judge.budget import SEND_GATE, Budget, BudgetBusy, BudgetExhausted, Prices, Reservation
from gate.judge.journal import CURRENT as JOURNAL
from gate.judge.outcome import kind_for_status, parse_retry_after
from gate.judge.pacing import PACER, Ticket
from gate.model.records import Attempt, RecordErrorKind


class OutsideJudgment(RuntimeError):
    """A request was made on the judge's client outside a judgment (nothing is sent)."""


class WireContractError(RuntimeError):
    """The request about to be sent differs from what the policy and the rendered prompt say."""


class JournalWriteError(RuntimeError):
    """The attempt could not be written ahead to the journal, so it is not sent."""


@dataclass(frozen=True)
class WireExpectations:
    prompt: str
    temperature: float
    seed: int | None
    max_output_tokens: int


@dataclass
class WireAttempt:
    """One HTTP request as the hooks saw it."""

    started: float
    reservation: Reservation | None
    status_code: int | None = None
    latency_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    error_kind: RecordErrorKind | None = None
    retry_after_s: float | None = None
    content: str | None = None
    finish_reason: str | None = None
    done: bool = False
    usage_missing: bool = False
    held: float = 0.0  # reservation kept as spent beyond reported usage
    over_reservation: bool = False
    attempt_id: str | None = None
    ticket: Ticket | None = None  # its place in the run's rate-limit windows (gate/judge/pacing.py)

    def to_attempt(self) -> Attempt:
        return Attempt(
            status_code=self.status_code,
            latency_ms=round(self.latency_ms, 3),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            error_kind=self.error_kind,
            usage_missing=self.usage_missing,
            held=self.held,
            over_reservation=self.over_reservation,
            attempt_id=self.attempt_id,
        )


@dataclass
class JudgmentSink:
    budget: Budget
    prices: Prices
    expect: WireExpectations
    attempts: list[WireAttempt] = field(default_factory=list)
    refused: Literal["budget", "busy", "contract", "output", "stopped"] | None = None
    refusal_message: str | None = None
    busy_settles: int = 0  # a `busy` refusal: the budget's settle count it must wait to move past
    # The pacer's admission of the attempt about to be sent (taken by the request hook).
    ticket: Ticket | None = None
    _pending: dict[int, tuple[httpx.Request, WireAttempt]] = field(default_factory=dict)

    def settle_pending(self, kind: RecordErrorKind) -> None:
        """Close every attempt that got no response; keep its reservation as spent."""
        now = time.monotonic()
        pacer = PACER.get()
        for _req, attempt in list(self._pending.values()):
            if attempt.done:
                continue
            if pacer is not None and attempt.ticket is not None:
                pacer.give_up(attempt.ticket)
            attempt.done = True
            attempt.latency_ms = (now - attempt.started) * 1000.0
            attempt.error_kind = attempt.error_kind or kind
            if attempt.reservation is not None:
                attempt.held = attempt.reservation.amount
                self.budget.settle(attempt.reservation, attempt.reservation.amount)
            journal_settled(attempt)
        self._pending.clear()

    @property
    def last(self) -> WireAttempt | None:
        return self.attempts[-1] if self.attempts else None


SINK: contextvars.ContextVar[JudgmentSink | None] = contextvars.ContextVar("gate_judge_sink", default=None)


def journal_settled(attempt: WireAttempt) -> None:
    ctx = JOURNAL.get()
    if ctx is not None and attempt.attempt_id is not None:
        ctx.journal.settled(attempt.attempt_id, attempt.to_attempt(), attempt.cost)


def _user_text(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    if len(users) != 1 or not isinstance(users[0].get("content"), str):
        return None
    content: str = users[0]["content"]
    return content


def check_wire(body: Any, expect: WireExpectations) -> str | None:
    """Why this request body breaks the contract, or None when it is what the policy says."""
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    if _user_text(body) != expect.prompt:
        return "the user message on the wire is not the rendered prompt"
    temp = body.get("temperature")
    if not isinstance(temp, int | float) or not math.isclose(float(temp), expect.temperature, abs_tol=1e-12):
        return f"temperature on the wire is {temp!r}, the policy says {expect.temperature!r}"
    if body.get("seed") != expect.seed:
        return f"seed on the wire is {body.get('seed')!r}, the policy says {expect.seed!r}"
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
    if max_tokens != expect.max_output_tokens:
        return f"max tokens on the wire is {max_tokens!r}, the policy says {expect.max_output_tokens!r}"
    return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _usage(payload: Any) -> tuple[int, int] | None:
    """(prompt_tokens, completion_tokens) when the reply reports both as whole numbers >= 0."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
    for v in (pt, ct):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            return None
    return _int(pt), _int(ct)


def _refused(ticket: Ticket | None) -> None:
    """Nothing was sent: the pacer gets the request's share of its windows back."""
    pacer = PACER.get()
    if pacer is not None and ticket is not None:
        pacer.release(ticket)


async def on_request(request: httpx.Request) -> None:
    sink = SINK.get()
    if sink is None:
        raise OutsideJudgment("the judge's HTTP client was used outside a judgment")
    ticket, sink.ticket = sink.ticket, None
    body_bytes = request.content
    try:
        body = json.loads(body_bytes) if body_bytes else None
    except ValueError:
        body = None
    problem = check_wire(body, sink.expect)
    if problem is not None:
        sink.refused = "contract"
        sink.refusal_message = problem
        _refused(ticket)
        raise WireContractError(problem)
    bound = sink.prices.cost(len(body_bytes), sink.expect.max_output_tokens)
    try:
        reservation = sink.budget.reserve(bound)
    except BudgetBusy as exc:  # others in flight hold the room: the judgment waits and asks again
        sink.refused, sink.busy_settles = "busy", exc.settles
        sink.refusal_message = f"budget boundary reached: {exc}"
        _refused(ticket)
        raise
    except BudgetExhausted as exc:
        sink.refused = "budget"
        sink.refusal_message = f"budget boundary reached: {exc}"
        _refused(ticket)
        raise
    attempt = WireAttempt(started=time.monotonic(), reservation=reservation, attempt_id=uuid.uuid4().hex)
    gate = SEND_GATE.get()
    if gate is not None:
        gate.sent()
    ctx = JOURNAL.get()
    if ctx is not None:
        # Written ahead: a run killed after this line still knows the attempt may have been paid.
        try:
            ctx.journal.sent(attempt.attempt_id or "", ctx.case_id, ctx.repeat_index, reservation.amount, ctx.stream)
        except OSError as exc:
            sink.budget.settle(reservation, 0.0)
            sink.refused = "output"
            sink.refusal_message = (
                f"the attempt journal {ctx.journal.path} cannot be written ({exc.strerror or exc}); nothing was sent"
            )
            _refused(ticket)
            raise JournalWriteError(sink.refusal_message) from None
    pacer = PACER.get()
    if pacer is not None and ticket is not None:
        attempt.ticket = ticket
        pacer.resize(ticket, len(body_bytes), len(sink.expect.prompt), sink.expect.max_output_tokens)
    sink.attempts.append(attempt)
    sink._pending[id(request)] = (request, attempt)


async def on_response(response: httpx.Response) -> None:
    sink = SINK.get()
    if sink is None:
        return
    entry = sink._pending.get(id(response.request))
    if entry is None:
        return
    _req, attempt = entry
    await response.aread()
    attempt.status_code = response.status_code
    attempt.latency_ms = (time.monotonic() - attempt.started) * 1000.0
    attempt.error_kind = kind_for_status(response.status_code)
    if response.status_code >= 400:  # only an error reply's Retry-After paces the next attempt
        attempt.retry_after_s = parse_retry_after(response.headers)
    try:
        payload = json.loads(response.content) if response.content else None
    except ValueError:
        payload = None
    usage = _usage(payload)
    if usage is not None:
        attempt.input_tokens, attempt.output_tokens = usage
    pacer = PACER.get()
    if pacer is not None:  # every reply feeds the run's windows; a 429 pauses every judgment
        pacer.observe(attempt.ticket, response.status_code, response.headers, usage[0] if usage else None)
    if isinstance(payload, dict):
        choices = payload.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choice = choices[0]
            fr = choice.get("finish_reason")
            attempt.finish_reason = fr if isinstance(fr, str) else None
            message = choice.get("message")
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                attempt.content = message["content"]
    attempt.cost = sink.prices.cost(attempt.input_tokens, attempt.output_tokens)
    attempt.done = True
    sink._pending.pop(id(response.request), None)
    if attempt.reservation is None:
        return
    charge = attempt.cost
    if usage is None and 200 <= response.status_code < 300:
        attempt.usage_missing = True
        attempt.held = attempt.reservation.amount
        charge = attempt.reservation.amount
    attempt.over_reservation = charge > attempt.reservation.amount * (1 + 1e-9)
    sink.budget.settle(attempt.reservation, charge)
    journal_settled(attempt)


def event_hooks() -> dict[str, list[Any]]:
    return {"request": [on_request], "response": [on_response]}
