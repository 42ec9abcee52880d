"""The review queue and ledger: what a reviewer's acts become, and every bad file refused by line."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from gate.review.draw import draw_order
from gate.review.ledger import EMPTY_SHA256, LedgerError, append_line, final_labels, read_ledger
from gate.review.queue import Queue, QueueError, QueueHeader, item_id, make_item, read_queue, write_queue

HEADER = QueueHeader(
    policy_id="support-bot",
    policy_path="policy.yaml",
    policy_sha256="0" * 64,
    rubric_version="1",
    allowed_values=("pass", "fail"),
    sources=({"kind": "file", "path": "answers.jsonl", "sha256": "1" * 64},),
)


def make_queue(tmp_path: Path, n: int = 3, name: str = "queue.jsonl") -> Queue:
    items = [
        make_item(case_id=f"c{i}", slice="billing", user_input=f"q{i}", reference="ref", evidence=["doc:1"],
                  response=f"answer {i}", source="file")
        for i in range(n)
    ]  # fmt: skip
    write_queue(tmp_path / name, HEADER, items)
    return read_queue(tmp_path / name)


def act(queue: Queue, i: int, reviewer: str, label: str, **more: Any) -> dict[str, Any]:
    item = queue.items[i]
    fields: dict[str, Any] = {
        "kind": "label", "item_id": item.item_id, "case_id": item.case_id, "response_sha256": item.response_sha256,
        "reviewer": reviewer, "label": label, "reason": f"{reviewer} read it", "queue_sha256": queue.sha256,
        "rubric_version": "1", "blind": True,
    }  # fmt: skip
    fields.update(more)
    return fields


def test_two_cases_with_the_same_text_are_two_items_and_an_edit_is_a_new_one() -> None:
    assert item_id("a", "q", "r", "x") != item_id("b", "q", "r", "x")
    assert item_id("a", "q", "r", "x") != item_id("a", "q", "r", "x ")
    assert item_id("a", "q", "r", "x") == item_id("a", "q", "r", "x")
    # ids are in every ledger line: a faster reader must make the same ones
    assert item_id("a", "q", "r", "x") == "0d071c01ca4be80af4efbf3717d2b2bd6b4e6e4f7cec07b7725525e01a59fbb5"
    assert (
        item_id(None, "q é", "r", "x", response_sha256="f" * 64)
        == "0dd46ad3fe1a412197e33d6f7a3fb9e41fe0f6c05774e29203c465b6b5f5c5c4"
    )


def test_the_draw_depends_on_the_seed_alone_so_a_larger_sample_extends_a_smaller_one() -> None:
    ids = [f"c{i}" for i in range(50)]
    order = draw_order("seed", "billing", "judged_pass", ids)
    assert order == draw_order("seed", "billing", "judged_pass", list(reversed(ids)))
    assert draw_order("seed", "billing", "judged_pass", ids[:30]) == [c for c in order if c in set(ids[:30])]
    assert order != sorted(ids) and order != draw_order("other", "billing", "judged_pass", ids)


def test_a_queue_round_trips_and_is_never_overwritten(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    assert [i.case_id for i in queue.items] == ["c0", "c1", "c2"] and queue.header == HEADER
    with pytest.raises(QueueError, match="already exists"):
        write_queue(tmp_path / "queue.jsonl", HEADER, queue.items)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda obj: {**obj, "verdict": "fail"}, "unknown key `verdict`"),
        (lambda obj: {**obj, "response": obj["response"] + "!"}, "`response_sha256` is not the sha256"),
        (lambda obj: {**obj, "draw": -1}, "`draw` must be"),
        (lambda obj: {**obj, "evidence": ["doc", 7]}, "`evidence` must be a list"),
        (lambda obj: {**obj, "case_id": None}, "`case_id` must be text"),
        (lambda obj: {**obj, "source": "judge"}, "`source` must be one of"),
        (lambda obj: {**obj, "user_input": obj["user_input"] + " (asked again)"}, "`item_id` does not match"),
        (lambda obj: {**obj, "reference": "Refunds within 3 days."}, "`item_id` does not match"),
    ],
)
def test_a_queue_holding_the_judge_or_an_edited_answer_is_refused_by_line(
    tmp_path: Path, edit: Any, message: str
) -> None:
    make_queue(tmp_path)
    lines = (tmp_path / "queue.jsonl").read_text().splitlines()
    lines[2] = json.dumps(edit(json.loads(lines[2])))
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(QueueError, match=r"bad\.jsonl:3 \(review queue\): " + message.replace("(", r"\(")):
        read_queue(tmp_path / "bad.jsonl")


def test_a_queue_line_spread_over_two_lines_is_refused_by_its_line_and_a_blank_line_is_skipped(
    tmp_path: Path,
) -> None:
    make_queue(tmp_path)
    lines = (tmp_path / "queue.jsonl").read_text().splitlines()
    (tmp_path / "blank.jsonl").write_text("\n".join([*lines[:2], "", *lines[2:]]) + "\n")
    assert [i.case_id for i in read_queue(tmp_path / "blank.jsonl").items] == ["c0", "c1", "c2"]
    lines[2] = json.dumps(json.loads(lines[2]), indent=1)  # the same object, pretty-printed
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(QueueError, match=r"bad\.jsonl:3 \(review queue\): not a JSON value"):
        read_queue(tmp_path / "bad.jsonl")


def test_labels_agree_disagree_abstain_and_an_adjudication_settles(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=4)
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    for i, (a, b) in enumerate([("pass", "pass"), ("pass", "fail"), ("abstain", "abstain")]):
        append_line(ledger, act(queue, i, "ana", a))
        append_line(ledger, act(queue, i, "ben", b))
    assert sorted(p.name for p in ledger.iterdir()) == ["ana.jsonl", "ben.jsonl"]
    final = final_labels(read_ledger(ledger, queue), queue, k=2)
    shown = [(f.status, f.label) for f in final.values()]
    assert shown == [("unanimous", "pass"), ("disagreement", None), ("abstain", "abstain"), ("pending", None)]
    append_line(ledger, {**act(queue, 1, "cy", "fail"), "kind": "adjudication"})
    settled = final_labels(read_ledger(ledger, queue), queue, k=2)[queue.items[1].item_id]
    assert (settled.status, settled.label, settled.adjudicator, settled.reviewers) == (
        "adjudicated",
        "fail",
        "cy",
        ("ana", "ben"),
    )
    assert len(settled.lines) == 3


def test_a_retraction_withdraws_its_line_and_a_new_label_follows(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=1)
    ledger = tmp_path / "ledger.jsonl"
    first = append_line(ledger, act(queue, 0, "ana", "fail"))
    append_line(ledger, act(queue, 0, "ben", "pass"))
    assert final_labels(read_ledger(ledger, queue), queue, k=2)[first.item_id].status == "disagreement"
    append_line(ledger, {**act(queue, 0, "ana", "fail"), "kind": "retraction", "retracts": first.line_sha256})
    assert final_labels(read_ledger(ledger, queue), queue, k=2)[first.item_id].status == "pending"
    append_line(ledger, act(queue, 0, "ana", "pass"))
    assert final_labels(read_ledger(ledger, queue), queue, k=2)[first.item_id].label == "pass"
    assert len(ledger.read_text().splitlines()) == 4  # nothing rewritten


def test_an_adjudicator_may_not_settle_an_item_they_labelled_unless_recorded(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=1)
    ledger = tmp_path / "ledger.jsonl"
    append_line(ledger, act(queue, 0, "ana", "fail"))
    append_line(ledger, act(queue, 0, "ben", "pass"))
    append_line(ledger, {**act(queue, 0, "ana", "fail"), "kind": "adjudication"})
    with pytest.raises(LedgerError, match=r"ledger\.jsonl:3 \(review ledger\): ana adjudicates an item they labelled"):
        final_labels(read_ledger(ledger, queue), queue, k=2)
    append_line(ledger, {**act(queue, 0, "ana", "fail"), "kind": "adjudication", "self_adjudication": True})
    assert final_labels(read_ledger(ledger, queue), queue, k=2)[queue.items[0].item_id].status == "adjudicated"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not a JSON object"),
        ('{"kind": "label"}', "`item_id` is missing"),
    ],
)
def test_a_ledger_line_that_does_not_parse_is_refused_naming_file_and_line(
    tmp_path: Path, line: str, message: str
) -> None:
    queue = make_queue(tmp_path, n=1)
    ledger = tmp_path / "ledger.jsonl"
    append_line(ledger, act(queue, 0, "ana", "fail"))
    with ledger.open("a") as fh:
        fh.write(line + "\n")
    with pytest.raises(LedgerError, match=r"ledger\.jsonl:2 \(review ledger\): " + message):
        read_ledger(ledger, queue)


def test_a_label_outside_the_policy_a_missing_reason_and_another_queue_are_refused(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=1)
    other = make_queue(tmp_path, n=2, name="other.jsonl")
    ledger = tmp_path / "ledger.jsonl"
    append_line(ledger, act(queue, 0, "ana", "maybe"))
    with pytest.raises(
        LedgerError, match=r"ledger\.jsonl:1 \(review ledger\): label `maybe` is not one of pass, fail, abstain"
    ):
        read_ledger(ledger, queue)
    with pytest.raises(LedgerError, match="`reason` is empty"):
        append_line(tmp_path / "l2.jsonl", act(queue, 0, "ana", "pass", reason=" "))
    append_line(tmp_path / "l3.jsonl", act(other, 1, "ana", "pass"))
    with pytest.raises(LedgerError, match=r"l3\.jsonl:1 \(review ledger\): item \w+ is in no queue given"):
        read_ledger(tmp_path / "l3.jsonl", queue)


def test_an_unfinished_last_line_is_named_and_the_next_label_starts_a_line_of_its_own(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=1)
    ledger = tmp_path / "ledger.jsonl"
    append_line(ledger, act(queue, 0, "ana", "fail"))
    with ledger.open("a") as fh:
        fh.write('{"kind": "lab')
    with pytest.raises(LedgerError, match=r"ledger\.jsonl:2 \(review ledger\): the last line was cut off mid-write"):
        read_ledger(ledger, queue)
    line = append_line(ledger, act(queue, 0, "ben", "fail"))
    assert line.line_no == 3 and ledger.read_text().splitlines()[2] == ledger.read_bytes().decode().splitlines()[-1]


def _append_many(ledger: str, queue_path: str, reviewer: str, n: int) -> None:
    queue = read_queue(Path(queue_path))
    for _ in range(n):
        append_line(Path(ledger), act(queue, 0, reviewer, "pass", reason="x" * 5000))


def test_two_writers_at_once_never_interleave_or_lose_a_line(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=1)
    ledger = tmp_path / "ledger.jsonl"
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_append_many, args=(str(ledger), str(queue.path), r, 60)) for r in ("ana", "ben")]
    for w in writers:
        w.start()
    for w in writers:
        w.join(30)
    assert [w.exitcode for w in writers] == [0, 0]
    lines = read_ledger(ledger, queue)
    assert len(lines) == 120 and {line.reviewer for line in lines} == {"ana", "ben"}


def _four_lines(tmp_path: Path) -> tuple[Queue, Path, list[str]]:
    queue = make_queue(tmp_path, n=2)
    ledger = tmp_path / "ledger.jsonl"
    for i in range(2):
        for reviewer in ("ana", "ben"):
            append_line(ledger, act(queue, i, reviewer, "pass"))
    return queue, ledger, ledger.read_text(encoding="utf-8").splitlines()


def test_each_line_names_the_sha256_of_the_line_before_it_in_its_file(tmp_path: Path) -> None:
    queue, ledger, text = _four_lines(tmp_path)
    lines = read_ledger(ledger, queue)
    assert lines[0].prev == EMPTY_SHA256 == hashlib.sha256(b"").hexdigest()
    assert [x.prev for x in lines[1:]] == [hashlib.sha256(raw.encode()).hexdigest() for raw in text[:-1]]
    assert [x.line_sha256 for x in lines] == [hashlib.sha256(raw.encode()).hexdigest() for raw in text]


def _edited(text: list[str]) -> list[str]:
    return [text[0], text[1].replace('"pass"', '"fail"'), *text[2:]]


@pytest.mark.parametrize(
    ("tamper", "where", "says"),
    [
        (_edited, 3, "it follows a line the file no longer holds: line 2 was edited, or a line was deleted there"),
        (lambda t: [t[0], *t[2:]], 2, "it follows a line the file no longer holds: line 1 was edited"),
        (lambda t: [t[0], t[1], t[1], *t[2:]], 3, "it repeats line 2"),
        (lambda t: [*t, t[3]], 5, "it repeats line 4"),
        (lambda t: [t[0], t[2], t[1], t[3]], 2, "it follows line 3, which comes after it: lines were reordered"),
        (lambda t: t[1:], 1, "it is the file's first line but follows another"),
        (lambda t: [t[0], t[3]], 2, "it follows a line the file no longer holds"),
    ],
    ids=["edited", "deleted", "duplicated", "duplicated-last", "reordered", "first-deleted", "middle-deleted"],
)
def test_an_edited_deleted_duplicated_or_reordered_line_is_refused_naming_the_file_and_line(
    tmp_path: Path, tamper: Any, where: int, says: str
) -> None:
    queue, ledger, text = _four_lines(tmp_path)
    ledger.write_text("\n".join(tamper(text)) + "\n", encoding="utf-8")
    with pytest.raises(LedgerError) as got:
        read_ledger(ledger, queue)
    message = str(got.value)
    assert f"ledger.jsonl:{where} (review ledger): the chain of lines is broken ({says}" in message, message
    assert "fix: restore the file from git" in message


def test_the_last_line_edited_is_what_the_chain_cannot_see(tmp_path: Path) -> None:
    """Nothing follows the last line of a file, so nothing names its sha256: an edit of it alone reads as
    written (git history anchors it; result.json records each file's last line for that)."""
    queue, ledger, text = _four_lines(tmp_path)
    ledger.write_text("\n".join([*text[:3], text[3].replace('"pass"', '"fail"')]) + "\n", encoding="utf-8")
    assert read_ledger(ledger, queue)[3].label == "fail"


def test_a_line_copied_into_another_reviewers_file_and_a_line_of_another_queue_are_refused(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=2)
    ledger = tmp_path / "labels"
    ledger.mkdir()
    append_line(ledger, act(queue, 0, "ana", "pass"))
    (ledger / "copy.jsonl").write_bytes((ledger / "ana.jsonl").read_bytes())
    with pytest.raises(LedgerError, match=r"copy\.jsonl:1 \(review ledger\): the line repeats .*ana\.jsonl:1"):
        read_ledger(ledger, queue)
    (ledger / "copy.jsonl").unlink()
    # The same item in another queue file (a second queue built over the same answers): another queue.
    other = tmp_path / "other.jsonl"
    other.write_bytes(queue.path.read_bytes() + b"\n")
    append_line(ledger, act(read_queue(other), 1, "ben", "pass"))
    with pytest.raises(LedgerError, match=r"ben\.jsonl:1 \(review ledger\): the line names queue \w+, not "):
        read_ledger(ledger, queue)


def test_a_ledger_written_before_lines_were_chained_is_refused_with_the_fix_and_chained_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ledger an earlier gate wrote (no `prev`): exit 2 naming the file and line and `gate review chain`;
    that command links each file once (a retraction following its line's new sha256), and reading works."""
    from gate.cli import main

    queue = make_queue(tmp_path, n=2)
    ledger = tmp_path / "labels"
    ledger.mkdir()
    first = append_line(ledger, act(queue, 0, "ana", "fail"))
    append_line(ledger, {**act(queue, 0, "ana", "fail"), "kind": "retraction", "retracts": first.line_sha256})
    append_line(ledger, act(queue, 0, "ana", "pass"))
    append_line(ledger, act(queue, 0, "ben", "pass"))
    for path in ledger.iterdir():  # as an earlier gate wrote them: no prev, retracts naming the old line
        old = [{k: v for k, v in json.loads(x).items() if k != "prev"} for x in path.read_text().splitlines()]
        text = [json.dumps(x, sort_keys=True, separators=(",", ":")) for x in old]
        if len(old) > 1:
            old[1]["retracts"] = hashlib.sha256(text[0].encode()).hexdigest()
            text[1] = json.dumps(old[1], sort_keys=True, separators=(",", ":"))
        path.write_text("".join(x + "\n" for x in text), encoding="utf-8")
    old_sha = hashlib.sha256((ledger / "ana.jsonl").read_text().splitlines()[0].encode()).hexdigest()
    with pytest.raises(LedgerError, match=r"ana\.jsonl:1 \(review ledger\): `prev` is missing.*gate review chain"):
        read_ledger(ledger, queue)
    capsys.readouterr()
    assert main(["review", "chain", str(ledger)]) == 0
    said = capsys.readouterr().out
    assert "ana.jsonl: 3 lines, linked" in said and "ben.jsonl: 1 line, linked" in said
    lines = read_ledger(ledger, queue)
    assert lines[1].retracts == lines[0].line_sha256 != old_sha
    assert final_labels(lines, queue, k=2)[queue.items[0].item_id].label == "pass"
    assert main(["review", "chain", str(ledger)]) == 0
    assert "ana.jsonl: 3 lines, already chained, left as it was" in capsys.readouterr().out
    # A file chained in part was edited by hand: refused, nothing written.
    (ledger / "ben.jsonl").write_text((ledger / "ben.jsonl").read_text() + json.dumps(old[0]) + "\n")
    before = (ledger / "ben.jsonl").read_bytes()
    assert main(["review", "chain", str(ledger)]) == 2
    assert "some lines of the file are chained and some are not" in capsys.readouterr().err
    assert (ledger / "ben.jsonl").read_bytes() == before


def test_chain_says_how_to_check_that_it_links_no_edited_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gate review chain` links whatever a file without `prev` holds: someone who strips `prev` from a
    chained ledger, rewrites labels and chains it again gets a ledger every reader accepts (exit 1 became
    4 on the example). It said only that git diff shows `prev` added to each line, which is all the
    chaining commit shows once the edit was committed first. Now it prints each file's sha256 as it was,
    to compare with the committed file, and the git command that finds a commit that took `prev` away."""
    from gate.cli import main

    queue = make_queue(tmp_path, n=1)
    ledger = tmp_path / "ledger.jsonl"
    append_line(ledger, act(queue, 0, "ana", "fail"))
    old = {k: v for k, v in json.loads(ledger.read_text()).items() if k != "prev"}
    ledger.write_text(json.dumps(old, sort_keys=True, separators=(",", ":")) + "\n", encoding="utf-8")
    before = hashlib.sha256(ledger.read_bytes()).hexdigest()
    capsys.readouterr()
    assert main(["review", "chain", str(ledger)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"ledger.jsonl: 1 line, linked; its sha256 before: {before}" in said, said
    assert "git show HEAD:" in said and "sha256sum" in said and "git log -S" in said, said


def test_reviewers_who_label_on_two_branches_meet_in_a_git_merge(tmp_path: Path) -> None:
    """A ledger directory of one file per reviewer: ana labels on one branch, ben on another, both
    after a shared first label; `git merge` joins them without a conflict and the chain of each file reads."""
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x",
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # fmt: skip

    def run(*args: str) -> None:
        subprocess.run([git, *args], cwd=repo, env=env, check=True, capture_output=True)

    queue = make_queue(repo, n=3)
    ledger = repo / "labels"
    ledger.mkdir()
    run("init", "-q", "-b", "main")
    append_line(ledger, act(queue, 0, "ana", "pass"))
    run("add", "-A")
    run("commit", "-qm", "first label")
    run("checkout", "-qb", "ben-work")
    for i in range(3):
        append_line(ledger, act(queue, i, "ben", "pass"))
    run("add", "-A")
    run("commit", "-qm", "ben")
    run("checkout", "-q", "main")
    for i in (1, 2):
        append_line(ledger, act(queue, i, "ana", "pass"))
    run("commit", "-qam", "ana")
    run("merge", "-q", "--no-edit", "ben-work")
    lines = read_ledger(ledger, queue)
    assert len(lines) == 6 and {x.reviewer for x in lines} == {"ana", "ben"}
    assert all(f.status == "unanimous" for f in final_labels(lines, queue, k=2).values())


def test_pass_beside_abstain_awaits_adjudication_and_only_k_abstentions_are_a_final_abstain(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=2)
    ledger = tmp_path / "ledger.jsonl"
    append_line(ledger, act(queue, 0, "ana", "pass"))
    append_line(ledger, act(queue, 0, "ben", "abstain"))
    append_line(ledger, act(queue, 1, "ana", "abstain"))
    append_line(ledger, act(queue, 1, "ben", "abstain"))
    finals = final_labels(read_ledger(ledger, queue), queue, k=2)
    assert [(f.status, f.label) for f in finals.values()] == [("disagreement", None), ("abstain", "abstain")]


def test_only_its_author_may_retract_a_line(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=1)
    ledger = tmp_path / "ledger.jsonl"
    ana = append_line(ledger, act(queue, 0, "ana", "fail"))
    append_line(ledger, {**act(queue, 0, "ben", "fail"), "kind": "retraction", "retracts": ana.line_sha256})
    with pytest.raises(
        LedgerError, match=r"ledger\.jsonl:2 \(review ledger\): ben retracts a line of ana: only its author"
    ):
        read_ledger(ledger, queue)


def test_a_label_under_another_rubric_than_its_queue_is_refused(tmp_path: Path) -> None:
    queue = make_queue(tmp_path, n=1)
    ledger = tmp_path / "ledger.jsonl"
    append_line(ledger, act(queue, 0, "ana", "fail", rubric_version="2"))
    with pytest.raises(
        LedgerError, match=r"ledger\.jsonl:1 \(review ledger\): labelled under rubric 2, the queue is under 1"
    ):
        read_ledger(ledger, queue)
