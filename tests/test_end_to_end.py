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
from suite import write_suite

from gate.action import main as action_main

HEAD = "ab" * 20
TOKEN = "ghs_e2eTOKENneverLEAKS0123456789"
KEY = "sk-e2e-KEY-never-leaks-98765"


def runner_env(tmp_path: Path, api_url: str) -> dict[str, str]:
    files = tmp_path / "files"
    files.mkdir(exist_ok=True)
    event = files / "event.json"
    event.write_text(json.dumps({"number": 5, "pull_request": {"number": 5, "head": {"sha": HEAD}}}))
    (files / "output").write_text("")
    return {
        "GITHUB_WORKSPACE": str(tmp_path / "ws"),
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_SHA": "cd" * 20,
        "GITHUB_REPOSITORY": "acme/support-bot",
        "GITHUB_API_URL": api_url,
        "GITHUB_OUTPUT": str(files / "output"),
        "GITHUB_STEP_SUMMARY": str(files / "summary.md"),
        "GATE_TEST_KEY": KEY,
        "RAGAS_DO_NOT_TRACK": "true",
        "INPUT_POLICY": "evals/policy.yaml",
        "INPUT_LANE": "pr",
        "INPUT_GITHUB-TOKEN": TOKEN,
        "INPUT_COMMENT": "sticky",
        "INPUT_FAIL-ON": "",
        "INPUT_MAX-COST": "",
        "INPUT_WORKING-DIRECTORY": ".",
        "INPUT_COMMENT-AUTHOR": "",
    }


def outputs(env: dict[str, str]) -> dict[str, str]:
    """Parse $GITHUB_OUTPUT the way the runner does (name<<DELIM ... DELIM); last value wins."""
    lines = Path(env["GITHUB_OUTPUT"]).read_text().splitlines()
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        name, _, delim = lines[i].partition("<<")
        j = lines.index(delim, i + 1)
        out[name] = "\n".join(lines[i + 1 : j])
        i = j + 1
    return out


def test_pr_story_fail_then_fix_edits_one_sticky_comment(tmp_path: Path, monkeypatch: Any) -> None:
    with FakeOpenAI() as provider, FakeGitHub(user_status=403) as github:
        policy = write_suite(tmp_path / "ws" / "evals", evaluator={"base_url": provider.base_url})
        env = runner_env(tmp_path, github.base_url)
        for name, value in env.items():  # the container step's environment
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path / "ws")
        provider.script("c-2", reply("pass", "Close enough."))

        assert action_main() == 1  # quality_failed is in the default fail-on
        out = outputs(env)
        assert out["state"] == "quality_failed" and out["exit-code"] == "1"
        (run,) = github.check_runs
        assert run["name"] == "ragas-gate / test-policy" and run["head_sha"] == HEAD
        assert run["conclusion"] == "failure"
        (comment,) = github.comments("acme/support-bot", 5)
        assert comment["body"].startswith("<!-- ragas-gate:test-policy -->")
        assert "false_pass_limit" in comment["body"] and "`c-2`" in comment["body"]
        assert "quality_failed" in Path(env["GITHUB_STEP_SUMMARY"]).read_text()

        # The fix: a tightened judge prompt (a new cache key), and the judge now agrees on c-2.
        prompt = tmp_path / "ws" / "evals" / "prompt.txt"
        prompt.write_text(prompt.read_text() + "A response that omits the 7-day window fails.\n")
        provider.reset()
        Path(env["GITHUB_OUTPUT"]).write_text("")
        assert action_main() == 0
        assert outputs(env)["state"] == "passed"
        runs = github.check_runs
        assert [r["conclusion"] for r in runs] == ["failure", "success"]
        (edited,) = github.comments("acme/support-bot", 5)
        assert edited["id"] == comment["id"] and "`passed`" in edited["body"]

        everything = json.dumps([r.__dict__ for r in github.requests], default=str)
        everything += Path(env["GITHUB_OUTPUT"]).read_text() + Path(env["GITHUB_STEP_SUMMARY"]).read_text()
        everything += "".join(p.read_text() for p in (tmp_path / "ws" / "gate-out").iterdir() if p.is_file())
        assert TOKEN not in everything and KEY not in everything
        assert policy.exists()
