"""An annotation is never sent without a message (issue 28, defect 10): GitHub refuses a check run
whose annotation has an empty `message` (422), and the check run is then lost. result.json is
untrusted: a blocker's message and kind may be empty or blank. Through real HTTP to the fake
GitHub, which refuses such annotations as GitHub does, driven by the real PyGithub client."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from fake_github import FakeGitHub, sample_result
from runner_env import TOKEN, runner_env

from gate.github.client import ClientOptions
from gate.github.publish import publish_result_dir

FAST = ClientOptions(0, 0, timeout=5, read_retries=2, backoff_factor=0, secondary_rate_wait=0)


@pytest.mark.parametrize(("message", "kind"), [("", ""), ("  \n ", "\t"), ("", "false_pass_limit")])
def test_a_blocker_without_a_message_still_gets_an_annotation_github_accepts(
    tmp_path: Path, message: str, kind: str
) -> None:
    result = sample_result("quality_failed")
    result["blockers"][0] = {**result["blockers"][0], "message": message, "kind": kind, "case_ids": []}
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text(json.dumps(result), encoding="utf-8")
    (out / "report.md").write_text("# report\n", encoding="utf-8")
    with FakeGitHub(user_status=403) as github:
        env = runner_env(tmp_path, api_url=github.base_url)
        env["GITHUB_TOKEN"] = TOKEN
        stream = io.StringIO()
        assert publish_result_dir(out, env, options=FAST, stream=stream) == 1
        assert "warning" not in stream.getvalue(), stream.getvalue()
        (run,) = github.check_runs
        annotations: list[dict[str, Any]] = run["annotations"]
    assert len(annotations) == len(result["blockers"])
    assert all(a["message"].strip() for a in annotations)
    first = annotations[0]["message"]
    assert (kind.strip() or "quality_failed") in first
