"""The records files of worker processes (`records.w<k>.jsonl` in --out): read, folded, set aside.

A worker appends one record a line, flushed per line, so a killed worker leaves at most a torn
last line: that judgment is unrun, not half-read, as `read_records` tolerates. Anything else (a
corrupt line in the middle, an unreadable file) is never dropped in silence: every line that can
still be read is kept, and the file's problem is returned for the run to report; the file itself
is renamed `records.w<k>.jsonl.unreadable` (kept for a person to look at, never folded twice).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.model.loading import FileProblem, open_binary
from gate.model.paths import shown_path
from gate.model.records import Record, RecordsError, RecordWriter, TornLine, record_line, record_of_line
from gate.model.wording import plural

WORKER_RECORDS_GLOB = "records.w*.jsonl"
UNREADABLE_SUFFIX = ".unreadable"


@dataclass(frozen=True)
class WorkerFile:
    """What reading one worker's records file found: how many records it held, and why the rest
    could not be read (None: all read)."""

    path: Path
    count: int
    problem: str | None = None


# Each record read, with its line (ending in b"\n") as the worker wrote it.
Take = Callable[[Record, bytes], None]


def read_worker(path: Path, take: Take) -> WorkerFile:
    """Give `take` every record of a worker's records file that can be read, one at a time (the
    file is never read whole); what was found (`WorkerReading`)."""
    reading = WorkerReading(path)
    for record, line in reading:
        take(record, line)
    return reading.found()


class WorkerReading:
    """A worker's records file, iterated one record (and its line) at a time; then `found()`. A
    torn last line is the judgment the kill cut short: unrun, as `read_records` has it. Any other
    line that cannot be read is counted, and the first one's reason is the file's problem; the
    lines after it are still read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = self.bad = 0
        self.first: str | None = None  # the first problem met
        self.unopened = False

    def __iter__(self) -> Iterator[tuple[Record, bytes]]:
        path = self.path
        try:
            if not path.exists() or (path.is_file() and not path.stat().st_size):
                return
            handle = open_binary(path, "records file")
        except (FileProblem, OSError) as exc:
            if isinstance(exc, FileProblem):  # "<path>: the records file is a directory; fix: ..."
                reason = exc.message.split("; fix:", 1)[0].removeprefix(f"{path}: ")
            else:
                reason = exc.strerror or type(exc).__name__
            self.first, self.unopened = f"{shown_path(path)}: cannot be read ({reason})", True
            return
        offset = 0
        with handle:
            for i, raw in enumerate(handle, start=1):
                start, offset = offset, offset + len(raw)
                if not raw.strip():
                    continue
                try:
                    record = record_of_line(raw, f"{path}:{i}", start)
                except TornLine:
                    continue  # the last line, cut by a kill: that judgment is unrun
                except RecordsError as exc:
                    self.first = self.first or str(exc).split("; fix:", 1)[0]  # the fix is the caller's to say
                    self.bad += raw.endswith(b"\n")  # a last line cut short is never counted
                    continue
                self.count += 1
                yield record, raw if raw.endswith(b"\n") else record_line(record)

    def found(self) -> WorkerFile:
        if self.first is None:
            return WorkerFile(self.path, self.count)
        if self.unopened:
            return WorkerFile(self.path, 0, f"{self.first}, no record kept")
        return WorkerFile(
            self.path,
            self.count,
            f"{self.first}; {plural(self.bad, 'unreadable line')}, {plural(self.count, 'record')} kept",
        )


def set_aside(path: Path) -> Path | None:
    """Rename an unreadable worker file out of the fold's way; None when it is gone or cannot be moved."""
    target = path.with_name(path.name + UNREADABLE_SUFFIX)
    try:
        path.replace(target)
    except OSError:
        return None
    return target


def unfolded_worker_records(out_dir: Path, records_path: Path) -> list[Record]:
    """What `fold_worker_records` would append to records.jsonl, read without changing anything: a
    resumed run reads its earlier records (and may refuse them) before --out starts to change."""
    paths = sorted(out_dir.glob(WORKER_RECORDS_GLOB))
    on_file = _identities_on_file(records_path, cut_torn=False) if paths else set()
    return [
        record for path in paths for record, line in WorkerReading(path) if _identity(json.loads(line)) not in on_file
    ]


def fold_worker_records(out_dir: Path, records_path: Path) -> list[str]:
    """Append every worker's records file to records.jsonl and remove it (a resumed run whose
    workers died with it); a note for each file that could not be read whole.

    Idempotent: a parent that died after folding a file and before removing it left its records in
    both places; those already in records.jsonl are not appended again (each would be billed twice)."""
    notes: list[str] = []
    paths = sorted(out_dir.glob(WORKER_RECORDS_GLOB))
    on_file = _identities_on_file(records_path) if paths else set()
    for path in paths:
        with RecordWriter(records_path) as writer:

            def take(record: Record, line: bytes) -> None:
                if _identity(json.loads(line)) not in on_file:
                    writer.write_line(line)

            found = read_worker(path, take)
        if found.problem is None:
            path.unlink()
            continue
        kept = set_aside(path)
        notes.append(
            f"a worker's records file could not be read whole: {found.problem}; the judgments it lost are "
            "billed from the attempt journal and judged again (the cache serves those already paid for)"
            + (f"; the file is kept as {shown_path(kept)}" if kept is not None else "")
        )
    return notes


def discard_worker_records(out_dir: Path) -> None:
    """A fresh run never mixes with an older run's worker files."""
    for path in [*out_dir.glob(WORKER_RECORDS_GLOB), *out_dir.glob(WORKER_RECORDS_GLOB + UNREADABLE_SUFFIX)]:
        if path.is_dir():
            continue
        path.unlink()


def _identity(rec: Any) -> tuple[object, ...]:
    """What tells one judgment's record from another: its case, repeat and attempt ids (unique per
    attempt), with its status and cache state for a record that sent none."""
    if not isinstance(rec, dict):
        return ()
    attempts = rec.get("attempts")
    ids = tuple(str(a.get("attempt_id")) for a in attempts if isinstance(a, dict)) if isinstance(attempts, list) else ()
    return (str(rec.get("case_id")), str(rec.get("repeat_index")), ids, str(rec.get("status")), str(rec.get("cache")))


def _identities_on_file(records_path: Path, *, cut_torn: bool = True) -> set[tuple[object, ...]]:
    """The identities of records.jsonl's records (read as untrusted: a line that is not one is
    left to `read_records` to report). A torn last line (the parent killed while writing it) is cut
    off first (`cut_torn`), so what is appended next starts a line: its record is still in its
    worker's file, or its attempts in the journal."""
    found: set[tuple[object, ...]] = set()
    whole = 0  # bytes up to the last newline
    try:
        with records_path.open("rb+" if cut_torn else "rb") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break
                whole += len(line)
                with contextlib.suppress(ValueError, RecursionError):
                    found.add(_identity(json.loads(line)))
            if cut_torn and fh.seek(0, 2) != whole:
                fh.truncate(whole)
    except FileNotFoundError:
        return set()
    return found
