"""`gate decide` of a run's records names that run in its next steps (issue 30, item 5): it
printed the placeholder `--out RUN` where the directory it had just read was known. Real CLI,
real ragas, real HTTP to the fake provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, server_error
from suite import gate, write_suite

from gate.model.paths import shown_path


def test_decide_without_out_names_the_run_it_read(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-decide-names")
    fake_openai.script("c-1", server_error(), server_error())  # an evaluator error: the run is resumable
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "run-17"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 3
    capsys.readouterr()
    assert gate("decide", "--policy", policy, "--records", out) == 3
    printed = capsys.readouterr().out
    assert "--out RUN" not in printed
    assert f"--out {shown_path(out)} --resume" in printed
