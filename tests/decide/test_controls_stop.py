"""Once a control has failed or ended in an evaluator error nothing else is scheduled, and what was
never sent for that reason is `not_needed`, never `control_error` or `unrun`; an auth error
(401/403) stops scheduling too, since every later request would meet it (issue 30, items 1 and 5).
A small model behind a local server showed both: controls never sent reported as errors "see why
each failed" with 0 errors, sentinel judgments paid after every control had errored, and all 16
requests sent after the first 401. Real CLI, real ragas, real HTTP to the fake provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, server_error, unauthorized
from suite import case, controls, gate, result, write_suite

CASES = [*controls(), case("c-1"), case("c-2", label="fail"), case("g-1", slice="general")]


def kinds(res: dict[str, Any]) -> dict[str, list[str]]:
    return {b["kind"]: b["case_ids"] for b in res["blockers"]}


def not_needed(res: dict[str, Any]) -> set[str]:
    return {c["case_id"] for c in res["cases"] if c["bucket"] == "not_needed"}


@pytest.mark.parametrize("concurrency", [1, 4])
def test_an_errored_control_stops_scheduling_and_the_rest_is_not_needed(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, concurrency: int
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-controls-stop")
    fake_openai.script("ctl-negative", server_error(), server_error())  # both attempts: an evaluator error
    ev = {"base_url": fake_openai.base_url, "max_concurrency": concurrency}
    policy = write_suite(tmp_path / "s", CASES, evaluator=ev)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 3
    res = result(out)
    # The one errored control is the control_error; nothing was paid for the cases after it.
    assert kinds(res)["control_error"] == ["ctl-negative"]
    assert not [r for r in fake_openai.requests if "ctl-" not in r.prompt]
    assert {"c-1", "c-2", "g-1"} <= not_needed(res)
    assert res["unrun_case_ids"] == [] and "unrun_cases" not in kinds(res)
    judged = {c["case_id"] for c in res["cases"] if c["bucket"] == "completed"}
    sent = {c["case_id"] for c in CASES if fake_openai.count(c["case_id"])}
    assert judged | {"ctl-negative"} == sent and sent.isdisjoint(not_needed(res))
    # gate decide on the records reaches the same decision.
    decided = tmp_path / "decided"
    assert gate("decide", "--policy", policy, "--records", out, "--out", decided) == 3
    again = result(decided)
    assert kinds(again) == kinds(res) and not_needed(again) == not_needed(res)


def test_the_first_auth_error_stops_scheduling(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-controls-stop")
    fake_openai.default = unauthorized()
    cases = [case(f"c-{i:02d}") for i in range(12)]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url, "max_concurrency": 1})
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--lane", "nocontrols", "--out", out, "--no-cache") == 3
    res = result(out)
    assert fake_openai.count() == 1, "every later request would have met the same 401"
    assert res["cost"]["http_attempts"] == 1 and len(res["unrun_case_ids"]) == 11
    assert any("auth error" in n for n in res["notes"])
