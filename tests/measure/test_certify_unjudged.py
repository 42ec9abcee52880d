"""No certification entry for held-out cases that were not judged (issue 30, item 5): a run that
judged none of its held-out cases still wrote certification-entry.json listing every one, and
appended, that entry would have spent cases nobody looked at. Real CLI, real ragas, real HTTP to
the fake provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply
from suite import result
from test_certify import held_suite, run


def test_a_run_stopped_before_its_held_out_cases_writes_no_entry(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-cert-unjudged")
    fake_openai.script("ctl-positive", reply("fail"))  # a failed control: nothing after it is sent
    policy = held_suite(tmp_path / "suite", fake_openai)
    out = tmp_path / "out"
    assert run(policy, out) == 1
    res = result(out)
    assert fake_openai.count("Question for h-1") == fake_openai.count("Question for h-2") == 0
    assert res["certification"]["ledger_entry"] is None
    assert not (out / "certification-entry.json").exists()
    assert any("no certification entry: 2 of the 2 held-out cases were not judged" in n for n in res["notes"])


def test_a_run_that_judged_every_held_out_case_still_writes_its_entry(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-cert-unjudged")
    out = tmp_path / "out"
    assert run(held_suite(tmp_path / "suite", fake_openai), out) == 0
    assert result(out)["certification"]["ledger_entry"] is not None
    assert (out / "certification-entry.json").is_file()
