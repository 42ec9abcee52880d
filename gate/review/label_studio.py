"""Label Studio, for teams that already label there: its tasks and config out, its export read in.

Out: `tasks.json` (each task's `data`: question, answer, evidence, evidence_ids, item_id, slice; no
`predictions`, nothing of the judge, and in a seeded shuffle, so the order says nothing of which
answers the judge failed) and `config.xml` (a `Choices` of the allowed labels and `abstain`, a
`TextArea` for the reason).

In: the two export forms that carry what a label needs, as a real Label Studio 1.23.2 writes them.
JSON is a list of tasks, each with its `data` and every `annotations` entry (`id`, `unique_id`,
`completed_by` a user id or, in a snapshot with annotators expanded, an object with the `email`,
`was_cancelled` for a skip, `result`, `created_at`, `updated_at`, `project`) and the task's own
counts (`total_annotations`, `cancelled_annotations`), which say whether the list is whole. JSON_MIN
is one flat row per annotation: the task's data at the top level, `id` the task, `annotation_id`,
`annotator`, one key per control (`label`, `reason`), the times; it has no `unique_id`, no
`project`, and leaves skips out. CSV, TSV and the rest carry no annotation id: refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from xml.sax.saxutils import quoteattr

from gate.model.errors import UsageError
from gate.review.draw import draw_order
from gate.review.queue import Queue

LABEL_CONTROL = "label"
REASON_CONTROL = "reason"
SHUFFLE = "label-studio"  # the draw's name for the task order (the seed is the queue's sha256)
EXPORT_AS_JSON = (
    "export the project as JSON or JSON_MIN (Export in the project's Data Manager) and import that file: only "
    "they carry each annotation's id and the task's item_id"
)
Form = Literal["JSON", "JSON_MIN"]
_UNIQUE_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
_TIME = re.compile(r"[0-9T:.+Z-]{1,40}")
_EMAIL = re.compile(r"[A-Za-z0-9._+-]{1,100}@[A-Za-z0-9.-]{1,99}")


class LabelStudioError(UsageError):
    """An export the gate cannot read as labels for this queue (exit 2), naming the task."""


def tasks(queue: Queue) -> list[dict[str, Any]]:
    """One task per item, text only (no predictions, no stratum, no draw), in the queue's seeded shuffle.

    Label Studio hands tasks out in the order they were imported; the queue lists each slice's
    judged-fail answers first, which would tell the reviewer the judge's verdict."""
    by_id = queue.by_id
    order = draw_order(queue.sha256, SHUFFLE, SHUFFLE, [item.item_id for item in queue.items])
    return [
        {
            "data": {
                "item_id": item.item_id,
                "slice": item.slice or "",
                "question": item.user_input,
                "evidence": item.reference,
                "evidence_ids": ", ".join(item.evidence),
                "answer": item.response,
            }
        }
        for item in (by_id[item_id] for item_id in order)
    ]


def config_xml(labels: Sequence[str]) -> str:
    """The labelling config: the question, evidence and answer as text, the labels as one choice, a reason."""
    choices = "\n".join(f"    <Choice value={quoteattr(label)}/>" for label in labels)
    return f"""<View>
  <Header value="Question"/>
  <Text name="question" value="$question"/>
  <Header value="Evidence"/>
  <Text name="evidence" value="$evidence"/>
  <Header value="Answer"/>
  <Text name="answer" value="$answer"/>
  <Choices name="{LABEL_CONTROL}" toName="answer" choice="single" required="true">
{choices}
  </Choices>
  <Header value="Reason"/>
  <TextArea name="{REASON_CONTROL}" toName="answer" required="true" maxSubmissions="1" editable="true"/>
</View>
"""


# ---- reading an export ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Annotation:
    annotation_id: int
    unique_id: str | None  # JSON only
    user: int
    email: str | None  # when the export expands annotators
    cancelled: bool  # a skip (JSON only: JSON_MIN leaves skips out)
    label: str | None
    reason: str
    created_at: str | None
    updated_at: str | None
    where: str


