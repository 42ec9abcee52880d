"""`make migration-check` stages 2 and 3 (scripts/migration_check.py) on the example suite,
offline against the fake provider, compared with the stored run. Stage 1 is
tests/judge/test_ragas_contract.py and tests/model/test_schema_versions.py, run on their own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import migration_check  # noqa: E402

EXAMPLE = ROOT / "policies" / "example" / "policy.yaml"


def first_critical_case() -> str:
    for line in (migration_check.BASELINE / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["slice"] == "billing-policy-critical" and rec["control_role"] is None:
            return str(rec["case_id"])
    raise AssertionError("the stored run has no critical case")


def test_a_judge_that_moved_is_read_as_evaluator_behaviour(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    flipped = first_critical_case()
    result = migration_check.run_stage(EXAMPLE, "pr", tmp_path / "run", flips=[flipped])
    assert (result.get("controls") or {}).get("ok") is True
    comparison = migration_check.compare_stage(migration_check.BASELINE, tmp_path / "run", EXAMPLE, tmp_path / "cmp")
    moved = {t["case_id"]: t for t in comparison["transitions"]}
    assert moved[flipped]["critical"] is True and moved[flipped]["first_divergence"] == "none"
    assert migration_check.diagnose(result, comparison) is False
    out = capsys.readouterr().out
    assert "3/3 compare against the stored run" in out
    assert f"- none: 1 case ({flipped}): same rendered inputs and configuration" in out
