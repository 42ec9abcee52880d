"""The review ledger: append-only JSON Lines, one line per act (a label, an adjudication, a retraction).

A line is written whole under an exclusive lock, flushed and fsynced before `append_line` returns,
and never rewritten: a correction is a retraction that names the `line_sha256` it withdraws, and
a new line. Each line carries `prev`, the sha256 of the line before it in its file (the first line:
of the empty string), computed under the same lock, so an edited, deleted, duplicated or reordered
line breaks the chain at the line after it and reading names that file and line. The chain cannot
see the last line of a file edited or removed (nothing follows it): git history anchors that. A ledger may be a directory: each reviewer then appends to a file of their own
(`<reviewer>.jsonl`), so people who label apart commit without merge conflicts, and every reader
takes the union of the directory's `*.jsonl` files. Reading checks every line; a line that does
not parse, a label outside the policy's, a missing reason or an item of no queue given is a usage
error naming the file and line, never skipped. `final_labels` turns the lines into each item's
final label: K independent labels that agree, or an adjudication.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.model.loading import FileProblem, canonical_json, open_binary, sha256_hex
from gate.model.paths import from_working_directory, shown_path
from gate.review.queue import ABSTAIN, Queue

Kind = Literal["label", "adjudication", "retraction"]
KINDS: tuple[Kind, ...] = ("label", "adjudication", "retraction")
Status = Literal["unanimous", "adjudicated", "disagreement", "abstain", "pending"]
MAX_LEDGER_BYTES = 1024 * 1024 * 1024
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # the first line's `prev`
_REQUIRED = (
    "kind",
    "item_id",
    "response_sha256",
    "reviewer",
    "label",
    "reason",
    "at",
    "queue_sha256",
    "rubric_version",
    "blind",
    "prev",
)
# `case_id` and `evidence` may be absent; the rest are written only when they say something:
# `retracts` on a retraction, `self_adjudication` when --allow-self-adjudication let an adjudicator
# settle an item they labelled, `external_id` the act's id in another tool (a Label Studio annotation).
_OPTIONAL = ("case_id", "evidence", "retracts", "self_adjudication", "external_id")
# A reviewer's name: a name (letters, digits and . _ : / -), or an email (Label Studio's annotators).
REVIEWER_RULE = "letters, digits and . _ : / - @ + only, 1 to 200 characters"
_REVIEWER = re.compile(r"[A-Za-z0-9._:/@+-]{1,200}")
_FIX = "fix: restore the line from git (the ledger is append-only; a correction is a retraction and a new line)"
_UNCHAINED = (
    "`prev` is missing: the line was written before each ledger line named the sha256 of the one before it; "
    "fix: check the file against git (`git log -p`), then link its lines once with `gate review chain LEDGER` "
    "and commit the result"
)


class LedgerError(UsageError):
    """A ledger the gate cannot use (exit 2): names the file, the line and the fix."""


@dataclass(frozen=True)
class LedgerLine:
    kind: Kind
    item_id: str
    case_id: str | None
    response_sha256: str
    reviewer: str
    label: str
    reason: str
    evidence: tuple[str, ...]
    at: str
    queue_sha256: str
    rubric_version: str
    blind: bool
    retracts: str | None
    line_sha256: str  # sha256 of the line's bytes as written (without its newline)
    prev: str  # line_sha256 of the line before it in its file (EMPTY_SHA256 for the first)
    file: Path
    line_no: int
    self_adjudication: bool = False
    external_id: str | None = None

    @property
    def where(self) -> str:
        return f"{shown_path(self.file)}:{self.line_no}"


def is_reviewer(text: object) -> bool:
    return isinstance(text, str) and _REVIEWER.fullmatch(text) is not None


def ledger_file(ledger: Path, reviewer: str) -> Path:
    """The file a reviewer's line goes to: `<reviewer>.jsonl` in a ledger directory, else the file itself."""
    if from_working_directory(ledger).is_dir():
        return ledger / (re.sub(r"[^A-Za-z0-9._-]", "_", reviewer) + ".jsonl")
    return ledger


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _line_object(fields: Mapping[str, object]) -> dict[str, object]:
    obj = {k: v for k, v in fields.items() if v is not None}
    obj.setdefault("at", now())
    obj.setdefault("evidence", [])
    if isinstance(obj["evidence"], tuple):
        obj["evidence"] = list(obj["evidence"])
    if obj.get("self_adjudication") is False:
        del obj["self_adjudication"]
    return obj


