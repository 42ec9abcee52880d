"""`gate review queue`: the answers people label, from each of the four sources, with nothing of the judge.

Every source is made by the real command that makes it (a product run, a metric run, a drift run,
through the real ragas judge against the fake provider), and the queue is read back as a reviewer's
page reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import case, controls, write_suite
from test_drift import drift_run, drift_suite
from test_drift import fake as fake  # the drift suite's fixture
from test_product_lane import app_suite, run_app, verdicts, write_responses

from gate.cli import main
from gate.review.draw import draw_order
from gate.review.queue import read_queue

JUDGE_WORDS = ("verdict", "judge", "model", "gpt-4o-mini", "[[judge", "label")


def queue(policy: Path, source: Path, out: Path, *extra: str) -> int:
    return main(["review", "queue", "--policy", str(policy), "--from", str(source), "--out", str(out), *extra])


def keys_of(path: Path) -> set[str]:
    return {k for line in path.read_text().splitlines()[1:] for k in json.loads(line)}


def test_a_product_run_is_audited_per_slice_in_two_seeded_strata_with_nothing_of_the_judge(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = app_suite(tmp_path / "suite", fake, limit=0.5)  # a limit an audit of 40 answers can decide
    responses = write_responses(tmp_path / "r.jsonl", verdicts(40, 6))
    out = tmp_path / "out"
    run_app(policy, out, responses)
    assert queue(policy, out, tmp_path / "q.jsonl") == 0
    q = read_queue(tmp_path / "q.jsonl")
    strata = q.header.design["strata"]["critical"]
    # The run's audit plan: drawn from the seed the run fixed when it started, as many as the plan sizes.
    plan = json.loads((out / "result.json").read_text())["product"]["slices"]["critical"]["audit_plan"]
    a_f, a_p = plan["judged_fail"]["sample"], plan["judged_pass"]["sample"]
    assert strata == {"judged_fail": {"population": 6, "sample": a_f}, "judged_pass": {"population": 34, "sample": a_p}}
    assert q.header.design["seed"] == plan["seed"] and a_f > 0 and 0 < a_p < 34
    failed = [i for i in q.items if i.stratum == "judged_fail"]
    assert [i.case_id for i in failed] == draw_order(
        q.header.design["seed"], "critical", "judged_fail", [f"p-{i:03d}" for i in range(6)]
    )[:a_f]
    assert [i.draw for i in failed] == list(range(a_f)) and all(i.source == "product-audit" for i in q.items)
    item, case_id = failed[0], failed[0].case_id
    assert item.response == f"App answer for {case_id}. [[judge:fail]]"
    assert item.user_input.startswith(f"Question for {case_id}")
    assert keys_of(tmp_path / "q.jsonl").isdisjoint({"verdict", "reason", "model", "label", "human_adjudication"})
    assert "gate review serve" in capsys.readouterr().out
    assert queue(policy, out, tmp_path / "q.jsonl") == 2  # never over an existing queue
    assert "never overwritten" in capsys.readouterr().err


def test_a_product_run_that_kept_no_answers_needs_the_file_it_judged(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = app_suite(tmp_path / "suite", fake, limit=0.5, records={"clear_text": False})
    responses = write_responses(tmp_path / "r.jsonl", verdicts(40, 2))
    out = tmp_path / "out"
    run_app(policy, out, responses)
    assert queue(policy, out, tmp_path / "q.jsonl") == 2
    assert "kept no copy of the answers it judged" in capsys.readouterr().err
    other = write_responses(tmp_path / "other.jsonl", verdicts(40, 0))
    assert queue(policy, out, tmp_path / "q.jsonl", "--responses", str(other)) == 2
    assert "is not the" in capsys.readouterr().err and not (tmp_path / "q.jsonl").exists()
    assert queue(policy, out, tmp_path / "q.jsonl", "--responses", str(responses)) == 0
    plan = json.loads((out / "result.json").read_text())["product"]["slices"]["critical"]["audit_plan"]
    assert len(read_queue(tmp_path / "q.jsonl").items) == plan["items"] > 0


def test_a_metric_run_queues_its_disagreements_for_the_gold_label_to_be_reviewed_again(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    wrong = case("c-3", label="pass", response="Answer for c-3: refunds within 7 days. [[judge:fail]]")
    cases = [*controls(), case("c-1"), case("c-2", label="fail"), wrong]
    policy = write_suite(tmp_path / "suite", cases, evaluator={"base_url": fake.base_url})
    out = tmp_path / "out"
    main(["run", "--policy", str(policy), "--lane", "pr", "--out", str(out), "--no-cache"])
    assert queue(policy, out, tmp_path / "q.jsonl") == 0
    q = read_queue(tmp_path / "q.jsonl")
    assert [(i.case_id, i.source) for i in q.items] == [("c-3", "disagreement")]
    assert q.items[0].evidence == ("refund-window",) and "human_adjudication" not in keys_of(tmp_path / "q.jsonl")


def test_a_metric_runs_review_required_cases_are_queued_and_its_report_names_the_command(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    unsure = case("c-4", reference=None, human_adjudication={"label": "pass", "reason": "read", "evidence": []})
    cases = [*controls(), case("c-1"), case("c-2", label="fail"), unsure]
    policy = write_suite(tmp_path / "suite", cases, evaluator={"base_url": fake.base_url}, missing_evidence="review")
    out = tmp_path / "out"
    assert main(["run", "--policy", str(policy), "--lane", "pr", "--out", str(out), "--no-cache"]) == 4
    assert f"gate review queue --policy {policy} --from {out} --out review-queue.jsonl" in capsys.readouterr().out
    assert (
        "`gate review queue --policy POLICY --from gate-out --out review-queue.jsonl`"
        in (out / "report.md").read_text()
    )
    assert queue(policy, out, tmp_path / "q.jsonl") == 0
    assert [(i.case_id, i.source) for i in read_queue(tmp_path / "q.jsonl").items] == [("c-4", "review")]


def test_a_drift_run_queues_its_proposed_cases(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = drift_suite(tmp_path / "suite", fake)
    _, _, proposed = drift_run(policy, tmp_path / "run")
    assert "gate review queue --policy POLICY --from OUT" in (tmp_path / "run" / "report.md").read_text()
    notes = json.loads((tmp_path / "run" / "result.json").read_text())["notes"]
    assert any(f"gate review queue --policy {policy} --from {tmp_path / 'run'}" in note for note in notes)
    assert queue(policy, tmp_path / "run", tmp_path / "q.jsonl") == 0
    q = read_queue(tmp_path / "q.jsonl")
    assert sorted(i.response for i in q.items) == sorted(p["response"] for p in proposed)
    assert all(i.source == "drift" and i.case_id is None and "Refunds are allowed" in i.reference for i in q.items)
    assert keys_of(tmp_path / "q.jsonl").isdisjoint({"judge_label", "judge_reason", "why", "previous_label"})


def test_a_file_of_answers_is_queued_with_its_label_ignored_and_two_equal_texts_are_two_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path / "suite")
    rows: list[dict[str, Any]] = [
        {"case_id": "a-1", "user_input": "When?", "response": "Within 7 days.", "slice": "critical", "label": "pass"},
        {"case_id": "a-2", "user_input": "When?", "response": "Within 7 days.", "slice": "critical"},
    ]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert queue(policy, answers, tmp_path / "q.jsonl") == 0
    q = read_queue(tmp_path / "q.jsonl")
    assert [i.case_id for i in q.items] == ["a-1", "a-2"] and q.items[0].item_id != q.items[1].item_id
    assert q.header.policy_path == "suite/policy.yaml" and q.header.allowed_values == ("pass", "fail")
    table = tmp_path / "answers.csv"  # a CSV needs no label column
    table.write_text(
        "case_id,user_input,response,slice,reference\nb-1,When?,Within 7 days.,critical,Refunds: 7 days.\n"
    )
    assert queue(policy, table, tmp_path / "q-csv.jsonl") == 0
    [item] = read_queue(tmp_path / "q-csv.jsonl").items
    assert (item.case_id, item.reference, item.source) == ("b-1", "Refunds: 7 days.", "file")
    answers.write_text('{"case_id": "a-1", "user_input": "When?"}\n')
    assert queue(policy, answers, tmp_path / "q2.jsonl") == 2
    assert "answers.jsonl:1: `response` is empty" in capsys.readouterr().err
