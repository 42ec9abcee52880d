"""People's audit decides a product slice: labels on this run's own answers, read from the review ledger.

Every verdict is driven through the real CLI: `gate run` judges the application's answers through the
real ragas judge and real HTTP to the fake provider; people's labels are appended to a ledger through
gate/review/ledger.py as `gate review serve` appends them; `gate decide --audit` and `gate run --audit`
then decide with them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, server_error
from suite import result
from test_product_lane import (
    KEY_ENV,
    answer,
    product_case,
    product_suite,
    run_app,
    write_calibration,
    write_responses,
)

from gate.cli import main
from gate.decide.product.answers import JudgeCounts
from gate.estimate import audit_rate as ar
from gate.review.draw import draw_order
from gate.review.ledger import append_line
from gate.review.queue import item_id

# A judge calibration measured on few labels: the calibration estimate alone stays wide.
WEAK_JUDGE = {"true_fail": 20, "false_pass": 5, "true_pass": 60, "false_fail": 6}


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, "sk-test-audit")
    with FakeOpenAI() as server:
        yield server


def audit_suite(
    root: Path,
    fake: FakeOpenAI,
    limit: float,
    overrides: list[dict[str, Any]] | None = None,
    review: dict[str, Any] | None = None,
    answers: int = 60,
    **slice_keys: Any,
) -> Path:
    slices = {"critical": {"max_false_passes": 0, "priority": 0, "max_failure_rate": limit, **slice_keys}}
    cases = [product_case(f"p-{i:03d}") for i in range(answers)]
    extra: dict[str, Any] = {"overrides": overrides} if overrides else {}
    if review:
        extra["review"] = review
    policy = product_suite(root, cases, slices=slices, evaluator={"base_url": fake.base_url}, **extra)
    write_calibration(policy, {"critical": WEAK_JUDGE})
    return policy


def answers_of(failing: int, answers: int = 60) -> list[dict[str, Any]]:
    return [answer(f"p-{i:03d}", "fail" if i < failing else "pass") for i in range(answers)]


def label(
    ledger: Path, line: dict[str, Any], verdict: str, reviewers: Iterable[str] = ("ana", "bo"), kind: str = "label"
) -> None:
    """People's label of one answer (a --responses line), K = 2 reviewers agreeing, as the review page appends it
    (`kind="adjudication"`: an adjudicator's)."""
    case_id, response = line["case_id"], line["response"]
    item = item_id(
        case_id,
        f"Question for {case_id}: when can I get a refund?",
        "Refunds are allowed within 7 days of purchase.",
        response,
    )
    for reviewer in reviewers:
        append_line(
            ledger,
            {
                "kind": kind,
                "item_id": item,
                "case_id": case_id,
                "response_sha256": hashlib.sha256(response.encode()).hexdigest(),
                "reviewer": reviewer,
                "label": verdict,
                "reason": f"{reviewer} read it against the evidence",
                "queue_sha256": "0" * 64,
                "rubric_version": "rubric-1",
                "blind": True,
            },
        )


def zero_tolerance_run(root: Path, fake: FakeOpenAI, failing: int = 2) -> tuple[Path, Path, list[dict[str, Any]]]:
    """A slice with `max_failures: 0` (limit 50%) whose first `failing` answers the judge fails: (policy,
    run, the answers); the run awaits people's audit of them (exit 4)."""
    policy = audit_suite(root / "suite", fake, 0.5, max_failures=0)
    lines = answers_of(failing)
    run = root / "run"
    assert run_app(policy, run, write_responses(root / "responses.jsonl", lines)) == 4
    return policy, run, lines


def decide(policy: Path, run: Path, out: Path, *extra: str) -> int:
    return main(["decide", "--policy", str(policy), "--records", str(run / "records.jsonl"), "--out", str(out), *extra])


@pytest.fixture()
def good_run(tmp_path: Path, fake: FakeOpenAI) -> tuple[Path, Path, Path, list[dict[str, Any]]]:
    """60 answers, 3 judged fail, a 20% limit: the calibration estimate alone is inconclusive."""
    policy = audit_suite(tmp_path / "suite", fake, 0.2)
    lines = answers_of(3)
    responses = write_responses(tmp_path / "responses.jsonl", lines)
    run = tmp_path / "run"
    assert run_app(policy, run, responses) == 4
    assert result(run)["product"]["slices"]["critical"]["verdict"] == "inconclusive"
    return policy, responses, run, lines


def judged_once(root: Path) -> tuple[Path, Path, Path, list[dict[str, Any]]]:
    """`good_run` for a module-scoped fixture: the run of 60 answers, made once, for tests that only read it
    (decide with labels makes no model call)."""
    with pytest.MonkeyPatch.context() as mp, FakeOpenAI() as server:
        mp.setenv(KEY_ENV, "sk-test-audit")
        policy = audit_suite(root / "suite", server, 0.2)
        lines = answers_of(3)
        responses = write_responses(root / "responses.jsonl", lines)
        assert run_app(policy, root / "run", responses) == 4
    return policy, responses, root / "run", lines


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, list[dict[str, Any]]]:
    """`good_run`, judged once for the tests of this file that only queue and decide over it."""
    return judged_once(tmp_path_factory.mktemp("judged"))


