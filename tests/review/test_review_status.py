"""`gate review status`: per slice how far labelling has come and whether people agree, read from the
ledger files reviewers append to (one per reviewer in a directory), through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from suite import write_suite

from gate.cli import main
from gate.review.ledger import append_line
from gate.review.queue import Queue, read_queue


def file_queue(tmp_path: Path, n: int = 8, slices: tuple[str, ...] = ("critical",), **policy: Any) -> Queue:
    suite = write_suite(tmp_path / "suite", **policy)
    rows = [
        {"case_id": f"a-{s}-{i}", "user_input": f"Question {i}?", "response": f"Answer {i}.", "slice": s}
        for s in slices
        for i in range(n)
    ]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert (
        main(["review", "queue", "--policy", str(suite), "--from", str(answers), "--out", str(tmp_path / "q.jsonl")])
        == 0
    )
    return read_queue(tmp_path / "q.jsonl")


def label(ledger: Path, queue: Queue, i: int, reviewer: str, value: str, kind: str = "label") -> None:
    item = queue.items[i]
    append_line(
        ledger,
        {
            "kind": kind, "item_id": item.item_id, "case_id": item.case_id, "response_sha256": item.response_sha256,
            "reviewer": reviewer, "label": value, "reason": "read against the reference", "evidence": [],
            "queue_sha256": queue.sha256, "rubric_version": queue.header.rubric_version, "blind": True,
        },
    )  # fmt: skip


def status(tmp_path: Path, ledger: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["review", "status", str(tmp_path / "q.jsonl"), "--ledger", str(ledger), *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_status_counts_agreement_per_slice_from_a_directory_of_reviewer_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = file_queue(tmp_path)
    capsys.readouterr()
    ledger = tmp_path / "labels"
    ledger.mkdir()
    ana = ["pass", "pass", "fail", "fail", "pass", "fail", "pass", "abstain"]
    ben = ["pass", "pass", "fail", "fail", "pass", "pass", "pass", "pass"]
    for i, (a, b) in enumerate(zip(ana, ben, strict=True)):
        label(ledger, queue, i, "ana", a)
        if i < 7:
            label(ledger, queue, i, "ben", b)
    code, out = status(tmp_path, ledger, capsys, "--format", "json")
    assert code == 0
    [row] = json.loads(out)["slices"]
    assert (row["items"], row["done"], row["unanimous"], row["awaiting_adjudication"]) == (8, 7, 6, 1)
    assert row["abstentions"] == 1 and row["reviewers"] == ["ana", "ben"] and row["alpha_items"] == 7
    # 14 pairable values (9 pass, 5 fail), one unit in disagreement: 1 - 13 * 2 / (14² - 9² - 5²)
    assert (
        row["alpha"] == pytest.approx(1 - 13 * 2 / 90)
        and row["alpha_interval"][0] <= row["alpha"] <= row["alpha_interval"][1]
    )
    assert row["cohen_kappa"] is None  # ben has not labelled item 8: not every item by both
    label(ledger, queue, 7, "ben", "pass")
    code, out = status(tmp_path, ledger, capsys, "--format", "json")
    # 7 pairs without an abstention, 6 agree; chance (4·5 + 3·2) / 49
    assert json.loads(out)["slices"][0]["cohen_kappa"] == pytest.approx((6 / 7 - 26 / 49) / (1 - 26 / 49))
    code, out = status(tmp_path, ledger, capsys)
    assert "slice critical: 8 items, 8 with 2 labels" in out and "Krippendorff's alpha 0.711" in out
    assert "final abstain 0 (1 abstention given)" in out  # counted words agree
    assert "fix the rubric" not in out
    assert "fewer than 50 items labelled twice: the interval is too narrow" in out  # bench/review_agreement.py


def test_alpha_below_the_policys_least_says_to_fix_the_rubric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = file_queue(tmp_path, review={"min_alpha": 0.8})
    ledger = tmp_path / "ledger.jsonl"
    for i in range(8):
        label(ledger, queue, i, "ana", "pass" if i % 2 else "fail")
        label(ledger, queue, i, "ben", "pass" if i % 3 else "fail")
    code, out = status(tmp_path, ledger, capsys)
    assert code == 0
    assert "people do not agree on this boundary: fix the rubric before any judge is measured on these labels" in out


def test_a_bad_ledger_is_exit_2_naming_the_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queue = file_queue(tmp_path)
    ledger = tmp_path / "labels"
    ledger.mkdir()
    label(ledger, queue, 0, "ana", "pass")
    with (ledger / "ana.jsonl").open("a") as fh:
        fh.write('{"kind": "label", "item_id": \n')
    code, out = status(tmp_path, ledger, capsys)
    assert code == 2 and "labels/ana.jsonl:2 (review ledger): not a JSON object" in out and "Traceback" not in out
    (ledger / "ana.jsonl").unlink()
    label(ledger, queue, 0, "ana", "maybe")
    code, out = status(tmp_path, ledger, capsys)
    assert code == 2 and "labels/ana.jsonl:1 (review ledger): label `maybe` is not one of pass, fail, abstain" in out
    (ledger / "ana.jsonl").unlink()
    other = file_queue(tmp_path / "other", n=3, slices=("general",))
    label(ledger, other, 0, "ben", "pass")
    code, out = status(tmp_path, ledger, capsys)
    assert code == 2 and "labels/ben.jsonl:1 (review ledger): item" in out and "is in no queue given" in out


def test_labels_past_k_from_another_machine_all_count_and_status_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page refuses a label past K, but reviewers labelling apart (their files met in git) or an
    import can give an item more: every independent label counts, and status names such items."""
    queue = file_queue(tmp_path, n=2)
    capsys.readouterr()
    ledger = tmp_path / "labels"
    ledger.mkdir()
    for who, value in (("ana", "pass"), ("ben", "pass"), ("cy", "fail")):
        label(ledger, queue, 0, who, value)
    code, out = status(tmp_path, ledger, capsys, "--format", "json")
    [row] = json.loads(out)["slices"]
    assert code == 0 and (row["unanimous"], row["awaiting_adjudication"], row["beyond_k"]) == (0, 1, 1)
    code, out = status(tmp_path, ledger, capsys)
    assert "Krippendorff's alpha n/a (bootstrap" not in out  # alpha is known here; and n/a has no interval
    assert "1 item with more than 2 labels (labelled apart, or imported): every label counts" in out, out


