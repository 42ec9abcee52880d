"""The environment a GitHub runner gives a container action step, for the Action's tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TOKEN = "ghs_FAKEtokenNEVERprinted0123456789"
API_KEY = "sk-test-FAKEkeyNEVERprinted987654321"
HEAD = "9e1c" * 10
MERGE = "4d4d" * 10


def parse_github_output(text: str) -> dict[str, str]:
    """Parse `$GITHUB_OUTPUT` the way the runner does (`k=v` lines and `k<<DELIM` blocks)."""
    out: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value: list[str] = []
            while lines[i] != delimiter:
                value.append(lines[i])
                i += 1
            i += 1
            out[name] = "\n".join(value)
        else:
            name, val = line.split("=", 1)
            out[name] = val
    return out


def runner_env(tmp_path: Path, *, api_url: str, event: dict[str, Any] | None = None, **inputs: str) -> dict[str, str]:
    """The environment a container action step gets: INPUT_* with hyphens, GITHUB_* files."""
    workspace = tmp_path / "workspace"
    (workspace / "evals").mkdir(parents=True, exist_ok=True)
    (workspace / "evals" / "policy.yaml").write_text(
        "version: 1\npolicy_id: refund-answer\nevaluator:\n  api_key_env: JUDGE_KEY\n", encoding="utf-8"
    )
    files = tmp_path / "files"
    files.mkdir(exist_ok=True)
    event_path = files / "event.json"
    if event is None:
        event = {"number": 17, "pull_request": {"number": 17, "head": {"sha": HEAD, "ref": "feature"}}}
    event_path.write_text(json.dumps(event), encoding="utf-8")
    (files / "output").write_text("earlier=value\n", encoding="utf-8")
    env = {
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_EVENT_NAME": "pull_request" if "pull_request" in event else "workflow_dispatch",
        "GITHUB_SHA": MERGE,
        "GITHUB_REPOSITORY": "acme/support-bot",
        "GITHUB_ACTIONS": "true",
        "GITHUB_RUN_ID": "9100000001",  # every job of one workflow run sees the same run id and attempt
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_API_URL": api_url,
        "GITHUB_OUTPUT": str(files / "output"),
        "GITHUB_STEP_SUMMARY": str(files / "summary.md"),
        "JUDGE_KEY": API_KEY,
        "INPUT_POLICY": "policy.yaml",
        "INPUT_LANE": "pr",
        "INPUT_GITHUB-TOKEN": TOKEN,
        "INPUT_COMMENT": "sticky",
        "INPUT_FAIL-ON": "",
        "INPUT_MAX-COST": "",
        "INPUT_WORKING-DIRECTORY": "evals",
        "INPUT_COMMENT-AUTHOR": "",
    }
    env.update({f"INPUT_{k.upper().replace('_', '-')}": v for k, v in inputs.items()})
    return env
