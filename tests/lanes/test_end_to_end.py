"""The PR story through the container entry point: the real `gate.action.main`, a real `gate run`
(ragas judge over real HTTP to the fake provider), real PyGithub to the fake GitHub API.

First push: the judge passes an answer people failed, so the step fails with `quality_failed`,
the check run says `failure` and one sticky comment names the case. Second push tightens the judge
prompt: the same comment is edited to `passed`, a second check run says `success`, and no comment
is added.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fake_github import FakeGitHub
from fake_openai import FakeOpenAI, reply
from runner_env import API_KEY, HEAD, TOKEN, parse_github_output, runner_env
from suite import write_suite

from gate.action import main as action_main


def test_pr_story_fail_then_fix_edits_one_sticky_comment(tmp_path: Path, monkeypatch: Any) -> None:
    with FakeOpenAI() as provider, FakeGitHub(user_status=403) as github:
        env = runner_env(tmp_path, api_url=github.base_url, fail_on="")
        env["RAGAS_DO_NOT_TRACK"] = "true"
        evals = tmp_path / "workspace" / "evals"  # working-directory: evals, policy: policy.yaml
        write_suite(evals, evaluator={"base_url": provider.base_url, "api_key_env": "JUDGE_KEY"})
        for name, value in env.items():  # the container step's environment
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path / "workspace")
        provider.script("c-2", reply("pass", "Close enough."))

        assert action_main() == 1  # quality_failed is in the default fail-on
        out = parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())
        assert out["state"] == "quality_failed" and out["exit-code"] == "1"
        (run,) = github.check_runs
        assert run["name"] == "ragas-gate / test-policy / pr" and run["head_sha"] == HEAD
        assert run["conclusion"] == "failure"
        (comment,) = github.comments("acme/support-bot", 17)
        assert comment["body"].startswith("<!-- ragas-gate:test-policy:pr -->")
        assert "false_pass_limit" in comment["body"] and "`c-2`" in comment["body"]
        assert "quality_failed" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()

        # The fix: a tightened judge prompt (a new cache key), and the judge now agrees on c-2.
        prompt = evals / "prompt.txt"
        prompt.write_text(prompt.read_text() + "A response that omits the 7-day window fails.\n")
        provider.reset()
        Path(env["GITHUB_OUTPUT"]).write_text("")
        assert action_main() == 0
        assert parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())["state"] == "passed"
        runs = github.check_runs
        assert [r["conclusion"] for r in runs] == ["failure", "success"]
        (edited,) = github.comments("acme/support-bot", 17)
        assert edited["id"] == comment["id"] and "`passed`" in edited["body"]

        everything = json.dumps([r.__dict__ for r in github.requests], default=str)
        everything += Path(env["GITHUB_OUTPUT"]).read_text() + Path(env["GITHUB_STEP_SUMMARY"]).read_text()
        everything += "".join(p.read_text() for p in (evals / "gate-out").iterdir() if p.is_file())
        assert TOKEN not in everything and API_KEY not in everything
