"""Unexpected errors are never a verdict (SPEC section 8): one paragraph, exit 3, a result that says so.

The faults are real ones from outside our code: a broken ragas install (a `ragas` package that
fails on import, first on the path), a broken PyGithub, an unwritable `$GITHUB_OUTPUT`. Each command
runs as a subprocess, the way CI runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_github import FakeGitHub
from runner_env import parse_github_output, runner_env
from suite import write_suite

ROOT = Path(__file__).resolve().parents[2]


def broken_package(tmp_path: Path, name: str) -> Path:
    """A directory holding a package `name` that fails on import, like a half-installed wheel."""
    shadow = tmp_path / f"shadow-{name}"
    (shadow / name).mkdir(parents=True, exist_ok=True)
    (shadow / name / "__init__.py").write_text(
        f"raise RuntimeError('{name} is half installed: missing its compiled part')\n", encoding="utf-8"
    )
    return shadow


def run_cli(args: list[str], cwd: Path, shadow: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
    full.update({"RAGAS_DO_NOT_TRACK": "true", "GATE_TEST_KEY": "sk-test-key-0123456789", **env})
    if shadow is not None:
        full["PYTHONPATH"] = os.pathsep.join([str(shadow), str(ROOT)])
    return subprocess.run(
        [sys.executable, "-m", "gate.cli", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=120
    )


def test_a_crash_in_gate_run_exits_3_with_a_paragraph_and_an_incomplete_result(tmp_path: Path) -> None:
    policy = write_suite(tmp_path / "suite", evaluator={"base_url": "http://127.0.0.1:9/v1"})
    out = tmp_path / "out"
    proc = run_cli(["run", "--policy", str(policy), "--out", str(out)], tmp_path, broken_package(tmp_path, "ragas"))

    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    err = proc.stderr.strip()
    assert err.startswith("error: internal error in `gate run`")
    assert "RuntimeError" in err and "half installed" in err  # what failed
    assert "GATE_DEBUG=1" in err and "result.json" in err  # what to do, what was written
    assert "sk-test-key" not in proc.stdout + proc.stderr

    result = json.loads((out / "result.json").read_text())
    assert result["state"] == "evaluation_incomplete" and result["exit_code"] == 3
    (internal,) = [b for b in result["blockers"] if b["kind"] == "internal_error"]
    assert internal["state"] == "evaluation_incomplete"
    assert "internal error stopped the run" in internal["message"]
    # Nothing was judged: every scheduled case is listed, as unrun, on the blocker and the result.
    assert set(internal["case_ids"]) == {
        "ctl-positive",
        "ctl-negative",
        "ctl-boundary",
        "ctl-persuasion",
        "ctl-injection",
        "c-1",
        "c-2",
        "g-1",
    }
    assert set(result["unrun_case_ids"]) >= set(internal["case_ids"])
    for name in ("report.md", "summary.md", "junit.xml"):
        assert (out / name).is_file()
    assert "internal_error" in (out / "report.md").read_text()


def test_gate_debug_shows_the_traceback(tmp_path: Path) -> None:
    policy = write_suite(tmp_path / "suite", evaluator={"base_url": "http://127.0.0.1:9/v1"})
    proc = run_cli(
        ["run", "--policy", str(policy), "--out", str(tmp_path / "out")],
        tmp_path,
        broken_package(tmp_path, "ragas"),
        GATE_DEBUG="1",
    )
    assert proc.returncode == 3
    assert "Traceback" in proc.stderr and "internal error in `gate run`" in proc.stderr


def test_a_crash_in_gate_publish_is_exit_3_not_a_state_code(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text(json.dumps({"policy_id": "p", "state": "quality_failed", "exit_code": 1}))
    proc = run_cli(["publish", "--result", str(out)], tmp_path, broken_package(tmp_path, "github"))
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "internal error in `gate publish`" in proc.stderr and "half installed" in proc.stderr


def test_the_action_reports_a_crashed_run_as_evaluation_incomplete(tmp_path: Path) -> None:
    with FakeGitHub(user_status=403) as github:
        env = runner_env(tmp_path, api_url=github.base_url)
        evals = tmp_path / "workspace" / "evals"
        write_suite(evals, evaluator={"base_url": "http://127.0.0.1:9/v1", "api_key_env": "JUDGE_KEY"})
        env.update(
            PATH=os.environ.get("PATH", ""),
            RAGAS_DO_NOT_TRACK="true",
            PYTHONPATH=os.pathsep.join([str(broken_package(tmp_path, "ragas")), str(ROOT)]),
        )
        proc = subprocess.run(
            [sys.executable, "-m", "gate.action"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        log = proc.stdout + proc.stderr
        assert "Traceback" not in log
        # docs/STATES.md's table: evaluation_incomplete is exit-code 3 and fails the step (default fail-on).
        assert proc.returncode == 1, log
        outputs = parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())
        assert outputs["state"] == "evaluation_incomplete" and outputs["exit-code"] == "3"
        (run,) = github.check_runs
        assert run["conclusion"] == "cancelled"
        assert "internal_error" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()


def test_an_action_crash_outside_the_run_is_exit_3_with_a_message(tmp_path: Path) -> None:
    """`$GITHUB_OUTPUT` that cannot be written (a directory): the Action itself fails, not the change."""
    env = runner_env(tmp_path, api_url="http://127.0.0.1:9", comment="off", github_token="")
    evals = tmp_path / "workspace" / "evals"
    write_suite(evals, evaluator={"base_url": "http://127.0.0.1:9/v1", "api_key_env": "JUDGE_KEY"})
    del env["JUDGE_KEY"]  # no key: missing_credentials, no network needed
    bad_output = tmp_path / "output-is-a-dir"
    bad_output.mkdir()
    env.update(GITHUB_OUTPUT=str(bad_output), PATH=os.environ.get("PATH", ""), PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "gate.action"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 3, log
    assert "Traceback" not in log
    assert "::error::" in log and "internal error in the ragas-gate Action" in log
    assert "GATE_DEBUG=1" in log


def test_publish_exits_with_the_code_of_the_state_not_a_field_that_disagrees(tmp_path: Path) -> None:
    """result.json is read back like any input: its `exit_code` cannot turn a failure into exit 0."""
    from gate.action import outputs_for
    from gate.github.publish import publish_result_dir
    from gate.model.result import Result

    out = tmp_path / "out"
    out.mkdir()
    fixture = json.loads((Path(__file__).parents[1] / "fixtures" / "schema" / "result-v1.json").read_text())
    result = {**fixture, "state": "quality_failed", "exit_code": 0}
    (out / "result.json").write_text(json.dumps(result))
    assert publish_result_dir(out, {}) == 1
    assert outputs_for(Result.from_dict(result), "gate-out/result.json")["exit-code"] == "1"
    # An exit code that is not a number is no result at all: a usage error, never exit 0.
    for exit_code in ("abc", None):
        (out / "result.json").write_text(json.dumps({**result, "exit_code": exit_code}))
        assert publish_result_dir(out, {}) == 2
