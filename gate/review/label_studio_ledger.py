"""What importing a Label Studio export appends to the ledger: new labels, edits and deletions.

A Label Studio annotation is known by the server it lives on and its `unique_id`; JSON_MIN carries
none, so there by its id and `created_at` (an edit keeps both). Every server numbers its tasks,
annotations and users from 1: another server's annotation 16 is another annotation, and its user 1
another person, so the server is part of both names (`--server`, `default` unless given). Each
ledger line keeps the annotation's identity in its `external_id` (server, project, task,
annotation, user, created_at, unique_id), which is how a later import of the same project knows:
- the same annotation with the same label and reason: already there, nothing appended;
- the same annotation with another label or reason (edited in Label Studio): a retraction of its
  line, then the new label;
- an annotation imported before that a task of this export no longer lists (deleted there, or
  turned into a skip): a retraction. Only a task the export lists whole says so: the default
  export leaves out tasks nobody annotated, and an annotation filter lists a part of a task.
The reviewer is the annotator's email when the export carries it (a snapshot with annotators
expanded), else `label-studio:<server>:<user id>`; once a person has a name in the ledger, their
later lines keep it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.model.escape import visible
from gate.model.wording import agree, listed
from gate.review.label_studio import Annotation, Export, LabelStudioError, Task
from gate.review.ledger import LedgerLine, active_lines, is_reviewer, now
from gate.review.queue import Queue, QueueItem

PREFIX = "label-studio:"
DEFAULT_SERVER = "default"
SERVER_RULE = "letters, digits and . _ - only, 1 to 60 characters"
_SERVER = re.compile(r"[A-Za-z0-9._-]{1,60}")
_ID = re.compile(
    r"label-studio:server=(?P<server>[A-Za-z0-9._-]{1,60});project=(?P<project>\d{1,18}|-);task=(?P<task>\d{1,18});"
    r"annotation=(?P<annotation>\d{1,18});user=(?P<user>\d{1,18});created_at=(?P<created>[0-9T:.+Z-]{1,40});"
    r"unique_id=(?P<unique>[A-Za-z0-9-]{1,64})"
)
_LEGACY_ID = re.compile(r"label-studio:task:(?P<task>\d{1,18}):annotation:(?P<annotation>\d{1,18})")
_LEGACY_REVIEWER = re.compile(r"label-studio:(?P<user>\d{1,18})")
_TEXTS = (("question", "user_input"), ("evidence", "reference"), ("answer", "response"))


def check_server(server: str) -> str:
    if not _SERVER.fullmatch(server):
        raise LabelStudioError(
            f"--server {visible(server, 80)}: a server's name must be {SERVER_RULE} (it becomes part of reviewer "
            "names, label-studio:<server>:<user id>); fix: pass a short name such as eu or ls2"
        )
    return server


@dataclass(frozen=True)
class Key:
    """One Label Studio annotation, as a ledger line's `external_id` records it."""

    server: str
    project: int | None
    task: int
    annotation: int
    user: int
    created_at: str | None
    unique_id: str | None

    def external_id(self) -> str:
        project = "-" if self.project is None else str(self.project)
        return (
            f"{PREFIX}server={self.server};project={project};task={self.task};annotation={self.annotation};"
            f"user={self.user};created_at={self.created_at or '-'};unique_id={self.unique_id or '-'}"
        )

    def same_annotation(self, other: Key) -> bool:
        if self.unique_id and other.unique_id:
            return self.unique_id == other.unique_id
        if self.annotation != other.annotation:
            return False
        if self.created_at and other.created_at:
            return self.created_at == other.created_at
        return self.task == other.task  # a line of an older gate recorded neither


def parse_external_id(line: LedgerLine) -> Key | None:
    """The annotation a ledger line came from, or None for a line not imported from Label Studio."""
    text = line.external_id or ""
    if m := _ID.fullmatch(text):
        project, created, unique = m["project"], m["created"], m["unique"]
        return Key(
            m["server"], None if project == "-" else int(project), int(m["task"]), int(m["annotation"]),
            int(m["user"]), None if created == "-" else created, None if unique == "-" else unique,
        )  # fmt: skip
    legacy, user = _LEGACY_ID.fullmatch(text), _LEGACY_REVIEWER.fullmatch(line.reviewer)
    if legacy and user:  # imported before servers had names: the one server there was
        return Key(DEFAULT_SERVER, None, int(legacy["task"]), int(legacy["annotation"]), int(user["user"]), None, None)
    return None


