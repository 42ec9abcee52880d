"""action.yml's wrapper run as the runner runs it, against a stub `docker` that records its calls.

Per ref a user may pin (v1, v1.2.3, main, a commit SHA, a branch with a slash, a fork, `uses: ./`)
and per `image` input: which image is pulled or built and run, that a ref without an image falls
back to building the Dockerfile and says why, that nothing is written into the workspace, and that
the evaluator key reaches docker only as the name of a variable in its environment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gate_process
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))

from composite_runner import BASH, ROOT, Runner, StepRun, stub_docker_dir
from fake_github import FakeGitHub
from fake_openai import FakeOpenAI
from runner_env import API_KEY, HEAD, MERGE, TOKEN, parse_github_output
from stub_docker import BUILT_IMAGE
from suite import case, controls, write_suite
from warm_launch import write_launcher

SHA = "0123456789abcdef0123456789abcdef01234567"
ACTION_FILES = ("action.yml", "Dockerfile", "scripts/action-run")


@dataclass
class Outcome:
    steps: list[StepRun]
    calls: list[dict[str, Any]]
    workspace: Path
    temp: Path

    @property
    def returncode(self) -> int:
        return self.steps[-1].returncode

    @property
    def log(self) -> str:
        return "".join(s.stdout + s.stderr for s in self.steps)

    def commands(self) -> list[str]:
        return [" ".join(c["argv"][:2]) if c["argv"][0] == "image" else c["argv"][0] for c in self.calls]

    def run_call(self) -> dict[str, Any]:
        (run,) = [c for c in self.calls if c["argv"][0] == "run"]
        return run


def copy_action(dest: Path) -> Path:
    for rel in ACTION_FILES:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    return dest


def files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


def run_wrapper(
    tmp_path: Path,
    *,
    repository: str = "acme/ragas-gate",
    ref: str = "v1",
    local: bool = False,
    expressions: bool = True,
    with_: dict[str, str] | None = None,
    stub: dict[str, str] | None = None,
    caller_env: dict[str, str] | None = None,
    suite: Callable[[Path], object] | None = None,
    may_write: tuple[str, ...] = (),
    path: str | None = None,
    cancel: signal.Signals | None = None,
) -> Outcome:
    """Run action.yml for `uses: <repository>@<ref>` (or `uses: ./` when local).

    `suite` fills the workspace's evals/ directory; `may_write` lists the only top-level entries of
    evals/ the run may add."""
    workspace = tmp_path / "work" / "support-bot" / "support-bot"
    workspace.mkdir(parents=True)
    (workspace / "evals").mkdir()
    if suite is None:
        (workspace / "evals" / "policy.yaml").write_text("version: 1\npolicy_id: refund-answer\n", encoding="utf-8")
    else:
        suite(workspace / "evals")
    if local:
        action_path = copy_action(workspace)
        repository = ref = ""
    else:  # where the runner checks out `uses: owner/repo@ref` (a ref may hold slashes)
        action_path = copy_action(tmp_path / "work" / "_actions" / repository / ref)
    temp = tmp_path / "work" / "_temp"
    files = temp / "_runner_file_commands"
    files.mkdir(parents=True)
    (files / "set_output_1").write_text("", encoding="utf-8")
    (files / "step_summary_1").write_text("", encoding="utf-8")
    (temp / "_github_workflow").mkdir()
    event = temp / "_github_workflow" / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 17, "head": {"sha": HEAD}}}), encoding="utf-8")
    before = files_under(workspace)
    docker_log = tmp_path / "docker-calls.jsonl"
    docker_log.touch()
    caller_env = caller_env if caller_env is not None else {"OPENAI_API_KEY": API_KEY, "APP_STAGE": "ci"}
    env = {
        "PATH": path or f"{stub_docker_dir(tmp_path)}:{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
        "PYTHONPATH": "/host/only/site-packages",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_REPOSITORY": "acme/support-bot",
        "GITHUB_SHA": MERGE,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_OUTPUT": str(files / "set_output_1"),
        "GITHUB_STEP_SUMMARY": str(files / "step_summary_1"),
        "GITHUB_ENV": str(files / "set_env_1"),
        "ACTIONS_RUNTIME_TOKEN": "runtime-token-never-passed",
        "STUB_DOCKER_LOG": str(docker_log),
        **caller_env,
        **(stub or {}),
    }
    runner = Runner(
        action_path=action_path,
        workspace=workspace,
        temp=temp,
        env=env,
        caller_env=caller_env,
        github={
            "token": TOKEN,
            "action_path": str(action_path),
            "action_ref": ref if expressions else "",
            "action_repository": repository if expressions else "",
        },
    )
    inputs = {"policy": "policy.yaml", "working-directory": "evals", **(with_ or {})}
    steps = runner.run_action(inputs) if cancel is None else cancelled_run(runner, inputs, docker_log, cancel)
    calls = [json.loads(line) for line in docker_log.read_text(encoding="utf-8").splitlines()]
    new = {f for f in files_under(workspace) - before if f.split("/")[:2] not in [["evals", w] for w in may_write]}
    assert not new, f"the wrapper wrote into the workspace: {sorted(new)}"
    assert [p.name for p in temp.iterdir() if p.name.startswith("ragas-gate.")] == [], "temp files left behind"
    return Outcome(steps, calls, workspace, temp)


_DEFAULT_SIGNALS_THEN_EXEC = (
    "import os, signal, sys\n"
    "for s in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM): signal.signal(s, signal.SIG_DFL)\n"
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def cancelled_run(runner: Runner, inputs: dict[str, str], docker_log: Path, sig: signal.Signals) -> list[StepRun]:
    """Start the step, and once `docker run` is under way send it `sig` as a cancelled job does."""
    ((name, argv, env),) = runner.steps(inputs)
    # A runner starts its steps with every signal at its default. Under nohup, or as a background job of
    # a script, this test inherits SIGHUP / SIGINT ignored, which bash may not trap: reset them, then exec.
    argv = [sys.executable, "-c", _DEFAULT_SIGNALS_THEN_EXEC, *argv]
    proc = subprocess.Popen(
        argv, env=env, cwd=runner.workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120  # a bound on a hang, not on a busy machine
    while '"run"' not in docker_log.read_text(encoding="utf-8") and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return [StepRun(name, proc.returncode, stdout, stderr)]


@pytest.mark.parametrize(
    ("repository", "ref", "image"),
    [
        ("acme/ragas-gate", "v1", "ghcr.io/acme/ragas-gate:v1"),
        ("acme/ragas-gate", "v1.2.3", "ghcr.io/acme/ragas-gate:v1.2.3"),
        ("acme/ragas-gate", "main", "ghcr.io/acme/ragas-gate:main"),
        ("acme/ragas-gate", SHA, f"ghcr.io/acme/ragas-gate:{SHA}"),
        ("acme/ragas-gate", "feature/quiet-log", "ghcr.io/acme/ragas-gate:feature-quiet-log"),
        ("Alice-Fork/Ragas-Gate", "main", "ghcr.io/alice-fork/ragas-gate:main"),
    ],
)
def test_each_ref_pulls_its_image_and_runs_it(tmp_path: Path, repository: str, ref: str, image: str) -> None:
    out = run_wrapper(tmp_path, repository=repository, ref=ref)
    assert out.returncode == 0, out.log
    assert out.commands() == ["pull", "run"]
    assert out.calls[0]["argv"][-1] == image
    assert out.run_call()["image"] == image
    assert f"ragas-gate: image {image} (action {repository}@{ref})" in out.log
    assert "::notice" not in out.log


def test_the_ref_is_read_from_the_action_path_when_the_expressions_are_empty(tmp_path: Path) -> None:
    out = run_wrapper(tmp_path, repository="acme/ragas-gate", ref="release/2.0", expressions=False)
    assert out.returncode == 0, out.log
    assert out.run_call()["image"] == "ghcr.io/acme/ragas-gate:release-2.0"


def test_a_ref_without_an_image_builds_the_dockerfile_and_says_why(tmp_path: Path) -> None:
    out = run_wrapper(tmp_path, repository="alice/ragas-gate", ref="wip/judge", stub={"STUB_PULL_STATUS": "1"})
    assert out.returncode == 0, out.log
    assert out.commands() == ["pull", "build", "run"]
    build = out.calls[1]["argv"]
    action_path = tmp_path / "work" / "_actions" / "alice" / "ragas-gate" / "wip" / "judge"
    assert build[-1] == str(action_path) and build[build.index("-f") + 1] == f"{action_path}/Dockerfile"
    assert out.run_call()["image"] == BUILT_IMAGE
    assert "::notice title=ragas-gate::building the action's Dockerfile" in out.log
    assert "ghcr.io/alice/ragas-gate:wip-judge: Error response from daemon: manifest unknown" in out.log


def test_uses_dot_builds_the_checkout_without_pulling(tmp_path: Path) -> None:
    out = run_wrapper(tmp_path, local=True)
    assert out.returncode == 0, out.log
    assert out.commands() == ["build", "run"]
    assert out.calls[0]["argv"][-1] == str(out.workspace)
    assert "local path (uses: ./...)" in out.log


def test_a_failed_build_is_an_error(tmp_path: Path) -> None:
    out = run_wrapper(tmp_path, local=True, stub={"STUB_BUILD_STATUS": "1"})
    assert out.returncode == 2 and out.commands() == ["build"]
    assert (
        "failed to solve" in out.log and "::error title=ragas-gate::building the action's Dockerfile failed" in out.log
    )


@pytest.mark.parametrize(
    "hostile",
    [
        'alpine"\n  entrypoint: sh',
        "alpine; touch pwned",
        "$(touch pwned)",
        "--privileged",
        "-v=/:/host alpine",
        "ghcr.io/acme/ragas-gate:v1 --network=host",
        "Alpine:latest",
        "alpine:" + "x" * 200,
    ],
)
def test_a_hostile_image_input_is_refused_before_docker_runs(tmp_path: Path, hostile: str) -> None:
    out = run_wrapper(tmp_path, with_={"image": hostile})
    assert out.returncode == 2
    assert out.calls == []
    assert "::error title=ragas-gate::input 'image' is not an image reference" in out.log
    assert "%0A" in out.log or "\n" not in hostile  # a newline in the value cannot start a new command
    assert not (tmp_path / "pwned").exists() and not (out.workspace / "pwned").exists()


@pytest.mark.parametrize(
    "image",
    ["registry.example.com:5000/mirror/ragas-gate:v1", "ragas-gate@sha256:" + "a" * 64, "docker://ragas-gate:smoke"],
)
def test_the_image_input_is_pulled_and_run(tmp_path: Path, image: str) -> None:
    out = run_wrapper(tmp_path, with_={"image": image})
    assert out.returncode == 0, out.log
    assert out.commands() == ["pull", "run"]
    assert out.run_call()["image"] == image.removeprefix("docker://")


def test_an_image_input_that_cannot_be_pulled_uses_a_local_copy_or_fails(tmp_path: Path) -> None:
    local = run_wrapper(
        tmp_path / "a", with_={"image": "ragas-gate:smoke"}, stub={"STUB_PULL_STATUS": "1", "STUB_INSPECT_STATUS": "0"}
    )
    assert local.returncode == 0 and local.commands() == ["pull", "image inspect", "run"]
    assert "using the local copy" in local.log
    missing = run_wrapper(tmp_path / "b", with_={"image": "ragas-gate:smoke"}, stub={"STUB_PULL_STATUS": "1"})
    assert missing.returncode == 2 and "build" not in missing.commands()
    assert "::error title=ragas-gate::could not pull the image input ragas-gate:smoke" in missing.log


def test_image_dockerfile_builds(tmp_path: Path) -> None:
    out = run_wrapper(tmp_path, with_={"image": "Dockerfile"})
    assert out.commands() == ["build", "run"] and "the image input says Dockerfile" in out.log


def test_docker_run_gets_the_runner_layout_and_the_key_by_name_only(tmp_path: Path) -> None:
    out = run_wrapper(tmp_path, with_={"max-cost": "0.50"})
    run = out.run_call()
    argv: list[str] = run["argv"]
    joined = "\n".join(argv)
    # Secrets: named, never valued, on docker's command line; docker finds them in its environment.
    assert API_KEY not in joined and TOKEN not in joined
    assert argv[argv.index("OPENAI_API_KEY") - 1] == "-e"
    assert run["env"]["OPENAI_API_KEY"] == API_KEY
    inputs = json.loads(run["env"]["GATE_INPUTS"])
    assert inputs["github-token"] == TOKEN and inputs["max-cost"] == "0.50" and inputs["policy"] == "policy.yaml"
    # Only the variables the Action documents pass; the host's do not; the runner's internals never do.
    for name in ("APP_STAGE", "PYTHONPATH", "PATH", "ACTIONS_RUNTIME_TOKEN", "GITHUB_ENV", "GATE_CALLER_ENV"):
        assert name not in run["env"], name
    for name in ("STUB_DOCKER_LOG",):
        assert name not in run["env"], name
    # The runner's mounts, the workspace as workdir, its owner as the user.
    mounts = dict(reversed(argv[i + 1].split(":")[:2]) for i, a in enumerate(argv) if a == "-v")
    assert mounts["/github/workspace"] == str(out.workspace)
    assert run["env"]["GITHUB_WORKSPACE"] == "/github/workspace" == argv[argv.index("--workdir") + 1]
    assert mounts["/github/file_commands/output"].endswith("set_output_1")
    assert run["env"]["GITHUB_OUTPUT"] == "/github/file_commands/output"
    assert run["env"]["GITHUB_EVENT_PATH"] == "/github/workflow/event.json"
    assert run["env"]["HOME"] == "/github/home" and mounts["/github/home"].startswith(str(out.temp))
    stat = out.workspace.stat()
    assert argv[argv.index("--user") + 1] == f"{stat.st_uid}:{stat.st_gid}"
    assert run["env"]["GITHUB_REPOSITORY"] == "acme/support-bot" and run["env"]["GITHUB_SHA"] == MERGE
    assert argv[argv.index("--pull") + 1] == "never"


def test_a_runner_without_docker_gets_one_clear_error(tmp_path: Path) -> None:
    only_bash = tmp_path / "only-bash"
    only_bash.mkdir()
    (only_bash / "bash").symlink_to(BASH)
    out = run_wrapper(tmp_path, path=str(only_bash))
    assert out.returncode == 2 and out.calls == []
    assert "::error title=ragas-gate::ragas-gate runs in a container and this runner has no docker CLI" in out.log


def test_the_container_exit_status_is_the_step_status(tmp_path: Path) -> None:
    assert run_wrapper(tmp_path / "a", stub={"STUB_RUN_STATUS": "1"}).returncode == 1
    broken = run_wrapper(tmp_path / "b", stub={"STUB_RUN_STATUS": "125"})
    assert broken.returncode == 2 and "docker could not run the container" in broken.log


@pytest.mark.parametrize(
    ("status", "signame", "cause"),
    [(137, "SIGKILL", "most likely out of memory"), (139, "SIGSEGV", ""), (134, "SIGABRT", "")],
)
def test_a_container_killed_by_a_signal_is_incomplete_not_a_usage_error(
    tmp_path: Path, status: int, signame: str, cause: str
) -> None:
    out = run_wrapper(tmp_path, stub={"STUB_RUN_STATUS": str(status)})
    assert out.returncode == 3, out.log
    (error,) = [line for line in out.log.splitlines() if line.startswith("::error")]
    assert f"killed by {signame} (docker run exited {status})" in error and cause in error
    assert "docker could not run" not in out.log
    outputs = parse_github_output((out.temp / "_runner_file_commands" / "set_output_1").read_text())
    assert outputs == {"state": "evaluation_incomplete", "exit-code": "3"}


def test_the_gates_own_variables_reach_the_container_and_the_wrappers_do_not(tmp_path: Path) -> None:
    """GATE_DEBUG (which a crash message recommends) and GATE_WORKERS are the allow-list: every
    GATE_* variable `gate run --help` documents; the wrapper's own GATE_* never pass."""
    from gate.cli.run import RUN_ENV

    documented = set(re.findall(r"\b(GATE_[A-Z_]+)", RUN_ENV))
    assert documented == {"GATE_DEBUG", "GATE_WORKERS"}
    caller = {"OPENAI_API_KEY": API_KEY, "GATE_DEBUG": "1", "GATE_WORKERS": "2", "GATE_SOMETHING": "x"}
    run = run_wrapper(tmp_path, caller_env=caller).run_call()
    assert {k: v for k, v in run["env"].items() if k.startswith("GATE_") and k != "GATE_INPUTS"} == {
        "GATE_DEBUG": "1",
        "GATE_WORKERS": "2",
    }
    for name in ("GATE_CALLER_ENV", "GATE_IMAGE", "GATE_ACTION_REF", "GATE_SOMETHING"):
        assert name not in run["argv"], name