def test_alpha_undefined_says_why_and_claims_no_interval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queue = file_queue(tmp_path, n=2)
    capsys.readouterr()
    ledger = tmp_path / "ledger.jsonl"
    for i in range(2):
        for who in ("ana", "ben"):
            label(ledger, queue, i, who, "pass")
    code, out = status(tmp_path, ledger, capsys)
    assert code == 0 and "Krippendorff's alpha n/a (every label given is the same), least 0.667" in out, out


def test_labels_under_a_rubric_the_policy_no_longer_lists_are_refused_by_status_and_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The policy moved to rubric-2 and dropped rubric-1: the queue's labels judged rules that are gone."""
    queue = file_queue(tmp_path)
    ledger = tmp_path / "ledger.jsonl"
    label(ledger, queue, 0, "ana", "pass")
    policy = tmp_path / "suite" / "policy.yaml"
    policy.write_text(policy.read_text().replace("- rubric-1", "- rubric-2"), encoding="utf-8")
    capsys.readouterr()
    code, said = status(tmp_path, ledger, capsys)
    assert code == 2 and "ledger.jsonl:1 (review ledger): labelled under rubric rubric-1, which the policy no" in said
    out = tmp_path / "cases.jsonl"
    args = ["review", "export", str(queue.path), "--ledger", str(ledger), "--partition", "calibration"]
    assert main([*args, "--out", str(out)]) == 2 and not out.exists()