@dataclass(frozen=True)
class Task:
    task_id: int
    project: int | None  # JSON only
    data: Mapping[str, Any]
    annotations: tuple[Annotation, ...]
    whole: bool  # the task lists every annotation it has (JSON: its own counts agree)
    where: str
    updated_at: str | None = None  # JSON only: when the task (an annotation of it among all) last changed

    @property
    def item_id(self) -> str | None:
        value = self.data.get("item_id")
        return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Export:
    form: Form
    tasks: tuple[Task, ...]

    @property
    def projects(self) -> list[int]:
        return sorted({t.project for t in self.tasks if t.project is not None})


def _number(value: object, where: str, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise LabelStudioError(f"{where}: {what} must be Label Studio's id (a whole number); fix: {EXPORT_AS_JSON}")
    return value


def _time(value: object) -> str | None:
    return value if isinstance(value, str) and _TIME.fullmatch(value) else None


def _user(value: object, where: str) -> tuple[int, str | None]:
    """Label Studio's user id and, when the export expands annotators, their email."""
    if isinstance(value, dict):
        email = value.get("email")
        return _number(value.get("id"), where, "`completed_by.id`"), _email(email)
    if isinstance(value, str) and _email(value):
        raise LabelStudioError(
            f"{where}: the annotator is an email without Label Studio's user id; fix: {EXPORT_AS_JSON} (the "
            "snapshot with annotators expanded carries both)"
        )
    return _number(value, where, "the annotator"), None


def _email(value: object) -> str | None:
    return value if isinstance(value, str) and _EMAIL.fullmatch(value) else None


def _texts(value: object) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [t for t in items if isinstance(t, str)]


def _one_label(chosen: object, where: str) -> str | None:
    """A single choice: a list of one (JSON's `choices`), a string (JSON_MIN), or an object with `choices`."""
    if chosen is None:
        return None
    if isinstance(chosen, dict):
        chosen = chosen.get("choices")
    if isinstance(chosen, str):
        return chosen
    if isinstance(chosen, list) and len(chosen) == 1 and isinstance(chosen[0], str):
        return chosen[0]
    raise LabelStudioError(f"{where}: the `{LABEL_CONTROL}` choice must be exactly one label")


def _results(results: object, where: str) -> tuple[str | None, str]:
    """The label of the `label` Choices and the reason of the `reason` TextArea; other controls are left alone."""
    if not isinstance(results, list):
        raise LabelStudioError(f"{where}: `result` must be a list; fix: {EXPORT_AS_JSON}")
    label: str | None = None
    reason: list[str] = []
    for r in results:
        value = r.get("value") if isinstance(r, dict) else None
        if not isinstance(value, dict):
            continue
        if r.get("type") == "choices" and r.get("from_name") == LABEL_CONTROL:
            if label is not None:
                raise LabelStudioError(f"{where}: the `{LABEL_CONTROL}` choice is given twice; keep one")
            label = _one_label(value.get("choices"), where)
        elif r.get("type") == "textarea" and r.get("from_name") == REASON_CONTROL:
            reason += _texts(value.get("text"))
    return label, "\n".join(reason).strip()


def _json_annotation(a: object, where: str) -> Annotation:
    if not isinstance(a, dict):
        raise LabelStudioError(f"{where}: an annotation is not an object; fix: {EXPORT_AS_JSON}")
    annotation_id = _number(a.get("id"), where, "the annotation's `id`")
    here = f"{where}, annotation {annotation_id}"
    user, email = _user(a.get("completed_by"), here)
    unique_id = a.get("unique_id")
    cancelled = bool(a.get("was_cancelled"))
    label, reason = (None, "") if cancelled else _results(a.get("result") or [], here)
    return Annotation(
        annotation_id=annotation_id,
        unique_id=unique_id if isinstance(unique_id, str) and _UNIQUE_ID.fullmatch(unique_id) else None,
        user=user,
        email=email,
        cancelled=cancelled,
        label=label,
        reason=reason,
        created_at=_time(a.get("created_at")),
        updated_at=_time(a.get("updated_at")),
        where=here,
    )


def _json_task(task: dict[str, Any], where: str) -> Task:
    task_id = _number(task.get("id"), where, "the task's `id`")
    here = f"{where}: task {task_id}"
    data, annotations = task.get("data"), task.get("annotations")
    if not isinstance(data, dict) or not isinstance(annotations, list):
        raise LabelStudioError(f"{here}: `data` must be an object and `annotations` a list; fix: {EXPORT_AS_JSON}")
    read = tuple(_json_annotation(a, here) for a in annotations)
    total, cancelled = task.get("total_annotations"), task.get("cancelled_annotations")
    # the task's own counts, when given: an annotation filter lists a part of its annotations
    whole = len(read) == total + cancelled if isinstance(total, int) and isinstance(cancelled, int) else True
    project = task.get("project")
    return Task(
        task_id=task_id,
        project=project if isinstance(project, int) and not isinstance(project, bool) else None,
        data=data,
        annotations=read,
        whole=whole,
        where=here,
        updated_at=_time(task.get("updated_at")),
    )


_MIN_META = ("id", "annotation_id", "annotator", "created_at", "updated_at", "lead_time", LABEL_CONTROL, REASON_CONTROL)


def _min_tasks(rows: list[dict[str, Any]], where: str) -> list[Task]:
    """JSON_MIN's rows grouped into tasks (a row without `annotation_id` is a task nobody annotated)."""
    grouped: dict[int, tuple[dict[str, Any], list[Annotation]]] = {}
    for row in rows:
        task_id = _number(row.get("id"), where, "a row's `id` (its task)")
        here = f"{where}: task {task_id}"
        _, found = grouped.setdefault(task_id, ({k: v for k, v in row.items() if k not in _MIN_META}, []))
        if row.get("annotation_id") is None:
            continue
        annotation_id = _number(row.get("annotation_id"), here, "`annotation_id`")
        there = f"{here}, annotation {annotation_id}"
        user, email = _user(row.get("annotator"), there)
        found.append(
            Annotation(
                annotation_id=annotation_id,
                unique_id=None,
                user=user,
                email=email,
                cancelled=False,
                label=_one_label(row.get(LABEL_CONTROL), there),
                reason="\n".join(_texts(row.get(REASON_CONTROL))).strip(),
                created_at=_time(row.get("created_at")),
                updated_at=_time(row.get("updated_at")),
                where=there,
            )
        )
    return [
        Task(task_id, None, data, tuple(found), True, f"{where}: task {task_id}")
        for task_id, (data, found) in grouped.items()
    ]


def read_export(data: bytes, where: str) -> Export:
    """The tasks and annotations of a Label Studio export in JSON or JSON_MIN; anything else is refused."""
    try:
        parsed = json.loads(data.decode("utf-8").removeprefix("\ufeff"))
    except (ValueError, RecursionError):  # UnicodeDecodeError among them
        head = data[:200].decode("utf-8", "replace").splitlines()[:1]
        shape = "CSV or TSV" if head and ("," in head[0] or "\t" in head[0]) else "not JSON"
        raise LabelStudioError(f"{where}: not a Label Studio JSON export ({shape}); fix: {EXPORT_AS_JSON}") from None
    if not isinstance(parsed, list) or not all(isinstance(row, dict) for row in parsed):
        raise LabelStudioError(f"{where}: not a list of Label Studio tasks; fix: {EXPORT_AS_JSON}")
    if any("annotations" in row for row in parsed):
        return Export("JSON", tuple(_json_task(row, where) for row in parsed))
    if parsed and not all("id" in row and "annotations" not in row for row in parsed):
        raise LabelStudioError(f"{where}: neither JSON nor JSON_MIN rows; fix: {EXPORT_AS_JSON}")
    if parsed and not any("annotation_id" in row for row in parsed):
        raise LabelStudioError(f"{where}: the rows carry no `annotation_id`; fix: {EXPORT_AS_JSON}")
    return Export("JSON_MIN" if parsed else "JSON", tuple(_min_tasks(parsed, where)))
