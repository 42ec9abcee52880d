"""`records: {clear_text: false}`: records keep the sha256 of the judge's reason, never its text,
and every reading path (decide, calibrate, compare) still works on them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply
from suite import case, controls, write_suite

from gate.cli import main

REASON = "The answer quotes the customer's order 4411 and states the 7-day window."


def test_clear_text_off_keeps_hashes_and_every_reading_path_works(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    fake_openai.script("Answer for c-1", reply("pass", REASON))
    cases = [*controls(), case("c-1", partition="calibration"), case("c-2", label="fail", partition="calibration")]
    lanes = {"calibration": {"partitions": ["calibration"], "controls": True}}
    policy = write_suite(
        tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url}, lanes=lanes, records={"clear_text": False}
    )
    out = tmp_path / "run"
    assert main(["run", "--policy", str(policy), "--lane", "calibration", "--out", str(out), "--no-cache"]) == 0
    text = (out / "records.jsonl").read_text()
    recs = [json.loads(line) for line in text.splitlines()]
    assert "order 4411" not in text and "Answer for" not in text  # no reason, no response text
    c1 = next(r for r in recs if r["case_id"] == "c-1")
    assert c1["judge_reason"] == "sha256:" + hashlib.sha256(REASON.encode()).hexdigest()
    assert all(r["judge_reason"].startswith("sha256:") for r in recs if r["status"] == "ok")
    for name in ("result.json", "report.md", "summary.md", "junit.xml"):
        assert "order 4411" not in (out / name).read_text(), name

    # decide reads them back to the same verdict
    decided = tmp_path / "decided"
    args = ["decide", "--policy", str(policy), "--records", str(out / "records.jsonl"), "--out", str(decided)]
    assert main(args) == 0
    assert json.loads((decided / "result.json").read_text())["state"] == "passed"

    # calibrate measures them
    cal = tmp_path / "cal"
    assert main(["calibrate", "--policy", str(policy), "--records", str(out / "records.jsonl"), "--out", str(cal)]) == 0
    data = json.loads((cal / "calibration.json").read_text())
    assert data["overall"]["true_pass"] == 1 and data["overall"]["true_fail"] == 1

    # compare finds the changed verdict between two clear_text-off runs
    fake_openai.reset()
    fake_openai.script("Answer for c-1", reply("fail", REASON + " On reflection it misses a step."))
    head = tmp_path / "head"
    main(["run", "--policy", str(policy), "--lane", "calibration", "--out", str(head), "--no-cache"])
    cmp = tmp_path / "cmp"
    assert main(["compare", "--base", str(out), "--head", str(head), "--out", str(cmp)]) == 0
    compared = json.loads((cmp / "compare.json").read_text())
    assert [t["case_id"] for t in compared["transitions"]] == ["c-1"]
    assert "misses a step" not in (cmp / "compare.md").read_text() + (head / "records.jsonl").read_text()


def test_clear_text_is_on_by_default(tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    fake_openai.script("Answer for c-1", reply("pass", REASON))
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "run"
    assert main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"]) == 0
    assert REASON in (out / "records.jsonl").read_text()
