"""Pure rules of the judge's one retry layer and of reading a reply (no ragas, no network).

- `kind_for_status`: HTTP status -> error kind (429 rate_limit, 408 timeout, 401/403 auth,
  5xx server_error, any other 4xx bad_request).
- `RetryTiming` / `backoff_delay`: capped exponential backoff with jitter; a Retry-After (or
  retry-after-ms) header is honoured, capped at `retry_after_cap_s` (`MAX_PAUSE_S`).
- `parse_retry_after`: the one reading of `retry-after-ms` / `Retry-After` (seconds or an HTTP
  date), for the retry path and the run's pacer.
- `RETRYABLE`: the only kinds a policy may list in `retry_on`. A verdict, a parse_error, an
  invalid_label, auth and bad_request are never retried, whatever the policy says.
- `interpret_reply`: the strict reading of a reply's message content: a JSON object (no fence, no
  prose) with a `value` that is an allowed label exactly (or a declared alias) and a non-empty
  `reason`. Anything else is an error, never a label.
"""

from __future__ import annotations

import datetime
import email.utils
import json
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gate.model.records import RecordErrorKind

# The longest a Retry-After (or a rate-limit window) can make the gate wait, for one attempt and
# for the run's pacer alike: a per-minute window is whole again after a minute.
MAX_PAUSE_S = 60.0

RETRYABLE: frozenset[str] = frozenset({"rate_limit", "server_error", "timeout", "connection"})


def kind_for_status(code: int) -> RecordErrorKind | None:
    if 200 <= code < 300:
        return None
    if code == 429:
        return "rate_limit"
    if code == 408:
        return "timeout"
    if code in (401, 403):
        return "auth"
    if code >= 500:
        return "server_error"
    return "bad_request"


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, else `Retry-After` (seconds or an HTTP date, against
    the wall clock `now`, default `time.time()`). Absent or unreadable: None; in the past: 0.
    The one reading of these headers: the retry path and the run's pacer both use it."""
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = _finite(lowered.get("retry-after-ms"))
    if ms is not None:
        return max(0.0, ms / 1000.0)
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _finite(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110: an HTTP date is GMT
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, float(when.timestamp()) - (time.time() if now is None else now))


def _finite(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class RetryTiming:
    """How long to wait between attempts. Defaults suit a real provider; tests shrink them."""

    base_s: float = 0.5  # first backoff
    cap_s: float = 8.0  # longest backoff
    retry_after_cap_s: float = MAX_PAUSE_S  # longest wait a Retry-After header can ask for
    jitter: float = 0.5  # a backoff d is drawn from [d * (1 - jitter), d]


def backoff_delay(timing: RetryTiming, retry_number: int, retry_after: float | None, rng: random.Random) -> float:
    """Delay before retry `retry_number` (1 = the second attempt)."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), timing.retry_after_cap_s)
    d = min(timing.cap_s, timing.base_s * float(2 ** max(retry_number - 1, 0)))
    return max(0.0, d * (1.0 - timing.jitter * rng.random()))


@dataclass(frozen=True)
class ReplyReading:
    label: str | None  # an allowed value (after aliases) when the reply is usable
    reason: str | None
    error_kind: RecordErrorKind | None  # parse_error or invalid_label when unusable
    message: str | None
    aliased_from: str | None = None


def reply_evidence(content: str | None, finish_reason: str | None, n: int = 160) -> str:
    """What a record keeps of a reply that gave no label: an escaped, clipped excerpt (JSON string
    escapes: no newline or control character survives), its top-level keys when it is a JSON
    object, and finish_reason. A model that echoes the response schema back is then visible."""
    excerpt = "(no content)" if content is None else json.dumps(_clip(content, n), ensure_ascii=True)
    keys = ""
    try:
        parsed = json.loads(content) if content else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        names = [json.dumps(_clip(str(k), 30), ensure_ascii=True) for k in list(parsed)[:6]]
        keys = f"; top-level keys: {', '.join(names) or '(none)'}{', ...' if len(parsed) > 6 else ''}"
    return f"; finish_reason: {json.dumps(finish_reason)}{keys}; the reply: {excerpt}"


def _clip(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def interpret_reply(content: str | None, allowed: Sequence[str], aliases: Mapping[str, str]) -> ReplyReading:
    """Read a reply's content strictly. Errors are never turned into labels."""
    if content is None or not content.strip():
        return ReplyReading(None, None, "parse_error", "the reply has no content")
    try:
        obj = json.loads(content)
    except ValueError:
        return ReplyReading(
            None, None, "parse_error", f"the reply is not a bare JSON object (prose or a fence?): {_clip(content)!r}"
        )
    if not isinstance(obj, dict):
        return ReplyReading(None, None, "parse_error", f"the reply is JSON but not an object: {_clip(content)!r}")
    return read_label(obj.get("value"), obj.get("reason"), allowed, aliases)


def read_label(
    value: object, reason: object, allowed: Sequence[str], aliases: Mapping[str, str], *, source: str = "the reply"
) -> ReplyReading:
    """The one rule for a verdict, live or recorded: an allowed label exactly (or a declared alias)
    and a non-empty reason. `source` names what is read ("the reply", "the record")."""
    if not isinstance(value, str):
        return ReplyReading(None, None, "parse_error", f"{source} has no `value` string")
    if not isinstance(reason, str) or not reason.strip():
        return ReplyReading(None, None, "parse_error", f"{source} for {_clip(value)!r} has a missing or empty `reason`")
    if value in allowed:
        return ReplyReading(value, reason, None, None)
    if value in aliases and aliases[value] in allowed:
        return ReplyReading(aliases[value], reason, None, None, aliased_from=value)
    return ReplyReading(
        None,
        None,
        "invalid_label",
        f"{source} says {_clip(value)!r}, which is not one of {list(allowed)}"
        + (f" or a declared alias {sorted(aliases)}" if aliases else " (labels are exact; no aliases are declared)"),
    )
