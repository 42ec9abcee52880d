"""The Action's `working-directory` without `os.chdir`: the process's current directory never moves.

The container's entry point runs the lane in working-directory (the policy path, the default cache,
every message relative to it, as `cd DIR && gate run` would) while the process stays where it
started: the fake provider records the process's directory while each judge call is in flight.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_github import FakeGitHub
from fake_openai import FakeOpenAI, RecordedRequest, oracle
from runner_env import parse_github_output, runner_env
from suite import write_suite

from gate.action import main as action_main


def test_the_action_runs_in_working_directory_without_changing_the_process_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[str] = []
    judge = oracle()

    def record_cwd(request: RecordedRequest) -> object:
        seen.append(os.getcwd())  # the server thread shares the process's directory
        return judge(request)

    with FakeOpenAI(default=record_cwd) as provider, FakeGitHub() as github:  # type: ignore[arg-type]
        env = runner_env(tmp_path, api_url=github.base_url)
        env["RAGAS_DO_NOT_TRACK"] = "true"
        workspace = tmp_path / "workspace"
        evals = workspace / "evals"  # working-directory: evals, policy: policy.yaml
        write_suite(evals, evaluator={"base_url": provider.base_url, "api_key_env": "JUDGE_KEY"})
        elsewhere = workspace / "elsewhere"  # the process starts outside working-directory
        elsewhere.mkdir()
        for name, value in env.items():  # the container step's environment
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(elsewhere)

        assert action_main() == 0
        assert seen and set(seen) == {str(elsewhere)}
        assert Path.cwd() == elsewhere
        assert (evals / ".gate-cache").is_dir() and not (elsewhere / ".gate-cache").exists()

        out = parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())
        assert out["state"] == "passed" and out["result-path"] == "evals/gate-out/result.json"
        stdout = capsys.readouterr().out
        assert "  gate-out/result.json " in stdout  # relative to working-directory, as in a `cd`
        summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text()
        (comment,) = github.comments("acme/support-bot", 17)
        (check_run,) = github.check_runs
        annotations = [a["path"] for a in check_run["annotations"]]
        assert set(annotations) <= {"evals/policy.yaml"}  # annotations name the policy from the workspace
        for shown in (stdout, summary, comment["body"], str(check_run["output_data"])):
            assert str(tmp_path) not in shown

        # A broken policy: the message names the files as the workflow author wrote them.
        (evals / "cases.jsonl").unlink()
        assert action_main() == 2  # a usage error
        err = capsys.readouterr().err
        assert "error: policy.yaml: the policy file is invalid" in err
        assert "`cases[0]`: cases.jsonl (cases.jsonl) does not exist" in err and str(tmp_path) not in err
        assert Path.cwd() == elsewhere