def append_line(ledger: Path, fields: Mapping[str, object]) -> LedgerLine:
    """Append one act: checked, one whole line under an exclusive lock, linked to the line before it
    (`prev`, read under the same lock), flushed and fsynced.

    `ledger` a directory: the reviewer's own file inside it. Returns the line as a reader sees it.
    """
    obj = {k: v for k, v in _line_object(fields).items() if k != "prev"}
    target = ledger_file(ledger, str(obj.get("reviewer", "")))
    where = f"{shown_path(target)} (the line to append)"
    _parse(canonical_json({**obj, "prev": EMPTY_SHA256}).encode("utf-8"), where, target, 0)  # refused before the lock
    try:
        fd = os.open(
            from_working_directory(target), os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644
        )
    except OSError as exc:
        raise LedgerError(
            f"{shown_path(target)}: the ledger cannot be opened for appending ({exc.strerror}); fix: pass a writable --ledger"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        tail = _tail(fd)
        text = canonical_json({**obj, "prev": tail.prev})
        line = _parse(text.encode("utf-8"), where, target, 0)
        data = text.encode("utf-8") + b"\n"
        if tail.unfinished:
            data = b"\n" + data  # never glue a line onto one a killed writer left unfinished
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as exc:
        raise LedgerError(
            f"{shown_path(target)}: the label was not written ({exc.strerror}); fix: free space or permissions, then label again"
        ) from None
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    return _replace_position(line, target, tail.lines + 1)


@dataclass(frozen=True)
class _Tail:
    lines: int  # lines in the file (an unfinished last line counts)
    prev: str  # the sha256 of its last whole line that is not blank: the next line's `prev`
    unfinished: bool  # the file ends inside a line a killed writer left


def _tail(fd: int) -> _Tail:
    """What the next line links to, read under the writer's lock. The link skips an unfinished last
    line, so deleting that line (as reading asks) leaves the chain whole."""
    size = os.fstat(fd).st_size
    chunks: list[bytes] = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(1 << 20, size - offset), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    data = b"".join(chunks)
    end = data.rfind(b"\n") + 1
    whole = data[:end].split(b"\n")[:-1]
    last = next((raw for raw in reversed(whole) if raw.strip()), None)
    prev = sha256_hex(last.rstrip(b"\r")) if last is not None else EMPTY_SHA256
    unfinished = end < len(data)
    return _Tail(len(whole) + (1 if unfinished else 0), prev, unfinished)


def _replace_position(line: LedgerLine, file: Path, line_no: int) -> LedgerLine:
    return replace(line, file=file, line_no=line_no)


def _fail(where: str, problem: str) -> LedgerError:
    return LedgerError(f"{where} (review ledger): {problem}")


def _field_problem(obj: dict[str, Any]) -> str | None:
    missing = [k for k in _REQUIRED if k not in obj]
    if missing == ["prev"]:
        return _UNCHAINED
    if missing:
        return f"`{missing[0]}` is missing"
    unknown = [k for k in obj if k not in _REQUIRED and k not in _OPTIONAL]
    if unknown:
        return f"unknown key `{visible(unknown[0], 40)}`"
    texts = (
        "prev", "item_id", "response_sha256", "reviewer", "label", "reason", "at", "queue_sha256", "rubric_version"
    )  # fmt: skip
    bad = next((k for k in texts if not isinstance(obj[k], str)), None)
    if bad is not None:
        return f"`{bad}` must be text"
    if obj["kind"] not in KINDS:
        return f"`kind` must be one of {', '.join(KINDS)}"
    if not isinstance(obj["blind"], bool) or not isinstance(obj.get("self_adjudication", False), bool):
        return "`blind` and `self_adjudication` must be true or false"
    evidence = obj.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        return "`evidence` must be a list of evidence ids"
    for key in ("case_id", "retracts", "external_id"):
        if key in obj and not isinstance(obj[key], str):
            return f"`{key}` must be text"
    if not is_reviewer(obj["reviewer"]):
        return f"`reviewer` must be a name ({REVIEWER_RULE})"
    if not obj["reason"].strip():
        return "`reason` is empty: every label says why"
    if (obj["kind"] == "retraction") != ("retracts" in obj):
        return "a retraction names the line it withdraws in `retracts` (its line_sha256), and only a retraction does"
    return None


def _parse(raw: bytes, where: str, file: Path, line_no: int) -> LedgerLine:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        raise _fail(where, f"not a JSON object (a line cut off or edited); {_FIX}") from None
    if not isinstance(obj, dict):
        raise _fail(where, f"not a JSON object; {_FIX}")
    problem = _field_problem(obj)
    if problem is not None:
        raise _fail(where, problem if problem == _UNCHAINED else f"{problem}; {_FIX}")
    return LedgerLine(
        kind=obj["kind"],
        item_id=obj["item_id"],
        case_id=obj.get("case_id"),
        response_sha256=obj["response_sha256"],
        reviewer=obj["reviewer"],
        label=obj["label"],
        reason=obj["reason"],
        evidence=tuple(obj.get("evidence", [])),
        at=obj["at"],
        queue_sha256=obj["queue_sha256"],
        rubric_version=obj["rubric_version"],
        blind=obj["blind"],
        retracts=obj.get("retracts"),
        line_sha256=sha256_hex(raw.rstrip(b"\r")),
        prev=obj["prev"],
        file=file,
        line_no=line_no,
        self_adjudication=obj.get("self_adjudication", False),
        external_id=obj.get("external_id"),
    )


def ledger_files(ledger: Path) -> list[Path]:
    """The files a ledger is: a directory's `*.jsonl` (sorted), else the file itself."""
    if from_working_directory(ledger).is_dir():
        return sorted(ledger / p.name for p in from_working_directory(ledger).glob("*.jsonl"))
    return [ledger]


def _file_bytes(path: Path) -> bytes:
    try:
        with open_binary(path, "review ledger", MAX_LEDGER_BYTES) as fh:
            return fh.read()
    except FileProblem as exc:
        raise LedgerError(exc.message) from None  # it names the file and the fix


def _read_file(path: Path) -> list[LedgerLine]:
    shown = shown_path(path)
    data = _file_bytes(path)
    lines = data.split(b"\n")
    out: list[LedgerLine] = []
    for line_no, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if line_no == len(lines) and data and not data.endswith(b"\n"):
            try:
                json.loads(raw)
            except ValueError:
                raise _fail(
                    f"{shown}:{line_no}",
                    "the last line was cut off mid-write (its writer was stopped before it confirmed the label); "
                    "fix: delete that unfinished line",
                ) from None
        out.append(_parse(raw, f"{shown}:{line_no}", path, line_no))
    for i, line in enumerate(out):
        if line.prev != (out[i - 1].line_sha256 if i else EMPTY_SHA256):
            raise _broken_chain(i, out)
    return out


def _broken_chain(at: int, lines: Sequence[LedgerLine]) -> LedgerError:
    """What a line whose `prev` is not the line before it says happened to the file."""
    line = lines[at]
    named = next((x for x in lines if x.line_sha256 == line.prev), None)
    twin = next((x for x in lines[:at] if x.line_sha256 == line.line_sha256), None)
    if twin is not None:
        what = f"it repeats line {twin.line_no} (a line copied, or merged in twice)"
    elif named is not None and named.line_no > line.line_no:
        what = f"it follows line {named.line_no}, which comes after it: lines were reordered"
    elif named is not None:
        what = (
            f"it follows line {named.line_no}, not the line before it: a line was deleted, moved or added by hand "
            "between them"
        )
    elif at == 0:
        what = "it is the file's first line but follows another: the lines before it were deleted"
    else:
        what = (
            f"it follows a line the file no longer holds: line {lines[at - 1].line_no} was edited, or a line was "
            "deleted there"
        )
    return _fail(
        line.where,
        f"the chain of lines is broken ({what}): people's labels were changed outside the gate; fix: restore the "
        "file from git (`git log -p` shows the edit; the ledger is append-only, a correction is a retraction and a "
        "new line)",
    )


def _check_against_queue(line: LedgerLine, queue: Queue, earlier: frozenset[str] = frozenset()) -> None:
    labels = queue.header.labels
    if line.label not in labels:
        raise _fail(line.where, f"label `{visible(line.label, 40)}` is not one of {', '.join(labels)}; {_FIX}")
    item = queue.by_id.get(line.item_id)
    if item is None:
        raise _fail(
            line.where,
            f"item {visible(line.item_id[:12])} is in no queue given (this line labels another queue: "
            f"{visible(line.queue_sha256[:12])}); fix: pass the queue this ledger labels, or a ledger of this queue",
        )
    if line.response_sha256 != item.response_sha256 or line.case_id != item.case_id:
        raise _fail(
            line.where, f"the case id or answer hash differs from item {line.item_id[:12]} in the queue; {_FIX}"
        )
    if line.queue_sha256 != queue.sha256 and line.queue_sha256 not in earlier:
        raise _fail(
            line.where,
            f"the line names queue {visible(line.queue_sha256[:12])}, not {shown_path(queue.path)} "
            f"({queue.sha256[:12]}) it is read with: people labelled another file; fix: pass the queue this ledger "
            "labels, or a ledger of this queue",
        )
    if line.rubric_version != queue.header.rubric_version:
        raise _fail(
            line.where,
            f"labelled under rubric {visible(line.rubric_version, 40)}, the queue is under "
            f"{visible(queue.header.rubric_version, 40)}; fix: build a queue for the new rubric and label it again",
        )


def _check_retractions(lines: Sequence[LedgerLine]) -> None:
    by_sha = {line.line_sha256: line for line in lines}
    for line in lines:
        if line.retracts is None:
            continue
        target = by_sha.get(line.retracts)
        if target is None or target.kind == "retraction" or target.item_id != line.item_id:
            raise _fail(line.where, f"`retracts` names no label or adjudication of this item in the ledger; {_FIX}")
        if target.reviewer != line.reviewer:
            raise _fail(
                line.where, f"{line.reviewer} retracts a line of {target.reviewer}: only its author may; {_FIX}"
            )


def _check_twins(lines: Sequence[LedgerLine]) -> None:
    """The same line in two files of a directory (a file copied, a line moved across): one act counted twice."""
    seen: dict[str, LedgerLine] = {}
    for line in lines:
        first = seen.setdefault(line.line_sha256, line)
        if first is not line:
            raise _fail(
                line.where,
                f"the line repeats {first.where} (a file or line copied): one act would count twice; fix: restore "
                "the ledger from git",
            )


def _check_rubric(line: LedgerLine, rubrics: Sequence[str]) -> None:
    if line.rubric_version not in rubrics:
        raise _fail(
            line.where,
            f"labelled under rubric {visible(line.rubric_version, 40)}, which the policy no longer has (its rubrics: "
            f"{', '.join(visible(r, 40) for r in rubrics)}): people judged against rules that are gone; fix: move "
            "this ledger aside (git keeps it) and label the answers again under the current rubric",
        )


def read_ledger(
    ledger: Path, queue: Queue | None = None, *, missing_ok: bool = False, rubrics: Sequence[str] | None = None
) -> tuple[LedgerLine, ...]:
    """Every line of the ledger (a directory: the union of its files), each checked (against `queue`
    when given, and against the policy's `rubrics` when given). A missing ledger is an error unless
    `missing_ok` (a page about to write its first line)."""
    if missing_ok and not from_working_directory(ledger).exists():
        return ()
    lines = [line for path in ledger_files(ledger) for line in _read_file(path)]
    _check_twins(lines)
    earlier = carried_queues(queue) if queue is not None else frozenset()
    if queue is not None and earlier:
        # Labels of the earlier queues this queue carries over: those on its items count (the same item under
        # the same rubric), those on other items are another queue's, and not this queue's to read.
        lines = [line for line in lines if line.queue_sha256 not in earlier or line.item_id in queue.by_id]
    for line in lines:
        if queue is not None:
            _check_against_queue(line, queue, earlier)
        if rubrics is not None:
            _check_rubric(line, rubrics)
    _check_retractions(lines)
    return tuple(lines)


def carried_queues(queue: Queue) -> frozenset[str]:
    """The earlier queues whose labels this queue carries over (`design.carried_over.queues`, written by
    `gate review queue --from RUN` when the ledger held labels already): their labels on this queue's
    items are this queue's too, so people label only what still needs a label."""
    carried = queue.header.design.get("carried_over")
    queues = carried.get("queues") if isinstance(carried, dict) else None
    return frozenset(q for q in queues if isinstance(q, str)) if isinstance(queues, list) else frozenset()


@dataclass(frozen=True)
class FinalLabel:
    item_id: str
    label: str | None  # None while pending or in disagreement; `abstain` for a final abstention
    status: Status
    reviewers: tuple[str, ...]  # those whose independent labels count, sorted
    adjudicator: str | None
    lines: tuple[str, ...]  # the line_sha256 of every line the final label rests on
    blind: bool = True  # every line it rests on was made blind

    @property
    def final(self) -> bool:
        """A label the gate may use: unanimous or adjudicated (a final abstention is listed, not used)."""
        return self.status in ("unanimous", "adjudicated")


def active_lines(lines: Iterable[LedgerLine]) -> list[LedgerLine]:
    """The labels and adjudications no retraction withdrew, in ledger order."""
    kept = list(lines)
    withdrawn = {line.retracts for line in kept if line.retracts is not None}
    return [line for line in kept if line.kind != "retraction" and line.line_sha256 not in withdrawn]


def _final(item: str, labels: list[LedgerLine], adjudication: LedgerLine | None, k: int) -> FinalLabel:
    latest: dict[str, LedgerLine] = {}
    for line in labels:  # a reviewer's later label of the same item replaces their earlier one
        latest[line.reviewer] = line
    reviewers = tuple(sorted(latest))
    used = [latest[r] for r in reviewers]
    if adjudication is not None:
        used.append(adjudication)
        status: Status = "abstain" if adjudication.label == ABSTAIN else "adjudicated"
        return FinalLabel(
            item, adjudication.label, status, reviewers, adjudication.reviewer,
            tuple(x.line_sha256 for x in used), all(x.blind for x in used),
        )  # fmt: skip
    given = {line.label for line in used}
    if len(used) < k:
        status, label = "pending", None
    elif given == {ABSTAIN}:
        status, label = "abstain", ABSTAIN
    elif len(given) == 1:
        status, label = "unanimous", next(iter(given))
    else:
        status, label = "disagreement", None
    return FinalLabel(
        item, label, status, reviewers, None, tuple(x.line_sha256 for x in used), all(x.blind for x in used)
    )


def final_labels(lines: Iterable[LedgerLine], queue: Queue | None, k: int) -> dict[str, FinalLabel]:
    """Each item's final label: K independent labels that agree (unanimous), or the adjudicator's.

    Items of the queue with no line are `pending`. Labels that disagree, or that mix `abstain` with
    a label, are a `disagreement` awaiting adjudication; K abstentions are a final `abstain`. An
    adjudication by someone who labelled the item counts only when recorded as `self_adjudication`.
    """
    labels: dict[str, list[LedgerLine]] = {}
    adjudications: dict[str, LedgerLine] = {}
    for line in active_lines(lines):
        if line.kind == "label":
            labels.setdefault(line.item_id, []).append(line)
        else:
            adjudications[line.item_id] = line  # the latest adjudication settles the item
    for item, adjudication in adjudications.items():
        labellers = {line.reviewer for line in labels.get(item, [])}
        if adjudication.reviewer in labellers and not adjudication.self_adjudication:
            raise _fail(
                adjudication.where,
                f"{adjudication.reviewer} adjudicates an item they labelled; fix: let another person adjudicate it "
                "(or record it with --allow-self-adjudication)",
            )
    items = (
        [item.item_id for item in queue.items] if queue is not None else list(dict.fromkeys([*labels, *adjudications]))
    )
    return {item: _final(item, labels.get(item, []), adjudications.get(item), k) for item in items}


@dataclass(frozen=True)
class Chained:
    file: Path
    lines: int
    linked: bool  # False: the file was chained already and is left as it was
    before_sha256: str  # the file's bytes as they were: what to compare with the committed file


def chain_ledger(ledger: Path) -> list[Chained]:
    """Link the lines of a ledger written before lines were chained, once: each line gains `prev`, and
    a retraction's `retracts` follows the new sha256 of the line it withdraws. Every file is checked
    whole before any is written; each is then replaced at once (a temporary file renamed over it). A
    file already chained is read as any reader reads it (a broken chain is an error) and left alone;
    one that is chained in part was edited by hand and is refused."""
    renamed: dict[str, str] = {}
    plans: list[tuple[Path, int, bytes | None, str]] = []
    for path in ledger_files(ledger):
        plans.append((*_chained_file(path, renamed), sha256_hex(_file_bytes(path))))
    out = []
    for path, count, data, before in plans:
        if data is not None:
            _replace_file(path, data)
        out.append(Chained(path, count, data is not None, before))
    read_ledger(ledger)  # what was written reads whole
    return out


def _chained_file(path: Path, renamed: dict[str, str]) -> tuple[Path, int, bytes | None]:
    shown = shown_path(path)
    data = _file_bytes(path)
    objs: list[tuple[int, bytes, dict[str, Any]]] = []
    for line_no, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            raise _fail(f"{shown}:{line_no}", f"not a JSON object (a line cut off or edited); {_FIX}") from None
        if not isinstance(obj, dict):
            raise _fail(f"{shown}:{line_no}", f"not a JSON object; {_FIX}")
        objs.append((line_no, raw, obj))
    chained = [line_no for line_no, _, obj in objs if "prev" in obj]
    if len(chained) == len(objs):
        return path, len(_read_file(path)), None
    if chained:
        raise _fail(
            f"{shown}:{chained[0]}",
            "some lines of the file are chained and some are not: it was edited by hand; fix: restore it from git",
        )
    prev, lines = EMPTY_SHA256, []
    for line_no, old, obj in objs:
        retracts = obj.get("retracts")
        if isinstance(retracts, str) and retracts in renamed:
            obj["retracts"] = renamed[retracts]
        raw = canonical_json({**obj, "prev": prev}).encode("utf-8")
        line = _parse(raw, f"{shown}:{line_no}", path, line_no)  # every field checked as a reader checks it
        renamed[sha256_hex(old.rstrip(b"\r"))] = line.line_sha256
        prev = line.line_sha256
        lines.append(raw)
    return path, len(lines), b"".join(raw + b"\n" for raw in lines)


def _replace_file(path: Path, data: bytes) -> None:
    target = from_working_directory(path)
    temporary = target.with_name(f".{target.name}.chaining")
    try:
        with open(temporary, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temporary, target)
    except OSError as exc:
        raise LedgerError(
            f"{shown_path(path)}: cannot rewrite it ({exc.strerror}); fix: free space or permissions, then chain again"
        ) from None
