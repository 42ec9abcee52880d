"""The Action entry point: inputs, event, outputs, step summary, exit status, publishing.

`publish_and_report` and `publish_result_dir` run against a result directory prepared here (what
`gate run --out` writes) and publish through real PyGithub to the fake GitHub server.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from fake_github import BOT_LOGIN, EXIT_CODES, FakeGitHub, sample_result
from runner_env import API_KEY, HEAD, MERGE, TOKEN, parse_github_output, runner_env

from gate.action import (
    DEFAULT_FAIL_ON,
    ActionContext,
    InputError,
    expand_json_inputs,
    main,
    mask,
    outputs_for,
    parse_fail_on,
    publish_and_report,
    read_context,
    run_options,
    secrets_to_mask,
    write_outputs,
)
from gate.commands.run import RunOptions
from gate.github.client import ClientOptions, comment_marker
from gate.github.publish import publish_result_dir
from gate.model.result import Result

FAST = ClientOptions(0, 0, timeout=5, read_retries=2, backoff_factor=0, secondary_rate_wait=0)


def write_result_dir(path: Path, result: dict[str, Any], report: str = "# report\n") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "result.json").write_text(json.dumps(result), encoding="utf-8")
    (path / "report.md").write_text(report, encoding="utf-8")
    (path / "summary.md").write_text(f"## ragas-gate: {result['state']}\n\nsummary body\n", encoding="utf-8")
    return path


def outputs(ctx: ActionContext) -> dict[str, str]:
    assert ctx.output_file is not None
    return parse_github_output(ctx.output_file.read_text(encoding="utf-8"))


@pytest.fixture
def fake() -> Any:
    with FakeGitHub(user_status=403) as server:
        yield server


# ---- inputs and event -------------------------------------------------------------------------
def test_inputs_with_hyphens_and_the_pull_request_head_sha(tmp_path: Path) -> None:
    env = runner_env(tmp_path, api_url="https://ghe.example.com/api/v3", max_cost="0.5", comment_author="bot")
    ctx = read_context(env)
    assert ctx.token == TOKEN and ctx.policy == "policy.yaml" and ctx.lane == "pr"
    assert ctx.head_sha == HEAD  # not GITHUB_SHA, the merge commit
    assert ctx.pr_number == 17
    assert ctx.api_url == "https://ghe.example.com/api/v3"
    assert ctx.comment_author == "bot" and ctx.max_cost == "0.5"
    assert ctx.working_directory == tmp_path / "workspace" / "evals"
    assert ctx.fail_on == DEFAULT_FAIL_ON
    assert run_options(ctx) == RunOptions(lane="pr", out_dir=ctx.working_directory / "gate-out", max_cost=0.5)


def test_workflow_dispatch_uses_github_sha_and_no_pr(tmp_path: Path) -> None:
    env = runner_env(tmp_path, api_url="", event={"inputs": {}, "ref": "refs/heads/main"}, lane="release")
    ctx = read_context(env)
    assert (ctx.head_sha, ctx.pr_number, ctx.lane) == (MERGE, None, "release")
    assert ctx.api_url == "https://api.github.com"
    assert run_options(ctx).max_cost is None


def test_fail_on_parsing() -> None:
    assert parse_fail_on("") == DEFAULT_FAIL_ON
    assert parse_fail_on("quality_failed, evaluation_incomplete") == {"quality_failed", "evaluation_incomplete"}
    assert parse_fail_on("none") == frozenset()
    with pytest.raises(InputError, match="fail-on"):
        parse_fail_on("quality_failed,broken")


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("comment", "always", "comment"),
        ("max-cost", "-1", "max-cost"),
        ("max-cost", "nan", "max-cost"),
        ("max-cost", "inf", "max-cost"),
        ("policy", "", "policy"),
        ("working-directory", "../..", "inside the workspace"),
        ("working-directory", "/etc", "inside the workspace"),
        ("comment-author", "bot\n::set-output name=x::y", "GitHub login"),
    ],
)
def test_bad_inputs_name_the_input(tmp_path: Path, name: str, value: str, match: str) -> None:
    env = runner_env(tmp_path, api_url="")
    env[f"INPUT_{name.upper()}"] = value
    with pytest.raises(InputError, match=match):
        read_context(env)


def test_secrets_are_masked_including_the_policy_key(tmp_path: Path) -> None:
    env = runner_env(tmp_path, api_url="")
    ctx = read_context(env)
    secrets = secrets_to_mask(ctx, env)
    assert TOKEN in secrets and API_KEY in secrets
    stream = io.StringIO()
    mask(secrets, stream)
    assert f"::add-mask::{TOKEN}\n" in stream.getvalue()
    assert f"::add-mask::{API_KEY}\n" in stream.getvalue()


# ---- outputs ------------------------------------------------------------------------------------
def test_write_outputs_is_multiline_safe(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text("a=1\n", encoding="utf-8")
    tricky = "line one\nline two\nstate<<EOF\nEOF\n"
    write_outputs(path, {"multi": tricky, "plain": "x=y"})
    write_outputs(path, {"again": ""})
    parsed = parse_github_output(path.read_text(encoding="utf-8"))
    assert parsed == {"a": "1", "multi": tricky, "plain": "x=y", "again": ""}
    delimiters = [line.split("<<")[1] for line in path.read_text().splitlines() if line.startswith("multi<<")]
    assert delimiters[0].startswith("ghadelimiter_") and len(delimiters[0]) > 30


@pytest.mark.parametrize("state", sorted(EXIT_CODES))
def test_publish_and_report_per_state(tmp_path: Path, fake: FakeGitHub, state: str) -> None:
    ctx = read_context(runner_env(tmp_path, api_url=fake.base_url))
    result_dir = write_result_dir(ctx.out_dir, sample_result(state))
    stream = io.StringIO()
    code = publish_and_report(result_dir, ctx, run_exit=EXIT_CODES[state], options=FAST, stream=stream)
    assert code == (0 if state == "passed" else 1)
    got = outputs(ctx)
    assert got["earlier"] == "value"  # appended, not overwritten
    assert got["state"] == state
    assert got["exit-code"] == str(EXIT_CODES[state])
    assert got["result-path"] == "evals/gate-out/result.json"
    assert got["cost"] == "0.0123456789"
    assert json.loads(got["unrun-case-ids"]) == sample_result(state)["unrun_case_ids"]
    assert ctx.summary_file is not None
    assert ctx.summary_file.read_text(encoding="utf-8").startswith(f"## ragas-gate: {state}")
    (run,) = fake.check_runs
    assert run["head_sha"] == HEAD and run["name"] == "ragas-gate / refund-answer / pr"
    (comment,) = fake.comments("acme/support-bot", 17)
    assert comment["body"].startswith(comment_marker("refund-answer", "pr"))
    assert comment["user"]["login"] == BOT_LOGIN
    annotations = run["annotations"]
    assert all(a["path"] == "evals/policy.yaml" for a in annotations)
    assert "::warning::" not in stream.getvalue()


@pytest.mark.parametrize(("fail_on", "expected"), [("quality_failed", 0), ("review_required", 1), ("none", 0)])
def test_fail_on_decides_the_step_exit(tmp_path: Path, fake: FakeGitHub, fail_on: str, expected: int) -> None:
    ctx = read_context(runner_env(tmp_path, api_url=fake.base_url, fail_on=fail_on))
    result_dir = write_result_dir(ctx.out_dir, sample_result("review_required"))
    assert publish_and_report(result_dir, ctx, options=FAST, stream=io.StringIO()) == expected
    assert outputs(ctx)["exit-code"] == "4"  # the state's own code is unchanged


def test_comment_off_and_workflow_dispatch_post_no_comment(tmp_path: Path, fake: FakeGitHub) -> None:
    for sub, kwargs in (("off", {"comment": "off"}), ("dispatch", {"event": {"inputs": {}}})):
        ctx = read_context(runner_env(tmp_path / sub, api_url=fake.base_url, **kwargs))  # type: ignore[arg-type]
        publish_and_report(write_result_dir(ctx.out_dir, sample_result("passed")), ctx, options=FAST)
    assert [r["head_sha"] for r in fake.check_runs] == [HEAD, MERGE]
    assert not fake.calls("POST", "comments") and not fake.calls("GET", "comments")


def test_fork_pr_read_only_token_degrades_cleanly(
    tmp_path: Path, fake: FakeGitHub, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.read_only = True
    ctx = read_context(runner_env(tmp_path, api_url=fake.base_url))
    result_dir = write_result_dir(ctx.out_dir, sample_result("quality_failed"))
    stream = io.StringIO()
    with caplog.at_level(logging.DEBUG):
        code = publish_and_report(result_dir, ctx, run_exit=1, options=FAST, stream=stream)
    assert code == 1  # quality_failed is in the default fail-on: unchanged by the refused writes
    log = stream.getvalue()
    assert log.count("::warning::") == 2 and "Resource not accessible by integration" in log
    assert outputs(ctx)["state"] == "quality_failed" and outputs(ctx)["exit-code"] == "1"
    assert ctx.summary_file is not None
    summary = ctx.summary_file.read_text(encoding="utf-8")
    assert summary.startswith("## ragas-gate: quality_failed") and "publishing incomplete" in summary
    assert fake.check_runs == [] and fake.comments("acme/support-bot", 17) == []
    # the token and the key appear nowhere
    assert ctx.output_file is not None
    captured = capsys.readouterr()
    for text in (log, caplog.text, summary, ctx.output_file.read_text(), captured.out, captured.err):
        assert TOKEN not in text and API_KEY not in text


def test_no_token_publishes_nothing_but_reports(tmp_path: Path, fake: FakeGitHub) -> None:
    ctx = read_context(runner_env(tmp_path, api_url=fake.base_url, github_token=""))
    stream = io.StringIO()
    code = publish_and_report(write_result_dir(ctx.out_dir, sample_result("passed")), ctx, stream=stream)
    assert code == 0 and fake.requests == []
    assert "::notice::ragas-gate: nothing published" in stream.getvalue()
    assert outputs(ctx)["state"] == "passed"


def test_missing_result_is_an_error_exit_2(tmp_path: Path, fake: FakeGitHub) -> None:
    ctx = read_context(runner_env(tmp_path, api_url=fake.base_url))
    stream = io.StringIO()
    assert publish_and_report(ctx.out_dir, ctx, run_exit=None, stream=stream) == 2
    assert "::error::" in stream.getvalue() and "result.json" in stream.getvalue()
    assert outputs(ctx)["state"] == "" and fake.requests == []


def test_usage_error_from_the_run_exits_2_even_with_a_stale_result(tmp_path: Path, fake: FakeGitHub) -> None:
    ctx = read_context(runner_env(tmp_path, api_url=fake.base_url))
    write_result_dir(ctx.out_dir, sample_result("passed"))
    assert publish_and_report(ctx.out_dir, ctx, run_exit=2, stream=io.StringIO()) == 2
    assert outputs(ctx)["exit-code"] == "2" and fake.requests == []


def test_multiline_summary_and_huge_summary_are_written(tmp_path: Path, fake: FakeGitHub) -> None:
    ctx = read_context(runner_env(tmp_path, api_url=fake.base_url, github_token=""))
    result_dir = write_result_dir(ctx.out_dir, sample_result("passed"))
    (result_dir / "summary.md").write_text("x" * 1_500_000, encoding="utf-8")
    publish_and_report(result_dir, ctx, stream=io.StringIO())
    assert ctx.summary_file is not None
    assert len(ctx.summary_file.read_bytes()) <= 1_048_576


def test_ghes_api_url_is_used(tmp_path: Path) -> None:
    with FakeGitHub(prefix="/api/v3", user_status=403) as ghes:
        ctx = read_context(runner_env(tmp_path, api_url=ghes.base_url))
        stream = io.StringIO()
        code = publish_and_report(
            write_result_dir(ctx.out_dir, sample_result("passed")), ctx, options=FAST, stream=stream
        )
        assert code == 0 and "::warning::" not in stream.getvalue()
        assert len(ghes.check_runs) == 1 and len(ghes.comments("acme/support-bot", 17)) == 1
        assert all(r.status in (200, 201, 403) for r in ghes.requests)


# ---- gate publish -------------------------------------------------------------------------------
@pytest.mark.parametrize("state", sorted(EXIT_CODES))
def test_publish_result_dir_exits_with_the_state_code_even_when_refused(
    tmp_path: Path, fake: FakeGitHub, state: str
) -> None:
    fake.read_only = True
    env = runner_env(tmp_path, api_url=fake.base_url)
    env["GITHUB_TOKEN"] = TOKEN
    result_dir = write_result_dir(tmp_path / "out", sample_result(state))
    stream = io.StringIO()
    assert publish_result_dir(result_dir, env, options=FAST, stream=stream) == EXIT_CODES[state]
    assert "warning" in stream.getvalue() and TOKEN not in stream.getvalue()


def test_publish_result_dir_publishes(tmp_path: Path, fake: FakeGitHub) -> None:
    env = runner_env(tmp_path, api_url=fake.base_url)
    env["GITHUB_TOKEN"] = TOKEN
    result_dir = write_result_dir(tmp_path / "out", sample_result("review_required"))
    assert publish_result_dir(result_dir, env, options=FAST, stream=io.StringIO()) == 4
    (run,) = fake.check_runs
    assert run["conclusion"] == "action_required" and run["head_sha"] == HEAD
    assert len(fake.comments("acme/support-bot", 17)) == 1


def test_publish_result_dir_without_result_or_token(tmp_path: Path) -> None:
    stream = io.StringIO()
    assert publish_result_dir(tmp_path / "nothing", {}, stream=stream) == 2
    assert "result.json" in stream.getvalue()
    result_dir = write_result_dir(tmp_path / "out", sample_result("evaluation_incomplete"))
    assert publish_result_dir(result_dir, {"GITHUB_REPOSITORY": "a/b"}, stream=stream) == 3


def test_main_with_a_bad_input_is_a_usage_error_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = runner_env(tmp_path, api_url="", fail_on="everything")
    assert main(env) == 2
    out = capsys.readouterr().out
    assert "::error::input 'fail-on'" in out and TOKEN not in out


def test_inputs_arrive_as_one_json_object_from_the_wrapper(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """action.yml passes toJSON(inputs) as GATE_INPUTS; each becomes INPUT_<NAME>, hyphens kept."""
    env = {k: v for k, v in runner_env(tmp_path, api_url="").items() if not k.startswith("INPUT_")}
    inputs = {"policy": "policy.yaml", "lane": "release", "github-token": TOKEN, "working-directory": "evals"}
    env["GATE_INPUTS"] = json.dumps({**inputs, "max-cost": "0.25", "comment-author": None}, indent=2)
    ctx = read_context(expand_json_inputs(env))
    assert (ctx.lane, ctx.token, ctx.max_cost, ctx.comment_author) == ("release", TOKEN, "0.25", None)
    env["GATE_INPUTS"] = '{"policy": "policy.yaml", "lane": '
    assert main(env) == 2
    out = capsys.readouterr().out
    assert "::error::GATE_INPUTS is not JSON" in out and TOKEN not in out


@pytest.mark.parametrize(
    ("total", "shown"),
    [(0.0012055500000000001, "0.00120555"), (0.1 + 0.2, "0.3"), (1e-7, "0.0000001"), (0, "0"), (12.5, "12.5")],
)
def test_cost_output_is_a_plain_decimal_without_float_noise(tmp_path: Path, total: float, shown: str) -> None:
    result = sample_result("passed")
    result["cost"]["total"] = total
    assert outputs_for(Result.from_dict(result), "gate-out/result.json")["cost"] == shown
