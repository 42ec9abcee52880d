"""SIGHUP is a stop, like SIGTERM (issue 28, defect 8). nektos/act cancels a job by killing the step,
and the docker CLI forwards SIGHUP into the container: the gate died of it and left no result.json.
Now the result is written, incomplete (exit 3), naming the signal: for `gate run` in the middle of
judging and before its judge is loaded, and for the Action's entry point (the container's). Real
processes, real signals, real HTTP to the fake provider and the fake GitHub; waits are on events
(requests seen, files present), never on wall-clock bounds of the run itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gate_process
import pytest
from fake_github import FakeGitHub
from fake_openai import FakeOpenAI
from runner_env import parse_github_output, runner_env
from slow_import import slow_import
from suite import case, controls, result, write_suite

ROOT = Path(__file__).resolve().parents[2]
KEY_ENV = "GATE_TEST_KEY"
WAIT_S = 120  # how long the test waits for the run to reach the point it interrupts (load-proof)


def wait_until(ready: Any, proc: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be interrupted"


def gate_run(policy: Path, out: Path, *, cold: bool = False, pythonpath: Path | None = None) -> Any:
    """`gate run` as a process of its own: forked warm (tests/gate_process.py), or `cold`, a fresh
    interpreter (where the judge's lazy import still lies ahead), with `pythonpath` first on its path."""
    cmd = [sys.executable, "-m", "gate.cli", "run", "--policy", str(policy), "--out", str(out), "--no-cache"]
    env = {**os.environ, KEY_ENV: "sk-test-sighup", "RAGAS_DO_NOT_TRACK": "true"}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), str(ROOT)])
    start = subprocess.Popen if cold else gate_process.popen
    return start(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def notes_and_blockers(res: dict[str, Any]) -> str:
    return json.dumps(res.get("notes", [])) + json.dumps([b["message"] for b in res["blockers"]])


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sighup_while_judging_writes_an_incomplete_result_naming_it(
    tmp_path: Path, fake_openai: FakeOpenAI, workers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_WORKERS", workers)
    cases = [*controls(), *(case(f"c-{i:02d}") for i in range(40))]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url, "max_concurrency": 4})
    fake_openai.latency = 0.3  # judgments are in flight when the job is cancelled
    out = tmp_path / "out"
    proc = gate_run(policy, out)
    wait_until(lambda: fake_openai.count() >= 8, proc)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    res = result(out)
    assert res["state"] == "evaluation_incomplete" and res["unrun_case_ids"]
    assert "SIGHUP" in notes_and_blockers(res)


def test_sighup_before_the_judge_is_loaded_writes_an_incomplete_result_naming_it(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "out"
    shim = slow_import(tmp_path, "ragas")  # the judge's import takes a minute: the signal comes during it
    proc = gate_run(policy, out, cold=True, pythonpath=shim.directory)
    shim.wait_started(proc, WAIT_S)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 3, err
    assert "Traceback" not in err and "SIGHUP" in err
    res = result(out)
    assert res["state"] == "evaluation_incomplete"
    assert "SIGHUP" in notes_and_blockers(res)


def test_the_actions_entry_point_handles_sighup_like_sigterm(tmp_path: Path) -> None:
    """The container's process (`python -m gate.action`) gets the SIGHUP: the step still writes
    its outputs, the summary and a check run that claim no verdict."""
    with FakeOpenAI() as fake, FakeGitHub(user_status=403) as github:
        fake.latency = 0.3
        env = runner_env(tmp_path, api_url=github.base_url)
        evals = tmp_path / "workspace" / "evals"
        cases = [*controls(), *(case(f"c-{i:02d}") for i in range(40))]
        write_suite(evals, cases, evaluator={"base_url": fake.base_url, "api_key_env": "JUDGE_KEY"})
        env.update(PATH=os.environ.get("PATH", ""), RAGAS_DO_NOT_TRACK="true", PYTHONPATH=str(ROOT))
        proc = gate_process.popen(
            [sys.executable, "-m", "gate.action"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(lambda: fake.count() >= 6, proc)
        proc.send_signal(signal.SIGHUP)
        stdout, stderr = proc.communicate(timeout=WAIT_S)
        log = stdout + stderr
        assert "Traceback" not in log
        assert proc.returncode == 1, log  # evaluation_incomplete fails the step (default fail-on)
        outputs = parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())
        assert outputs["state"] == "evaluation_incomplete" and outputs["exit-code"] == "3"
        (run,) = github.check_runs
        assert run["conclusion"] != "success"
    res = json.loads(Path(outputs["result-path"]).read_text()) if Path(outputs["result-path"]).is_absolute() else None
    res = res or json.loads((tmp_path / "workspace" / outputs["result-path"]).read_text())
    assert "SIGHUP" in notes_and_blockers(res)


# A team's check file, loaded before any judgment, whose object's weakref callback hangs up the run.
# Python runs a signal's handler at the callback's next loop turn, inside the callback, and prints
# and drops an exception a weakref callback raises: the interruption the handler raised was lost.
HANG_UP_IN_A_CALLBACK = """
import os, signal, weakref


def _hang_up(ref):
    os.kill(os.getpid(), signal.SIGHUP)
    for _ in range(10_000):
        pass


class _Held:
    pass


_held = _Held()
_ref = weakref.ref(_held, _hang_up)
del _held


def always_pass(response: str) -> str:
    return "pass"
"""


def test_a_sighup_lost_in_a_callback_still_stops_the_run_before_it_judges(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    check = {"name": "always_pass", "file": "checks.py", "function": "always_pass", "gate": True}
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url}, checks=[check])
    (tmp_path / "s" / "checks.py").write_text(HANG_UP_IN_A_CALLBACK, encoding="utf-8")
    out = tmp_path / "out"
    proc = gate_run(policy, out)
    _, err = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 3, err
    assert "Traceback" not in err and "SIGHUP" in err
    res = result(out)
    assert res["state"] == "evaluation_incomplete" and "SIGHUP" in notes_and_blockers(res)
    assert fake_openai.count() == 0  # nothing judged, nothing paid after the hang-up


def test_a_stop_signal_lost_in_a_callback_after_judging_interrupts_the_command_as_it_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from gate.commands.crash import Interrupted
    from gate.commands.steps import sigterm_interrupts

    namespace: dict[str, Any] = {}
    with pytest.raises(Interrupted) as stopped, sigterm_interrupts():
        exec(HANG_UP_IN_A_CALLBACK.replace("SIGHUP", "SIGTERM"), namespace)
        namespace["after"] = "the code after the callback ran on"
    assert stopped.value.signal_name == "SIGTERM" and namespace["after"]
    assert "Traceback" not in capsys.readouterr().err  # the dropped exception is not printed either


def test_a_run_cancelled_before_any_error_gets_no_advice_about_errors(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its controls have no verdict (a `control_error` blocker) but no error either: the next step is
    to resume, not to look for the provider's errors."""
    from suite import gate

    monkeypatch.setenv(KEY_ENV, "sk-test-sighup")
    check = {"name": "always_pass", "file": "checks.py", "function": "always_pass", "gate": True}
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url}, checks=[check])
    (tmp_path / "s" / "checks.py").write_text(HANG_UP_IN_A_CALLBACK.replace("SIGHUP", "SIGINT"), encoding="utf-8")
    assert gate("run", "--policy", policy, "--out", tmp_path / "out", "--no-cache") == 3
    printed = " ".join(capsys.readouterr().out.split())
    assert "interrupted (SIGINT)" in printed and "--resume judges only what is missing" in printed
    assert "Errors are the provider's" not in printed and fake_openai.count() == 0
