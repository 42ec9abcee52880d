"""After a timeout the next steps point at the settings that cause it, not at the key (issue 30,
item 3): a local server answers as many requests at once as it has slots, and the wait in its
queue counts in `timeout_s`. The old advice, "check the evaluator's base_url and key", sent a user
after the wrong thing. Real CLI, real ragas, real HTTP to the fake provider (a reply that never
ends, so the timeout fires however loaded the machine is)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, never_ends, server_error
from suite import case, gate, write_suite

CASES = [case("c-1"), case("c-2", label="fail")]


def run_printing(tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str], timeout_s: float) -> str:
    policy = write_suite(
        tmp_path / "s",
        CASES,
        evaluator={"base_url": fake.base_url, "timeout_s": timeout_s, "retries": {"max_attempts": 1}},
    )
    assert gate("run", "--policy", policy, "--lane", "nocontrols", "--out", tmp_path / "o", "--no-cache") == 3
    return capsys.readouterr().out


def test_a_timeout_names_timeout_s_and_max_concurrency_against_the_servers_slots(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-timeout-steps")
    fake_openai.script("c-1", never_ends())
    printed = " ".join(run_printing(tmp_path, fake_openai, capsys, 1).split())
    assert "evaluator.max_concurrency to at most the server's slots" in printed
    assert "evaluator.timeout_s" in printed and "waits in the server's queue" in printed
    assert "timeout or auth: check the evaluator's base_url and key" not in printed


def test_another_error_does_not_get_the_timeout_step(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-timeout-steps")
    fake_openai.script("c-1", server_error())  # and no timeout: 60 s is far beyond any reply here
    printed = " ".join(run_printing(tmp_path, fake_openai, capsys, 60).split())
    assert "Errors are the provider's or the reply's" in printed
    assert "server's slots" not in printed
