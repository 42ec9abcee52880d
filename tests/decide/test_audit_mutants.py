"""Tests that notice hand-made mutations of how people's audit reads labels and decides a product slice
(gate/review/audit_labels.py, gate/decide/product/audit.py and verdict.py, gate/estimate/audit_rate.py,
gate/commands/review.py's queue): each says what a user would see change. Through the real CLI and
HTTP to the fake provider; labels appended as the review page appends them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from suite import result
from test_product_audit import answers_of, audit_suite, decide, judged_once, label, zero_tolerance_run
from test_product_audit import fake as fake  # the fixture
from test_product_lane import GOOD_JUDGE, answer, app_suite, run_app, write_calibration, write_responses

from gate.cli import main
from gate.review.queue import read_queue

Run = tuple[Path, Path, Path, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One run of 60 answers (3 judged fail, a 20% limit) the tests that only decide over it share."""
    return judged_once(tmp_path_factory.mktemp("judged"))


def test_a_final_abstain_counts_against_the_verdict_never_as_a_pass(tmp_path: Path, judged: Run) -> None:
    """Six drawn answers both reviewers abstained on: open, a failure for the upper bound, so the slice
    stays inconclusive (read as passes, the slice passed: exit 0)."""
    policy, _responses, run, lines = judged
    abstained = set(result(run)["product"]["slices"]["critical"]["audit_plan"]["judged_pass"]["case_ids"][:6])
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        label(ledger, line, "abstain" if line["case_id"] in abstained else "fail" if i == 0 else "pass")
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger)) == 4
    audit = result(out)["product"]["slices"]["critical"]["audit"]
    assert audit["judged_pass"]["open"] == 6 and audit["verdict"] == "inconclusive"


def test_zero_tolerance_never_counts_an_abstained_answer_as_audited(tmp_path: Path, fake: Any) -> None:
    """`max_failures: 0`: people cleared p-000 and abstained on p-001, both judged fail. p-001 is not
    audited: audit_required names it (counted as audited, the slice passed: exit 0)."""
    policy, run, lines = zero_tolerance_run(tmp_path, fake)
    ledger = tmp_path / "ledger.jsonl"
    label(ledger, lines[0], "pass")
    label(ledger, lines[1], "abstain")
    for line in lines[2:]:
        label(ledger, line, "pass")
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger)) == 4
    assert [(b["kind"], b["case_ids"]) for b in result(out)["blockers"]] == [("audit_required", ["p-001"])]


def test_on_a_lane_that_stops_once_decided_a_small_audit_never_turns_exceeded_into_inconclusive(
    tmp_path: Path, fake: Any
) -> None:
    """Half the answers fail: the lane stops as soon as its interval is above the 10% limit (exceeded).
    People passed every answer they looked at, a few: the audit alone would leave the slice open or pass
    it, but on a stopping lane it may only hold a slice back, so the slice stays exceeded (exit 1)."""
    policy = audit_suite(tmp_path / "suite", fake, 0.1)
    policy.write_text(policy.read_text().replace("product: true", "product: true\n    stop_when_decided: true"))
    write_calibration(policy, {"critical": GOOD_JUDGE})
    lines = [answer(f"p-{i:03d}", "fail" if i % 2 else "pass") for i in range(60)]
    responses = write_responses(tmp_path / "responses.jsonl", lines)
    run = tmp_path / "run"
    assert run_app(policy, run, responses) == 1
    judged = {c["case_id"] for c in result(run)["cases"] if c["bucket"] == "completed" and c["control_role"] is None}
    assert len(judged) < 60  # it stopped
    ledger = tmp_path / "ledger.jsonl"
    for line in lines:
        if line["case_id"] in judged:
            label(ledger, line, "pass")
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger)) == 1
    row = result(out)["product"]["slices"]["critical"]
    assert (row["verdict"], row["decided_by"]) == ("exceeded", "calibration")
    assert row["audit"]["verdict"] in ("passed", "inconclusive")


def test_a_slice_with_a_missing_answer_is_incomplete_whatever_the_audit_says(tmp_path: Path, fake: Any) -> None:
    """p-059 has no answer in --responses (missing_response): people's audit of the other 59 would pass the
    slice, but an answer nobody judged keeps its row `incomplete`, in result.json and in the report (the
    row read `passed`)."""
    policy = audit_suite(tmp_path / "suite", fake, 0.2)
    lines = answers_of(3)[:59]
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", lines)) == 3
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i == 0 else "pass")
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger), "--responses", str(tmp_path / "responses.jsonl")) == 3
    row = result(out)["product"]["slices"]["critical"]
    assert (row["verdict"], row["decided_by"], row["audit"]["verdict"]) == ("incomplete", "audit", "passed")
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "| `critical` | passed" not in report and "incomplete" in report


def test_an_answer_the_records_judged_but_the_responses_given_lack_is_not_counted_as_judged(
    tmp_path: Path, judged: Run
) -> None:
    """`gate decide --responses` with p-059's line missing, over records that judged p-059: the answer the
    records judged is not one of the answers given, so the slice is incomplete beside its missing_response
    blocker (it counted the record: the row read `passed` on 60 answers, exit 3 with nothing incomplete
    on the screen but the blocker)."""
    policy, responses, run, lines = judged
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i == 0 else "pass")
    assert decide(policy, run, tmp_path / "whole", "--audit", str(ledger), "--responses", str(responses)) == 0
    short = tmp_path / "short.jsonl"
    short.write_text("".join(responses.read_text(encoding="utf-8").splitlines(keepends=True)[:59]), encoding="utf-8")
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger), "--responses", str(short)) == 3
    res = result(out)
    assert [(b["kind"], b["case_ids"]) for b in res["blockers"]] == [("missing_response", ["p-059"])]
    row = res["product"]["slices"]["critical"]
    assert (row["verdict"], row["n"]) == ("incomplete", 59) and res["unrun_case_ids"] == ["p-059"]


def test_the_audit_queue_draws_every_answer_the_judge_failed_however_many(
    tmp_path: Path, fake: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A zero-tolerance slice (`max_failures`) with 101 answers the judge failed: the queue holds all 101
    (zero tolerance needs every one audited; cut at 100, or at the plan's size, one was never queued)."""
    from test_product_lane import verdicts

    policy = app_suite(tmp_path / "suite", fake, n=102, limit=0.9)
    policy.write_text(
        policy.read_text().replace("max_failure_rate: 0.9", "max_failure_rate: 0.9\n    max_failures: 101")
    )
    run = tmp_path / "run"
    run_app(policy, run, write_responses(tmp_path / "r.jsonl", verdicts(102, 101)))
    assert main(["review", "queue", "--policy", str(policy), "--from", str(run), "--out", str(tmp_path / "q")]) == 0
    strata = read_queue(tmp_path / "q").header.design["strata"]["critical"]
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]
    assert plan["judged_fail"]["rate_sample"] < 101  # the plan's own sample is smaller: the queue holds every one
    assert strata == {
        "judged_fail": {"population": 101, "sample": 101},
        "judged_pass": {"population": 1, "sample": plan["judged_pass"]["sample"]},
    }