def test_a_whole_run_through_the_wrapper_writes_only_gate_out_and_a_quiet_log(tmp_path: Path) -> None:
    """The stub runs the real entry point as the container would (its mounts mapped back): a run
    judged over HTTP by the fake provider, published to the fake GitHub API."""
    cases = [*controls(), *(case(f"c-{i}") for i in range(30))]
    with FakeOpenAI() as provider, FakeGitHub(user_status=403) as github:
        out = run_wrapper(
            tmp_path,
            caller_env={"JUDGE_KEY": API_KEY, "GITHUB_API_URL": github.base_url},
            suite=lambda root: write_suite(
                root, cases, evaluator={"base_url": provider.base_url, "api_key_env": "JUDGE_KEY"}
            ),
            with_={"max-cost": "5"},
            # The entry point forked warm (tests/warm_launch.py), as `python -P -m gate.action` runs it.
            stub={"STUB_RUN_EXEC": str(write_launcher(tmp_path / "python", "python", gate_process.server_address()))},
            may_write=("gate-out", ".gate-cache"),
        )
        check_runs = github.check_runs
    assert out.returncode == 0, out.log
    outputs = parse_github_output((out.temp / "_runner_file_commands" / "set_output_1").read_text())
    result = json.loads((out.workspace / outputs["result-path"]).read_text())
    assert outputs["state"] == result["state"] == "passed" and outputs["result-path"] == "evals/gate-out/result.json"
    assert result["cost"]["total"] > 0 and "e" not in outputs["cost"].lower()
    assert abs(float(outputs["cost"]) - result["cost"]["total"]) <= 1e-12
    (run,) = check_runs
    assert run["head_sha"] == HEAD and run["conclusion"] == "success"
    # A quiet log: no line per HTTP request, a progress line per ~10% of the judgments, the summary.
    assert "HTTP Request" not in out.log
    progress = [line for line in out.log.splitlines() if line.startswith("gate: ") and "judgments" in line]
    assert 2 <= len(progress) <= 12, progress
    assert "ragas-gate: passed (exit code 0)" in out.log
    assert API_KEY not in out.log.replace(f"::add-mask::{API_KEY}", "") and TOKEN not in out.log.replace(
        f"::add-mask::{TOKEN}", ""
    )
    # Written as the workspace's owner, only under gate-out/ and .gate-cache/.
    owner = out.workspace.stat()
    written = [p for p in (out.workspace / "evals").rglob("*") if p.parts[-1] != "policy.yaml"]
    assert all((p.stat().st_uid, p.stat().st_gid) == (owner.st_uid, owner.st_gid) for p in written)


