"""The judgment record (records.jsonl, schema_version 1): one line per judgment.

Every record carries its own lineage so a single line can explain which configuration produced
its verdict. Readers accept every schema version up to the current one.
"""

from __future__ import annotations

import io
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from gate.model.errors import UsageError
from gate.model.escape import NAME_RULE, is_name, visible
from gate.model.loading import (
    MAX_STREAM_BYTES,
    FileProblem,
    format_validation_error,
    open_binary,
    read_bytes,
    surrogate_at,
)

SCHEMA_VERSION = 1
RECORDS_FILE = "records.jsonl"  # in --out: every judgment of the run, one JSON line each

Status = Literal["ok", "error", "skipped"]
RecordErrorKind = Literal[
    "rate_limit",
    "server_error",
    "timeout",
    "connection",
    "parse_error",
    "invalid_label",
    "auth",
    "bad_request",
    "budget",
    "cancelled",
    # The judge's model: on or after its shutdown date, never sent (`skipped`); or answered 404
    # `model_not_found` by the provider (`error`). Either stops the run (gate/model/retirement.py).
    "model_retired",
    "model_not_found",
]
# "rejudged": the cache held an entry for this judgment that failed vetting (a label outside the
# list, no reason): it was judged again, paid, and the entry overwritten.
CacheState = Literal["hit", "miss", "off", "rejudged"]


class Attempt(BaseModel):
    """One HTTP request sent to the provider (abandoned ones included)."""

    model_config = ConfigDict(extra="forbid")

    status_code: int | None = None
    latency_ms: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    error_kind: RecordErrorKind | None = None
    # The bill beyond reported usage ("Budget"): an attempt answered without `usage`, or not
    # answered at all, keeps its whole reservation as spent; `held` is that amount.
    usage_missing: bool = False
    held: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    # The provider reported more than the attempt's reserved upper bound (scheduling stops).
    over_reservation: bool = False
    # Matches the attempt's line in the write-ahead journal (attempts.jsonl); None in older records.
    attempt_id: str | None = None


class Sampling(BaseModel):
    """The evaluator's sampling settings as sent on every request, and the repeat count."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float
    seed: int | None = None
    max_output_tokens: int
    repeats: int = 1
    # None in records written before they were policy keys (ragas sent top_p 0.1, JSON mode).
    top_p: float | None = None
    response_format: str | None = None


class RecordShard(BaseModel):
    """The shard of a `gate run --shard I/N` that made a record: a merge decides each control by
    its majority within a shard, as that shard's run did."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    index: int = Field(ge=1)
    count: int = Field(ge=1)

    @model_validator(mode="after")
    def _within(self) -> RecordShard:
        if self.index > self.count:
            raise ValueError(f"shard index {self.index} is above its count {self.count}")
        return self


class JudgeFigures(BaseModel):
    """calibration.json's counts for one slice, as a product run sized its audit plan with them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    true_fail: int = Field(ge=0)
    false_pass: int = Field(ge=0)
    true_pass: int = Field(ge=0)
    false_fail: int = Field(ge=0)


class AuditSizing(BaseModel):
    """What sized a product slice's audit plan besides its answers, fixed when the run started
    (gate/decide/product/seal.py): `gate decide`, `gate merge`, `--resume` and a batch's collect size
    the plan from exactly these, and refuse a policy, calibration or dataset that would size it otherwise."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_failure_rate: float = Field(ge=0, lt=1, allow_inf_nan=False)  # the slice's limit
    confidence: float = Field(gt=0.5, lt=1, allow_inf_nan=False)  # the lane's
    zero_tolerance: bool  # the slice's `max_failures` is set: every answer the judge failed is in the plan
    judge: JudgeFigures | None  # calibration's counts for the slice on the judge that decided; None: none
    # The calibration file's sha256, naming the file the figures came from (the figures are what is compared).
    calibration_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    # The slice's answers: the lane's cases of the slice when the run started (the whole lane's, whichever
    # share a shard judged) and the sha256 of their sorted ids, so a dataset that moved, withdrew or added
    # one after the run is refused. None on the records of a gate before it kept them.
    cases: int | None = Field(default=None, ge=0)
    case_ids_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    # The slice's `audit_sized_at`: the rate its design to pass is sized at (None: a quarter of the limit).
    audit_sized_at: float | None = Field(default=None, gt=0, lt=1, allow_inf_nan=False)


