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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.model.paths import shown_path
from gate.model.records import Record, RecordsError, RecordWriter, parse_record, read_records
from gate.model.wording import plural

WORKER_RECORDS_GLOB = "records.w*.jsonl"
UNREADABLE_SUFFIX = ".unreadable"


@dataclass(frozen=True)
class WorkerFile:
    """What could be read from one worker's records file, and why the rest could not (None: all read)."""

    path: Path
    records: tuple[Record, ...]
    problem: str | None = None


def read_worker(path: Path) -> WorkerFile:
    try:
        if not path.exists() or (path.is_file() and not path.stat().st_size):
            return WorkerFile(path, ())
        return WorkerFile(path, tuple(read_records(path)))
    except RecordsError as exc:
        first = str(exc).split("; fix:", 1)[0]  # the fix is the caller's to say
    except OSError as exc:
        first = f"{shown_path(path)}: cannot be read ({exc.strerror or type(exc).__name__})"
    return _salvage(path, first)


def _salvage(path: Path, first: str) -> WorkerFile:
    """Every readable line of a file `read_records` refused at its first bad line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return WorkerFile(path, (), f"{shown_path(path)}: cannot be read ({reason}), no record kept")
    lines = data.split(b"\n")
    torn_tail = lines.pop()  # b"" when the file ends with a newline; else a line cut by a kill
    kept: list[Record] = []
    bad = 0
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            kept.append(parse_record(json.loads(raw.decode("utf-8")), f"{shown_path(path)}:{i}"))
        except (UnicodeDecodeError, ValueError, RecursionError, RecordsError):
            bad += 1
    # A last line cut by a kill mid-write: that judgment is unrun, as read_records has it.
    with contextlib.suppress(UnicodeDecodeError, ValueError, RecursionError, RecordsError):
        if torn_tail.strip():
            kept.append(parse_record(json.loads(torn_tail.decode("utf-8")), f"{shown_path(path)}:{len(lines) + 1}"))
    return WorkerFile(
        path, tuple(kept), f"{first}; {plural(bad, 'unreadable line')}, {plural(len(kept), 'record')} kept"
    )


def set_aside(path: Path) -> Path | None:
    """Rename an unreadable worker file out of the fold's way; None when it is gone or cannot be moved."""
    target = path.with_name(path.name + UNREADABLE_SUFFIX)
    try:
        path.replace(target)
    except OSError:
        return None
    return target


def fold_worker_records(out_dir: Path, records_path: Path) -> list[str]:
    """Append every worker's records file to records.jsonl and remove it (a resumed run whose
    workers died with it); a note for each file that could not be read whole.

    Idempotent: a parent that died after folding a file and before removing it left its records in
    both places; those already in records.jsonl are not appended again (each would be billed twice)."""
    notes: list[str] = []
    paths = sorted(out_dir.glob(WORKER_RECORDS_GLOB))
    on_file = _identities_on_file(records_path) if paths else set()
    for path in paths:
        found = read_worker(path)
        fresh = [r for r in found.records if _identity(r.model_dump(mode="json")) not in on_file]
        if fresh:
            with RecordWriter(records_path) as writer:
                for r in fresh:
                    writer.write(r)
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


def _identities_on_file(records_path: Path) -> set[tuple[object, ...]]:
    """The identities of records.jsonl's records (read as untrusted: a line that is not one is
    left to `read_records` to report). A torn last line (the parent killed while writing it) is cut
    off first, so what is appended next starts a line: its record is still in its worker's file,
    or its attempts in the journal."""
    found: set[tuple[object, ...]] = set()
    whole = 0  # bytes up to the last newline
    try:
        with records_path.open("rb+") as fh:
            for line in fh:
                if not line.endswith(b"\n"):
                    break
                whole += len(line)
                with contextlib.suppress(ValueError, RecursionError):
                    found.add(_identity(json.loads(line)))
            if fh.seek(0, 2) != whole:
                fh.truncate(whole)
    except FileNotFoundError:
        return set()
    return found
