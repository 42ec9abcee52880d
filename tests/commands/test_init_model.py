"""`gate init` names the judge model: its default is said to be a placeholder to choose, `--model`
writes the team's, and with a key it asks the provider when that model shuts down (the real CLI,
real HTTP to the fake provider's models endpoint)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from suite import gate

from gate.model.policy import today
from gate.model.yaml12 import load_yaml12


def test_the_default_model_is_a_placeholder_and_its_date_is_not_asked_without_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert gate("init", "suite") == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "note: the judge model is gpt-4o-mini, a placeholder: choose yours" in said
    assert "the shutdown date of gpt-4o-mini was not asked (no key in $OPENAI_API_KEY)" in said
    text = (tmp_path / "suite" / "policy.yaml").read_text(encoding="utf-8")
    assert "gpt-4o-mini is a placeholder" in text and load_yaml12(text)["evaluator"]["model"] == "gpt-4o-mini"


def test_init_writes_the_chosen_model_and_asks_the_provider_when_it_shuts_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    day = (today() + dt.timedelta(days=40)).isoformat()
    with FakeOpenAI(models={"team-judge-1": {"shutdown_date": day}}) as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-init")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        assert gate("init", "suite", "--model", "team-judge-1") == 0
        assert [r.path for r in fake.model_lookups] == ["/v1/models/team-judge-1"]
    said = " ".join(capsys.readouterr().out.split())
    assert f"note: team-judge-1 shuts down on {day} (the provider's date, 40 days left)" in said
    assert "placeholder" not in said
    text = (tmp_path / "suite" / "policy.yaml").read_text(encoding="utf-8")
    assert "placeholder" not in text and load_yaml12(text)["evaluator"]["model"] == "team-judge-1"
