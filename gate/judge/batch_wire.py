"""The batch lane's wire: request bodies captured from the live judge, replies replayed through it.

Nothing here builds a request or parses a reply of its own. A batch line's `body` is what the live
judge (ragas' `llm_factory` + instructor + the openai client, with the metering hooks and the wire
contract) puts on the wire for that judgment, caught by `BatchTransport` in place of the network;
a batch output line's `response` is handed back to the same stack by the same transport, so the
reply parser, the label contract (aliases, allowed values, a reason) and the metering (usage x
prices) are the live ones. The judge is built with the batch prices and one attempt per
judgment: a batch line is answered once.

Which judgment a request belongs to travels in `LINE`, a context variable set around each
`Evaluator.judge` call (read in the judgment's own task, as the metering sink is).
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

from gate.judge import Evaluator, Judgment
from gate.judge.budget import Budget
from gate.model.cases import Case
from gate.model.records import RecordErrorKind


@dataclass(frozen=True)
class LineReply:
    """One batch line's answer, as the output or error file gave it."""

    status_code: int | None  # None: the provider never ran it (expired, cancelled, refused)
    body: Any  # the chat-completion response body (or the error body)
    error_code: str | None = None
    error_message: str | None = None


@dataclass
class _Line:
    custom_id: str
    expected: bytes | None = None  # the body submitted (collect checks the rebuilt request against it)
    reply: LineReply | None = None
    captured: bytes | None = None
    mismatch: bool = False


LINE: contextvars.ContextVar[_Line | None] = contextvars.ContextVar("gate_batch_line", default=None)


class NotSent(httpx.TransportError):
    """The batch transport never sends: a captured request, or a request outside a batch line."""


class BatchTransport(httpx.AsyncBaseTransport):
    """Stands where the network would: captures a request (submit), or answers it from the line (collect)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        line = LINE.get()
        if line is None:
            raise NotSent("a request outside a batch line")
        content = request.content
        if line.reply is None:
            line.captured = content
            raise NotSent("captured for the batch")
        if line.expected is not None and _json(content) != _json(line.expected):
            line.mismatch = True
            raise NotSent("the rebuilt request differs from the submitted line")
        data = json.dumps(line.reply.body).encode("utf-8")
        return httpx.Response(
            line.reply.status_code or 500,
            headers={"content-type": "application/json"},
            content=data,
            request=request,
        )


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


async def capture_body(evaluator: Evaluator, case: Case, repeat: int, custom_id: str) -> tuple[bytes | None, Judgment]:
    """The request body the live judge would send for this judgment, without sending it.

    Returns (body, judgment): body None when the judge never reached the wire (the case does not
    render, or the request breaks the wire contract); the judgment then says why, as live.
    """
    line = _Line(custom_id)
    token = LINE.set(line)
    try:
        judgment = await evaluator.judge(case, repeat, Budget(None))
    finally:
        LINE.reset(token)
    return line.captured, judgment


# An error line with no response: what the provider said, as an evaluator error kind.
_UNANSWERED_KINDS: dict[str, RecordErrorKind] = {
    "batch_expired": "timeout",
    "batch_cancelled": "timeout",
}


class ReplayEvaluator:
    """An `Evaluator` whose judgments are a collected batch's lines, read by the live judge.

    `keys` maps (case_id, repeat) to the line's custom_id; `submitted` the custom_id to the body
    uploaded; `replies` the custom_id to its answer (absent: the batch has no line for it).
    """

    def __init__(
        self,
        inner: Evaluator,
        batch_id: str,
        batch_status: str,
        keys: Mapping[tuple[str, int], str],
        submitted: Mapping[str, bytes],
        replies: Mapping[str, LineReply],
    ) -> None:
        self.inner = inner
        self.ragas_version = inner.ragas_version
        self.batch_id = batch_id
        self.batch_status = batch_status
        self.keys = keys
        self.submitted = submitted
        self.replies = replies

    async def judge(self, case: Case, repeat_index: int, budget: Budget) -> Judgment:
        custom_id = self.keys.get((case.case_id, repeat_index))
        if custom_id is None:
            return self._error(
                "bad_request", f"judgment {case.case_id}#{repeat_index} was not in batch {self.batch_id}"
            )
        reply = self.replies.get(custom_id)
        if reply is None:
            why = {"expired": "the batch expired", "cancelled": "the batch was cancelled"}.get(self.batch_status)
            detail = "its output and error files have no line for this judgment" + (f" ({why})" if why else "")
            return self._error("timeout" if why else "server_error", f"batch {self.batch_id}: {detail}")
        if reply.status_code is None:
            code = reply.error_code or "error"
            kind = _UNANSWERED_KINDS.get(code, "bad_request")
            return self._error(kind, f"batch {self.batch_id}: {code}: {reply.error_message or 'no answer'}")
        line = _Line(custom_id, expected=self.submitted.get(custom_id), reply=reply)
        token = LINE.set(line)
        try:
            judgment = await self.inner.judge(case, repeat_index, budget)
        finally:
            LINE.reset(token)
        if line.mismatch:
            judgment = Judgment(
                status="error",
                error_kind="bad_request",
                error_message=(
                    f"batch {self.batch_id}: the request the judge builds now differs from the line submitted "
                    "(the prompt, the inputs or the judge changed since `--batch submit`); fix: submit again into a "
                    "new --out"
                ),
            )
        judgment.batch_id = self.batch_id
        return judgment

    def _error(self, kind: RecordErrorKind, message: str) -> Judgment:
        return Judgment(status="error", error_kind=kind, error_message=message, batch_id=self.batch_id)

    async def aclose(self) -> None:
        await self.inner.aclose()
