"""Tests that notice hand-made mutations of the stop and the product decision (decide/settled.py,
decide/product/verdict.py, run/stop.py, estimate/failure_rate.py): each says what a user would see change.
Through the real CLI and HTTP to the fake provider, except the statistics, which are pure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply, slow
from suite import case, controls, gate, result, write_suite
from test_product_lane import (
    GOOD_JUDGE,
    answer,
    app_suite,
    fake,
    product_case,
    product_suite,
    write_calibration,
    write_responses,
)

from gate.estimate.failure_rate import judge_accuracy, what_would_decide

__all__ = ["fake"]  # the fixture, shared with tests/decide/test_product_lane.py

SENT_CONTROLS = 5  # the missing-evidence control is withheld, never sent
PR_STOP = {"pr": {"partitions": ["sentinel"], "controls": True, "stop_when_decided": True}}
APP_STOP = {
    "calibration": {"partitions": ["calibration"], "controls": True},
    "app": {"partitions": ["product"], "controls": True, "product": True, "stop_when_decided": True},
}


def stop_suite(root: Path, fake: FakeOpenAI, cases: list[dict[str, Any]], **evaluator: Any) -> Path:
    return write_suite(root, [*controls(), *cases], evaluator={"base_url": fake.base_url, **evaluator}, lanes=PR_STOP)


def run(policy: Path, out: Path, lane: str, *extra: str) -> int:
    return gate("run", "--policy", policy, "--lane", lane, "--out", out, "--no-cache", *extra)


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]


# --- decide/settled.py -------------------------------------------------------------------------


def test_a_stopping_lane_that_runs_out_of_budget_is_incomplete_never_passed(tmp_path: Path, fake: FakeOpenAI) -> None:
    # The boundary stops the lane after the controls: nothing is decided, so the cases never sent are
    # unrun (budget_exhausted), not `not_needed`. Settling whatever the verdict exited 0, "nothing blocks".
    policy = stop_suite(tmp_path / "s", fake, [case(f"c-{i}") for i in range(6)], max_concurrency=1)
    out = tmp_path / "out"
    assert run(policy, out, "pr", "--max-cost", "0.002") == 3
    res = result(out)
    assert "budget_exhausted" in [b["kind"] for b in res["blockers"]]
    assert "stopped_early" not in res and res["counts"].get("not_needed", 0) == 0
    assert res["unrun_case_ids"] and all(c["bucket"] != "not_needed" for c in res["cases"])


def test_a_missing_answer_stays_unrun_when_a_product_lane_stops(tmp_path: Path, fake: FakeOpenAI) -> None:
    # The lane stops on an exceeded slice; the case with no line was never sendable: missing_response
    # and unrun, not `not_needed` like the answers the stop spared.
    policy = app_suite(tmp_path / "s", fake, n=80, lanes=APP_STOP)
    write_calibration(policy, {"critical": GOOD_JUDGE})
    lines = [answer(f"p-{i:03d}", "fail" if i % 2 else "pass") for i in range(79)]  # p-079 has no line
    out = tmp_path / "out"
    assert run(policy, out, "app", "--responses", str(write_responses(tmp_path / "r.jsonl", lines))) == 1
    res = result(out)
    kinds = [b["kind"] for b in res["blockers"]]
    assert "failure_rate_exceeded" in kinds and "missing_response" in kinds
    assert res["unrun_case_ids"] == ["p-079"] and "p-079" not in res["stopped_early"]["not_needed"]
    assert {c["case_id"]: c["bucket"] for c in res["cases"]}["p-079"] == "unrun"


def test_a_stopped_lane_with_repeats_counts_every_repeat_it_would_have_made(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("c-bad", reply("pass"))  # people failed it; every repeat passes it: a false pass
    cases = [case("c-bad", label="fail"), case("c-ok")]
    policy = stop_suite(tmp_path / "s", fake, cases, repeats=3, max_concurrency=1)
    out = tmp_path / "out"
    assert run(policy, out, "pr") == 1
    res = result(out)
    judged, scheduled = (SENT_CONTROLS + 1) * 3, (SENT_CONTROLS + 2) * 3
    assert res["stopped_early"]["judged"] == judged and res["stopped_early"]["scheduled"] == scheduled
    assert f"stopped after {judged} of {scheduled} judgments" in " ".join(res["notes"])


# --- run/stop.py -----------------------------------------------------------------------------------


def test_a_case_started_before_the_stop_finishes_all_its_repeats(tmp_path: Path, fake: FakeOpenAI) -> None:
    # Two in flight, three repeats: c-bad's three repeats decide while c-ok's first (slow) is out.
    # c-ok's other two repeats still go, so its verdict is whole; cut between its repeats it would
    # stay unrun, and the run would end evaluation_incomplete.
    fake.script("c-bad", reply("pass"))
    fake.script("Answer for c-ok:", slow(0.6, reply("pass")))
    cases = [case("c-bad", label="fail"), case("c-ok"), *(case(f"g-{i}", slice="general") for i in range(4))]
    policy = stop_suite(tmp_path / "s", fake, cases, repeats=3, max_concurrency=2)
    out = tmp_path / "out"
    assert run(policy, out, "pr") == 1
    res = result(out)
    assert [b["kind"] for b in res["blockers"]] == ["false_pass_limit"] and res["unrun_case_ids"] == []
    assert sorted(r["repeat_index"] for r in records(out) if r["case_id"] == "c-ok") == [0, 1, 2]
    row = {c["case_id"]: c for c in res["cases"]}["c-ok"]
    assert row["bucket"] == "completed" and row["labels"] == ["pass", "pass", "pass"]
    assert res["stopped_early"]["not_needed"] == [f"g-{i}" for i in range(4)]


# --- decide/product/verdict.py ------------------------------------------------------------------

APP = {
    "calibration": {"partitions": ["calibration"], "controls": True},
    "app": {"partitions": ["product"], "controls": True, "product": True},
}


def test_a_failing_slice_is_exceeded_even_with_an_answer_missing(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = app_suite(tmp_path / "s", fake, n=40)
    lines = [answer(f"p-{i:03d}", "fail" if i < 20 else "pass") for i in range(39)]  # p-039: no line
    out = tmp_path / "out"
    assert run(policy, out, "app", "--responses", str(write_responses(tmp_path / "r.jsonl", lines))) == 1
    res = result(out)
    assert sorted(b["kind"] for b in res["blockers"]) == ["failure_rate_exceeded", "missing_response"]
    assert res["product"]["slices"]["critical"]["verdict"] == "exceeded"


def test_fewer_answers_failing_than_on_the_base_or_noise_is_never_regressed(tmp_path: Path, fake: FakeOpenAI) -> None:
    lanes = {**APP, "app": {**APP["app"], "fail_on_regression": True}}
    policy = app_suite(tmp_path / "s", fake, limit=0.8, lanes=lanes)
    write_calibration(policy, {"critical": GOOD_JUDGE})
    base = tmp_path / "base"
    base_lines = [answer(f"p-{i:03d}", "fail" if i < 12 else "pass") for i in range(40)]
    # (exit 4: this base run has no base of its own to compare with, regression_unchecked)
    assert run(policy, base, "app", "--responses", str(write_responses(tmp_path / "b.jsonl", base_lines))) == 4
    heads = {
        # the 12 the base failed now pass: a significant change, the good way
        "better": [answer(f"p-{i:03d}", "pass") for i in range(40)],
        # 3 turned fail and 1 turned pass: p = 0.625, noise
        "noise": [answer(f"p-{i:03d}", "fail" if 1 <= i < 15 else "pass") for i in range(40)],
    }
    tables = {}
    for name, lines in heads.items():
        out = tmp_path / name
        responses = write_responses(tmp_path / f"{name}.jsonl", lines)
        assert run(policy, out, "app", "--responses", str(responses), "--base-result", str(base)) == 0, name
        tables[name] = result(out)["product"]["slices"]["critical"]["base"]
        assert tables[name]["regressed"] is False and result(out)["blockers"] == []
    assert (tables["better"]["pass_to_fail"], tables["better"]["fail_to_pass"]) == (0, 12)
    assert tables["better"]["p_value"] < 0.05
    assert (tables["noise"]["pass_to_fail"], tables["noise"]["fail_to_pass"]) == (3, 1)
    assert tables["noise"]["p_value"] == pytest.approx(0.625)


def test_a_two_slice_lane_stops_only_once_both_slices_pass(tmp_path: Path, fake: FakeOpenAI) -> None:
    slices = {
        "critical": {"max_false_passes": 0, "priority": 0, "max_failure_rate": 0.3},
        "general": {"max_false_passes": 1, "priority": 1, "max_failure_rate": 0.3},
    }
    cases = [product_case(f"p-{i:03d}") for i in range(40)] + [
        product_case(f"q-{i:03d}", slice="general") for i in range(40)
    ]
    evaluator = {"base_url": fake.base_url, "max_concurrency": 1}
    policy = product_suite(tmp_path / "s", cases, slices=slices, evaluator=evaluator, lanes=APP_STOP)
    write_calibration(policy, {"critical": GOOD_JUDGE, "general": GOOD_JUDGE})
    lines = [answer(f"p-{i:03d}", "pass") for i in range(40)] + [answer(f"q-{i:03d}", "pass") for i in range(40)]
    out = tmp_path / "out"
    assert run(policy, out, "app", "--responses", str(write_responses(tmp_path / "r.jsonl", lines))) == 0
    rows = result(out)["product"]["slices"]
    # Critical slices go first: critical passes, and general is still judged until it passes too.
    assert rows["critical"]["verdict"] == "passed" and rows["general"]["verdict"] == "passed"
    assert rows["general"]["n"] >= rows["general"]["decided_at"]["n"] > 0


# --- estimate/failure_rate.py -------------------------------------------------------------------


def test_labelling_is_suggested_only_when_it_takes_a_tenth_of_the_answers() -> None:
    # 163 more answers decide it; 29 labelled failing answers would too, but a label costs a person
    # and an answer a judgment: below ten answers a label, answers are the way.
    judge = judge_accuracy(true_fail=20, false_pass=5, true_pass=200, false_fail=2, confidence=0.95)
    hint = what_would_decide(judged_fail=16, n=200, judge=judge, confidence=0.95, max_failure_rate=0.2)
    assert hint.more_answers is not None and hint.more_answers < 290
    assert hint.more_labelled_fails is None and hint.more_labelled_passes is None
    assert "labelled" not in hint.text and "more answers" in hint.text
