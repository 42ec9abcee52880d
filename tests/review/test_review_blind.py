"""The review page stays blind until an item is final: what a reviewer can read of an item they
labelled (nothing another person said of it, no count that moves with another person's label),
what undo withdraws (their own latest label, never an adjudication, never once the item has its K
labels), and what `/api/adjudicate` lists and accepts (an item with all K labels that disagree or
abstain, never to someone who labelled it unless --allow-self-adjudication, recorded not blind).

Each test is an adversary with two tabs and the JSON API, driven in process through the app.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from test_review_web import LOCAL, Page, ledger_lines, page_for

from gate.cli import main
from gate.review.ledger import append_line, final_labels, read_ledger
from gate.review.queue import read_queue
from gate.web.app import build_app
from gate.web.desk import Desk, completed_items


def everything_seen_by(page: Page, who: str) -> str:
    """Every read a person can make with their own name, and without one, as one text."""
    reads = [
        page.client.get("/api/next", params={"reviewer": who}).json(),
        page.client.get("/api/status", params={"reviewer": who}).json(),
        page.client.get("/api/status").json(),
        page.client.get("/api/adjudicate", params={"adjudicator": who}).json(),
        page.client.get("/").text,
        page.client.get("/adjudicate").text,
    ]
    return json.dumps(reads, sort_keys=True)


def finals(tmp_path: Path, ledger: Path, k: int = 2) -> dict[str, Any]:
    queue = read_queue(tmp_path / "queue.jsonl")
    return final_labels(read_ledger(ledger, queue), queue, k)


def test_a_reviewer_cannot_read_the_other_label_of_an_item_they_labelled_nor_change_theirs(tmp_path: Path) -> None:
    """The issue's repro: ann opens /api/adjudicate for the item she labelled, reads bob's label and
    reason, undoes hers and labels it again to agree; the export then says two blind reviewers,
    unanimous, no adjudicator."""
    page, ledger = page_for(tmp_path, n=1, k=2)
    item = page.label_next("ann", "pass", "ann-reason")
    page.label_next("bob", "fail", "bob-secret-reason")
    listed = page.client.get("/api/adjudicate", params={"adjudicator": "ann"})
    assert listed.status_code == 200
    assert "bob-secret-reason" not in listed.text and "bob" not in listed.text
    assert listed.json()["items"] == [] and listed.json()["awaiting"] == 0
    undo = page.post("/api/undo", {"reviewer": "ann"})
    assert undo.status_code == 409 and "has its 2 labels" in undo.json()["error"], undo.text
    assert page.label("ann", item, "fail", "agreeing now").status_code == 409
    assert [line["kind"] for line in ledger_lines(ledger)] == ["label", "label"]  # nothing written
    final = finals(tmp_path, ledger)[item]
    assert final.status == "disagreement" and final.adjudicator is None
    # someone who did not label it sees both, and settles it
    shown = page.client.get("/api/adjudicate", params={"adjudicator": "cat"}).json()
    assert [x["item_id"] for x in shown["items"]] == [item] and "bob-secret-reason" in json.dumps(shown)


def test_nothing_a_reviewer_can_read_moves_with_another_persons_label_of_an_item_they_labelled(
    tmp_path: Path,
) -> None:
    """Every endpoint, read by ann before and after bob labels the item ann labelled (disagreeing;
    with K=2 it is the item's last label, with K=3 not): the same bytes. /api/status without a
    name is anyone's, ann's too."""
    for k in (2, 3):
        where = tmp_path / f"k{k}"
        where.mkdir()
        page, _ = page_for(where, n=3, k=k)
        item = page.label_next("ann", "pass", "ann-reason")
        before = everything_seen_by(page, "ann")
        assert page.label("bob", item, "fail", "bob-secret-reason").status_code == 200
        after = everything_seen_by(page, "ann")
        assert "bob" not in after
        assert before == after, (k, before, after)


def test_an_adjudicator_who_labelled_an_item_is_refused_the_same_before_and_after_the_others_label(
    tmp_path: Path,
) -> None:
    """A decision posted on an item one labelled is refused with the same answer whether the item
    awaits its other label or awaits adjudication: the answer does not say which."""
    page, ledger = page_for(tmp_path, n=1, k=2)
    item = page.label_next("ann", "pass")
    body = {"adjudicator": "ann", "item_id": item, "label": "pass", "reason": "mine"}
    early = page.post("/api/adjudicate", body)
    page.label_next("bob", "fail")
    late = page.post("/api/adjudicate", body)
    assert (early.status_code, early.json()) == (late.status_code, late.json()) and early.status_code == 403
    assert len(ledger_lines(ledger)) == 2


def test_adjudicate_lists_and_accepts_an_item_only_once_it_has_all_k_labels(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=1, k=3)
    decision = {"adjudicator": "cat", "label": "fail", "reason": "r"}
    item = page.label_next("ann", "pass")
    for labelled in (1, 2):  # after 1 of 3 labels, then after 2 of 3 that disagree
        listed = page.client.get("/api/adjudicate", params={"adjudicator": "cat"}).json()
        assert listed == {"items": [], "awaiting": 0}, labelled
        early = page.post("/api/adjudicate", {**decision, "item_id": item})
        assert early.status_code == 409 and "not awaiting adjudication" in early.json()["error"], labelled
        if labelled == 1:
            assert page.label("bob", item, "fail").status_code == 200
    assert [line["kind"] for line in ledger_lines(ledger)] == ["label", "label"]
    assert page.label("dan", item, "abstain").status_code == 200
    listed = page.client.get("/api/adjudicate", params={"adjudicator": "cat"}).json()
    assert [x["item_id"] for x in listed["items"]] == [item] and listed["awaiting"] == 1
    assert page.post("/api/adjudicate", {**decision, "item_id": item}).status_code == 200


# -- undo ------------------------------------------------------------------------------------


def test_undo_withdraws_the_reviewers_own_label_never_another_reviewers_later_line(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=3, k=3)
    mine = page.label_next("ann", "pass")
    page.label_next("bob", "fail")  # written after ann's
    reply = page.post("/api/undo", {"reviewer": "ann"})
    assert reply.status_code == 200, reply.text
    lines = ledger_lines(ledger)
    (retraction,) = [x for x in lines if x["kind"] == "retraction"]
    assert retraction["reviewer"] == "ann" and retraction["item_id"] == mine
    assert reply.json()["item"]["item_id"] == mine and reply.json()["withdrawn"] == "label"
    assert read_ledger(ledger, read_queue(tmp_path / "queue.jsonl"))  # every line still reads


def test_undo_withdraws_the_latest_label_not_the_first(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=3, k=2)
    first = page.label_next("ann", "pass")
    latest = page.label_next("ann", "fail")
    reply = page.post("/api/undo", {"reviewer": "ann"})
    assert reply.status_code == 200 and reply.json()["item"]["item_id"] == latest != first
    (retraction,) = [x for x in ledger_lines(ledger) if x["kind"] == "retraction"]
    assert retraction["item_id"] == latest and retraction["label"] == "fail"


def test_undo_never_withdraws_an_adjudication(tmp_path: Path) -> None:
    """cat labels one item, then adjudicates another: U withdraws cat's label, and with no label
    left to withdraw is refused; the adjudication stands."""
    page, ledger = page_for(tmp_path, n=3, k=2)
    disputed = page.label_next("ann", "pass")
    assert page.label("bob", disputed, "fail").status_code == 200
    labelled = next(i for i in read_queue(tmp_path / "queue.jsonl").by_id if i != disputed)
    assert page.label("cat", labelled, "pass").status_code == 200
    settled = page.post("/api/adjudicate", {"adjudicator": "cat", "item_id": disputed, "label": "fail", "reason": "r"})
    assert settled.status_code == 200
    undone = page.post("/api/undo", {"reviewer": "cat"})
    assert undone.status_code == 200 and undone.json()["item"]["item_id"] == labelled
    again = page.post("/api/undo", {"reviewer": "cat"})
    assert again.status_code == 409 and "no label" in again.json()["error"], again.text
    assert finals(tmp_path, ledger)[disputed].adjudicator == "cat"
    retracted = {x["retracts"] for x in ledger_lines(ledger) if x["kind"] == "retraction"}
    assert settled.json()["line_sha256"] not in retracted


def test_undo_of_a_line_named_is_refused_unless_it_is_the_persons_own_open_label(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=2, k=3)
    page.label_next("ann", "pass")
    bobs = page.label("bob", page.next("bob")["item"]["item_id"], "fail").json()["line_sha256"]
    reply = page.post("/api/undo", {"reviewer": "ann", "line_sha256": bobs})
    assert reply.status_code == 409, reply.text
    assert [x["kind"] for x in ledger_lines(ledger)] == ["label", "label"]


# -- blind: false ----------------------------------------------------------------------------


def test_a_self_adjudication_is_recorded_not_blind_and_the_final_label_says_so(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=1, k=2, allow_self=True)
    item = page.label_next("ann", "pass")
    page.label_next("bob", "fail", "bob-reason")
    listed = page.client.get("/api/adjudicate", params={"adjudicator": "ann"}).json()
    assert listed["items"][0]["you_labelled"] is True  # permitted, and said
    reply = page.post("/api/adjudicate", {"adjudicator": "ann", "item_id": item, "label": "pass", "reason": "r"})
    assert reply.status_code == 200 and reply.json()["self_adjudication"] is True
    (line,) = [x for x in ledger_lines(ledger) if x["kind"] == "adjudication"]
    assert line["blind"] is False and line["self_adjudication"] is True
    final = finals(tmp_path, ledger)[item]
    assert (final.status, final.label, final.blind) == ("adjudicated", "pass", False)


def test_an_item_that_had_its_k_labels_keeps_them_locked_and_a_new_label_of_it_is_not_blind(tmp_path: Path) -> None:
    """A second server on the same ledger (another K) lets bob withdraw his label of an item that had
    its 2 labels here, where both were shown on /adjudicate: ann may still not undo hers, and carl's
    label of it is recorded `blind: false`."""
    page, ledger = page_for(tmp_path, n=1, k=2)
    item = page.label_next("ann", "pass")
    page.label_next("bob", "fail", "bob-reason")
    other_server = Desk(read_queue(tmp_path / "queue.jsonl"), ledger, 3)
    other = Page(TestClient(build_app(other_server, page.settings), base_url=LOCAL), page.settings)
    assert other.post("/api/undo", {"reviewer": "bob"}).status_code == 200
    bobs = [x for x in ledger_lines(ledger) if x["reviewer"] == "bob"]
    assert [x["kind"] for x in bobs] == ["label", "retraction"], bobs
    assert page.post("/api/undo", {"reviewer": "ann"}).status_code == 409
    assert page.label("carl", item, "pass", "carl-reason").status_code == 200
    (carls,) = [x for x in ledger_lines(ledger) if x["reviewer"] == "carl"]
    assert carls["blind"] is False
    assert finals(tmp_path, ledger)[item].blind is False


def test_a_label_given_again_after_the_item_had_its_k_labels_is_not_blind_read_in_the_order_written(
    tmp_path: Path,
) -> None:
    """ann and bob give the item its 2 labels; on another server (K=3) ann withdraws hers, and here
    labels it again: not blind. One file a reviewer: read file by file, ann's withdrawal comes before
    bob's label and the item never seems to have had its 2 labels; read in the order written, it had."""
    page, ledger = page_for(tmp_path, n=1, k=2)
    item = page.label_next("ann", "pass")
    page.label_next("bob", "fail")
    other_server = Desk(read_queue(tmp_path / "queue.jsonl"), ledger, 3)
    other = Page(TestClient(build_app(other_server, page.settings), base_url=LOCAL), page.settings)
    assert other.post("/api/undo", {"reviewer": "ann"}).status_code == 200
    assert page.label("ann", item, "fail", "agreeing now").status_code == 200
    relabel = [x for x in ledger_lines(ledger) if x["reviewer"] == "ann" and x["kind"] == "label"][-1]
    assert relabel["blind"] is False
    assert finals(tmp_path, ledger)[item].blind is False


def test_the_exported_case_of_a_self_adjudicated_item_says_it_is_not_blind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page, ledger = page_for(tmp_path, n=1, k=2, allow_self=True)
    item = page.label_next("ann", "pass")
    page.label_next("bob", "fail")
    reply = page.post("/api/adjudicate", {"adjudicator": "ann", "item_id": item, "label": "pass", "reason": "r"})
    assert reply.status_code == 200
    out = tmp_path / "new-cases.jsonl"
    code = main(["review", "export", str(tmp_path / "queue.jsonl"), "--ledger", str(ledger), "--partition",
                 "calibration", "--out", str(out), "--accept-low-agreement"])  # fmt: skip
    assert code == 0, capsys.readouterr()
    (case,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert case["provenance"]["blind"] is False and case["provenance"]["adjudicator"] == "ann"


def test_an_item_had_its_k_labels_by_the_times_the_lines_give_in_any_time_zone(tmp_path: Path) -> None:
    """bob's label (an import's, written at 10:30+02:00, so 08:30Z) came before ann's (09:00Z), which
    she withdrew at 09:10Z: the item had its 2 labels from 09:00 to 09:10, though the times read as
    text sort bob's last."""
    page, ledger = page_for(tmp_path, n=1, k=2)
    queue = read_queue(tmp_path / "queue.jsonl")
    item = queue.items[0]
    base = {"item_id": item.item_id, "case_id": item.case_id, "response_sha256": item.response_sha256,
            "queue_sha256": queue.sha256, "rubric_version": "rubric-1", "blind": True, "reason": "r"}  # fmt: skip
    ann = append_line(
        ledger, {**base, "kind": "label", "reviewer": "ann", "label": "pass", "at": "2026-01-01T09:00:00Z"}
    )
    append_line(ledger, {**base, "kind": "retraction", "reviewer": "ann", "label": "pass",
                         "retracts": ann.line_sha256, "at": "2026-01-01T09:10:00.000Z"})  # fmt: skip
    append_line(
        ledger, {**base, "kind": "label", "reviewer": "bob", "label": "fail", "at": "2026-01-01T10:30:00+02:00"}
    )
    assert completed_items(read_ledger(ledger, queue), 2) == {item.item_id}
    assert page.label("carl", item.item_id, "pass").status_code == 200
    assert [x["blind"] for x in ledger_lines(ledger) if x["reviewer"] == "carl"] == [False]
