"""The Action's `base-result` input: transitions against the base run in the sticky comment.

Through the real publish path against the fake GitHub server; the runs are the frozen records
fixture (tests/fixtures/schema/) with one verdict changed on one side.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub, sample_result
from runner_env import runner_env

from gate.action import publish_and_report, read_context, run_options
from gate.github.client import ClientOptions

FAST = ClientOptions(0, 0, timeout=5, read_retries=2, backoff_factor=0, secondary_rate_wait=0)
FIXTURES = Path(__file__).parents[1] / "fixtures" / "schema"
RECORDS = FIXTURES / "records-v1-lineage.jsonl"


@pytest.fixture
def fake() -> Any:
    with FakeGitHub(user_status=403) as server:
        yield server


def workspace(tmp_path: Path, fake: FakeGitHub, base_result: str) -> Any:
    env = runner_env(tmp_path, api_url=fake.base_url, base_result=base_result)
    evals = Path(env["GITHUB_WORKSPACE"]) / "evals"
    for f in (FIXTURES / "suite").iterdir():
        shutil.copy(f, evals / f.name)  # a real policy: its critical slices mark the transitions
    ctx = read_context(env)
    ctx.out_dir.mkdir(parents=True)
    shutil.copy(RECORDS, ctx.out_dir / "records.jsonl")
    (ctx.out_dir / "result.json").write_text(json.dumps(sample_result("passed", policy_id="refund-answer")))
    (ctx.out_dir / "report.md").write_text("<!-- ragas-gate:refund-answer -->\n## report\n")
    return ctx


def write_base(path: Path, flips: dict[str, str]) -> None:
    path.mkdir(parents=True)
    lines = [json.loads(line) for line in RECORDS.read_text().splitlines() if line]
    for rec in lines:
        if rec["case_id"] in flips:
            rec["judge_label"] = flips[rec["case_id"]]
            rec["prompt_template_sha256"] = "a" * 64  # the base ran an older prompt
    (path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (path / "result.json").write_text(json.dumps(sample_result("passed", policy_id="refund-answer")))


def test_transitions_reach_the_comment_critical_first(tmp_path: Path, fake: FakeGitHub) -> None:
    ctx = workspace(tmp_path, fake, "gate-base")
    write_base(ctx.working_directory / "gate-base", {"g-1": "fail", "c-1": "fail"})
    assert run_options(ctx).base_result == ctx.working_directory / "gate-base"
    code = publish_and_report(ctx.out_dir, ctx, run_exit=0, options=FAST, stream=io.StringIO())
    assert code == 0
    (comment,) = fake.comments("acme/support-bot", 17)
    body = comment["body"]
    assert "### Against the base run" in body and "2 transitions over" in body
    assert body.index("`c-1`") < body.index("`g-1`")  # c-1 is in the critical slice
    assert "**prompt**" in body
    saved = json.loads((ctx.out_dir / "compare.json").read_text())
    assert [(t["case_id"], t["critical"], t["first_divergence"]) for t in saved["transitions"]] == [
        ("c-1", True, "prompt"),
        ("g-1", False, "prompt"),
    ]
    assert ctx.summary_file is not None and "### Against the base run" in ctx.summary_file.read_text()


@pytest.mark.parametrize("made", ["missing", "empty"])
def test_no_base_run_is_said_and_never_fails(tmp_path: Path, fake: FakeGitHub, made: str) -> None:
    ctx = workspace(tmp_path, fake, "gate-base")
    if made == "empty":
        (ctx.working_directory / "gate-base").mkdir()
    assert run_options(ctx).base_result is None  # `gate run` would refuse a missing base
    assert publish_and_report(ctx.out_dir, ctx, run_exit=0, options=FAST, stream=io.StringIO()) == 0
    (comment,) = fake.comments("acme/support-bot", 17)
    assert "No base run to compare against: `gate-base` holds no records.jsonl" in comment["body"]


def test_an_unreadable_base_run_is_said_and_never_fails(tmp_path: Path, fake: FakeGitHub) -> None:
    ctx = workspace(tmp_path, fake, "gate-base")
    base = ctx.working_directory / "gate-base"
    base.mkdir()
    (base / "records.jsonl").write_text("{not json\n{}\n")
    assert publish_and_report(ctx.out_dir, ctx, run_exit=0, options=FAST, stream=io.StringIO()) == 0
    (comment,) = fake.comments("acme/support-bot", 17)
    assert "could not be made" in comment["body"] and "not valid JSON" in comment["body"]


def test_a_base_run_that_raises_an_os_error_is_said_and_never_fails(tmp_path: Path, fake: FakeGitHub) -> None:
    """Not a GateError: a name longer than the file system allows raises OSError on any look."""
    ctx = workspace(tmp_path, fake, "x" * 300)
    assert run_options(ctx).base_result is None
    assert publish_and_report(ctx.out_dir, ctx, run_exit=0, options=FAST, stream=io.StringIO()) == 0
    (comment,) = fake.comments("acme/support-bot", 17)
    body = comment["body"]
    assert "could not be made" in body and "OSError" in body and "File name too long" in body
    assert "the state does not depend on it" in body and "fix:" in body


def test_without_the_input_the_comment_has_no_base_section(tmp_path: Path, fake: FakeGitHub) -> None:
    ctx = workspace(tmp_path, fake, "")
    assert ctx.base_result is None
    publish_and_report(ctx.out_dir, ctx, run_exit=0, options=FAST, stream=io.StringIO())
    (comment,) = fake.comments("acme/support-bot", 17)
    assert "Against the base run" not in comment["body"]


def test_a_run_that_judged_nothing_says_so(tmp_path: Path, fake: FakeGitHub) -> None:
    ctx = workspace(tmp_path, fake, "gate-base")
    write_base(ctx.working_directory / "gate-base", {})
    (ctx.out_dir / "records.jsonl").write_text("")  # deterministic blockers: no model call was made
    assert publish_and_report(ctx.out_dir, ctx, run_exit=0, options=FAST, stream=io.StringIO()) == 0
    (comment,) = fake.comments("acme/support-bot", 17)
    assert "This run judged no case" in comment["body"]
