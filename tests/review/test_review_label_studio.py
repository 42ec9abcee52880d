"""Label Studio round trip: tasks and config out, its JSON export in, through the real CLI.

The export bodies are shaped as Label Studio's own docs show an annotated task (labelstud.io,
"Label Studio Task Format": `id`, `data`, `annotations` with `result`, `was_cancelled`,
`completed_by` as the annotator's integer id, `created_at`...), with a `choices` result for the
label and a `textarea` result for the reason, as the config we write produces."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_review_status import file_queue

from gate.cli import main
from gate.review.ledger import read_ledger

JUDGE_KEYS = {"predictions", "verdict", "judge", "model", "reason"}


def annotation(annotation_id: int, task_id: int, user: int, label: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": annotation_id,
        "completed_by": user,
        "result": [
            {"id": f"c{annotation_id}", "from_name": "label", "to_name": "answer", "type": "choices",
             "origin": "manual", "value": {"choices": [label]}},
            {"id": f"t{annotation_id}", "from_name": "reason", "to_name": "answer", "type": "textarea",
             "origin": "manual", "value": {"text": [reason]}},
        ],
        "was_cancelled": False,
        "ground_truth": False,
        "created_at": f"2026-12-01T10:{annotation_id:02d}:00.000000Z",
        "updated_at": f"2026-12-01T10:{annotation_id:02d}:00.000000Z",
        "lead_time": 12.5,
        "result_count": 0,
        "task": task_id,
        "project": 7,
        **extra,
    }  # fmt: skip


def export_of(tasks: list[dict[str, Any]], labels: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Label Studio's JSON export: the annotated tasks (and one left unannotated), with their ids."""
    out = []
    for n, task in enumerate(tasks, start=1):
        if n not in labels:
            continue  # the default export leaves out tasks nobody annotated
        out.append({"id": n, "data": task["data"], "annotations": labels[n], "predictions": [], "project": 7,
                    "created_at": "2026-12-01T09:00:00Z", "updated_at": "2026-12-01T10:30:00Z"})  # fmt: skip
    return out


def test_label_studio_round_trip_two_annotators_and_an_unannotated_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = file_queue(tmp_path, n=4)
    assert main(["review", "export", str(queue.path), "--format", "label-studio", "--out", str(tmp_path / "ls")]) == 0
    tasks = json.loads((tmp_path / "ls" / "tasks.json").read_text())
    assert len(tasks) == 4 and all(set(t) == {"data"} and JUDGE_KEYS.isdisjoint(t["data"]) for t in tasks)
    by_item = {t["data"]["item_id"]: t for t in tasks}
    assert by_item[queue.items[0].item_id]["data"]["answer"] == "Answer 0."
    tasks = [
        by_item[item.item_id] for item in queue.items
    ]  # task n is the queue's item n, as Label Studio numbers them
    config = ET.fromstring((tmp_path / "ls" / "config.xml").read_text())
    assert [c.get("value") for c in config.iter("Choice")] == ["pass", "fail", "abstain"]
    assert config.find("TextArea") is not None and config.find("TextArea").get("name") == "reason"  # type: ignore[union-attr]

    labels = {
        1: [annotation(1, 1, 11, "pass", "states the window"), annotation(2, 1, 12, "pass", "correct")],
        2: [annotation(3, 2, 11, "fail", "wrong day count"), annotation(4, 2, 12, "pass", "fine"),
            annotation(5, 2, 13, "fail", "x", was_cancelled=True)],
        3: [],  # in the export, annotated by nobody
    }  # fmt: skip
    body = tmp_path / "export.json"
    body.write_text(json.dumps(export_of(tasks, labels)))
    ledger = tmp_path / "labels"
    ledger.mkdir()
    args = ["review", "import", str(queue.path), "--ledger", str(ledger), "--format", "label-studio", str(body)]
    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "3 tasks, 5 annotations (1 skipped in Label Studio, not a label)" in out and "appended 4 ledger lines" in out
    assert "1 task without annotations; 1 item of the queue not in the export" in out
    lines = read_ledger(ledger, queue)
    assert sorted({line.reviewer for line in lines}) == ["label-studio:default:11", "label-studio:default:12"]
    assert all(line.blind is False for line in lines) and {line.label for line in lines} == {"pass", "fail"}
    assert next(line for line in lines if line.label == "fail").reason == "wrong day count"
    assert main(args) == 0  # the same export again appends nothing
    assert "appended 0 ledger lines" in capsys.readouterr().out and len(read_ledger(ledger, queue)) == 4
    assert main(["review", "status", str(queue.path), "--ledger", str(ledger), "--format", "json"]) == 0
    row = json.loads(capsys.readouterr().out)["slices"][0]
    assert (row["unanimous"], row["awaiting_adjudication"], row["reviewers"]) == (
        1,
        1,
        ["label-studio:default:11", "label-studio:default:12"],
    )


def test_an_unknown_label_in_the_export_is_exit_2_naming_the_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = file_queue(tmp_path, n=2)
    main(["review", "export", str(queue.path), "--format", "label-studio", "--out", str(tmp_path / "ls")])
    tasks = json.loads((tmp_path / "ls" / "tasks.json").read_text())
    body = tmp_path / "export.json"
    body.write_text(json.dumps(export_of(tasks, {2: [annotation(9, 2, 11, "maybe", "unsure")]})))
    ledger = tmp_path / "ledger.jsonl"
    capsys.readouterr()
    assert (
        main(["review", "import", str(queue.path), "--ledger", str(ledger), "--format", "label-studio", str(body)]) == 2
    )
    err = capsys.readouterr().err
    assert "export.json: task 2, annotation 9: label `maybe`, not one of pass, fail, abstain" in err
    assert not ledger.exists()  # nothing half-imported
