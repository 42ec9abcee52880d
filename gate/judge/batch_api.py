"""The provider's Files and Batches API (OpenAI, and Azure OpenAI v1 at `<resource>/openai/v1/`),
through the real `openai` client: upload a JSONL file, create a batch, ask its status, download
its output and error files. openai is imported when a client is built, never at module import.

Every provider failure is a `BatchProviderError` (one sentence, no key): the caller turns it into
an `evaluation_incomplete` result, never a verdict.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

TERMINAL = frozenset({"completed", "expired", "cancelled", "failed"})
COLLECTABLE = frozenset({"completed", "expired", "cancelled"})
COMPLETION_WINDOW: Literal["24h"] = "24h"
CREATE_ATTEMPTS = 3  # as the client's own retries (max_retries=2), each after a look for the batch


class BatchProviderError(RuntimeError):
    """The provider refused or failed a Files/Batches call."""


def is_azure(base_url: str) -> bool:
    """Azure OpenAI v1: the API lives under `/openai/v1` (the deployment is the `model`)."""
    return urlsplit(base_url).path.rstrip("/").endswith("/openai/v1")


def line_url(base_url: str) -> str:
    """The `url` of each JSONL line and the batch's `endpoint`: OpenAI's `/v1/chat/completions`;
    Azure OpenAI's batch service resolves `/chat/completions` against its own v1 root."""
    return "/chat/completions" if is_azure(base_url) else "/v1/chat/completions"


@dataclass(frozen=True)
class BatchStatus:
    batch_id: str
    status: str
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None
    total: int
    completed: int
    failed: int
    errors: tuple[str, ...]  # validation errors of a batch that failed

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def _status(batch: Any) -> BatchStatus:
    counts = getattr(batch, "request_counts", None)
    errors: list[str] = []
    data = getattr(getattr(batch, "errors", None), "data", None) or []
    for e in data:
        line = getattr(e, "line", None)
        where = f"line {line}: " if line is not None else ""
        errors.append(f"{where}{getattr(e, 'code', None) or 'error'}: {getattr(e, 'message', None) or ''}".strip())
    return BatchStatus(
        batch_id=str(batch.id),
        status=str(batch.status),
        input_file_id=getattr(batch, "input_file_id", None),
        output_file_id=getattr(batch, "output_file_id", None),
        error_file_id=getattr(batch, "error_file_id", None),
        total=int(getattr(counts, "total", 0) or 0),
        completed=int(getattr(counts, "completed", 0) or 0),
        failed=int(getattr(counts, "failed", 0) or 0),
        errors=tuple(errors),
    )


def _retryable(exc: Exception) -> bool:
    """A failure another attempt may get past: no answer, a timeout, 408, 409, 429 or 5xx (the client's rule)."""
    status = getattr(exc, "status_code", None)
    return status is None or status in (408, 409, 429) or status >= 500


class BatchProvider:
    """One provider endpoint's Files + Batches calls (synchronous: a handful per run)."""

    def __init__(self, api_key: str, base_url: str, timeout_s: float = 120.0) -> None:
        import openai

        self._openai = openai
        self._api_key = api_key
        self.base_url = base_url
        self.endpoint = line_url(base_url)
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=2)

    def _fail(self, what: str, exc: Exception) -> BatchProviderError:
        status = getattr(exc, "status_code", None)
        detail = getattr(exc, "message", None) or type(exc).__name__
        text = f"{what} failed" + (f" (HTTP {status})" if status else "") + f": {detail}"
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return BatchProviderError(text[:500])

    def upload(self, name: str, content: bytes) -> str:
        try:
            return str(self._client.files.create(file=(name, content, "application/jsonl"), purpose="batch").id)
        except self._openai.OpenAIError as exc:
            raise self._fail("uploading the batch input file", exc) from None

    def create(self, input_file_id: str, metadata: dict[str, str]) -> BatchStatus:
        """Create the batch of this input file. The client never sends the create again on its own: a
        create whose answer was lost (a 5xx, a dropped connection) may have made the batch, and a blind
        retry makes a second one, run and billed too; the batch is looked up by its input file first."""
        client = self._client.with_options(max_retries=0)
        for attempt in range(CREATE_ATTEMPTS):
            try:
                batch = client.batches.create(
                    input_file_id=input_file_id,
                    endpoint=self.endpoint,  # type: ignore[arg-type]  # Azure's differs from OpenAI's literal
                    completion_window=COMPLETION_WINDOW,
                    metadata=metadata,
                )
                return _status(batch)
            except self._openai.OpenAIError as exc:
                found = self.find(input_file_id)
                if found is not None:
                    return found
                if attempt + 1 == CREATE_ATTEMPTS or not _retryable(exc):
                    raise self._fail("creating the batch", exc) from None
                time.sleep(0.5 * (attempt + 1))  # about the client's own backoff
        raise AssertionError("unreachable: the last attempt returns or raises")

    def find(self, input_file_id: str) -> BatchStatus | None:
        """The batch created from this input file, if any (a submit that died before recording it)."""
        try:
            for batch in self._client.batches.list(limit=100):
                if getattr(batch, "input_file_id", None) == input_file_id:
                    return _status(batch)
        except self._openai.OpenAIError as exc:
            raise self._fail("listing batches", exc) from None
        return None

    def status(self, batch_id: str) -> BatchStatus:
        try:
            return _status(self._client.batches.retrieve(batch_id))
        except self._openai.OpenAIError as exc:
            raise self._fail(f"asking the status of batch {batch_id}", exc) from None

    def download(self, file_id: str) -> bytes:
        try:
            return bytes(self._client.files.content(file_id).content)
        except self._openai.OpenAIError as exc:
            raise self._fail(f"downloading file {file_id}", exc) from None

    def close(self) -> None:
        self._client.close()
