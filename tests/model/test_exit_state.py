"""A process exit code that is no state's (a crash, a signal's 128+N, anything) is
evaluation_incomplete, never `passed` (issue 28, item 11, gate/model/states.py: nothing pinned
the default of `exit_state`). Through the one exit decision, and through the Action's publishing
of a result whose run ended that way, against the fake GitHub over real HTTP."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from fake_github import FakeGitHub, sample_result
from runner_env import parse_github_output, runner_env
from test_action import write_result_dir

from gate.action import publish_and_report, read_context
from gate.github.client import ClientOptions
from gate.model.states import State, exit_state

FAST = ClientOptions(0, 0, timeout=5, read_retries=2, backoff_factor=0, secondary_rate_wait=0)
NOT_A_STATE = [5, 6, 70, 126, 137, 143, 255, -9]


@pytest.mark.parametrize("code", NOT_A_STATE)
@pytest.mark.parametrize("said", [None, *State])
def test_an_exit_code_that_is_no_states_is_at_least_incomplete(code: int, said: State | None) -> None:
    state, exit_code = exit_state(code, said)
    assert state is not None and state.rank >= State.EVALUATION_INCOMPLETE.rank
    assert exit_code == state.exit_code != 0


@pytest.mark.parametrize("code", [137, 70])
def test_a_passed_result_of_a_run_that_died_is_published_incomplete(tmp_path: Path, code: int) -> None:
    with FakeGitHub(user_status=403) as github:
        ctx = read_context(runner_env(tmp_path, api_url=github.base_url))
        result_dir = write_result_dir(ctx.out_dir, sample_result("passed"))
        stream = io.StringIO()
        assert publish_and_report(result_dir, ctx, run_exit=code, options=FAST, stream=stream) == 1
        (run,) = github.check_runs
    assert ctx.output_file is not None
    outputs = parse_github_output(ctx.output_file.read_text(encoding="utf-8"))
    assert outputs["state"] == "evaluation_incomplete" and outputs["exit-code"] == "3"
    assert run["conclusion"] != "success"
    assert f"the run exited {code} although result.json says passed" in stream.getvalue()
