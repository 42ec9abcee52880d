"""Label Studio, for teams that already label there: its tasks and config out, its JSON export in.

Out: `tasks.json` (each task's `data`: question, answer, evidence, evidence_ids, item_id, slice; no
`predictions`, so nothing of the judge) and `config.xml` (a `Choices` of the allowed labels and
`abstain`, a `TextArea` for the reason). In: Label Studio's JSON export, a list of tasks each with
its `annotations`; every annotation not `was_cancelled` becomes one ledger line by reviewer
`label-studio:<completed_by>` (an integer user id), its label from the `Choices` result and its
reason from the `TextArea`. Its `external_id` (task and annotation ids) makes a second import of
the same export append nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import quoteattr

from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.review.queue import Queue

LABEL_CONTROL = "label"
REASON_CONTROL = "reason"


def tasks(queue: Queue) -> list[dict[str, Any]]:
    """One task per item, text only: nothing of the judge, no predictions."""
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
        for item in queue.items
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


@dataclass(frozen=True)
class Imported:
    lines: tuple[dict[str, Any], ...]  # ledger fields, one per annotation not cancelled
    tasks: int
    cancelled: int
    without_annotations: int  # tasks in the export with no annotation that counts
    not_in_export: int  # queue items the export leaves out (Label Studio's default export omits unannotated tasks)


class LabelStudioError(UsageError):
    """An export the gate cannot read as labels for this queue (exit 2), naming the task."""


def _reviewer(completed_by: object, where: str) -> str:
    if isinstance(completed_by, dict):
        completed_by = completed_by.get("id")
    if not isinstance(completed_by, int) or isinstance(completed_by, bool):
        raise LabelStudioError(f"{where}: `completed_by` must be Label Studio's user id (a number); fix: export again")
    return f"label-studio:{completed_by}"


def _results(annotation: Mapping[str, Any], where: str) -> tuple[str | None, str]:
    label: str | None = None
    reason: list[str] = []
    results = annotation.get("result") or []
    if not isinstance(results, list):
        raise LabelStudioError(f"{where}: `result` must be a list; fix: pass Label Studio's JSON export")
    for r in results:
        value = r.get("value") if isinstance(r, dict) else None
        if not isinstance(value, dict):
            continue
        if r.get("type") == "choices" and r.get("from_name") == LABEL_CONTROL:
            chosen = value.get("choices")
            if not isinstance(chosen, list) or len(chosen) != 1 or not isinstance(chosen[0], str):
                raise LabelStudioError(f"{where}: the `{LABEL_CONTROL}` choice must be exactly one label")
            label = chosen[0]
        elif r.get("type") == "textarea" and r.get("from_name") == REASON_CONTROL:
            text = value.get("text")
            reason += [t for t in (text if isinstance(text, list) else [text]) if isinstance(t, str)]
    return label, "\n".join(reason).strip()


def _task_lines(
    task: Mapping[str, Any], n: int, queue: Queue, blind: bool, where_file: str
) -> tuple[list[dict[str, Any]], int]:
    task_id = task.get("id", n)
    where = f"{where_file}: task {visible(task_id, 40)}"
    data = task.get("data")
    item_id = data.get("item_id") if isinstance(data, dict) else None
    item = queue.by_id.get(item_id) if isinstance(item_id, str) else None
    if item is None:
        raise LabelStudioError(
            f"{where}: its `data.item_id` names no item of {queue.path.name}; fix: import the export of the project "
            "made from this queue's tasks.json"
        )
    annotations = task.get("annotations") or []
    if not isinstance(annotations, list):
        raise LabelStudioError(f"{where}: `annotations` must be a list; fix: pass Label Studio's JSON export")
    out: list[dict[str, Any]] = []
    cancelled = 0
    for annotation in annotations:
        if not isinstance(annotation, dict):
            raise LabelStudioError(f"{where}: an annotation is not an object; fix: pass Label Studio's JSON export")
        if annotation.get("was_cancelled"):
            cancelled += 1
            continue
        here = f"{where}, annotation {visible(annotation.get('id'), 40)}"
        label, reason = _results(annotation, here)
        if label is None or label not in queue.header.labels:
            shown = "no label" if label is None else f"label `{visible(label, 40)}`"
            raise LabelStudioError(
                f"{here}: {shown}, not one of {', '.join(queue.header.labels)}; fix: label it in Label Studio with "
                "the config.xml `gate review export --format label-studio` wrote, and export again"
            )
        if not reason:
            raise LabelStudioError(
                f"{here}: no reason in the `{REASON_CONTROL}` text area; fix: give one, and export again"
            )
        at = annotation.get("created_at") or annotation.get("updated_at")
        out.append(
            {
                "kind": "label",
                "item_id": item.item_id,
                "case_id": item.case_id,
                "response_sha256": item.response_sha256,
                "reviewer": _reviewer(annotation.get("completed_by"), here),
                "label": label,
                "reason": reason,
                "evidence": [],
                "at": at if isinstance(at, str) else None,
                "queue_sha256": queue.sha256,
                "rubric_version": queue.header.rubric_version,
                "blind": blind,
                "external_id": f"label-studio:task:{task_id}:annotation:{annotation.get('id')}",
            }
        )
    return out, cancelled


def read_export(export: Any, queue: Queue, *, blind: bool, where: str) -> Imported:
    """The ledger lines of a Label Studio JSON export, every task checked first (nothing half-imported)."""
    if not isinstance(export, list):
        raise LabelStudioError(f"{where}: not a list of tasks; fix: export the project as JSON (not JSON-MIN or CSV)")
    lines: list[dict[str, Any]] = []
    cancelled = empty = 0
    seen: set[str] = set()
    for n, task in enumerate(export, start=1):
        if not isinstance(task, dict):
            raise LabelStudioError(f"{where}: task {n} is not an object; fix: pass Label Studio's JSON export")
        got, dropped = _task_lines(task, n, queue, blind, where)
        cancelled += dropped
        empty += not got
        lines += got
        seen.add(task["data"]["item_id"])
    missing = sum(1 for item in queue.items if item.item_id not in seen)
    return Imported(tuple(lines), len(export), cancelled, empty, missing)