@dataclass(frozen=True)
class Change:
    """An annotation an import retracted a line of: edited, deleted, or now a skip."""

    task: int
    annotation: int
    reviewer: str

    def __str__(self) -> str:
        return f"task {self.task}, annotation {self.annotation}, {self.reviewer}"


@dataclass
class Plan:
    """The lines an import appends, in order, and what it has to say."""

    export: Export
    server: str
    appends: list[dict[str, Any]] = field(default_factory=list)
    annotations: int = 0
    cancelled: int = 0
    new: int = 0
    already: int = 0
    edited: list[Change] = field(default_factory=list)
    deleted: list[Change] = field(default_factory=list)
    skipped: list[Change] = field(default_factory=list)  # a label turned into a skip
    handmade: list[tuple[int, int]] = field(default_factory=list)  # (task, annotations) gate did not write
    left_out: int = 0  # labels imported before, on tasks the export leaves out
    partial: int = 0  # ... on tasks it lists only in part
    other_projects: list[tuple[int, list[int]]] = field(default_factory=list)
    renamed: list[tuple[int, str, str]] = field(default_factory=list)  # (user, email, the name they keep)
    without_annotations: int = 0
    not_in_export: int = 0

    @property
    def tasks(self) -> int:
        return len(self.export.tasks)


def _checked_item(task: Task, queue: Queue) -> QueueItem:
    """The queue item a task of gate's shows, its text unchanged since tasks.json was written."""
    item = queue.by_id.get(task.item_id or "")
    if item is None:
        raise LabelStudioError(
            f"{task.where}: its `data.item_id` names no item of {queue.path.name} (the project was made from another "
            "queue's tasks.json); nothing was imported; fix: import the export of the project made from this "
            "queue's tasks.json"
        )
    changed = [shown for shown, attr in _TEXTS if task.data.get(shown) != getattr(item, attr)]
    if changed:
        raise LabelStudioError(
            f"{task.where} (item {item.item_id[:12]}, case {visible(item.case_id or '-', 80)}): its "
            f"{' and '.join(changed)} {agree(len(changed), 'is', 'are')} not the queue item's: the task was changed "
            "in Label Studio, and a label given on other text is not a label of this item; nothing was imported; "
            "fix: put the text back in Label Studio as tasks.json has it (or delete the task and import tasks.json "
            "again), then export again"
        )
    return item


def _checked_label(a: Annotation, queue: Queue) -> None:
    labels = queue.header.labels
    if a.label is None or a.label not in labels:
        shown = "no label" if a.label is None else f"label `{visible(a.label, 40)}`"
        raise LabelStudioError(
            f"{a.where}: {shown}, not one of {', '.join(labels)}; fix: label it in Label Studio with the config.xml "
            "`gate review export --format label-studio` wrote, and export again"
        )
    if not a.reason:
        raise LabelStudioError(f"{a.where}: no reason in the `reason` text area; fix: give one, and export again")


@dataclass
class _Known:
    """What the ledger already holds from Label Studio."""

    active: list[tuple[Key, LedgerLine]]
    names: dict[tuple[str, int], str]  # (server, user) -> the reviewer name their lines carry
    servers: dict[str, str]  # unique_id -> the server it was imported from
    projects: dict[str, set[int]]  # server -> projects imported from it


def _known(lines: Sequence[LedgerLine]) -> _Known:
    keyed = [(key, line) for line in lines if (key := parse_external_id(line)) is not None]
    known = _Known([], {}, {}, {})
    for key, line in keyed:
        known.names.setdefault((key.server, key.user), line.reviewer)
        if key.unique_id:
            known.servers.setdefault(key.unique_id, key.server)
        if key.project is not None:
            known.projects.setdefault(key.server, set()).add(key.project)
    live = {id(line) for line in active_lines(line for _, line in keyed)}
    known.active = [(key, line) for key, line in keyed if id(line) in live]
    return known


