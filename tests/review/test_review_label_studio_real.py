"""`gate review import` against what a real Label Studio 1.23.2 exported (tests/fixtures/label_studio,
its README says what was done before each export), through the real CLI: two users, an edit, a
deletion, a hand-made task, a second project, an answer changed inside Label Studio, a second
server whose ids start from 1 again, JSON, JSON_MIN and CSV."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gate.cli import main
from gate.review.ledger import active_lines, final_labels, read_ledger
from gate.review.queue import Queue, read_queue

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "label_studio"
QUEUE = FIXTURES / "queue.jsonl"


class Importer:
    """`gate review import` of the fixture queue into one ledger directory, with what it printed."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp_path, self.capsys = tmp_path, capsys
        self.ledger = tmp_path / "labels"
        self.ledger.mkdir()
        self.queue: Queue = read_queue(QUEUE)

    def __call__(self, export: str | Path, *extra: str) -> tuple[int, str]:
        path = export if isinstance(export, Path) else FIXTURES / export
        self.capsys.readouterr()
        code = main(["review", "import", str(QUEUE), "--ledger", str(self.ledger), "--format", "label-studio",
                     str(path), *extra])  # fmt: skip
        got = self.capsys.readouterr()
        return code, got.out + got.err

    def lines(self) -> list[Any]:
        return list(read_ledger(self.ledger, self.queue))

    def active(self) -> dict[tuple[str, str], str]:
        """(case id, reviewer) -> label, for the lines no retraction withdrew."""
        return {(str(x.case_id), x.reviewer): x.label for x in active_lines(self.lines())}

    def derived(self, name: str, change: Any) -> Path:
        """A captured export changed by `change(data)` (what a person does in Label Studio, or a filter)."""
        data = json.loads((FIXTURES / name).read_text())
        change(data)
        out = self.tmp_path / f"derived-{name}"
        out.write_text(json.dumps(data))
        return out


