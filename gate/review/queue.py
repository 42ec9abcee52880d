"""The review queue: JSON Lines, a header line and one item a line, never anything of the judge.

Line 1 is `{"queue": {...}}` (the policy it labels for, the allowed labels, where the items came
from and, for a sample, the design); every other line is one item people label: a case's question,
evidence text and answer. An item's id is the sha256 of its case id and texts, so two cases with
the same text are two items and an edited text is a new item. A queue never holds the judge's
verdict, reason or model, nor any reviewer's label: the reader refuses such keys.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.model.loading import FileProblem, canonical_json, gc_paused, open_binary, sha256_hex
from gate.model.paths import from_working_directory, shown_path

if TYPE_CHECKING:
    from gate.model.cases import Case

ABSTAIN = "abstain"
SOURCES = ("product-audit", "drift", "disagreement", "review", "file")
MAX_QUEUE_BYTES = 2 * 1024 * 1024 * 1024
_HEADER_KEYS = ("policy_id", "policy", "rubric_version", "allowed_values", "sources", "design")
_ITEM_KEYS = (
    "item_id",
    "case_id",
    "slice",
    "user_input",
    "reference",
    "evidence",
    "response",
    "response_sha256",
    "source",
    "stratum",
    "draw",
)


class QueueError(UsageError):
    """A queue file the gate cannot use (exit 2): names the file, the line and the fix."""


@dataclass(frozen=True)
class QueueItem:
    """One answer to label: a case's question, the evidence text, the response (nothing of the judge)."""

    item_id: str
    case_id: str | None
    slice: str | None
    user_input: str
    reference: str
    evidence: tuple[str, ...]
    response: str
    response_sha256: str
    source: str
    stratum: str | None = None
    draw: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: getattr(self, k) for k in _ITEM_KEYS}
        out["evidence"] = list(self.evidence)
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class QueueHeader:
    """What the queue labels for: the policy (path relative to the queue file), its rubric and labels."""

    policy_id: str
    policy_path: str
    policy_sha256: str
    rubric_version: str
    allowed_values: tuple[str, ...]
    sources: tuple[dict[str, Any], ...]
    design: dict[str, Any] = field(default_factory=dict)

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels a reviewer may give: the policy's allowed values and `abstain`."""
        return (*self.allowed_values, ABSTAIN)

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": {
                "policy_id": self.policy_id,
                "policy": {"path": self.policy_path, "sha256": self.policy_sha256},
                "rubric_version": self.rubric_version,
                "allowed_values": list(self.allowed_values),
                "sources": [dict(s) for s in self.sources],
                "design": self.design,
            }
        }


@dataclass(frozen=True)
class Queue:
    header: QueueHeader
    items: tuple[QueueItem, ...]
    sha256: str  # of the file's bytes: every ledger line names it
    path: Path

    @functools.cached_property
    def by_id(self) -> Mapping[str, QueueItem]:
        return {item.item_id: item for item in self.items}

    @property
    def policy_file(self) -> Path:
        """The policy the header names, relative to the queue file's directory."""
        return self.path.parent / self.header.policy_path

    def slices(self) -> list[str | None]:
        """The slices in the order the queue first names them."""
        return list(dict.fromkeys(item.slice for item in self.items))


def item_id(case_id: str | None, user_input: str, reference: str, response: str, *, response_sha256: str = "") -> str:
    """sha256 of the case id and the texts a reviewer sees: one case's answer is one item.

    Each part is written with its length first, so no two different items hash the same bytes; the
    response enters as its sha256 (pass it when known: a 100,000-item queue then hashes each text once).
    The bytes are made by one formatting and hashed by one call: every item of a queue is checked so.
    """
    case = b"1:-" if case_id is None else b"%d:+%s" % (len(raw := case_id.encode("utf-8")) + 1, raw)
    question, evidence = user_input.encode("utf-8"), reference.encode("utf-8")
    answer = (response_sha256 or sha256_hex(response)).encode("utf-8")
    data = b"review-item-v1\n%s%d:+%s%d:+%s%d:+%s" % (
        case, len(question) + 1, question, len(evidence) + 1, evidence, len(answer) + 1, answer
    )  # fmt: skip
    return hashlib.sha256(data).hexdigest()


def answer_item_id(case: Case, response_sha256: str) -> str:
    """The item a case's answer is in a queue (its question and evidence text as the case holds them
    now): the identity a label of that answer must carry to be this run's."""
    return item_id(case.case_id, case.user_input, case.reference or "", "", response_sha256=response_sha256)