def test_the_audit_decides_a_slice_the_calibration_left_inconclusive_and_a_run_with_the_labels_agrees(
    tmp_path: Path, good_run: tuple[Path, Path, Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    policy, responses, run, lines = good_run
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i == 0 else "pass")  # people confirm 1 of the 3 the judge failed
    capsys.readouterr()
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger)) == 0
    terminal = capsys.readouterr().out
    res = result(out)
    row = res["product"]["slices"]["critical"]
    assert res["state"] == "passed" and row["decided_by"] == "audit" and row["verdict"] == "passed"
    audit = row["audit"]
    assert audit["verdict"] == "passed" and audit["high"] <= 0.2 and audit["confirmed_fail"] == ["p-000"]
    assert audit["judged_fail"] == {"population": 3, "audited": 3, "people_fail": 1, "people_pass": 2, "open": 0}
    # The plan's own sample: labels past it are listed and never used.
    assert audit["judged_pass"]["audited"] == row["audit_plan"]["judged_pass"]["sample"] < 57
    # Both estimates are shown: the calibration's interval still holds the limit.
    assert row["low"] <= 0.2 < row["high"]
    report = (out / "report.md").read_text()
    assert "decided by people's audit" in report and "calibration estimate" in report
    assert "decided by people's audit" in terminal
    # The method line names the audit's method beside calibration's, on the terminal and in the report.
    assert "People's audit: audit-plan+exact-unconditional" in " ".join(terminal.split())
    assert "People's audit: audit-plan+exact-unconditional" in " ".join(report.split())
    assert "(decides)</text>" in (out / "product.svg").read_text()  # the picture draws the audit's interval too

    # The same labels given to the run itself: the same decision.
    again = tmp_path / "again"  # a replay of the run: its seed, so its order and audit plan
    assert run_app(policy, again, responses, "--audit", str(ledger), "--order-seed", res["product"]["order_seed"]) == 0
    # (What would decide the calibration estimate names each run's own directory for its queue.)
    same = json.dumps(result(again)["product"]).replace(str(again), str(run))
    assert json.loads(same) == res["product"] and result(again)["blockers"] == res["blockers"] == []


def test_a_drawn_answer_without_a_final_label_counts_against_the_verdict(
    tmp_path: Path, judged: tuple[Path, Path, Path, list[dict[str, Any]]]
) -> None:
    policy, _responses, run, lines = judged
    skipped = set(result(run)["product"]["slices"]["critical"]["audit_plan"]["judged_pass"]["case_ids"][:6])
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        if line["case_id"] in skipped:
            label(ledger, line, "pass", reviewers=("ana",))  # one label of two: awaiting the second
            continue
        label(ledger, line, "fail" if i == 0 else "pass")
    out = tmp_path / "decided"
    # Six answers people passed so far, each awaiting its second reviewer: counted as failing, they keep
    # the upper bound above the limit; counted as the passes they look like, the slice would pass.
    assert decide(policy, run, out, "--audit", str(ledger)) == 4
    audit = result(out)["product"]["slices"]["critical"]["audit"]
    assert audit["judged_pass"]["open"] == 6 and audit["verdict"] == "inconclusive" and audit["high"] > 0.2
    [b] = result(out)["blockers"]
    assert (
        b["kind"] == "failure_rate_inconclusive" and "without a final label count against the verdict" in b["message"]
    )


def test_the_queue_of_the_run_is_its_audit_plan_and_decide_reads_its_labels(
    tmp_path: Path, judged: tuple[Path, Path, Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    from gate.review.queue import read_queue

    policy, _, run, lines = judged
    queue_path = tmp_path / "queue.jsonl"
    assert main(["review", "queue", "--policy", str(policy), "--from", str(run), "--out", str(queue_path)]) == 0
    queue = read_queue(queue_path)
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]
    assert queue.header.design["seed"] == plan["seed"] == result(run)["product"]["order_seed"]
    assert [i.case_id for i in queue.items if i.stratum == "judged_pass"] == plan["judged_pass"]["case_ids"]
    ledger = tmp_path / "ledger.jsonl"
    for item in queue.items:
        for reviewer in ("ana", "bo"):
            append_line(
                ledger,
                {
                    "kind": "label", "item_id": item.item_id, "case_id": item.case_id,
                    "response_sha256": item.response_sha256, "reviewer": reviewer,
                    "label": "fail" if item.case_id == "p-000" else "pass", "reason": "read against the evidence",
                    "queue_sha256": queue.sha256, "rubric_version": queue.header.rubric_version, "blind": True,
                },
            )  # fmt: skip
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger), "--audit-queue", str(queue_path)) == 0
    audit = result(out)["product"]["slices"]["critical"]["audit"]
    m = plan["judged_pass"]["sample"]
    assert audit["judged_fail"]["audited"] == 3 and audit["judged_pass"] == {
        "population": 57, "audited": m, "people_fail": 0, "people_pass": m, "open": 0,
    }  # fmt: skip
    # A label of an item the queue does not hold (another answer of p-010) is refused, naming the line.
    label(ledger, {**lines[10], "response": "Another answer for p-010."}, "pass", reviewers=("cy",))
    capsys.readouterr()
    assert decide(policy, run, tmp_path / "refused", "--audit", str(ledger), "--audit-queue", str(queue_path)) == 2
    assert "is in no queue given" in capsys.readouterr().err


