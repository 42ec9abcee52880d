"""`make migrate-offline` (scripts/migrate_offline.py) on the example: the judge's model is 7 days
from its shutdown, the release lane is `judge_retiring`, `gate calibrate --candidate-model` writes
the two judges side by side, and the printed change, applied to a copy, passes the release lane's
calibration requirement. Real ragas, real HTTP to the offline provider (two models, two error
patterns, a shutdown date on one)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "policies" / "example" / "policy.yaml"


@pytest.fixture(scope="module")
def scripts() -> Iterator[tuple[ModuleType, ModuleType]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(ROOT / "scripts"))
        import demo_offline
        import migrate_offline

        yield demo_offline, migrate_offline


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, "")  # the scripts set them; the test restores them
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def test_the_example_moves_its_retiring_judge_with_evidence(
    tmp_path: Path, scripts: tuple[ModuleType, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    before = EXAMPLE.read_bytes()
    out = tmp_path / "mig"
    assert scripts[1].main(["--out", str(out)]) == 0
    assert EXAMPLE.read_bytes() == before  # the shipped example never changes
    shown = capsys.readouterr().out
    assert "Judge model gpt-4o-mini shuts down on" in shown and "7 days left" in shown
    assert "evaluator.model: gpt-4o-mini -> candidate-mini" in shown
    release = json.loads((out / "release" / "result.json").read_text())
    assert [b["kind"] for b in release["blockers"]] == ["judge_retiring"]
    migration = json.loads((out / "migration" / "migration.json").read_text())
    assert migration["slices"]["all slices"]["paired"]["current_only_wrong"] == 2
    assert migration["slices"]["all slices"]["paired"]["candidate_only_wrong"] == 1
    adopted = json.loads((out / "release-adopted" / "result.json").read_text())
    assert adopted["state"] == "passed" and adopted["calibration"]["ok"] is True
    assert adopted["lineage"]["evaluator_model"] == "candidate-mini"


def test_the_demo_past_the_shutdown_says_so_once_and_sends_nothing(
    tmp_path: Path, scripts: tuple[ModuleType, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    code = scripts[0].main(["--policy", str(EXAMPLE), "--out", str(out), "--retires-in", "0", "--port", port])
    assert code == 3
    shown = capsys.readouterr().out
    assert "0 HTTP requests reached the offline provider" in shown
    res = json.loads((out / "result.json").read_text())
    assert [b["kind"] for b in res["blockers"]] == ["judge_retired"]
