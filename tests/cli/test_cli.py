"""`gate validate` and the CLI's contract: exit codes, output, no traceback, no ragas import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from suite import case, controls, write_suite

from gate.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "policies" / "example" / "policy.yaml"


def test_example_policy_validates_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--policy", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("valid: ") and "no findings" in out and "support-refunds" in out


def test_validate_imports_no_ragas_and_opens_no_socket() -> None:
    code = f"""
import sys, socket
def deny(*a, **k):
    raise AssertionError("network used")
socket.socket.connect = deny
from gate.cli import main
rc = main(["validate", "--policy", {str(EXAMPLE)!r}, "--format", "json"])
assert "ragas" not in sys.modules, "ragas imported"
assert "openai" not in sys.modules, "openai imported"
sys.exit(rc)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["blocking"] is False and data["findings"] == []
    assert len(data["policy_sha256"]) == 64


def test_blocking_findings_exit_1_grouped_by_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [*controls(), case("c-1", slice="mystery"), case("c-2", reference="")]
    policy = write_suite(tmp_path, cases)
    assert main(["validate", "--policy", str(policy)]) == 1
    out = capsys.readouterr().out
    assert "quality_failed" in out and "unknown_slice" in out and "missing_evidence" in out
    assert "c-1" in out and "c-2" in out


def test_a_case_copied_300_times_prints_short_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One paired case copied 300 times: every message names a few ids and counts the rest (the pair
    message listed all 301), while --format json still lists every case id."""
    copy = case("c-1", pair={"id": "p-1", "kind": "flip"})
    cases = [*controls(), case("c-2", label="fail", pair={"id": "p-1", "kind": "flip"}), *[copy] * 300]
    policy = write_suite(tmp_path, cases)
    assert main(["validate", "--policy", str(policy)]) == 1
    out = capsys.readouterr().out
    assert "which has 301 cases (c-2, c-1) instead of exactly two" in out
    assert max(len(line) for line in out.splitlines()) < 1_000
    assert main(["validate", "--policy", str(policy), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert any(f["case_ids"] == ["c-2", "c-1"] for f in data["findings"] if "pair id" in f["message"])


def test_json_format_lists_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = [*controls(), case("c-1"), case("c-1")]
    policy = write_suite(tmp_path, cases)
    assert main(["validate", "--policy", str(policy), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["blocking"] is True
    dup = [f for f in data["findings"] if f["kind"] == "input_contract" and "c-1" in f["case_ids"]]
    assert dup and dup[0]["state"] == "quality_failed"


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["validate"], "--policy"),
        (["validate", "--policy", "/nonexistent/policy.yaml"], "/nonexistent/policy.yaml"),
        (["run", "--policy", "x.yaml", "--max-cost", "-1"], "--max-cost"),
        (["run", "--policy", "x.yaml", "--max-cost", "nan"], "--max-cost"),
        (["run", "--policy", "x.yaml", "--max-cost", "inf"], "--max-cost"),
        (["frobnicate"], "frobnicate"),
    ],
)
def test_usage_errors_exit_2_without_traceback(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_malformed_yaml_names_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("version: 1\npolicy_id: x\n  metric: [unclosed\n")
    assert main(["validate", "--policy", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "line" in err and "fix" in err


def test_misspelled_key_suggests_the_known_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path, slices={"critical": {"max_false_pases": 0}})
    assert main(["validate", "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert "`slices.critical.max_false_pases`: unknown key" in err
    assert "rename it to `max_false_passes`" in err
    assert "`slices.critical.max_false_passes`: required key is missing" in err


def test_a_key_written_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    policy.write_text(policy.read_text() + "policy_id: shadow-id\n")
    assert main(["validate", "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert "'policy_id' is written twice" in err and "line" in err


def test_a_pasted_key_as_api_key_env_is_refused_and_not_echoed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-proj-PASTEDsecret0123456789"
    policy = write_suite(tmp_path, evaluator={"api_key_env": secret})
    assert main(["validate", "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert "evaluator.api_key_env" in err and "NAME of an environment variable" in err
    assert secret not in err