@pytest.fixture
def imp(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Importer:
    return Importer(tmp_path, capsys)


def case_of(task: int) -> str:
    """The case id of the fixture queue's item behind Label Studio task 1-14 (tasks were made in queue order)."""
    return str(read_queue(QUEUE).items[task - 1].case_id)


def test_a_real_json_export_imports_every_label_once_under_its_server_and_unique_id(imp: Importer) -> None:
    code, out = imp("e1.json.json")
    assert code == 0, out
    assert "e1.json.json: JSON export of Label Studio project 1 (server default): 14 tasks, 27 annotations" in out
    assert "1 skipped in Label Studio, not a label" in out and "appended 26 ledger lines" in out
    lines = imp.lines()
    assert Counter(x.reviewer for x in lines) == {"label-studio:default:1": 14, "label-studio:default:2": 12}
    assert all(x.blind is False for x in lines)
    assert imp.active()[(case_of(14), "label-studio:default:1")] == "abstain"
    ids = [x.external_id or "" for x in lines]
    assert len(set(ids)) == 26 and all("server=default" in i and "project=1" in i for i in ids)
    assert any("unique_id=84a6f618-ffe1-4055-b1d0-a6e681cbf3ad" in i for i in ids)
    code, out = imp("e1.json.json")  # the same export again
    assert code == 0 and "appended 0 ledger lines" in out and "26 were already there" in out
    code, out = imp("e1.json-min.json")  # the same annotations, the other form
    assert code == 0 and "appended 0 ledger lines" in out and len(imp.lines()) == 26, out


def test_one_of_everything_is_counted_in_words(imp: Importer) -> None:
    one = imp.derived("e8-second-project-same-queue.json.json", lambda d: None)
    code, out = imp(one)
    assert code == 0, out
    assert "1 task, 1 annotation" in out and "appended 1 ledger line to" in out
    code, out = imp(one)
    assert "1 was already there" in out and "1 tasks" not in out and "1 were" not in out


def test_an_annotation_edited_in_label_studio_supersedes_its_earlier_line(imp: Importer) -> None:
    assert imp("e1.json.json")[0] == 0
    code, out = imp("e2.json.json")  # user 1 changed annotation 16 (task 9) from pass to fail; user 2 labelled task 3
    assert code == 0, out
    assert "appended 3 ledger lines" in out
    assert "1 annotation edited in Label Studio since it was imported: its earlier label retracted" in out
    assert "task 9, annotation 16" in out
    lines = imp.lines()
    retraction = next(x for x in lines if x.kind == "retraction")
    assert (retraction.reviewer, retraction.label, retraction.case_id) == ("label-studio:default:1", "pass", case_of(9))
    assert imp.active()[(case_of(9), "label-studio:default:1")] == "fail"
    finals = final_labels(lines, imp.queue, 2)
    assert finals[imp.queue.items[8].item_id].status == "disagreement"  # A now fail, B pass
    code, out = imp("e2.json.json")
    assert code == 0 and "appended 0 ledger lines" in out and "edited in Label Studio" not in out
    code, out = imp("e2.json-min.json")  # JSON_MIN of the same state: nothing new either
    assert code == 0 and "appended 0 ledger lines" in out, out


def test_an_edit_seen_first_in_json_min_supersedes_too(imp: Importer) -> None:
    assert imp("e1.json-min.json")[0] == 0
    code, out = imp("e2.json-min.json")
    assert code == 0 and "appended 3 ledger lines" in out and "task 9, annotation 16" in out, out
    assert imp.active()[(case_of(9), "label-studio:default:1")] == "fail"


@pytest.mark.parametrize("older", ["e1.json.json", "e1.json-min.json"])
def test_an_export_older_than_what_was_imported_changes_nothing(imp: Importer, older: str) -> None:
    """e2 imported, then e1, which was exported before it (a file lying around, a colleague's download):
    annotation 16's edit was reverted (its fail retracted, the old pass appended back) and annotation 28,
    made after e1, was retracted as deleted. An annotation older in the export than in the ledger says
    the export is older: nothing is imported, and the message names the annotation and both times."""
    assert imp("e2.json.json")[0] == 0
    before = imp.lines()
    code, out = imp(older)
    said = " ".join(out.split())
    assert code == 2, out
    assert "task 9, annotation 16" in said and "older than the one imported" in said, said
    assert "2026-12-07T14:02:21.349371Z" in said and "2026-12-07T14:02:33.945739Z" in said, said
    assert "export the project again" in said
    assert imp.lines() == before and imp.active()[(case_of(9), "label-studio:default:1")] == "fail"


def test_a_json_export_made_before_an_annotation_was_never_reads_it_as_deleted(imp: Importer) -> None:
    """e2 imported (user 2's annotation 28 on task 3 among its labels); then an export of the project from
    before annotation 28 existed, whose other annotations are the same (e1 with annotation 16 as e2 has
    it): task 3's own updated_at is earlier than annotation 28's creation, so the export predates it,
    and its label is not retracted as deleted (it was)."""

    def as_e2(data: list[dict[str, Any]]) -> None:
        e2 = {t["id"]: t for t in json.loads((FIXTURES / "e2.json.json").read_text())}
        for task in data:
            if task["id"] == 9:
                task["annotations"] = e2[9]["annotations"]
                task["updated_at"] = e2[9]["updated_at"]

    assert imp("e2.json.json")[0] == 0
    before = imp.lines()
    code, out = imp(imp.derived("e1.json.json", as_e2))
    said = " ".join(out.split())
    assert code == 2, out
    assert "task 3" in said and "annotation 28" in said and "made after this export" in said, said
    assert imp.lines() == before and imp.active()[(case_of(3), "label-studio:default:2")]


def restore_task_1(data: list[dict[str, Any]]) -> None:
    """Task 1's answer put back as the queue has it (what the person does in Label Studio after exit 2)."""
    answer = read_queue(QUEUE).items[0].response
    for row in data:
        if row.get("id") == 1:
            row.get("data", row)["answer"] = answer


def test_an_answer_changed_inside_label_studio_is_exit_2_naming_the_task(imp: Importer) -> None:
    code, out = imp("e6-answer-patched-in-ls.json.json")
    assert code == 2
    assert "e6-answer-patched-in-ls.json.json: task 1" in out and "lockout-app-114" in out
    assert "its answer is not the queue item's" in out and "nothing was imported" in out
    assert not list(imp.ledger.iterdir())
    for field in ("question", "evidence"):

        def change(data: list[dict[str, Any]], field: str = field) -> None:
            data[3]["data"][field] += " (edited)"

        code, out = imp(imp.derived("e2.json.json", change))
        assert code == 2 and "task 4 (item" in out and f"its {field} is not the queue item's" in out, out


def test_a_label_deleted_in_label_studio_is_retracted_and_said(imp: Importer) -> None:
    assert imp("e2.json.json")[0] == 0
    code, out = imp("e7-annotation-deleted.json.json")
    assert code == 2 and "task 1" in out  # as captured, task 1's answer is still the changed one
    code, out = imp(imp.derived("e7-annotation-deleted.json.json", restore_task_1))
    assert code == 0, out
    assert "1 annotation deleted in Label Studio since it was imported: its label retracted" in out
    assert "task 13, annotation 24, label-studio:default:1" in out and "appended 1 ledger line" in out
    assert (case_of(13), "label-studio:default:1") not in imp.active()
    assert (case_of(13), "label-studio:default:2") in imp.active()
    code, out = imp(imp.derived("e7-annotation-deleted.json.json", restore_task_1))
    assert code == 0 and "appended 0 ledger lines" in out and "deleted in Label Studio" not in out


def test_json_min_sees_a_deletion_on_a_task_it_lists(imp: Importer) -> None:
    assert imp("e2.json-min.json")[0] == 0
    code, out = imp(imp.derived("e7-annotation-deleted.json-min.json", restore_task_1))
    assert code == 0 and "task 13, annotation 24" in out and "appended 1 ledger line" in out, out
    assert (case_of(13), "label-studio:default:1") not in imp.active()


def test_an_export_that_leaves_a_task_out_retracts_nothing_of_it(imp: Importer) -> None:
    assert imp("e2.json.json")[0] == 0

    def without_task_13(data: list[dict[str, Any]]) -> None:  # the default export after both were deleted
        data[:] = [t for t in data if t["id"] != 13]

    code, out = imp(imp.derived("e2.json.json", without_task_13))
    assert code == 0 and "appended 0 ledger lines" in out and "label retracted" not in out, out
    assert "2 labels imported before are on tasks this export leaves out: kept" in out

    def filtered(data: list[dict[str, Any]]) -> None:  # an annotation filter: the task lists 1 of its 2
        task = next(t for t in data if t["id"] == 13)
        task["annotations"] = task["annotations"][1:]

    code, out = imp(imp.derived("e2.json.json", filtered))
    assert code == 0 and "label retracted" not in out and "appended 0 ledger lines" in out, out
    assert (case_of(13), "label-studio:default:1") in imp.active()
    code, out = imp("e8-second-project-same-queue.json.json")  # another project's export: nothing of project 1
    assert code == 0 and "label retracted" not in out and "appended 1 ledger line" in out


def test_a_task_made_by_hand_in_label_studio_is_skipped_with_a_note_while_the_rest_import(imp: Importer) -> None:
    code, out = imp("e3-handmade.json.json")
    assert code == 0, out
    assert "appended 27 ledger lines" in out
    assert (
        "1 task made in Label Studio, not by gate (no item_id in its data): skipped with its 1 annotation (task 15)"
        in out
    )
    assert len(imp.lines()) == 27


def test_the_project_is_recorded_and_a_second_project_of_the_queue_is_named(imp: Importer) -> None:
    assert imp("e2.json.json")[0] == 0
    code, out = imp("e8-second-project-same-queue.json.json")
    assert code == 0, out
    assert "project 3 is another Label Studio project of this queue than the one imported before (project 1)" in out
    line = next(x for x in imp.lines() if "project=3" in (x.external_id or ""))
    assert (line.case_id, line.reviewer) == (case_of(1), "label-studio:default:2")
    code, out = imp("e4-other-project.json.json")  # made from another queue's tasks.json
    assert code == 2 and "task 15" in out and "names no item of queue.jsonl" in out, out


def test_json_min_imports_and_says_what_it_cannot_show(imp: Importer) -> None:
    code, out = imp("e1.json-min.json")
    assert code == 0, out
    assert "JSON_MIN export (server default): 14 tasks, 26 annotations" in out
    assert "JSON_MIN names no project and leaves out skips" in out
    assert Counter(x.reviewer for x in imp.lines()) == {"label-studio:default:1": 14, "label-studio:default:2": 12}
    code, out = imp("e1.json.json")
    assert code == 0 and "appended 0 ledger lines" in out, out


def test_csv_and_other_formats_are_told_to_export_as_json(imp: Importer) -> None:
    code, out = imp("e1.csv.csv")
    assert code == 2
    assert "export the project as JSON or JSON_MIN" in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1
    tsv = imp.tmp_path / "export.tsv"
    tsv.write_text("annotation_id\tannotator\n1\t1\n")
    code, out = imp(tsv)
    assert code == 2 and "export the project as JSON or JSON_MIN" in out
    obj = imp.tmp_path / "object.json"
    obj.write_text('{"tasks": []}')
    code, out = imp(obj)
    assert code == 2 and "export the project as JSON or JSON_MIN" in out


def test_a_second_server_is_other_people_and_its_ids_never_pass_for_the_first(imp: Importer) -> None:
    assert imp("e2.json.json")[0] == 0
    code, out = imp("i2-e1.json.json")  # ids 1-27 again, other unique_ids: not taken for server default's
    assert code == 2, out
    assert "another Label Studio server" in out and "--server" in out
    assert len(imp.lines()) == 27
    code, out = imp("i2-e1.json.json", "--server", "eu")
    assert code == 0 and "appended 26 ledger lines" in out, out
    who = Counter(x.reviewer for x in imp.lines())
    assert who["label-studio:eu:1"] == 14 and who["label-studio:default:1"] == 14
    code, out = imp("e2.json.json", "--server", "eu")  # server default's export named as eu
    assert code == 2 and "--server default" in out, out
    code, out = imp("e2.json.json", "--server", "has:colon")
    assert code == 2 and "--server" in out and "letters" in out


def test_the_annotators_email_names_the_reviewer_when_the_export_carries_it(imp: Importer) -> None:
    code, out = imp("e1.snapshot-json-annotators-expanded.json")
    assert code == 0, out
    assert Counter(x.reviewer for x in imp.lines()) == {"reviewer-a@example.com": 14, "reviewer-b@example.com": 12}
    code, out = imp("i2-e1.snapshot-json-annotators-expanded.json", "--server", "eu")
    assert code == 0, out
    assert {x.reviewer for x in imp.lines()} == {f"reviewer-{p}@example.com" for p in "abcd"}
    code, out = imp("e2.json.json")  # no emails in this form: the names already given are kept
    assert code == 0 and "appended 3 ledger lines" in out, out
    assert {x.reviewer for x in imp.lines()} == {f"reviewer-{p}@example.com" for p in "abcd"}


def test_an_email_after_ids_keeps_one_name_per_person_and_says_so(imp: Importer) -> None:
    assert imp("e1.json.json")[0] == 0
    code, out = imp("e1.snapshot-json-annotators-expanded.json")
    assert code == 0 and "appended 0 ledger lines" in out, out
    assert "user 1 of server default is reviewer-a@example.com in this export" in out
    assert "label-studio:default:1, which they keep" in out


def test_blind_only_when_the_project_hid_other_annotators_work(imp: Importer) -> None:
    assert imp("e1.json.json", "--blind")[0] == 0
    assert all(x.blind for x in imp.lines())


def test_a_second_choices_control_does_not_break_import(imp: Importer) -> None:
    def with_confidence(data: list[dict[str, Any]]) -> None:
        for task in data:
            for a in task["annotations"]:
                if not a["was_cancelled"]:
                    a["result"].insert(0, {"value": {"choices": ["high"]}, "id": "conf", "from_name": "confidence",
                                           "to_name": "answer", "type": "choices", "origin": "manual"})  # fmt: skip

    code, out = imp(imp.derived("e1.json.json", with_confidence))
    assert code == 0 and "appended 26 ledger lines" in out, out
    assert imp.active()[(case_of(4), "label-studio:default:1")] == "fail"
    assert {x.label for x in imp.lines()} == {"pass", "fail", "abstain"}


def test_two_annotations_of_one_task_are_two_labels(imp: Importer) -> None:
    assert imp("e1.json.json")[0] == 0
    by_case = Counter(x.case_id for x in imp.lines())
    assert by_case[case_of(1)] == 2 and by_case[case_of(2)] == 1 and by_case[case_of(3)] == 1


def test_export_writes_the_tasks_in_a_seeded_shuffle_with_no_stratum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = read_queue(QUEUE)
    written = []
    for n in (1, 2):
        out = tmp_path / f"ls{n}"
        assert main(["review", "export", str(QUEUE), "--format", "label-studio", "--out", str(out)]) == 0
        written.append((out / "tasks.json").read_bytes())
    assert written[0] == written[1]  # seeded: the same queue, the same order
    tasks = json.loads(written[0])
    order = [t["data"]["item_id"] for t in tasks]
    assert sorted(order) == sorted(i.item_id for i in queue.items) and order != [i.item_id for i in queue.items]
    stratum = {i.item_id: i.stratum for i in queue.items}
    assert [stratum[x] for x in order[:5]] != ["judged_fail"] * 5
    shipped = Path(__file__).resolve().parents[2] / "policies" / "example-product" / "audit" / "queue.jsonl"
    assert main(["review", "export", str(shipped), "--format", "label-studio", "--out", str(tmp_path / "big")]) == 0
    big = read_queue(shipped)
    fails = {i.item_id for i in big.items if i.stratum == "judged_fail"}  # 8 of 64, first in their slices' blocks
    first = [t["data"]["item_id"] for t in json.loads((tmp_path / "big" / "tasks.json").read_text())][: len(fails)]
    assert len(fails) == 8 and len(fails & set(first)) < 3  # spread through the tasks, not one block
    text = written[0].decode()
    assert all(word not in text for word in ("judged_fail", "judged_pass", "stratum", '"draw"'))
    assert all(set(t) == {"data"} for t in tasks)
    assert "shuffled" in capsys.readouterr().out


def test_an_export_of_nothing_labelled_imports_nothing_and_says_what_it_lacks(imp: Importer) -> None:
    code, out = imp("e0-unlabelled.json.json")  # the default export of a project nobody labelled: []
    assert code == 0 and "0 tasks, 0 annotations" in out and "14 items of the queue not in the export" in out, out
    code, out = imp("e0-unlabelled.json-all-tasks.json")
    assert code == 0 and "14 tasks without annotations" in out and "appended 0 ledger lines" in out, out