def _guard_servers(export: Export, known: _Known, server: str, where: str) -> None:
    """Refuse an export whose annotations were imported from another server, or that looks like another's."""
    incoming = [(t, a) for t in export.tasks if t.item_id for a in t.annotations]
    for _, a in incoming:
        other = known.servers.get(a.unique_id or "")
        if other is not None and other != server:
            raise LabelStudioError(
                f"{a.where}: this annotation was imported from Label Studio server {other}, not {server}; nothing "
                f"was imported; fix: pass --server {other}"
            )
    mine = [key for key, _ in known.active if key.server == server]
    by_annotation = {key.annotation: key for key in mine}
    clashes = [(t, a) for t, a in incoming if a.annotation_id in by_annotation]
    if clashes and not any(by_annotation[a.annotation_id].same_annotation(_key(server, t, a)) for t, a in clashes):
        ids = listed([str(a.annotation_id) for _, a in clashes])
        raise LabelStudioError(
            f"{where}: annotations {ids} have the ids of annotations imported from "
            f"Label Studio server {server}, but none is one of them (other unique ids, made at other times): the "
            "export comes from another Label Studio server, whose tasks, annotations and users are numbered from 1 "
            "again; nothing was imported; fix: pass --server NAME, a name of your choosing for that server (its "
            "user 1 is then another person than this one's)"
        )


def _when(text: str | None) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None
    return when.replace(tzinfo=dt.UTC) if when is not None and when.tzinfo is None else when


def _older(than: str | None, text: str | None) -> bool:
    """Whether Label Studio's time `text` is before `than` (either unknown: no)."""
    a, b = _when(text), _when(than)
    return a is not None and b is not None and a < b


_STALE_FIX = (
    "the export was made before the last one imported; nothing was imported; fix: export the project again "
    "and import the new export"
)


def _key(server: str, task: Task, a: Annotation) -> Key:
    return Key(server, task.project, task.task_id, a.annotation_id, a.user, a.created_at, a.unique_id)


def plan_import(
    export: Export, queue: Queue, lines: Sequence[LedgerLine], server: str, *, blind: bool, where: str
) -> Plan:
    """Every task checked first (nothing half-imported), then what to append, in order."""
    plan = Plan(export, server)
    ours: list[tuple[Task, QueueItem]] = []
    for task in export.tasks:
        if task.item_id is None:
            plan.handmade.append((task.task_id, len(task.annotations)))
            continue
        ours.append((task, _checked_item(task, queue)))
        for a in task.annotations:
            if not a.cancelled:
                _checked_label(a, queue)
    known = _known(lines)
    _guard_servers(export, known, server, where)
    matched = _match(plan, known, ours, queue, blind)
    _withdraw_the_missing(plan, known, ours, matched, queue)
    _notes(plan, known, ours, queue)
    return plan


def _fields(item: QueueItem, queue: Queue, reviewer: str, label: str, reason: str, at: str | None) -> dict[str, Any]:
    return {
        "item_id": item.item_id,
        "case_id": item.case_id,
        "response_sha256": item.response_sha256,
        "reviewer": reviewer,
        "label": label,
        "reason": reason,
        "evidence": [],
        "at": at or now(),
        "queue_sha256": queue.sha256,
        "rubric_version": queue.header.rubric_version,
    }


def _retraction(line: LedgerLine, queue: Queue, why: str, at: str | None) -> dict[str, Any]:
    return {
        **_fields(queue.by_id[line.item_id], queue, line.reviewer, line.label, why, at),
        "kind": "retraction",
        "retracts": line.line_sha256,
        "blind": line.blind,
        "external_id": line.external_id,
    }


def _reviewer(plan: Plan, known: _Known, a: Annotation) -> str:
    """One person, one name: the name their lines already carry, else the email, else the server's user id."""
    email = a.email if a.email and is_reviewer(a.email) else None
    kept = known.names.get((plan.server, a.user))
    if kept is None:
        kept = known.names[(plan.server, a.user)] = email or f"{PREFIX}{plan.server}:{a.user}"
    elif email and kept != email and all(user != a.user for user, _, _ in plan.renamed):
        plan.renamed.append((a.user, email, kept))
    return kept