def make_item(
    *,
    case_id: str | None,
    slice: str | None,
    user_input: str,
    reference: str,
    evidence: Sequence[str],
    response: str,
    source: str,
    stratum: str | None = None,
    draw: int | None = None,
) -> QueueItem:
    """An item with its id and response hash computed (the one way a queue item is made)."""
    digest = sha256_hex(response)
    return QueueItem(
        item_id=item_id(case_id, user_input, reference, response, response_sha256=digest),
        case_id=case_id,
        slice=slice,
        user_input=user_input,
        reference=reference,
        evidence=tuple(evidence),
        response=response,
        response_sha256=digest,
        source=source,
        stratum=stratum,
        draw=draw,
    )


def _fail(where: str, problem: str) -> QueueError:
    return QueueError(f"{where} (review queue): {problem}")


def _text(obj: Mapping[str, Any], key: str, where: str, *, optional: bool = False) -> Any:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _fail(where, f"`{key}` must be text; fix: rebuild the queue with `gate review queue`")
    return value


def _texts(obj: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, f"`{key}` must be a list of text; fix: rebuild the queue with `gate review queue`")
    return tuple(value)


def _parse_header(obj: Any, where: str) -> QueueHeader:
    head = obj.get("queue") if isinstance(obj, dict) and len(obj) == 1 else None
    if not isinstance(head, dict):
        raise _fail(
            where, 'line 1 must be the queue\'s header {"queue": {...}}; fix: build the queue with `gate review queue`'
        )
    unknown = [k for k in head if k not in _HEADER_KEYS]
    if unknown:
        raise _fail(
            where, f"unknown header key `{visible(unknown[0], 40)}`; fix: rebuild the queue with `gate review queue`"
        )
    policy = head.get("policy")
    if not isinstance(policy, dict):
        raise _fail(where, "`policy` must be {path, sha256}; fix: rebuild the queue with `gate review queue`")
    sources, design = head.get("sources", []), head.get("design", {})
    if not isinstance(sources, list) or not all(isinstance(s, dict) for s in sources) or not isinstance(design, dict):
        raise _fail(where, "`sources` must be a list of objects and `design` an object; fix: rebuild the queue")
    allowed = _texts(head, "allowed_values", where)
    if not allowed or ABSTAIN in allowed:
        raise _fail(where, f"`allowed_values` must name the policy's labels (not `{ABSTAIN}`); fix: rebuild the queue")
    return QueueHeader(
        policy_id=_text(head, "policy_id", where),
        policy_path=_text(policy, "path", where),
        policy_sha256=_text(policy, "sha256", where),
        rubric_version=_text(head, "rubric_version", where),
        allowed_values=allowed,
        sources=tuple(sources),
        design=design,
    )


_ITEM_KEY_SET = frozenset(_ITEM_KEYS)
_REQUIRED_TEXT = ("item_id", "user_input", "reference", "response", "response_sha256", "source")
_OPTIONAL_TEXT = ("case_id", "slice", "stratum")


def _item_problem(obj: Any) -> str | None:
    """What is wrong with an item line's shape, or None (kept cheap: a queue may hold 100,000 items,
    so the common case is one test of every key's type at once, and the slow path says which)."""
    if type(obj) is not dict:
        return "an item must be a JSON object"
    if not obj.keys() <= _ITEM_KEY_SET:
        unknown = next(k for k in obj if k not in _ITEM_KEY_SET)
        return (
            f"unknown key `{visible(unknown, 40)}`: a queue holds the question, evidence and answer only, never "
            "the judge's verdict, reason or model, nor a reviewer's label"
        )
    get = obj.get
    evidence, draw = get("evidence", []), get("draw")
    if (
        type(get("item_id")) is str and type(get("user_input")) is str and type(get("reference")) is str
        and type(get("response")) is str and type(get("response_sha256")) is str and type(get("source")) is str
        and type(get("case_id", "")) is str and type(get("slice", "")) is str and type(get("stratum", "")) is str
        and type(evidence) is list and (not evidence or set(map(type, evidence)) == {str})
        and (draw is None or (type(draw) is int and draw >= 0))
        and obj["source"] in SOURCES
    ):  # fmt: skip
        return None
    return _shape_problem(obj)


def _shape_problem(obj: dict[str, Any]) -> str:
    """Which key of an item line that failed the quick test is wrong, and how."""
    for key in _REQUIRED_TEXT:
        if type(obj.get(key)) is not str:
            return f"`{key}` must be text"
    for key in _OPTIONAL_TEXT:
        if key in obj and type(obj[key]) is not str:
            return f"`{key}` must be text"
    evidence = obj.get("evidence", [])
    if type(evidence) is not list or any(type(v) is not str for v in evidence):
        return "`evidence` must be a list of evidence ids"
    draw = obj.get("draw")
    if draw is not None and (type(draw) is not int or draw < 0):
        return "`draw` must be a whole number from 0"
    return f"`source` must be one of {', '.join(SOURCES)}"


_ITEM_DEFAULTS: dict[str, Any] = {"case_id": None, "slice": None, "stratum": None, "draw": None}


