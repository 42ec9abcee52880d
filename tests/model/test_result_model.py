"""result.json as a frozen typed model (gate/model/result.py): every shape ever written loads and is
written back byte for byte; a result.json read from disk is validated, and a bad one is one
paragraph naming the file, the field and the fix, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fake_github import EXIT_CODES, sample_result
from suite import write_suite

from gate.cli import main
from gate.model.result import Result, ResultProblem, load_result

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "schema"
RESULT_FIXTURES = sorted(FIXTURES.glob("result-v*.json"))


@pytest.mark.parametrize("path", RESULT_FIXTURES, ids=lambda p: p.name)
def test_every_result_shape_ever_written_is_written_back_byte_for_byte(path: Path) -> None:
    assert load_result(path).to_json() == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("state", sorted(EXIT_CODES))
def test_blockers_overrides_and_routing_survive_a_round_trip(state: str) -> None:
    data = sample_result(state)
    data["blockers"] = [
        {**b, "location": "cases/a.jsonl:3", "owner_group": "product", "owner": None} for b in data["blockers"]
    ]
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    result = Result.from_dict(json.loads(text))
    assert result.to_json() == text
    assert all(b.routed for b in result.blockers)


def test_the_model_is_frozen() -> None:
    result = load_result(RESULT_FIXTURES[0])
    with pytest.raises(ValueError, match="frozen"):
        result.state = "quality_failed"  # type: ignore[misc]


def _bad_result(directory: Path, **changes: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    data = json.loads((FIXTURES / "result-v1-card.json").read_text())
    data.update(changes)
    (directory / "result.json").write_text(json.dumps(data))
    return directory


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"state": "fine"}, "`state`"),
        ({"counts": {"eligible": "many"}}, "`counts.eligible`"),
        ({"cost": {"total": 0.1}}, "`cost.currency`"),
        ({"blockers": [{"state": "passed", "kind": "x", "slice": None, "case_ids": [], "message": "m", "colour": 1}]},
         "`blockers.0.colour`"),
    ],
)  # fmt: skip
def test_gate_publish_of_a_malformed_result_is_one_paragraph_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, object], field: str
) -> None:
    out = _bad_result(tmp_path / "out", **changes)
    assert main(["publish", "--result", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert str(out / "result.json") in err and field in err and "fix:" in err


def test_a_result_from_a_newer_gate_is_refused_with_an_upgrade_hint(tmp_path: Path) -> None:
    out = _bad_result(tmp_path / "out", schema_version=2)
    with pytest.raises(ResultProblem, match=r"schema_version 2, newer than this gate reads.*upgrade"):
        load_result(out / "result.json")


def test_gate_merge_of_a_malformed_shard_result_is_one_paragraph_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path / "suite")
    shard = _bad_result(tmp_path / "shard-1", shard={"index": "one", "count": 2})
    assert main(["merge", "--policy", str(policy), "--out", str(tmp_path / "merged"), str(shard)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(shard / "result.json") in err and "`shard.index`" in err


def test_validate_does_not_build_the_result_model() -> None:
    """`gate validate` is on the start-up budget: the result model is imported by run, decide and report only."""
    code = f"""
import sys
from gate.cli import main
rc = main(["validate", "--policy", {str(ROOT / "policies" / "example" / "policy.yaml")!r}])
assert "gate.model.result" not in sys.modules, "gate.model.result imported"
sys.exit(rc)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_the_hand_built_result_of_a_failed_decision_loads_as_a_result(tmp_path: Path) -> None:
    """gate.commands.crash writes a minimal result.json when decide itself fails: publish and the Action must read it."""
    from types import SimpleNamespace

    from gate.commands.crash import _write_minimal

    plan = SimpleNamespace(eligible=[SimpleNamespace(case_id="c-1")], lane="pr")
    try:
        raise RuntimeError("the decision broke")
    except RuntimeError as exc:
        assert _write_minimal(exc, "pol", "v1", plan, tmp_path, ["an internal error stopped the run"])
    result = load_result(tmp_path / "result.json")
    assert result.state == "evaluation_incomplete" and result.unrun_case_ids == ["c-1"]
    assert result.lineage is None and result.limits is None  # not known: said as absent, never guessed


def test_an_attached_section_is_validated_and_written_last_in_its_place() -> None:
    result = load_result(FIXTURES / "result-v1.json")  # SPEC 5 only: no section after shard
    sharded = result.with_(shard={"index": 2, "count": 3})
    assert sharded.shard is not None and sharded.shard.count == 3 and result.shard is None
    assert sharded.to_json().endswith('"shard": {\n    "index": 2,\n    "count": 3\n  }\n}\n')
    with pytest.raises(ValueError, match="index"):
        result.with_(shard={"index": "two", "count": 3})