def test_the_action_input_audit_reaches_the_product_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeOpenAI
) -> None:
    """Through the container entry point: `audit` (relative to the working directory) is the ledger."""
    from fake_github import FakeGitHub
    from runner_env import parse_github_output, runner_env

    from gate.action import main as action_main

    with FakeGitHub(user_status=403) as github:
        monkeypatch.chdir(tmp_path)
        env = runner_env(tmp_path, api_url=github.base_url, lane="app", responses="answers.jsonl", audit="audit")
        env["RAGAS_DO_NOT_TRACK"] = "true"
        evals = tmp_path / "workspace" / "evals"
        policy = audit_suite(evals, fake, 0.2)
        lines = answers_of(3)
        write_responses(evals / "answers.jsonl", lines)
        (evals / "audit").mkdir()
        for i, line in enumerate(lines):
            label(evals / "audit", line, "fail" if i == 0 else "pass")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert policy.is_file() and action_main() == 0
        outputs = parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())
        assert outputs["state"] == "passed"  # the calibration estimate alone: review_required
        row = result(evals / "gate-out")["product"]["slices"]["critical"]
        assert row["decided_by"] == "audit" and row["audit"]["verdict"] == "passed"


def test_the_action_merge_job_decides_the_shards_with_the_audit_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeOpenAI
) -> None:
    """A sharded product lane in the Action: the merge job's `audit` input reaches `gate merge`."""
    from fake_github import FakeGitHub
    from runner_env import parse_github_output, runner_env

    from gate.action import main as action_main

    with FakeGitHub(user_status=403) as github:
        monkeypatch.chdir(tmp_path)
        env = runner_env(
            tmp_path, api_url=github.base_url, lane="app", responses="answers.jsonl", audit="audit", merge="shard-*"
        )
        env["RAGAS_DO_NOT_TRACK"] = "true"
        evals = tmp_path / "workspace" / "evals"
        policy = audit_suite(evals, fake, 0.2)
        lines = answers_of(3)
        responses = write_responses(evals / "answers.jsonl", lines)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        for i in (1, 2):  # the matrix jobs of this workflow run: they share its order seed
            run_app(policy, evals / f"shard-{i}", responses, "--shard", f"{i}/2")
        (evals / "audit").mkdir()
        for i, line in enumerate(lines):
            label(evals / "audit", line, "fail" if i == 0 else "pass")
        assert action_main() == 0
        assert parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())["state"] == "passed"
        row = result(evals / "gate-out")["product"]["slices"]["critical"]
        assert row["decided_by"] == "audit" and row["audit"]["verdict"] == "passed"


def ledger_named_suite(root: Path, fake: FakeOpenAI) -> Path:
    """`audit_suite` at a 20% limit whose app lane names its ledger, `labels/` beside the policy (not made)."""
    lanes = {
        "calibration": {"partitions": ["calibration"], "controls": True},
        "app": {"partitions": ["product"], "controls": True, "product": True, "audit": "labels"},
    }
    slices = {"critical": {"max_false_passes": 0, "priority": 0, "max_failure_rate": 0.2}}
    cases = [product_case(f"p-{i:03d}") for i in range(60)]
    policy = product_suite(root, cases, slices=slices, evaluator={"base_url": fake.base_url}, lanes=lanes)
    write_calibration(policy, {"critical": WEAK_JUDGE})
    return policy