def _item_of(obj: dict[str, Any]) -> QueueItem:
    """The item of a checked line, made without the dataclass's field-by-field frozen __init__ (a
    100,000-item queue opens faster): the parsed line's own dict becomes the frozen item's fields."""
    item = object.__new__(QueueItem)
    for key in _ITEM_DEFAULTS:
        if key not in obj:
            obj[key] = None
    obj["evidence"] = tuple(obj["evidence"]) if "evidence" in obj else ()
    object.__setattr__(item, "__dict__", obj)
    return item


def _parse_item(obj: Any, shown: str, lineno: int) -> QueueItem:
    problem = _item_problem(obj)
    if problem is None:
        item = _item_of(obj)
        if item.response_sha256 != sha256_hex(item.response):
            problem = "`response_sha256` is not the sha256 of `response`: the answer was edited"
        elif item.item_id != item_id(
            item.case_id, item.user_input, item.reference, "", response_sha256=item.response_sha256
        ):
            problem = "`item_id` does not match the item's case id and texts: the item was edited"
        else:
            return item
    raise _fail(f"{shown}:{lineno}", f"{problem}; fix: rebuild the queue with `gate review queue`")


def _data(path: Path) -> bytes:
    try:
        with open_binary(path, "review queue", MAX_QUEUE_BYTES) as fh:
            return fh.read()
    except FileProblem as exc:
        raise QueueError(f"{exc.message}; fix: pass the file `gate review queue --out` wrote") from None


_DECODER = json.JSONDecoder()


def _values(text: str) -> list[Any] | None:
    """One JSON value a line, read straight from the text (no copy of it joined into one array):
    None when any line is not exactly one value and its newline (a blank line, spaces, a value over
    two lines): then each line is read on its own, to name the one at fault."""
    decode = _DECODER.raw_decode
    out: list[Any] = []
    at, end = 0, len(text)
    while at < end:
        value, at = decode(text, at)
        if text[at] != "\n":
            return None
        out.append(value)
        at += 1
    return out if len(out) == text.count("\n") else None


def _parsed(data: bytes, shown: str) -> list[tuple[int, Any]]:
    """Each non-blank line's number and JSON value; one pass over the whole file when it is sound."""
    if data.endswith(b"\n"):  # as written
        try:
            values = _values(data.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError among them
            values = None
        if values is not None:
            return list(enumerate(values, start=1))
    out: list[tuple[int, Any]] = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):  # find the line that does not parse
        if not raw.strip():
            continue
        try:
            out.append((lineno, json.loads(raw)))
        except (ValueError, RecursionError):
            raise _fail(
                f"{shown}:{lineno}", "not a JSON value (a line cut off or edited); fix: rebuild the queue"
            ) from None
    return out


def read_queue(path: Path) -> Queue:
    """The queue file, every line checked; a problem is a QueueError naming the file and line."""
    shown = shown_path(path)
    data = _data(path)
    with gc_paused():  # 100,000 items are ~1.5 million long-lived objects: no collection rescans them
        return _read(path, shown, data)


def _read(path: Path, shown: str, data: bytes) -> Queue:
    parsed = _parsed(data, shown)
    if not parsed:
        raise _fail(shown, "the file is empty; fix: build the queue with `gate review queue`")
    header = _parse_header(parsed[0][1], f"{shown}:{parsed[0][0]}")
    items: list[QueueItem] = []
    seen: dict[str, int] = {}
    for lineno, obj in parsed[1:]:
        item = _parse_item(obj, shown, lineno)
        if item.item_id in seen:
            raise _fail(
                f"{shown}:{lineno}",
                f"item {item.item_id[:12]} is listed twice (first on line {seen[item.item_id]}); fix: keep one",
            )
        seen[item.item_id] = lineno
        items.append(item)
    return Queue(header=header, items=tuple(items), sha256=sha256_hex(data), path=Path(path))


def queue_bytes(header: QueueHeader, items: Iterable[QueueItem]) -> bytes:
    """The queue file's bytes: the header line, then one canonical JSON line per item."""
    lines = [canonical_json(header.to_json()), *(canonical_json(item.to_json()) for item in items)]
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_queue(path: Path, header: QueueHeader, items: Iterable[QueueItem]) -> str:
    """Write a new queue file (never over an existing one: labels name its sha256); returns that sha256."""
    data = queue_bytes(header, items)
    target = from_working_directory(path)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    except FileExistsError:
        raise QueueError(
            f"{shown_path(path)}: the queue file already exists, and ledgers name its sha256, so it is never "
            "overwritten; fix: pass a new --out path"
        ) from None
    except OSError as exc:
        raise QueueError(
            f"{shown_path(path)}: the queue cannot be written ({exc.strerror}); fix: pass a writable --out path"
        ) from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return sha256_hex(data)
