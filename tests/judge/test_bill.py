"""The bill: usage_missing, over-reservation, the dry run's worst case and the retry loop's bound.

Real HTTP to the fake provider (tests/fake_openai.py) through the real CLI or the real judge.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from suite import case, gate, result, write_suite
from test_judge import evaluator as make_judge
from test_judge import judge_one, mkcase
from test_judge import policy as judge_policy

from gate.judge.budget import Budget

KEY_ENV = "GATE_TEST_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-bill")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line]


def test_a_reply_without_usage_keeps_its_reservation_as_spent(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-1", reply("pass", usage=False))
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
    res = result(out)
    cost = res["cost"]
    assert cost["usage_missing"] == 1
    rec = next(r for r in records(out) if r["case_id"] == "c-1")
    attempt = rec["attempts"][0]
    assert attempt["usage_missing"] is True and attempt["held"] > 0
    assert rec["cost"] == 0 and rec["input_tokens"] == 0  # nothing was reported
    # The reservation is an upper bound of what the request may cost: request bytes + max tokens.
    body = fake_openai.requests_for("c-1")[0].body
    assert attempt["held"] >= (len(json.dumps(body)) * 0.9 + 64 * 2.0) / 1e6
    assert cost["budget_spent"] == pytest.approx(cost["total"] + attempt["held"], rel=1e-12)
    report = (out / "report.md").read_text()
    assert "1 attempt was answered without `usage`" in report and "Budget used" in report


def test_usage_missing_counts_against_the_boundary(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    # Every reply lacks usage: each judgment costs its full reservation (~0.0014 here), so a 0.005
    # boundary admits three judgments, not all twelve that "$0 per reply" would let through.
    fake_openai.default = reply("pass", usage=False)
    cases = [case(f"c-{i:02d}") for i in range(12)]
    policy = write_suite(
        tmp_path / "s",
        cases,
        evaluator={"base_url": fake_openai.base_url, "max_concurrency": 1},
        lanes={"pr": {"partitions": ["sentinel"], "controls": False}},
    )
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--max-cost", "0.005") == 3
    res = result(out)
    held = [a["held"] for r in records(out) for a in r["attempts"]]
    assert res["cost"]["budget_spent"] == pytest.approx(sum(held), rel=1e-12) and sum(held) <= 0.005
    assert sum(held) + max(held) > 0.005  # stopped only when the next reservation did not fit
    assert 1 <= fake_openai.count() == res["cost"]["usage_missing"] == len(held) < 12
    assert "budget_exhausted" in {b["kind"] for b in res["blockers"]}


def test_a_reply_reporting_more_than_its_reservation_stops_scheduling(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("c-03", reply("pass", prompt_tokens=5_000_000))  # $5 at $1/Mtok
    cases = [case(f"c-{i:02d}") for i in range(8)]
    policy = write_suite(
        tmp_path / "s",
        cases,
        evaluator={"base_url": fake_openai.base_url, "max_concurrency": 1},
        lanes={"pr": {"partitions": ["sentinel"], "controls": False}},
        limits={"max_evaluator_errors": 0, "max_total_cost": 100.0},
    )
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 3
    res = result(out)
    assert fake_openai.count() == 4  # c-00..c-03, then nothing more is sent
    assert res["cost"]["over_reservation"] == 1
    assert res["cost"]["total"] == pytest.approx(5.0, rel=1e-3)  # the reported cost is what is counted
    assert sorted(res["unrun_case_ids"]) == [f"c-{i:02d}" for i in range(4, 8)]
    budget = next(b for b in res["blockers"] if b["kind"] == "budget_exhausted")
    assert "above their reserved upper bound" in budget["message"]
    assert "above their reserved upper bound" in (out / "report.md").read_text()


def _at_most(text: str) -> float:
    m = re.search(r"at most ([0-9.]+) USD", text)
    assert m, text
    return float(m.group(1))


def test_dry_run_at_most_counts_every_attempt(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    figures = {}
    for n in (1, 3):
        retries = {"max_attempts": n, "retry_on": ["server_error"]}
        policy = write_suite(tmp_path / f"s{n}", evaluator={"base_url": fake_openai.base_url, "retries": retries})
        assert gate("run", "--policy", policy, "--out", tmp_path / "o", "--dry-run") == 0
        text = capsys.readouterr().out
        figures[n] = _at_most(text)
        assert f"all {n} attempts" in text
    assert figures[3] == pytest.approx(3 * figures[1], rel=1e-2)  # printed to 4 decimals
    assert fake_openai.count() == 0


def test_timeouts_before_the_request_is_sent_are_bounded_by_max_attempts(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    # timeout_s so short that every attempt times out before its request is built: nothing
    # reaches the request hook, and the loop must still stop after max_attempts tries.
    retries = {"max_attempts": 3, "retry_on": ["timeout"]}
    loaded = judge_policy(tmp_path, fake_openai, evaluator={"timeout_s": 0.00001, "retries": retries})
    j = judge_one(make_judge(loaded), mkcase("c-1"), Budget(None))
    assert (j.status, j.error_kind) == ("error", "timeout")
    assert "gave up after 3 attempts" in (j.error_message or "")
    assert fake_openai.count() == 0 and j.attempts == []