# One AuditSizing object for the many records that carry equal ones (a run's answers of a slice all do),
# so a million records hold a handful; bounded, so a file of distinct ones costs no more than it did.
_SIZINGS: dict[AuditSizing, AuditSizing] = {}


def _shared(sizing: AuditSizing | None) -> AuditSizing | None:
    if sizing is None:
        return None
    kept = _SIZINGS.get(sizing)
    if kept is not None:
        return kept
    if len(_SIZINGS) < 1024:
        _SIZINGS[sizing] = sizing
    return sizing


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    case_id: str
    slice: str
    partition: str
    control_role: str | None = None
    human_label: str | None  # None: a product lane's answer, which no person labelled
    judge_label: str | None = None
    judge_reason: str | None = None
    status: Status
    error_kind: RecordErrorKind | None = None
    error_message: str | None = None
    repeat_index: int = 0
    attempts: list[Attempt] = Field(default_factory=list)
    # Money and tokens are checked on read: a NaN cost would turn the budget's comparisons off.
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    cache: CacheState = "off"
    prompt_sha256: str = ""
    input_sha256: str = ""
    metric_version: str = ""
    evaluator_model: str = ""
    ragas_version: str = ""
    # Lineage beyond the record's minimum: enough to tie a line to its policy and dataset.
    policy_id: str = ""
    policy_version: str = ""
    policy_sha256: str = ""
    dataset_sha256: str = ""
    dataset_card_sha256: str = ""  # gate.model.dataset_card: the card the cases were described by
    gate_version: str = ""
    lane: str | None = None
    # gate.model.fingerprint: the judge configuration that made this record ("" in older records).
    config_fingerprint: str = ""
    # Lineage, for `gate compare`. None: written before these fields existed (compare
    # reports the step as `unknown`); see docs/SCHEMA.md for the versioning policy.
    gold_sha256: str | None = None
    field_sha256: dict[str, str] | None = None
    rubric_version: str | None = None
    sampling: Sampling | None = None
    base_url_host: str | None = None
    allowed_values: list[str] | None = None
    label_aliases_sha256: str | None = None
    prompt_template_sha256: str | None = None
    # The policy's deterministic checks on this case: name -> value, None when the check errored.
    checks: dict[str, str | None] | None = None
    # The provider batch whose output line this judgment was read from (`gate run --batch`);
    # written only when set, so a live run's lines are what they were before the batch lane.
    batch_id: str | None = None
    # A product lane's answer (`--responses`): sha256 of the response judged, and the line's
    # `generation` (model, app version, commit; None when the line had none). Written on those only.
    response_sha256: str | None = None
    generation: dict[str, Any] | None = None
    # A product lane's answer: the seed of the random order its lane judged in and of its audit plan
    # (gate/run/order_seed.py), so `gate decide` on these records orders and plans as the run did.
    # Written on those only.
    order_seed: str | None = Field(default=None, max_length=200)
    # A product lane's answer: what sized its slice's audit plan besides the answers (the slice's limit,
    # the lane's confidence, calibration's figures), fixed when the run started. Written on those only.
    audit_sizing: AuditSizing | None = None
    # The judge model's shutdown date when the run was made and who said it (gate/model/retirement.py:
    # a date or "none", "provider" or "policy"), so `gate decide` reads it without asking. Written when known.
    judge_shutdown_date: str | None = Field(default=None, max_length=10)
    judge_shutdown_source: Literal["provider", "policy"] | None = None
    # The shard that made it (`gate run --shard I/N`; None on a run of the whole lane and in records
    # written before it was kept, which `gate merge` reads as its shard directory's). Written when set.
    shard: RecordShard | None = None

    @field_validator("audit_sizing", mode="after")
    @classmethod
    def _one_of_each(cls, sizing: AuditSizing | None) -> AuditSizing | None:
        return _shared(sizing)

    @model_serializer(mode="wrap")
    def _without_unset_batch(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("batch_id") is None:
            data.pop("batch_id", None)
        if data.get("response_sha256") is None and data.get("generation") is None:
            data.pop("response_sha256", None)
            data.pop("generation", None)
        if data.get("order_seed") is None:
            data.pop("order_seed", None)
        if data.get("audit_sizing") is None:
            data.pop("audit_sizing", None)
        if data.get("judge_shutdown_source") is None:
            data.pop("judge_shutdown_date", None)
            data.pop("judge_shutdown_source", None)
        if data.get("shard") is None:
            data.pop("shard", None)
        return data

    @property
    def retries(self) -> int:
        return max(0, len(self.attempts) - 1)

    @property
    def budget_charge(self) -> float:
        """What this judgment counted against the cost boundary: reported cost plus held reservations."""
        return self.cost + sum(a.held for a in self.attempts)


class RecordsError(UsageError):
    """A records file cannot be read: a usage error (exit 2) naming the file and line."""


def _upgrade(obj: dict[str, Any]) -> dict[str, Any]:
    """Bring an older record to the current schema. Version 1 is the first; nothing to do yet."""
    return obj


def _untyped_verdict_as_error(obj: dict[str, Any]) -> dict[str, Any]:
    """A `judge_label`/`judge_reason` that is not text is no verdict: an `ok` record holding one is
    a parse_error, as on the live path (`gate.judge.vetting` checks the rest of the contract)."""
    bad = [k for k in ("judge_label", "judge_reason") if obj.get(k) is not None and not isinstance(obj[k], str)]
    if not bad:
        return obj
    fixed = {**obj, **dict.fromkeys(bad)}
    if obj.get("status") == "ok":
        what = "; ".join(f"`{k}` is {type(obj[k]).__name__} {json.dumps(obj[k])[:40]}, not text" for k in bad)
        fixed.update(
            status="error",
            error_kind="parse_error",
            error_message=f"recorded judgment outside the contract: {what}",
            judge_label=None,
        )
    return fixed


def parse_record(obj: Any, where: str, *, surrogates: bool = True) -> Record:
    """The record a decoded JSON line holds, checked; `surrogates=False`: the caller knows no string
    of it can hold a lone surrogate (its raw line has no `\\ud` escape), and that walk is skipped."""
    if not isinstance(obj, dict):
        raise RecordsError(f"{where}: a record must be a JSON object; fix: restore the file from the run")
    version = obj.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        raise RecordsError(
            f"{where}: `schema_version` must be a positive whole number; fix: restore the file from the run"
        )
    if version > SCHEMA_VERSION:
        raise RecordsError(
            f"{where}: record schema_version {version} is newer than this gate reads ({SCHEMA_VERSION}); "
            "fix: upgrade ragas-gate"
        )
    try:
        record = Record.model_validate(_untyped_verdict_as_error(_upgrade(obj)))
    except ValidationError as exc:
        problems = "; ".join(format_validation_error(exc))
        raise RecordsError(f"{where}: {problems}") from None
    for key in ("case_id", "slice"):
        value = getattr(record, key)
        if not is_name(value):
            raise RecordsError(
                f"{where}: `{key}` '{visible(value, 80)}' is not allowed: use {NAME_RULE}; "
                "fix: restore the file from the run"
            )
    text_problem = surrogate_at(obj) if surrogates else None
    if text_problem:
        raise RecordsError(
            f"{where}: `{text_problem}` holds a lone surrogate, which is not text; fix: restore the file"
        )
    return record


def read_records(path: Path, *, tolerate_torn_tail: bool = True) -> list[Record]:
    """Read a records.jsonl file. A torn last line (a run killed mid-write) is skipped."""
    try:
        data = read_bytes(path, "records file", MAX_STREAM_BYTES)
    except FileProblem as exc:
        if "does not exist" in exc.message:
            raise RecordsError(
                f"{path}: the records file does not exist; fix: pass a run's --out directory or its records.jsonl"
            ) from None
        raise RecordsError(exc.message) from None
    if not data.strip():
        raise RecordsError(f"{path}: the records file is empty; fix: pass the records.jsonl of a run that judged cases")
    return list(_records_of_lines(path, io.BytesIO(data), tolerate_torn_tail))


def iter_records(path: Path, *, start: int = 0) -> Iterator[Record]:
    """The records of a records.jsonl one line at a time, from byte `start` (a line's start): the
    whole file is never in memory. The same reading as `read_records` (a torn last line skipped, a
    bad line a RecordsError naming it); a missing or empty file holds no record."""
    try:
        handle = open_binary(path, "records file")
    except FileProblem as exc:
        if "does not exist" in exc.message:
            return
        raise RecordsError(exc.message) from None
    with handle:
        handle.seek(start)
        yield from _records_of_lines(path, handle, True)


@dataclass(frozen=True)
class RecordsFile:
    """A run's records as the decision reads them, without holding them: the records file read
    line by line each time this is iterated (from byte `start`), then `unwritten`, the records a
    failed write could keep only in memory."""

    path: Path
    unwritten: tuple[Record, ...] = ()
    start: int = 0

    def __iter__(self) -> Iterator[Record]:
        yield from iter_records(self.path, start=self.start)
        yield from self.unwritten


def _records_of_lines(path: Path, lines: Iterable[bytes], tolerate_torn_tail: bool) -> Iterator[Record]:
    """Each line's record; `lines` keep their b"\n" (a binary file's lines: split there only, since a
    reason may hold U+2028, which JSON does not escape). Blank lines are skipped; a last line without
    its newline that is not JSON is torn (a run killed mid-write), skipped."""
    offset = 0
    for i, raw in enumerate(lines, start=1):
        start, offset = offset, offset + len(raw)
        if not raw.strip():
            continue
        try:
            yield record_of_line(raw, f"{path}:{i}", start)
        except TornLine:
            if not tolerate_torn_tail:
                raise
            return


class TornLine(RecordsError):
    """A last line without its newline that is not JSON: a run killed while writing it."""


def record_of_line(raw: bytes, where: str, offset: int = 0) -> Record:
    """The record one line of a records file holds (`offset`: its first byte in the file, for a
    message). RecordsError names the line; TornLine when it is a last line cut short."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecordsError(
            f"{where}: not UTF-8 text (byte {offset + exc.start}); fix: restore the file from the run's artifact"
        ) from None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        message = f"{where}: not valid JSON ({exc.msg}); fix: restore the file from the run"
        raise (RecordsError if raw.endswith(b"\n") else TornLine)(message) from None  # only the last line lacks it
    except (ValueError, RecursionError) as exc:  # thousands of digits; nesting too deep
        raise RecordsError(
            f"{where}: a value cannot be read ({visible(exc, 120) or 'nested too deep'}); "
            "fix: restore the file from the run"
        ) from None
    # A lone surrogate can only come from a `\\ud800`-style escape: raw UTF-8 cannot hold one.
    return parse_record(obj, where, surrogates=b"\\ud" in raw or b"\\uD" in raw)


class RecordWriter:
    """Appends one record per line and flushes it as soon as it is written.

    `flush` hands each line to the OS, so a killed process loses nothing. `fsync` (surviving a
    machine crash) blocks the event loop, so it runs at most once a second and on close.
    """

    FSYNC_INTERVAL_S = 1.0

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[bytes] = path.open("ab")
        self._last_sync = time.monotonic()

    def write(self, record: Record) -> None:
        self.write_line(record_line(record))

    def write_line(self, line: bytes) -> None:
        """One record's line as `record_line` made it (a worker's line, copied as it was written)."""
        self._fh.write(line)
        self._fh.flush()
        now = time.monotonic()
        if now - self._last_sync >= self.FSYNC_INTERVAL_S:
            os.fsync(self._fh.fileno())
            self._last_sync = now

    def size(self) -> int:
        """The file's length now: where the next record's line starts."""
        return os.fstat(self._fh.fileno()).st_size

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record_line(record: Record) -> bytes:
    """A record as records.jsonl holds it: one line of JSON, keys sorted, text as it is."""
    return (json.dumps(record.model_dump(mode="json"), ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def write_records(path: Path, records: Iterable[Record]) -> None:
    with RecordWriter(path) as w:
        for r in records:
            w.write(r)


def majority(labels: Sequence[str]) -> str | None:
    """The label most repeats gave (the majority counts); None on a tie or no label."""
    counts = Counter(labels).most_common()
    if not counts:
        return None
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]
