"""The attempt journal (`attempts.jsonl` in `--out`): every HTTP attempt written ahead when it is
sent and settled when answered.

records.jsonl gets a judgment's line only when the judgment ends; a run killed (SIGKILL, OOM, a
lost runner) between paying for an attempt and recording its judgment would forget that attempt.
The journal closes that gap: the request hook writes a `sent` line (flushed to the OS, so it
survives the process) before the request leaves, and the response hook a `settled` line. The
judgment's record names each attempt by `attempt_id`, so `--resume` can tell which journaled
attempts no record covers and count them (`recover`): in cost, `http_attempts` and the budget.

Each line names its stream: the verdicts (no `stream` key, as before), the trend (`"trend"`, whose
judgments go to trend.jsonl) or the drift lane (`"drift"`); `recover` reads one stream at a time,
so an attempt of the trend is never mistaken for a verdict's.

What cannot be known: an attempt `sent` but never settled may or may not have reached the
provider and been billed; it is counted at its reserved upper bound, like an unanswered attempt.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gate.model.records import Attempt, Record

JOURNAL_FILE = "attempts.jsonl"
VERDICTS = "verdict"  # the stream of records.jsonl; its lines carry no `stream` key (older journals)
TREND_STREAM = "trend"  # trend.jsonl's judgments
DRIFT_STREAM = "drift"  # the drift lane's (drift-records.jsonl)


class AttemptJournal:
    """Appends `sent` and `settled` lines. A failed write is kept in `error`, never raised twice."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] = path.open("a", encoding="utf-8")
        self.error: OSError | None = None

    def _write(self, obj: dict[str, Any]) -> None:
        if self.error is not None:
            raise self.error
        try:
            self._fh.write(json.dumps(obj, sort_keys=True) + "\n")
            self._fh.flush()
        except OSError as exc:
            self.error = exc
            raise

    def sent(self, attempt_id: str, case_id: str, repeat_index: int, reserved: float, stream: str = VERDICTS) -> None:
        """Raises OSError when the line cannot be written: then the attempt must not be sent."""
        line: dict[str, Any] = {
            "event": "sent",
            "id": attempt_id,
            "case_id": case_id,
            "repeat_index": repeat_index,
            "reserved": reserved,
        }
        if stream != VERDICTS:
            line["stream"] = stream
        self._write(line)

    def settled(self, attempt_id: str, attempt: Attempt, cost: float) -> None:
        # A failure is kept in `error` (the runner stops on it); the answer itself is already in hand.
        with contextlib.suppress(OSError):
            self._write(
                {"event": "settled", "id": attempt_id, "cost": cost, "attempt": attempt.model_dump(mode="json")}
            )

    def close(self) -> None:
        if not self._fh.closed:
            try:
                self._fh.close()
            except OSError as exc:
                self.error = self.error or exc


@dataclass(frozen=True)
class JournalContext:
    """Which judgment the attempts being sent belong to (set per judgment by the runner)."""

    journal: AttemptJournal
    case_id: str
    repeat_index: int
    stream: str = VERDICTS


CURRENT: contextvars.ContextVar[JournalContext | None] = contextvars.ContextVar("gate_journal", default=None)


@dataclass(frozen=True)
class Unrecorded:
    """Attempts of one judgment that the journal holds and no record names."""

    case_id: str
    repeat_index: int
    attempts: tuple[Attempt, ...]
    cost: float  # reported usage x prices, for the attempts that were answered

    @property
    def unanswered(self) -> int:
        return sum(1 for a in self.attempts if a.status_code is None)

    @property
    def budget_charge(self) -> float:
        """What these attempts count against the cost boundary (as `Record.budget_charge`)."""
        return self.cost + sum(a.held for a in self.attempts)


def _number(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 else 0.0


def recover(path: Path, records: Iterable[Record], stream: str = VERDICTS) -> list[Unrecorded]:
    """The journaled attempts of `stream` no record covers, grouped by judgment, in the order sent.

    The journal is read as untrusted: lines that are not what this module writes (a torn last
    line after a kill, anything edited) are skipped.
    """
    if not path.exists():
        return []
    covered = {a.attempt_id for r in records for a in r.attempts if a.attempt_id}
    sent: dict[str, dict[str, Any]] = {}
    settled: dict[str, dict[str, Any]] = {}
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("id"), str) or obj["id"] in covered:
                continue
            if obj.get("event") == "sent" and isinstance(obj.get("case_id"), str):
                if obj.get("stream", VERDICTS) != stream:
                    continue
                if isinstance(obj.get("repeat_index"), int):
                    sent.setdefault(obj["id"], obj)
            elif obj.get("event") == "settled":
                settled.setdefault(obj["id"], obj)
    groups: dict[tuple[str, int], tuple[list[Attempt], list[float]]] = {}
    for attempt_id, s in sent.items():
        done = settled.get(attempt_id)
        attempt: Attempt | None = None
        cost = 0.0
        if done is not None:
            try:
                attempt = Attempt.model_validate(done.get("attempt"))
                cost = _number(done.get("cost"))
            except ValueError:
                attempt = None
        if attempt is None:  # sent, never settled: it may have been billed; hold its reservation
            attempt = Attempt(error_kind="cancelled", held=_number(s.get("reserved")))
        attempt = attempt.model_copy(update={"attempt_id": attempt_id})
        attempts, costs = groups.setdefault((s["case_id"], s["repeat_index"]), ([], []))
        attempts.append(attempt)
        costs.append(cost)
    return [Unrecorded(cid, rep, tuple(a), math.fsum(c)) for (cid, rep), (a, c) in groups.items()]