def release_tags(tmp_path: Path, ref: str, ref_type: str, sha: str) -> list[str]:
    """The tags release-image.yml's "Compute tags" step pushes for a ref, run in a git repository."""
    workflow = yaml.safe_load((ROOT / ".github/workflows/release-image.yml").read_text(encoding="utf-8"))
    (step,) = [s for s in workflow["jobs"]["build-and-push"]["steps"] if s.get("id") == "tags"]
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "release"], check=True)
    for tag in ("v1.0.0", "v1.2.3", "v1.3.0"):
        subprocess.run([*git, "tag", tag], check=True)
    output = tmp_path / "release-output"
    output.touch()
    env = {"PATH": os.environ["PATH"], "REF_NAME": ref, "REF_TYPE": ref_type, "GITHUB_OUTPUT": str(output)}
    env |= {"GITHUB_REPOSITORY": "Acme/Ragas-Gate", "GITHUB_SHA": sha}
    subprocess.run([BASH, "-eo", "pipefail", "-c", step["run"]], env=env, cwd=repo, check=True)
    return parse_github_output(output.read_text(encoding="utf-8"))["tags"].splitlines()


@pytest.mark.parametrize(
    ("ref", "ref_type", "expected"),
    [
        ("main", "branch", {"main", SHA}),
        ("v1.3.0", "tag", {"v1.3.0", "v1.3", "v1", SHA}),
        ("v1.2.3", "tag", {"v1.2.3", "v1.2", SHA}),  # a backport moves v1.2, never v1 back
        ("feature/quiet-log", "branch", {"feature-quiet-log", SHA}),  # workflow_dispatch
    ],
)
def test_release_image_pushes_the_tags_the_wrapper_pulls(
    tmp_path: Path, ref: str, ref_type: str, expected: set[str]
) -> None:
    tags = release_tags(tmp_path, ref, ref_type, SHA)
    assert {t.removeprefix("ghcr.io/acme/ragas-gate:") for t in tags} == expected
    pins = {ref} | expected - {ref.replace("/", "-")}  # the refs a user may pin: feature/x, not feature-x
    for pinned in pins:  # each pulls an image this release pushed
        out = run_wrapper(tmp_path / f"uses-{pinned.replace('/', '-')}", repository="Acme/Ragas-Gate", ref=pinned)
        assert out.run_call()["image"] in tags


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)])
def test_a_cancelled_job_stops_the_container(tmp_path: Path, sig: signal.Signals, status: int) -> None:
    # The stub's run lasts 90 s unless killed: on a loaded machine the cancel may reach the wrapper
    # many seconds after the run began, and a run that ended first would exit 0 with nothing to stop.
    out = run_wrapper(tmp_path, stub={"STUB_RUN_SECONDS": "90"}, cancel=sig)
    assert out.returncode == status, out.log
    run = out.run_call()["argv"]
    assert "--init" in run
    name = run[run.index("--name") + 1]
    assert out.calls[-1]["argv"] == ["kill", "--signal", "TERM", name]
    assert "ragas-gate: cancelled: stopping the container" in out.log


