"""People's audit carries over a change of judge model honestly: after the switch, a product lane's
audit reads people's labels on this run's answers (labels are on answers, not on judges), and the
transport test holds the new judge against its own calibration, never the old model's. Real CLI,
real ragas, real HTTP to the fake provider."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, model_of
from suite import result
from test_product_audit import answers_of, audit_suite, decide, label
from test_product_lane import KEY_ENV, run_app, write_calibration, write_responses

NEW = "cand-1"
EXCELLENT = {"true_fail": 990, "false_pass": 10, "true_pass": 990, "false_fail": 10}


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, "sk-test-switch")
    with FakeOpenAI() as server:
        yield server


def test_after_the_switch_the_transport_test_reads_the_new_judges_own_calibration(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    policy = audit_suite(tmp_path / "suite", fake, 0.15)
    write_calibration(policy, {"critical": EXCELLENT})  # the old model's, measured excellent
    lines = answers_of(3)
    responses = write_responses(tmp_path / "responses.jsonl", lines)
    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):  # people fail far more answers than an excellent judge would miss
        label(ledger, line, "fail" if i < 3 or i % 3 == 0 else "pass")
    # The switch: the policy names the new model; its calibration is still the old model's.
    policy.write_text(re.sub(r"(?m)^(\s*model:\s*)\S+", rf"\g<1>{NEW}", policy.read_text(), count=1))
    run = tmp_path / "run"
    run_app(policy, run, responses)
    assert {model_of(r) for r in fake.requests} == {NEW}
    out = tmp_path / "switched"
    decide(policy, run, out, "--audit", str(ledger))
    res = result(out)
    kinds = {b["kind"] for b in res["blockers"]}
    assert "judge_uncalibrated" in kinds and "calibration_not_transferable" not in kinds
    row = res["product"]["slices"]["critical"]
    assert row["judge"] is None  # the old model's figures describe another judge: not used
    assert row["decided_by"] == "audit" and row["audit"]["transport"] is None  # labels on this run's answers decide
    # The new judge's own calibration, adopted: the transport test now holds it against that. A run made
    # before it sized its audit plan without figures (a decide under the new file is refused), so the
    # lane runs again; people's labels are on the same answers and carry over.
    write_calibration(policy, {"critical": EXCELLENT})
    run_app(policy, tmp_path / "adopted", responses, "--audit", str(ledger))
    adopted = result(tmp_path / "adopted")
    assert "judge_uncalibrated" not in {b["kind"] for b in adopted["blockers"]}
    transport = adopted["product"]["slices"]["critical"]["audit"]["transport"]
    assert transport is not None and transport["carries_over"] is False
    assert adopted["lineage"]["evaluator_model"] == NEW
