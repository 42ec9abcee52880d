"""Run action.yml's composite steps the way the GitHub runner does, for the wrapper's tests.

Each `run:` step is written to a file and run with `bash --noprofile --norc -eo pipefail FILE`
(the runner's `shell: bash`), in the runner's environment: GITHUB_ACTION_PATH, RUNNER_TEMP,
GITHUB_WORKSPACE, GITHUB_OUTPUT, ... and the step's `env:` with its expressions evaluated. Inside
composite steps the runner leaves $GITHUB_ACTION_REF and $GITHUB_ACTION_REPOSITORY empty
(actions/runner#2473), and so does this. Expressions: `inputs.<name>`, `github.<name>`,
`env.<name>`, `toJSON(inputs)` and `toJSON(env)` (pretty-printed, as the runner prints JSON);
anything else fails the test, so an expression action.yml starts using must be added here.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASH = shutil.which("bash") or "/bin/bash"
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepRun:
    name: str
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Runner:
    """The parts of a runner a composite action sees."""

    action_path: Path
    workspace: Path
    temp: Path
    env: dict[str, str]  # the runner's process environment (PATH, GITHUB_*, the caller's env...)
    caller_env: dict[str, str] = field(default_factory=dict)  # the `env` context
    github: dict[str, str] = field(default_factory=dict)  # the `github` context

    def evaluate(self, text: str, inputs: dict[str, str]) -> str:
        contexts: dict[str, dict[str, str]] = {"inputs": inputs, "github": self.github, "env": self.caller_env}

        def one(match: re.Match[str]) -> str:
            expr = match.group(1)
            call = re.fullmatch(r"toJSON\((inputs|env)\)", expr)
            if call:
                return json.dumps(contexts[call.group(1)], indent=2)
            ref = re.fullmatch(r"(inputs|github|env)\.([A-Za-z0-9_-]+)", expr)
            if ref:
                return contexts[ref.group(1)].get(ref.group(2), "")
            raise AssertionError(f"composite_runner cannot evaluate ${{{{ {expr} }}}}: add it here")

        return _EXPR.sub(one, text)

    def steps(self, with_: dict[str, str]) -> list[tuple[str, list[str], dict[str, str]]]:
        """(name, argv, env) of each step of action.yml with the `with:` inputs, as the runner runs it."""
        action = yaml.safe_load((self.action_path / "action.yml").read_text(encoding="utf-8"))
        declared: dict[str, Any] = action["inputs"]
        unknown = set(with_) - set(declared)
        assert not unknown, f"inputs not declared in action.yml: {unknown}"
        inputs: dict[str, str] = {}
        for name, spec in declared.items():
            default = str(spec.get("default", "")) if spec else ""
            inputs[name] = with_.get(name, self.evaluate(default, {}))
        assert action["runs"]["using"] == "composite"
        out = []
        for index, step in enumerate(action["runs"]["steps"]):
            assert "run" in step, f"step {index} is not a run: step; teach composite_runner to run it"
            assert step.get("shell") == "bash", "the wrapper's steps run with bash"
            script = self.temp / f"step-{index}.sh"
            script.write_text(self.evaluate(step["run"], inputs), encoding="utf-8")
            env = dict(self.env)
            env.update({k: self.evaluate(str(v), inputs) for k, v in (step.get("env") or {}).items()})
            env.update(
                GITHUB_ACTION_PATH=str(self.action_path),
                GITHUB_ACTION_REF="",
                GITHUB_ACTION_REPOSITORY="",
                GITHUB_WORKSPACE=str(self.workspace),
                RUNNER_TEMP=str(self.temp),
            )
            argv = [BASH, "--noprofile", "--norc", "-eo", "pipefail", str(script)]
            out.append((str(step.get("name", index)), argv, env))
        return out

    def run_action(self, with_: dict[str, str]) -> list[StepRun]:
        """Run every step of action.yml with the `with:` inputs; stops at the first failing step."""
        runs: list[StepRun] = []
        for name, argv, env in self.steps(with_):
            done = subprocess.run(
                argv, env=env, cwd=self.workspace, capture_output=True, text=True, timeout=120, check=False
            )
            Path(argv[-1]).unlink()
            runs.append(StepRun(name, done.returncode, done.stdout, done.stderr))
            if done.returncode != 0:
                break
        return runs


def stub_docker_dir(tmp: Path) -> Path:
    """A directory holding `docker`: tests/stub_docker.py run by this interpreter."""
    bin_dir = tmp / "stub-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    docker = bin_dir / "docker"
    docker.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{ROOT / "tests" / "stub_docker.py"}" "$@"\n',
        encoding="utf-8",
    )
    docker.chmod(0o755)
    return bin_dir