# A host's whole environment, as nektos/act's host mode puts it in the `env` context (issue 28,
# defect 8): the wrapper passed every name of it into the container.
ACT_HOST_ENV = {
    "OPENAI_API_KEY": API_KEY,
    "HTTPS_PROXY": "http://proxy.internal:3128",
    "JUDGE_TOKEN": "judge-token-listed-in-pass-env",
    "REFUND_JUDGE_SECRET": "the-policys-api-key-env",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-never-passed",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "DATABASE_URL": "postgres://admin:pw@db/prod",
    "JAVA_HOME": "/usr/lib/jvm/java-17",
    "APP_STAGE": "ci",
    "DISPLAY": ":0",
}


def _policy_naming_its_key(evals: Path) -> None:
    (evals / "policy.yaml").write_text(
        "version: 1\npolicy_id: refund-answer\nevaluator:\n  model: m\n  api_key_env: 'REFUND_JUDGE_SECRET'  # the key\n",
        encoding="utf-8",
    )


def test_under_act_host_mode_only_the_documented_variables_reach_the_container(tmp_path: Path) -> None:
    out = run_wrapper(
        tmp_path, caller_env=ACT_HOST_ENV, with_={"pass-env": "JUDGE_TOKEN"}, suite=_policy_naming_its_key
    )
    assert out.returncode == 0, out.log
    run = out.run_call()
    passed = {a for i, a in enumerate(run["argv"]) if i and run["argv"][i - 1] == "-e" and "=" not in a}
    assert passed - {"GATE_INPUTS"} - {n for n in passed if n.startswith(("GITHUB_", "RUNNER_"))} == {
        "OPENAI_API_KEY",
        "HTTPS_PROXY",
        "JUDGE_TOKEN",
        "REFUND_JUDGE_SECRET",  # the policy's evaluator.api_key_env
    }
    for secret in ("aws-secret-never-passed", "postgres://admin:pw@db/prod", "judge-token-listed-in-pass-env"):
        assert secret not in "\n".join(run["argv"])
    for name in ("AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "DATABASE_URL", "JAVA_HOME", "APP_STAGE", "DISPLAY"):
        assert name not in run["env"], name
    assert run["env"]["JUDGE_TOKEN"] == "judge-token-listed-in-pass-env"


@pytest.mark.parametrize("listed", ["PATH", "GITHUB_TOKEN", "GATE_SOMETHING"])
def test_pass_env_never_passes_what_describes_the_host(tmp_path: Path, listed: str) -> None:
    caller = {"OPENAI_API_KEY": API_KEY, "GITHUB_TOKEN": "ghs-never-passed", "GATE_SOMETHING": "x"}
    run = run_wrapper(tmp_path, caller_env=caller, with_={"pass-env": f"{listed}, OPENAI_API_KEY"}).run_call()
    assert listed not in run["argv"] and "OPENAI_API_KEY" in run["argv"]


def test_a_pass_env_that_is_not_names_is_refused_before_docker_runs(tmp_path: Path) -> None:
    out = run_wrapper(tmp_path, with_={"pass-env": "OK_NAME $(touch /tmp/x)"})
    assert out.returncode == 2 and "run" not in out.commands()
    assert "input 'pass-env' lists variable names" in out.log
