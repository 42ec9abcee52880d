"""The cross-lane property (SPEC 14): every path to a result is `gate decide` over the same evidence.

Scripted runs through the fake provider (a plain run, one killed and resumed, shards merged, a
result decided again) each end in a result.json whose state, blockers, counts and cost equal what
`gate decide` gives over all the evidence the run left (records, trend.jsonl, the attempt journal),
and whose bill is the attempts the provider saw and billed. The suite has a trend, a false pass and
a control, so the verdicts, the trend's bill and the controls' meet on every path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import case, controls, gate, result, write_suite
from test_resume_kill import command, run_until
from test_trend import trend, trend_or_verdict

KEY_ENV = "GATE_TEST_KEY"
PRICE_IN, PRICE_OUT = 1.0, 2.0
CONC = 3


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-one-decision")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def suite(root: Path, fake: FakeOpenAI) -> Path:
    # fp-1: the judge passes an answer people failed (a false pass: quality_failed on every path).
    fake.default = trend_or_verdict({"c-01": "5", "g-01": "2"})
    cases = [
        *controls(),
        *(case(f"c-{i:02d}") for i in range(6)),
        *(case(f"g-{i:02d}", slice="general") for i in range(4)),
        case("fp-1", label="fail", response="Refunds any time. [[judge:pass]]"),
    ]
    return write_suite(root, cases, evaluator={"base_url": fake.base_url, "max_concurrency": CONC}, trend=trend())


def decision(res: dict[str, Any]) -> dict[str, Any]:
    """What must agree: the state, each blocker's kind and cases, the counts and the bill."""
    blockers = sorted((b["state"], b["kind"], tuple(sorted(b["case_ids"]))) for b in res["blockers"])
    cost = {k: (round(v, 12) if isinstance(v, float) else v) for k, v in res["cost"].items() if k != "by_slice"}
    by_slice = {k: round(v, 12) for k, v in res["cost"]["by_slice"].items()}
    return {"state": res["state"], "blockers": blockers, "counts": res["counts"], "cost": cost, "by_slice": by_slice}


def decided(policy: Path, out: Path, *records: Path) -> dict[str, Any]:
    """`gate decide` over the records (and what lies beside them), written into `out`."""
    code = gate("decide", "--policy", policy, "--records", *records, "--out", out)
    res = result(out)
    assert code == res["exit_code"]
    return res


def billed(fake: FakeOpenAI) -> float:
    prompt, completion = fake.usage_totals()
    return (prompt * PRICE_IN + completion * PRICE_OUT) / 1e6


def test_a_plain_run_and_a_redecision_are_gate_decide(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    policy = suite(tmp_path / "s", fake_openai)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 1
    res = result(out)
    assert res["state"] == "quality_failed"
    assert decision(res) == decision(decided(policy, tmp_path / "d1", out / "records.jsonl"))
    # Decided again, into the run's own --out: the same decision, the same bill.
    assert decision(decided(policy, out, out / "records.jsonl")) == decision(res)
    assert res["cost"]["http_attempts"] == fake_openai.count()
    assert res["cost"]["total"] == pytest.approx(billed(fake_openai), rel=1e-9)
    assert sum(res["cost"]["by_slice"].values()) == pytest.approx(res["cost"]["total"], rel=1e-9)


def test_shards_merged_are_gate_decide_over_every_shard(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    policy = suite(tmp_path / "s", fake_openai)
    shards = [tmp_path / f"shard-{i}" for i in (1, 2, 3)]
    for i, out in enumerate(shards, 1):
        gate("run", "--policy", policy, "--out", out, "--shard", f"{i}/3", "--no-cache")
    merged = tmp_path / "merged"
    assert gate("merge", "--policy", policy, *shards, "--out", merged) == 1
    res = result(merged)
    over_shards = decided(policy, tmp_path / "d1", *(s / "records.jsonl" for s in shards))
    over_merged = decided(policy, tmp_path / "d2", merged / "records.jsonl")
    assert decision(res) == decision(over_shards) == decision(over_merged)
    # The bill is what the provider saw: every shard judged every control, and its share of the trend.
    assert res["cost"]["http_attempts"] == fake_openai.count()
    assert res["cost"]["total"] == pytest.approx(billed(fake_openai), rel=1e-9)
    assert res["trend"]["overall"]["n"] == 11


def test_a_killed_then_resumed_run_is_gate_decide_and_bills_every_request(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    policy = suite(tmp_path / "s", fake_openai)
    out = tmp_path / "out"
    fake_openai.latency = 0.1  # judgments are in flight when the run is killed
    run_until(command(policy, out), fake_openai, 7)  # SIGKILL once the provider has 7 requests
    fake_openai.latency = 0.0
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--resume") == 1
    res = result(out)
    assert decision(res) == decision(decided(policy, tmp_path / "d", out / "records.jsonl"))
    # Every request the provider saw is billed; an attempt cut off while being sent (at most one per
    # judgment in flight) is billed too, as it may have arrived.
    http = res["cost"]["http_attempts"]
    assert fake_openai.count() <= http <= fake_openai.count() + CONC
    assert res["cost"]["total"] <= billed(fake_openai) + 1e-12 <= res["cost"]["budget_spent"] + 2e-12