def _match(plan: Plan, known: _Known, ours: Sequence[tuple[Task, QueueItem]], queue: Queue, blind: bool) -> set[int]:
    """Append each annotation that is new or edited; returns the ids of the ledger lines it found again."""
    by_unique: dict[str, tuple[Key, LedgerLine]] = {}
    by_annotation: dict[int, list[tuple[Key, LedgerLine]]] = {}
    for key, line in known.active:
        if key.server == plan.server:
            by_annotation.setdefault(key.annotation, []).append((key, line))
            if key.unique_id:
                by_unique[key.unique_id] = (key, line)
    found: set[int] = set()
    for task, item in ours:
        for a in task.annotations:
            plan.annotations += 1
            key = _key(plan.server, task, a)
            reviewer = _reviewer(plan, known, a)
            candidates = [
                *by_annotation.get(a.annotation_id, []),
                *([by_unique[a.unique_id]] if a.unique_id in by_unique else []),
            ]
            before = next((line for k, line in candidates if k.same_annotation(key)), None)
            if before is not None:
                found.add(id(before))
            if a.cancelled:
                plan.cancelled += 1
                if before is not None:  # a label turned into a skip
                    plan.skipped.append(Change(task.task_id, a.annotation_id, before.reviewer))
                    plan.appends.append(_retraction(before, queue, _why("now a skip", key), a.updated_at))
                continue
            assert a.label is not None
            if before is not None and (before.label, before.reason, before.item_id) == (
                a.label,
                a.reason,
                item.item_id,
            ):
                plan.already += 1
                continue
            if before is not None and _older(before.at, a.updated_at):  # never an edit undone by an old file
                raise LabelStudioError(
                    f"{a.where} ({before.reviewer}): this export's version of the annotation (updated "
                    f"{a.updated_at}) is older than the one imported into the ledger ({before.at}): {_STALE_FIX}"
                )
            if before is not None:  # edited there: its line withdrawn, the new label in its place
                plan.edited.append(Change(task.task_id, a.annotation_id, before.reviewer))
                plan.appends.append(_retraction(before, queue, _why("edited", key), a.updated_at))
                reviewer = before.reviewer
            else:
                plan.new += 1
            fields = _fields(item, queue, reviewer, a.label, a.reason, a.updated_at or a.created_at)
            plan.appends.append({**fields, "kind": "label", "blind": blind, "external_id": key.external_id()})
    return found


def _why(what: str, key: Key) -> str:
    return f"{what} in Label Studio (server {key.server}, task {key.task}, annotation {key.annotation})"


def _withdraw_the_missing(
    plan: Plan, known: _Known, ours: Sequence[tuple[Task, QueueItem]], found: set[int], queue: Queue
) -> None:
    """Retract the labels of annotations a task listed whole no longer has; count those it cannot see.

    Task ids are the server's, not the project's: a task of that id in another project means the one
    the label was on is gone (Label Studio on SQLite gives a deleted row's id again), and its
    annotations with it."""
    listed_tasks = {task.task_id: task for task, _ in ours}
    projects = set(plan.export.projects)
    for key, line in known.active:
        if key.server != plan.server or id(line) in found:
            continue
        task = listed_tasks.get(key.task)
        if task is None:
            if key.project is None or not projects or key.project in projects:
                plan.left_out += 1
            continue
        if not task.whole:
            plan.partial += 1
            continue
        if _older(key.created_at, task.updated_at):  # the task as it was before the annotation existed
            raise LabelStudioError(
                f"{task.where}: annotation {key.annotation} ({line.reviewer}) was made after this export (created "
                f"{key.created_at}; the task last changed {task.updated_at} in it), not deleted: {_STALE_FIX}"
            )
        plan.deleted.append(Change(key.task, key.annotation, line.reviewer))
        plan.appends.append(_retraction(line, queue, _why("deleted", key), None))


def _notes(plan: Plan, known: _Known, ours: Sequence[tuple[Task, QueueItem]], queue: Queue) -> None:
    before = known.projects.get(plan.server, set())
    plan.other_projects = [(p, sorted(before)) for p in plan.export.projects if before and p not in before]
    plan.without_annotations = sum(1 for task, _ in ours if not any(not a.cancelled for a in task.annotations))
    seen = {item.item_id for _, item in ours}
    plan.not_in_export = sum(1 for item in queue.items if item.item_id not in seen)


def changes(found: Iterable[Change]) -> str:
    """The annotations an import retracted a line of, for a message: the first five, then how many more."""
    shown = [str(c) for c in found]
    return "; ".join(shown[:5]) + (f"; and {len(shown) - 5} more" if len(shown) > 5 else "")
