"""A label decides only the item its person saw: this run's case, question, evidence and answer, under
the rubric the policy gates with. A label on another item of the same answer is listed, never used.

Driven through the real CLI (`gate run`, `gate decide`, `gate review queue`) against the fake provider;
labels are appended through gate/review/ledger.py as the review page appends them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import result
from test_product_audit import answers_of, audit_suite, decide, judged_once, label, zero_tolerance_run
from test_product_audit import fake as fake  # the fixture
from test_product_audit import good_run as good_run  # the fixture
from test_product_lane import run_app, write_responses

from gate.cli import main
from gate.model.owners import KIND_GROUP
from gate.review.ledger import append_line
from gate.review.queue import read_queue

Run = tuple[Path, Path, Path, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One run the tests that only decide over it share (those that edit the suite make their own)."""
    return judged_once(tmp_path_factory.mktemp("judged"))


def notes_of(out: Path) -> str:
    return " ".join(" ".join(result(out)["notes"]).split())


def test_labels_given_under_other_evidence_never_decide_the_slice(
    tmp_path: Path, good_run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """People passed the answers under the shipped evidence; the evidence of ten cases then changes (7
    days becomes 3) while the answers still say what they said. Their labels were on other items: the
    slice is decided as if they were never given (it passed on them, exit 0)."""
    policy, responses, _run, lines = good_run
    ledger = tmp_path / "labels"
    ledger.mkdir()
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i == 0 else "pass")
    assert decide(policy, _run, tmp_path / "before", "--audit", str(ledger)) == 0
    cases = policy.parent / "cases.jsonl"
    rows = [json.loads(x) for x in cases.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["case_id"] in {f"p-{i:03d}" for i in range(10)}:
            row["reference"] = "Refunds are allowed within 3 days of purchase."
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    after = tmp_path / "after"
    assert run_app(policy, after, responses, "--audit", str(ledger)) == 4
    row = result(after)["product"]["slices"]["critical"]
    # The changed items (the three the judge failed among them) have no label of their own.
    assert row["decided_by"] == "calibration" and row["verdict"] == "inconclusive"
    notes = notes_of(after)
    assert "10 labels of" in notes and "another question, evidence text or rubric" in notes, notes
    assert "p-000, p-001" in notes and "never used" in notes


def test_fail_labels_on_a_file_queue_that_asked_another_question_are_not_this_runs(
    tmp_path: Path, judged: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit passes the slice on labels of this run's queue; five `fail` labels on a file queue that
    showed the same answers under another question are on other items: listed, never counted."""
    policy, _responses, run, lines = judged
    ledger = tmp_path / "labels"
    ledger.mkdir()
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i == 0 else "pass")
    assert decide(policy, run, tmp_path / "passed", "--audit", str(ledger)) == 0
    answers = tmp_path / "answers.jsonl"
    answers.write_text(
        "".join(
            json.dumps(
                {
                    "case_id": line["case_id"],
                    "user_input": f"How long is the refund window for {line['case_id']}?",
                    "reference": "Refunds are allowed within 7 days of purchase.",
                    "response": line["response"],
                    "slice": "critical",
                }
            )
            + "\n"
            for line in lines[10:15]
        ),
        encoding="utf-8",
    )
    queue_path = tmp_path / "file-queue.jsonl"
    assert main(["review", "queue", "--policy", str(policy), "--from", str(answers), "--out", str(queue_path)]) == 0
    queue = read_queue(queue_path)
    assert {i.response_sha256 for i in queue.items} <= {
        hashlib.sha256(x["response"].encode()).hexdigest() for x in lines
    }
    for item in queue.items:
        for reviewer in ("ana", "bo"):
            append_line(
                ledger,
                {
                    "kind": "label", "item_id": item.item_id, "case_id": item.case_id,
                    "response_sha256": item.response_sha256, "reviewer": reviewer, "label": "fail",
                    "reason": "the window is wrong", "queue_sha256": queue.sha256,
                    "rubric_version": queue.header.rubric_version, "blind": True,
                },
            )  # fmt: skip
    out = tmp_path / "decided"
    capsys.readouterr()
    assert decide(policy, run, out, "--audit", str(ledger)) == 0
    audit = result(out)["product"]["slices"]["critical"]["audit"]
    assert audit["missed_fail"] == [] and audit["verdict"] == "passed"
    notes = notes_of(out)
    assert "5 labels of" in notes and "another question, evidence text or rubric" in notes, notes


def test_a_label_under_an_earlier_rubric_is_listed_and_one_under_a_rubric_the_policy_dropped_is_refused(
    tmp_path: Path, good_run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """The policy gates under rubric-2 now (rubric-1 kept in its history): labels people gave under
    rubric-1 judged other rules, so they are on other items; a label under rubric-0, which the policy
    no longer names, is exit 2 naming the file and line."""
    policy, _responses, run, lines = good_run
    policy.write_text(policy.read_text().replace("- rubric-1", "- rubric-1\n- rubric-2"), encoding="utf-8")
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i == 0 else "pass")
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger)) == 4
    assert result(out)["product"]["slices"]["critical"]["decided_by"] == "calibration"
    assert "60 labels of" in notes_of(out) and "another question, evidence text or rubric" in notes_of(out)
    first = json.loads(ledger.read_text(encoding="utf-8").splitlines()[0])
    append_line(ledger, {**first, "reviewer": "cy", "rubric_version": "rubric-0", "at": None, "prev": None})
    capsys.readouterr()
    assert decide(policy, run, tmp_path / "refused", "--audit", str(ledger)) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "ledger.jsonl:121" in err and "rubric rubric-0, which the policy no longer has" in err, err


def test_labels_rewritten_by_hand_never_clear_a_confirmed_failure(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """Zero tolerance: people confirmed p-001 failing (exit 1). Rewriting its two labels to `pass` by hand
    cleared it (exit 0, not a word); the chain of lines names the file and line instead (exit 2).
    result.json records what was read: each file's lines and last line's sha256."""
    policy, run, lines = zero_tolerance_run(tmp_path, fake)
    ledger = tmp_path / "ledger.jsonl"
    label(ledger, lines[0], "pass")
    label(ledger, lines[1], "fail")
    assert decide(policy, run, tmp_path / "confirmed", "--audit", str(ledger)) == 1
    text = ledger.read_text(encoding="utf-8").splitlines()
    assert result(tmp_path / "confirmed")["product"]["audit_ledger"] == [
        {"file": str(ledger), "lines": 4, "last_line_sha256": hashlib.sha256(text[3].encode()).hexdigest()}
    ]
    ledger.write_text("\n".join([*text[:2], *(x.replace('"fail"', '"pass"') for x in text[2:])]) + "\n")
    capsys.readouterr()
    assert decide(policy, run, tmp_path / "cleared", "--audit", str(ledger)) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "ledger.jsonl:4 (review ledger): the chain of lines is broken" in err and "line 3 was edited" in err, err
    assert not (tmp_path / "cleared" / "result.json").exists()


def test_a_ledger_the_policy_names_for_every_release_is_a_note_on_a_release_nobody_labelled_yet(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """`lanes.app.audit: labels`: people labelled release 1. Release 2's answers are new, so no label is on
    them: `gate run` and `gate review queue` go on, with a note (both were exit 2, naming an
    `--audit-queue` flag `queue` does not have). A ledger the policy names that does not exist yet is a
    note too; a `--audit` path that does not exist is exit 2 with one fix, naming `--audit`."""
    policy = audit_suite(tmp_path / "suite", fake, 0.2)
    policy.write_text(policy.read_text().replace("product: true", "product: true\n    audit: labels"))
    assert "audit: labels" in policy.read_text()
    labels = policy.parent / "labels"
    labels.mkdir()
    for i, line in enumerate(answers_of(3)):
        label(labels, line, "fail" if i == 0 else "pass")
    second = [{**x, "response": x["response"].replace("App answer", "Release 2 answer")} for x in answers_of(3)]
    run = tmp_path / "run"
    capsys.readouterr()
    assert run_app(policy, run, write_responses(tmp_path / "r2.jsonl", second)) == 4
    assert "no label of" in notes_of(run) and "the audit decides nothing here" in notes_of(run)
    queue_path = tmp_path / "queue.jsonl"
    assert main(["review", "queue", "--policy", str(policy), "--from", str(run), "--out", str(queue_path)]) == 0
    # The policy names a ledger nobody has started: a note.
    labels.rename(policy.parent / "older-labels")
    fresh = tmp_path / "fresh"
    assert run_app(policy, fresh, write_responses(tmp_path / "r2.jsonl", second)) == 4
    assert "lanes.app.audit names the review ledger" in notes_of(fresh) and "does not exist yet" in notes_of(fresh)
    capsys.readouterr()
    assert run_app(policy, tmp_path / "typo", tmp_path / "r2.jsonl", "--audit", str(tmp_path / "nowhere")) == 2
    err = capsys.readouterr().err
    assert "--audit" in err and "nowhere: no such review ledger" in err and err.count("fix:") == 1, err
    assert "--ledger your reviewers" not in err and "Traceback" not in err


def test_labels_people_do_not_agree_on_never_decide_a_slice(
    tmp_path: Path, judged: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """ana fails p-000 and passes the rest of the run's audit plan; bo fails p-000 and the plan's next
    seven; cy adjudicates the seven they differ on as passes. Every planned answer has a final label and
    the audit would pass the slice (exit 0), but the two reviewers agree little (Krippendorff's alpha
    below review.min_alpha 0.667): their labels decide nothing, and the slice says why (labels_disagree,
    owner evaluator), with alpha and its interval."""
    policy, _responses, run, lines = judged
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]
    planned = [*plan["judged_fail"]["case_ids"], *plan["judged_pass"]["case_ids"]]
    planned.sort(key=lambda c: c != "p-000")  # p-000 first, the one both fail
    by_case = {line["case_id"]: line for line in lines}
    ledger = tmp_path / "labels"
    ledger.mkdir()
    for i, case_id in enumerate(planned):
        label(ledger, by_case[case_id], "fail" if i == 0 else "pass", reviewers=("ana",))
        label(ledger, by_case[case_id], "fail" if i < 8 else "pass", reviewers=("bo",))
        if 0 < i < 8:
            label(ledger, by_case[case_id], "pass", reviewers=("cy",), kind="adjudication")
    # Two coders, nominal: alpha = 1 - d (n - 1) / (n_fail n_pass) over the 2N values, d items differing.
    n = 2 * len(planned)
    expected = 1 - 7 * (n - 1) / (9 * (n - 9))
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger)) == 4
    res = result(out)
    row = res["product"]["slices"]["critical"]
    assert row["decided_by"] == "calibration" and row["verdict"] == "inconclusive"
    assert row["audit"]["verdict"] == "passed" and row["audit"]["labels_disagree"] is True
    assert row["audit"]["alpha"] == pytest.approx(expected, abs=1e-4)
    low, high = row["audit"]["alpha_interval"]
    assert low < expected < high < 0.667
    [b] = [b for b in res["blockers"] if b["kind"] == "labels_disagree"]
    assert b["state"] == "review_required" and b["slice"] == "critical" and KIND_GROUP[b["kind"]] == "evaluator"
    message = " ".join(b["message"].split())
    assert f"Krippendorff's alpha {expected:.3f}" in message and f"[{low:.3f}, {high:.3f}]" in message, message
    assert "below review.min_alpha 0.667" in message
    report = " ".join((out / "report.md").read_text(encoding="utf-8").split())
    assert "it does not decide here: people's labels disagree" in report


def test_labels_on_the_judged_fail_answers_alone_never_call_people_in_disagreement(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """Zero tolerance asks people to label the answers the judge failed, and only those: ana and bo fail
    p-000 and p-001 and differ on p-002, which cy settles. Their labels decide no failure rate (nothing
    of the judged-pass stratum is labelled), so they cannot disagree on one: with nearly every label
    `fail`, one difference put Krippendorff's alpha at 0 and the slice was labels_disagree (exit 4, no
    override), its message saying an audit was shown beside a calibration estimate that had passed."""
    # Its own run: the audit plan is sized by the policy the run was made with (a limit and max_failures
    # edited after a run are refused), and zero tolerance puts every answer the judge failed in it.
    zero = audit_suite(tmp_path / "suite", fake, 0.5, max_failures=3)
    lines = answers_of(3)
    run = tmp_path / "run"
    assert run_app(zero, run, write_responses(tmp_path / "responses.jsonl", lines)) == 4
    ledger = tmp_path / "labels"
    ledger.mkdir()
    for i, line in enumerate(lines[:3]):
        label(ledger, line, "fail", reviewers=("ana",))
        label(ledger, line, "fail" if i < 2 else "pass", reviewers=("bo",))
    label(ledger, lines[2], "pass", reviewers=("cy",), kind="adjudication")
    out = tmp_path / "decided"
    assert decide(zero, run, out, "--audit", str(ledger)) == 0
    row = result(out)["product"]["slices"]["critical"]
    assert row["decided_by"] == "calibration" and row["audit"] is None
    assert row["zero_tolerance"]["confirmed"] == ["p-000", "p-001"] and row["zero_tolerance"]["verdict"] == "passed"