def test_the_policy_names_the_ledger_for_run_and_decide_alike(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = ledger_named_suite(tmp_path / "suite", fake)
    lines = answers_of(3)
    (policy.parent / "labels").mkdir()
    for i, line in enumerate(lines):
        label(policy.parent / "labels", line, "fail" if i == 0 else "pass")
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", lines)) == 0
    assert result(run)["product"]["slices"]["critical"]["decided_by"] == "audit"
    assert decide(policy, run, tmp_path / "decided") == 0
    assert (
        result(tmp_path / "decided")["product"]["slices"]["critical"]["audit"]
        == result(run)["product"]["slices"]["critical"]["audit"]
    )


def test_labels_on_answers_this_run_did_not_judge_are_noted_and_never_used(
    tmp_path: Path, judged: tuple[Path, Path, Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    policy, _, run, lines = judged
    ledger = tmp_path / "ledger.jsonl"
    planned = set(result(run)["product"]["slices"]["critical"]["audit_plan"]["judged_pass"]["case_ids"][:3])
    for line in lines:
        if line["case_id"] in {"p-000", "p-001", "p-002", *planned}:
            label(ledger, line, "pass")
    label(ledger, {**lines[6], "response": "An older answer for p-006."}, "fail")
    out = tmp_path / "decided"
    decide(policy, run, out, "--audit", str(ledger))
    res = result(out)
    audit = res["product"]["slices"]["critical"]["audit"]
    assert audit["missed_fail"] == [] and audit["judged_pass"]["people_fail"] == 0
    assert any("1 label of" in n and "p-006" in n and "not used" in n for n in res["notes"])

    # A ledger with no label on this run (an earlier release's): a note, never an error.
    other = tmp_path / "other.jsonl"
    label(other, {**lines[6], "response": "An older answer for p-006."}, "fail")
    capsys.readouterr()
    assert decide(policy, run, tmp_path / "earlier", "--audit", str(other)) == 4
    notes = [n for n in result(tmp_path / "earlier")["notes"] if "other.jsonl" in n]
    assert "no label of" in notes[0] and "the audit decides nothing here" in notes[0] and "p-006" in notes[1]
    assert not any("--audit-queue" in n for n in notes)


def test_an_audit_that_confirms_the_failures_exceeds_the_limit_the_calibration_could_not(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = audit_suite(tmp_path / "suite", fake, 0.05)
    lines = answers_of(20)
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", lines)) == 4
    # What would decide it names the audit plan, its items and labels counted apart, with the command that
    # makes its queue and the power it is sized to; labelling part of it decides nothing yet.
    [open_] = result(run)["blockers"]
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]
    assert (plan["aim"], plan["judged_fail"]["sample"], plan["judged_pass"]["sample"]) == ("exceeded", 6, 0)
    route = (
        "people labelling this run's audit plan, 6 items (6 of the 20 answers the judge failed and none "
        "of the 40 it passed), 12 labels at two reviewers an item (`gate review queue --policy"
    )
    message = " ".join(open_["message"].split())
    assert route in message, message
    assert f"--from {run} --out audit-queue.jsonl`), sized before the run to show it exceeded " in message
    partial_ledger = tmp_path / "partial.jsonl"
    for case_id in plan["judged_fail"]["case_ids"][:3]:
        label(partial_ledger, lines[int(case_id[2:])], "fail")
    assert decide(policy, run, tmp_path / "partial", "--audit", str(partial_ledger)) == 4
    partial = result(tmp_path / "partial")["product"]["slices"]["critical"]["audit"]
    assert partial["judged_fail"]["audited"] == 6 and partial["judged_fail"]["open"] == 3
    assert "3 planned answers of the 6 items of this run's audit plan have no final label" in partial["decide_hint"]
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i < 20 else "pass")
    out = tmp_path / "decided"
    capsys.readouterr()
    assert decide(policy, run, out, "--audit", str(ledger)) == 1
    # An answer people audited shows their label, never "human unlabelled", on the terminal and in the report.
    screen = " ".join(capsys.readouterr().out.split())
    first = result(out)["blockers"][0]["case_ids"][0]  # the blocker's answers, in the plan's draw order
    assert f"{first}: human fail (people's audit), judge fail" in screen and "human unlabelled" not in screen, screen
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "human **fail (people's audit)**, judge **fail**" in report and "unlabelled" not in report
    res = result(out)
    [b] = [b for b in res["blockers"] if b["kind"] == "failure_rate_exceeded"]
    assert b["state"] == "quality_failed" and "people's audit" in b["message"] and len(b["case_ids"]) == 6
    row = res["product"]["slices"]["critical"]
    assert row["decided_by"] == "audit" and row["verdict"] == "exceeded" and row["audit"]["low"] > 0.1


def test_a_judge_whose_calibration_does_not_describe_it_on_this_run_is_flagged(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    policy = audit_suite(tmp_path / "suite", fake, 0.15)
    write_calibration(policy, {"critical": {"true_fail": 990, "false_pass": 10, "true_pass": 990, "false_fail": 10}})
    lines = answers_of(3)
    run = tmp_path / "run"
    # The calibration estimate passes the slice: the judge measured excellent failed only 3 of 60.
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", lines)) == 0
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        # people fail four in five of the answers the judge passed: it misses far more than calibration measured
        # (at least 19 of any 30 the plan draws of the 57, whatever the run's seed)
        label(ledger, line, "fail" if i < 3 or i % 5 != 0 else "pass")
    out = tmp_path / "decided"
    assert decide(policy, run, out, "--audit", str(ledger)) == 1
    res = result(out)
    by_kind = {b["kind"]: b for b in res["blockers"]}
    assert set(by_kind) == {"failure_rate_exceeded", "calibration_not_transferable"}
    b = by_kind["calibration_not_transferable"]
    assert b["state"] == "review_required"
    assert "calibration measured Se 99% and Sp 99%" in b["message"] and b["slice"] == "critical"
    row = res["product"]["slices"]["critical"]
    assert row["decided_by"] == "audit" and row["audit"]["transport"]["carries_over"] is False
    assert row["high"] <= 0.15 < row["audit"]["low"]  # the calibration estimate alone would have passed it


def test_zero_tolerance_requires_every_judged_fail_answer_audited_and_fails_on_a_confirmed_one(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = audit_suite(tmp_path / "suite", fake, 0.5, max_failures=0)
    lines = answers_of(2)
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", lines)) == 4
    [b] = result(run)["blockers"]
    assert b["kind"] == "audit_required" and b["case_ids"] == ["p-000", "p-001"]
    assert "gate review queue --policy" in b["message"] and f"--from {run}" in b["message"]

    ledger = tmp_path / "ledger.jsonl"
    label(ledger, lines[0], "pass")
    out = tmp_path / "one"
    assert decide(policy, run, out, "--audit", str(ledger)) == 4
    assert [(b["kind"], b["case_ids"]) for b in result(out)["blockers"]] == [("audit_required", ["p-001"])]

    label(ledger, lines[1], "fail")
    out = tmp_path / "two"
    assert decide(policy, run, out, "--audit", str(ledger)) == 1
    res = result(out)
    [b] = [b for b in res["blockers"] if b["kind"] == "failure_confirmed"]
    assert b["state"] == "quality_failed" and b["case_ids"] == ["p-001"]
    assert res["product"]["slices"]["critical"]["zero_tolerance"]["cleared"] == ["p-000"]


def test_a_long_list_of_answers_to_audit_names_ten_and_counts_the_rest(tmp_path: Path, fake: FakeOpenAI) -> None:
    """The message names the first ten answers and says how many more; the blocker lists all of them."""
    policy = audit_suite(tmp_path / "suite", fake, 0.5, max_failures=0)
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", answers_of(13))) == 4
    blockers = result(run)["blockers"]
    [b] = [x for x in blockers if x["kind"] == "audit_required"]
    assert b["case_ids"] == [f"p-{i:03d}" for i in range(13)]
    assert "p-000, p-001, p-002, p-003, p-004, p-005, p-006, p-007, p-008, p-009 and 3 more)" in b["message"]
    assert "p-010" not in b["message"]


def test_audit_flags_outside_a_product_lane_are_usage_errors(
    tmp_path: Path, judged: tuple[Path, Path, Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    policy, _, run, _ = judged
    capsys.readouterr()
    assert decide(policy, run, tmp_path / "x", "--audit-queue", str(tmp_path / "q.jsonl")) == 2
    assert "fix: add --audit LEDGER" in capsys.readouterr().err
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"kind": "label"\n', encoding="utf-8")
    assert decide(policy, run, tmp_path / "y", "--audit", str(broken)) == 2
    err = capsys.readouterr().err
    assert "broken.jsonl:1" in err and "Traceback" not in err
    assert json.loads((run / "result.json").read_text())["state"] == "review_required"


def test_junit_has_a_failing_test_per_answer_judged_fail_with_peoples_label_and_errors_as_errors(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    import xml.etree.ElementTree as ET

    policy = audit_suite(tmp_path / "suite", fake, 0.5, max_failures=5)
    lines = answers_of(3)
    lines[10] = {"case_id": "p-010", "response": "App answer for p-010. [[judge:http=500]]"}
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", lines)) == 3
    ledger = tmp_path / "ledger.jsonl"
    label(ledger, lines[0], "fail")
    label(ledger, lines[1], "pass")
    out = tmp_path / "decided"
    decide(policy, run, out, "--audit", str(ledger))
    suite = ET.parse(out / "junit.xml").getroot()
    found = {tc.get("name"): tc for tc in suite.iter("testcase")}
    failures = {name: tc.find("failure") for name, tc in found.items() if tc.find("failure") is not None}
    assert sorted(failures) == ["p-000", "p-001", "p-002"] and suite.get("failures") == "3"
    assert failures["p-000"].get("message") == "slice critical: the judge failed this answer; people's label: fail"
    assert failures["p-001"].get("message") == "slice critical: the judge failed this answer; people's label: pass"
    assert failures["p-002"].get("message") == "slice critical: the judge failed this answer; not audited by people"
    assert failures["p-000"].text == "oracle marker says fail"  # the judge's reason
    assert found["p-010"].find("error") is not None and suite.get("errors") == "1"
    assert found["p-020"].find("failure") is None and found["p-020"].find("error") is None


def test_validate_says_the_smallest_limit_a_product_slice_could_pass_and_agrees_with_run(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = audit_suite(tmp_path / "suite", fake, 0.02)
    capsys.readouterr()
    assert main(["validate", "--policy", str(policy), "--lane", "app"]) == 1
    out = capsys.readouterr().out
    assert "slice critical: with its calibration (Se 20/25, Sp 60/66) and the 60 answers lane app holds" in out
    assert "its limit 2% is below" in out and "no run can pass it" in out
    # No run can: even with no answer judged fail the slice stays open.
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", answers_of(0))) == 4
    assert result(run)["product"]["slices"]["critical"]["verdict"] == "inconclusive"

    loose = audit_suite(tmp_path / "loose", fake, 0.5)
    assert main(["validate", "--policy", str(loose), "--lane", "app"]) == 0
    assert "the smallest max_failure_rate it could pass is" in capsys.readouterr().out
    # A calibration that measured another judge: judge_uncalibrated in validate, as in the run.
    prompt = loose.parent / "prompt.txt"
    prompt.write_text(prompt.read_text() + "Be strict.\n", encoding="utf-8")
    assert main(["validate", "--policy", str(loose), "--lane", "app"]) == 1
    assert "judge_uncalibrated" in capsys.readouterr().out
    assert run_app(loose, tmp_path / "other", write_responses(tmp_path / "r2.jsonl", answers_of(0))) == 4
    assert [b["kind"] for b in result(tmp_path / "other")["blockers"]] == ["judge_uncalibrated"]
    # A slice without max_failure_rate: the run's policy error (exit 2), said by validate too.
    bare = product_suite(tmp_path / "bare", [product_case("p-1")], slices={"critical": {"max_false_passes": 0}})
    capsys.readouterr()
    assert main(["validate", "--policy", str(bare), "--lane", "app"]) == 2
    assert "`slices.critical.max_failure_rate` is missing" in capsys.readouterr().err


def override(blocker: str, **scope: Any) -> dict[str, Any]:
    return {
        "id": "ovr-1",
        "blocker": blocker,
        "approver": "@release-lead",
        "reason": "the three failing answers were read and accepted",
        "evidence": "https://example.com/ticket/7",
        "expires": "2099-01-01",
        "follow_up": "audit the next release",
        **scope,
    }


def test_a_person_may_decide_an_inconclusive_slice_but_never_an_exceeded_one(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = audit_suite(tmp_path / "suite", fake, 0.2, [override("failure_rate_inconclusive", slice="critical")])
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", answers_of(3))) == 0
    res = result(run)
    assert res["state"] == "passed" and res["product"]["slices"]["critical"]["verdict"] == "inconclusive"
    [w] = res["waived"]
    assert w["kind"] == "failure_rate_inconclusive" and w["slice"] == "critical" and w["approver"] == "@release-lead"
    report = (run / "report.md").read_text()
    # Beside the slice, the approver (a mention defused in Markdown: no one is pinged).
    beside = r"`critical` decided by a person: failure\_rate\_inconclusive waived by override ovr-1, approved by @"
    assert beside + "\u200drelease-lead" in report
    assert "decided by a person" in capsys.readouterr().out

    for kind in ("failure_rate_exceeded", "failure_confirmed", "regressed"):
        refused = product_suite(tmp_path / kind, [product_case("p-1")], overrides=[override(kind, slice="critical")])
        assert main(["validate", "--policy", str(refused)]) == 2
        err = capsys.readouterr().err
        assert f"{kind} cannot be waived for a slice" in err and "fix: name one of failure_rate_inconclusive" in err
    both = product_suite(
        tmp_path / "both",
        [product_case("p-1")],
        overrides=[override("judge_unfit", slice="critical", case_ids=["p-1"])],
    )
    assert main(["validate", "--policy", str(both)]) == 2
    assert "either `case_ids`" in capsys.readouterr().err


# --- the statistics, pure ---


def test_a_strata_sample_is_the_draw_prefix_to_its_last_final_label_and_open_answers_widen_both_sides() -> None:
    order = ["a", "b", "c", "d", "e"]
    sample = ar.stratum_sample(order, {"a": "pass", "c": "fail", "x": "fail"})
    assert (sample.size, sample.fails, sample.passes, sample.open) == (3, 1, 1, 1) and sample.case_ids == (
        "a",
        "b",
        "c",
    )
    # 200 answers the judge passed, the first 60 of their draw labelled, one of them (p-007) still open.
    passing = [f"p-{i:03d}" for i in range(200)]
    labels: dict[str, ar.Final] = {c: "pass" for c in passing[:60]}
    labels["p-003"] = "fail"
    opened = {c: v for c, v in labels.items() if c != "p-007"}
    fail = ar.StratumSample(population=10, size=10, fails=5, passes=5, case_ids=())
    settled = ar.audit_rate(fail_sample=fail, pass_sample=ar.stratum_sample(passing, labels), confidence=0.95)
    unsettled = ar.audit_rate(fail_sample=fail, pass_sample=ar.stratum_sample(passing, opened), confidence=0.95)
    assert unsettled.pass_sample.open == 1 and settled.pass_sample.open == 0
    assert unsettled.low <= settled.low and unsettled.high > settled.high  # a failure for high, a pass for low
    # No answer judged fail, 300 the judge passed audited and people passed every one: the only way to be
    # wrong is a failure rate at which 300 passes in a row happen 5% of the time or less, 1 - 0.05^(1/300).
    nothing = ar.audit_rate(
        fail_sample=ar.StratumSample(0, 0, 0, 0, ()),
        pass_sample=ar.StratumSample(300, 300, 0, 300, ()),
        confidence=0.95,
    )
    edge = 1 - 0.05 ** (1 / 300)
    assert nothing.estimate == 0.0 and nothing.low == 0.0
    assert edge <= nothing.high <= edge * 1.01  # the nuisance grid's cells may only widen it, and by little
    assert ar.audit_verdict(nothing, 0.0101) == "passed" and ar.audit_verdict(nothing, 0.0098) == "inconclusive"


@pytest.mark.parametrize(
    ("judged_fail", "n", "counts", "limit", "aim"),
    [
        (2, 120, JudgeCounts(true_pass=120, true_fail=50, false_pass=10, false_fail=0), 0.15, "passed"),
        (20, 60, JudgeCounts(true_fail=20, false_pass=5, true_pass=60, false_fail=1), 0.1, "exceeded"),
    ],
)
def test_the_plans_power_is_the_chance_the_decisions_own_verdict_reaches_its_aim(
    judged_fail: int, n: int, counts: JudgeCounts, limit: float, aim: str
) -> None:
    """The power a run's plan states ("sized to pass it 93.4% of the time") is counted by the verdict the
    audit decides with: every outcome of the planned labels, people failing each stratum at the shares the
    plan was sized at, put through `plan_verdict` as `gate decide` does, reaches the plan's aim with
    exactly that chance. A planner with a test of its own would state a power the decision does not keep."""
    from scipy.stats import binom

    from gate.decide.product.audit_plan import size_plan
    from gate.estimate import audit_sizing as ep

    # The power is stated at the judged-fail count calibration expects at the rate the plan was sized at.
    k = size_plan(judged_fail, n - judged_fail, counts, limit, 0.95).part.expected_k
    z = size_plan(k, n - k, counts, limit, 0.95)
    judged_fail = k
    assert z.decides and z.aim == aim and z.power >= 0.8 and 0 < z.fail_labels + z.pass_labels < n
    reached = 0.0
    for x_f in range(z.fail_labels + 1):
        for x_p in range(z.pass_labels + 1):
            chance = binom.pmf(x_f, z.fail_labels, z.q_fail) * binom.pmf(x_p, z.pass_labels, z.q_pass)
            fs = ["fail"] * x_f + ["pass"] * (z.fail_labels - x_f)
            ps = ["fail"] * x_p + ["pass"] * (z.pass_labels - x_p)
            reached += chance if ep.plan_verdict(z, fs, ps) == aim else 0.0
    assert reached == pytest.approx(z.power, abs=1e-9)


def test_an_answer_the_judge_passed_and_people_failed_counts_against_zero_tolerance() -> None:
    """A zero-tolerance slice (max_failures: 0) where the judge failed nothing, and people's audit of
    the answers it passed found one failing: that is a confirmed failure (policies/example-product's
    account-security in v2.4 said "zero tolerance: passed" over lockout-app-012)."""

    z = ar.zero_tolerance((), {"a": "fail", "b": "pass"}, 0, ("a", "b", "c"))
    assert (z.verdict, z.failures, z.missed) == ("failure_confirmed", ("a",), ("a",))
    assert ar.zero_tolerance((), {"b": "pass"}, 0, ("a", "b")).verdict == "passed"
    assert ar.zero_tolerance(("x",), {"a": "fail", "x": "fail"}, 1, ("a",)).verdict == "failure_confirmed"


def test_merged_shards_are_decided_with_the_audit_as_the_whole_run_is(
    tmp_path: Path, good_run: tuple[Path, Path, Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    """`gate merge --audit`: the shards of a product lane, merged with people's labels, reach the verdict
    the whole run reaches with them (a sharded CI has no other route to the audit but a re-decide)."""
    policy, responses, run, lines = good_run
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i == 0 else "pass")
    whole = tmp_path / "whole"
    assert decide(policy, run, whole, "--audit", str(ledger)) == 0
    shards = [tmp_path / f"shard-{i}" for i in (1, 2)]
    seed = result(whole)["product"]["order_seed"]  # the shards of one run share its seed
    for i, out in enumerate(shards, start=1):
        run_app(policy, out, responses, "--shard", f"{i}/2", "--order-seed", seed)
    merged = tmp_path / "merged"
    args = ["merge", "--policy", str(policy), *map(str, shards), "--out", str(merged), "--responses", str(responses)]
    assert main(args) == 4  # without the labels: the calibration estimate alone, inconclusive
    # The command that makes the audit queue names the merged output, which holds every shard's records (a queue
    # made from shard 1's would hold its answers only).
    hint = result(merged)["product"]["slices"]["critical"]["decide_hint"]
    assert f"--from {merged} --out audit-queue.jsonl" in hint and str(shards[0]) not in hint, hint
    assert main([*args, "--audit", str(ledger)]) == 0
    row = result(merged)["product"]["slices"]["critical"]
    assert row["decided_by"] == "audit" and row["audit"] == result(whole)["product"]["slices"]["critical"]["audit"]
    capsys.readouterr()
    assert main([*args, "--audit", str(tmp_path / "nowhere.jsonl")]) == 2
    assert "nowhere.jsonl" in capsys.readouterr().err


def test_an_audited_answer_is_settled_by_as_many_people_as_the_policy_asks(tmp_path: Path, fake: FakeOpenAI) -> None:
    """`review.reviewers_per_item: 3`: two agreeing labels leave an answer awaiting its third reviewer, as
    `gate review serve` and `status` count it, so the audit cannot decide yet; with the third it does."""
    policy = audit_suite(tmp_path / "suite", fake, 0.2, review={"reviewers_per_item": 3})
    lines = answers_of(3)
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", lines)) == 4
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i == 0 else "pass")  # ana and bo: two of the three
    assert decide(policy, run, tmp_path / "two", "--audit", str(ledger)) == 4
    assert result(tmp_path / "two")["product"]["slices"]["critical"]["decided_by"] == "calibration"
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i == 0 else "pass", reviewers=("cy",))
    assert decide(policy, run, tmp_path / "three", "--audit", str(ledger)) == 0
    assert result(tmp_path / "three")["product"]["slices"]["critical"]["decided_by"] == "audit"


def test_a_shard_holding_none_of_the_audited_answers_still_runs_with_the_ledger(
    tmp_path: Path, good_run: tuple[Path, Path, Path, list[dict[str, Any]]]
) -> None:
    """A workflow gives `audit` to every matrix job. A shard whose share holds none of the labelled
    answers is no wrong ledger: the labels are on answers of the lane it is a share of. It runs (never
    exit 2), and the merge reads them."""
    policy, responses, _run, lines = good_run
    ledger = tmp_path / "ledger.jsonl"
    from gate.plan.shard import shard_of

    # One answer the judge failed and the first of the plan's answers it passed, both in shard 2: shard 1
    # holds neither.
    first = draw_order("one-run", "critical", "judged_pass", [line["case_id"] for line in lines[3:]])[0]
    label(ledger, lines[0], "fail")
    label(ledger, lines[int(first[2:])], "pass")
    assert {shard_of(c, 2) for c in ("p-000", first)} == {2}
    shards = [tmp_path / f"shard-{i}" for i in (1, 2)]
    codes = [
        run_app(policy, out, responses, "--shard", f"{i}/2", "--audit", str(ledger), "--order-seed", "one-run")
        for i, out in enumerate(shards, 1)
    ]
    assert 2 not in codes and all((out / "result.json").is_file() for out in shards)
    merged = tmp_path / "merged"
    args = ["merge", "--policy", str(policy), *map(str, shards), "--out", str(merged), "--responses", str(responses)]
    assert main([*args, "--audit", str(ledger)]) == 4
    assert result(merged)["product"]["slices"]["critical"]["audit"]["confirmed_fail"] == ["p-000"]


def test_on_a_lane_that_stops_once_decided_the_audit_holds_a_slice_back_but_never_passes_one(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """`stop_when_decided: true`: how many answers the lane judged hung on the judge's verdicts, and the
    audit's tests count on a number fixed in advance, so the audit there may only raise a verdict. At an
    8% limit the sequential interval can never pass this slice (this judge's calibration, 3 labelled
    failing answers, leaves it above the limit even with no answer judged fail), whatever order the
    answers come in: it judges all 200 and leaves the slice open. People's labels (the one answer the
    judge failed cleared, none failing) would pass it, and did (exit 0); they stay beside the open
    verdict. Labels that fail every answer hold it back: exceeded."""
    policy = audit_suite(tmp_path / "suite", fake, 0.08, answers=200)
    write_calibration(policy, {"critical": {"true_fail": 3, "false_pass": 0, "true_pass": 60, "false_fail": 0}})
    policy.write_text(policy.read_text().replace("product: true", "product: true\n    stop_when_decided: true"))
    lines = answers_of(1, answers=200)
    responses = write_responses(tmp_path / "responses.jsonl", lines)
    ledger = tmp_path / "ledger.jsonl"
    for line in lines:
        label(ledger, line, "pass")
    run = tmp_path / "open"
    assert run_app(policy, run, responses, "--audit", str(ledger)) == 4
    row = result(run)["product"]["slices"]["critical"]
    assert (row["n"], row["verdict"], row["decided_by"], row["audit"]["verdict"]) == (
        200,
        "inconclusive",
        "calibration",
        "passed",
    )
    assert "people labelling" not in (row["decide_hint"] or "")  # the audit is no route to a pass here
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "it does not decide here: on a lane that stops once decided the audit may hold" in report
    failing = tmp_path / "failing.jsonl"
    for line in lines:
        label(failing, line, "fail")
    assert decide(policy, run, tmp_path / "held", "--audit", str(failing)) == 1
    held = result(tmp_path / "held")["product"]["slices"]["critical"]
    assert (held["verdict"], held["decided_by"], held["calibration_verdict"]) == ("exceeded", "audit", "inconclusive")


def test_the_transport_test_notices_a_drop_in_sensitivity_that_the_odds_ratio_hides() -> None:
    """Calibration measured Se 0.9 and Sp 0.99 (100 + 1,000 labelled answers); on this run of 3,000 the
    judge failed 118, people confirm 90 of them and fail 28 of 1,000 it passed: Se about 0.53. The odds
    ratios the two allow overlap (Sp's width hides it), so the test said the calibration carried over;
    Se measured on the run against calibration's Se, from the same bounds, sets them apart."""

    def on_the_run(missed: int) -> ar.Transport | None:
        return ar.transport(
            fail_sample=ar.StratumSample(118, 118, 90, 28, ()),
            pass_sample=ar.StratumSample(2882, 1000, missed, 1000 - missed, ()),
            true_fail=90, false_pass=10, true_pass=990, false_fail=10, confidence=0.95,
        )  # fmt: skip

    dropped = on_the_run(28)
    assert dropped is not None and dropped.run_se is not None and dropped.run_se < 0.6
    assert dropped.predicted[0] <= dropped.seen[1]  # the odds ratios overlap
    assert dropped.carries_over is False
    same = on_the_run(5)  # Se about 0.86 on the run, as calibration measured
    assert same is not None and same.carries_over is True


def test_a_lane_that_stops_once_decided_judges_every_answer_of_a_zero_tolerance_slice(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """`max_failures: 0` on a lane with `stop_when_decided`: the judge passes the first answers and the
    interval passes the slice early, but zero tolerance asks people to confirm every answer the judge
    fails, so the lane judges all 60 (it stopped at 40 judgments, 25 answers never judged, and zero
    tolerance read 'passed'). The one answer the judge fails, wherever the seeded order puts it, then
    awaits people: audit_required."""
    policy = audit_suite(tmp_path / "suite", fake, 0.2, max_failures=0)
    policy.write_text(policy.read_text().replace("product: true", "product: true\n    stop_when_decided: true"))
    lines = answers_of(1)
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", lines)) == 4
    res = result(run)
    row = res["product"]["slices"]["critical"]
    assert row["n"] == 60 and res["counts"].get("not_needed", 0) == 0, res["counts"]
    assert row["zero_tolerance"]["verdict"] == "audit_required" and row["zero_tolerance"]["unaudited"] == ["p-000"]
    assert [b["kind"] for b in res["blockers"]] == ["audit_required"]


def test_a_zero_tolerance_slice_never_passes_over_an_answer_the_judge_did_not_judge(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """`max_failures: 0`, and the lane tolerates one evaluator error (`limits.max_evaluator_errors: 1`):
    the provider fails on p-007 every time, so nobody has checked it. The slice stays open, naming
    p-007 and how to judge it (it read 'zero tolerance: passed', exit 0)."""
    policy = audit_suite(tmp_path / "suite", fake, 0.2, max_failures=0)
    policy.write_text(policy.read_text().replace("max_evaluator_errors: 0", "max_evaluator_errors: 1"))
    fake.script("App answer for p-007.", server_error())
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "responses.jsonl", answers_of(0))) == 4
    res = result(run)
    zero = res["product"]["slices"]["critical"]["zero_tolerance"]
    assert (zero["verdict"], zero["unjudged"]) == ("audit_required", ["p-007"])
    [b] = res["blockers"]
    assert b["kind"] == "audit_required" and b["case_ids"] == ["p-007"] and "--resume" in b["message"]
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "zero tolerance: open until every answer is judged" in report
