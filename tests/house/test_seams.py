"""SPEC 14 (issue 19): one decision, one bill, one exit code, on every path.

Each test reproduces one defect from outside: the real CLI (in process or as CI runs it, a
subprocess), real HTTP to the fake provider, the real Action entry point against the fake GitHub.
"""

from __future__ import annotations

import io
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
from fake_openai import FakeOpenAI, raw, reply
from runner_env import parse_github_output, runner_env
from slow_import import slow_import
from suite import case, controls, gate, result, write_suite
from test_crash import broken_package
from test_resume_kill import command, run_until
from test_trend import trend, trend_or_verdict

from gate.action import main as action_main
from gate.action import publish_and_report, read_context
from gate.plan.shard import shard_of

KEY_ENV = "GATE_TEST_KEY"
ROOT = Path(__file__).resolve().parents[2]
PRICE_IN, PRICE_OUT = 1.0, 2.0  # tests/suite.py's prices, per million tokens


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-seams")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def billed(fake: FakeOpenAI) -> float:
    """What the provider billed: the usage it sent, at the suite's prices."""
    prompt, completion = fake.usage_totals()
    return (prompt * PRICE_IN + completion * PRICE_OUT) / 1e6


def blocked_output(out: Path, name: str) -> None:
    """`name` cannot be written into `out`: its temporary file's path is a directory (a real EISDIR)."""
    (out / f"{name}.tmp").mkdir(parents=True)
    (out / f"{name}.tmp" / "keep").write_text("", encoding="utf-8")


# -- defect 1: an output that cannot be written is never published as a verdict ------------------


def test_an_output_that_cannot_be_written_leaves_result_json_incomplete_and_exit_3(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "out"
    blocked_output(out, "junit.xml")
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 3
    res = result(out)
    assert res["state"] == "evaluation_incomplete" and res["exit_code"] == 3
    (blocker,) = [b for b in res["blockers"] if b["kind"] == "output_write_failed"]
    assert blocker["files"] == ["junit.xml"] and "junit.xml" in blocker["message"]
    # The reports that could be written say what result.json says.
    assert "output_write_failed" in (out / "report.md").read_text()
    # `gate decide` over the same records, into a directory it can write, decides the verdict.
    assert gate("decide", "--policy", policy, "--records", out / "records.jsonl", "--out", tmp_path / "d") == 0


def test_the_action_publishes_the_most_severe_of_the_run_exit_and_the_result(tmp_path: Path) -> None:
    """A result.json that says `passed` from a run that exited 3 is published as evaluation_incomplete."""
    with FakeGitHub(user_status=403) as github:
        ctx = read_context(runner_env(tmp_path, api_url=github.base_url))
        ctx.out_dir.mkdir(parents=True)
        from fake_github import sample_result

        (ctx.out_dir / "result.json").write_text(json.dumps(sample_result("passed")), encoding="utf-8")
        stream = io.StringIO()
        assert publish_and_report(ctx.out_dir, ctx, run_exit=3, stream=stream) == 1
        assert ctx.output_file is not None
        outputs = parse_github_output(ctx.output_file.read_text())
        assert outputs["state"] == "evaluation_incomplete" and outputs["exit-code"] == "3"
        (run,) = github.check_runs
        assert run["conclusion"] == "cancelled"  # never `success` after exit 3
        assert "::error::" in stream.getvalue() and "exited 3" in stream.getvalue()


def test_the_action_with_an_unwritable_report_publishes_evaluation_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI() as provider, FakeGitHub(user_status=403) as github:
        env = runner_env(tmp_path, api_url=github.base_url)
        env["RAGAS_DO_NOT_TRACK"] = "true"
        evals = tmp_path / "workspace" / "evals"
        write_suite(evals, evaluator={"base_url": provider.base_url, "api_key_env": "JUDGE_KEY"})
        blocked_output(evals / "gate-out", "summary.md")
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path / "workspace")
        assert action_main() == 1  # evaluation_incomplete is in the default fail-on
        outputs = parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())
        assert outputs["state"] == "evaluation_incomplete" and outputs["exit-code"] == "3"
        (run,) = github.check_runs
        assert run["conclusion"] == "cancelled"
        assert result(evals / "gate-out")["state"] == "evaluation_incomplete"


# -- defect 3: a control is never absorbed ---------------------------------------------------------


def test_a_control_answered_with_garbage_is_control_error_not_an_absorbed_error(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script("ctl-injection", raw("I will not answer in JSON."))
    policy = write_suite(
        tmp_path / "s", evaluator={"base_url": fake_openai.base_url}, limits={"max_evaluator_errors": 1}
    )
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 3
    res = result(out)
    assert res["state"] == "evaluation_incomplete"
    assert res["controls"]["ok"] is False
    (blocker,) = [b for b in res["blockers"] if b["kind"] == "control_error"]
    assert blocker["case_ids"] == ["ctl-injection"] and "ctl-injection (injection)" in blocker["message"]
    assert not [b for b in res["blockers"] if b["kind"] == "evaluator_errors"]
    # `gate decide` over the records agrees.
    assert gate("decide", "--policy", policy, "--records", out / "records.jsonl", "--out", tmp_path / "d") == 3
    assert result(tmp_path / "d")["blockers"] == res["blockers"]


def test_an_error_outside_the_controls_is_still_absorbed_by_max_evaluator_errors(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script("g-1", raw("I will not answer in JSON."))
    policy = write_suite(
        tmp_path / "s", evaluator={"base_url": fake_openai.base_url}, limits={"max_evaluator_errors": 1}
    )
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
    assert result(out)["controls"]["ok"] is True


def test_without_a_key_the_controls_are_not_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    policy = write_suite(tmp_path / "s", evaluator={"base_url": "http://127.0.0.1:9/v1"})
    assert gate("run", "--policy", policy, "--out", tmp_path / "out") == 3
    res = result(tmp_path / "out")
    assert res["controls"]["ok"] is False  # nothing was judged: no control separated
    assert [b["kind"] for b in res["blockers"]] == ["missing_credentials"]  # named once, by its cause


# -- defect 4: merge bills what the shards paid; the trend is merged like the verdicts ------------


def test_merge_bills_every_shard_and_combines_the_trend(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.default = trend_or_verdict({"c-1": "4", "g-1": "2"})
    cases = [
        *controls(),
        *(case(f"c-{i}") for i in range(1, 5)),
        *(case(f"g-{i}", slice="general") for i in range(1, 5)),
    ]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url}, trend=trend())
    shards = [tmp_path / f"shard-{i}" for i in (1, 2)]
    for i, out in enumerate(shards, 1):
        assert gate("run", "--policy", policy, "--out", out, "--shard", f"{i}/2", "--no-cache") == 0
    paid = [result(s)["cost"] for s in shards]
    merged = tmp_path / "merged"
    assert gate("merge", "--policy", policy, *shards, "--out", merged) == 0
    res = result(merged)
    cost = res["cost"]
    assert cost["http_attempts"] == fake_openai.count() == sum(p["http_attempts"] for p in paid)
    assert cost["total"] == pytest.approx(sum(p["total"] for p in paid)) == pytest.approx(billed(fake_openai))
    assert cost["trend_total"] == pytest.approx(sum(p["trend_total"] for p in paid))
    # The trend covers every case of the lane, each graded in the shard that owns it.
    assert res["trend"]["overall"]["n"] == 8
    assert sum(cost["by_slice"].values()) == pytest.approx(cost["total"])


def test_the_trend_joins_every_figure_of_the_bill(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    """attach_trend: usage_missing, retries and by_slice count the trend's judgments too."""
    bands = {"c-1": "4"}
    verdicts_and_bands = trend_or_verdict(bands)

    def answer(req: Any) -> Any:
        if "Place the response in exactly one band" in req.prompt:
            return reply("3", "graded", usage=False)  # every trend reply lacks usage
        return verdicts_and_bands(req)

    fake_openai.default = answer
    cases = [*controls(), case("c-1"), case("g-1", slice="general")]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url}, trend=trend())
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
    cost = result(out)["cost"]
    assert cost["usage_missing"] == 2  # the two trend replies
    assert sum(cost["by_slice"].values()) == pytest.approx(cost["total"])
    assert cost["http_attempts"] == fake_openai.count()


# -- defect 5: --resume bills every record of --out, in the lane or not ----------------------------


def test_resume_bills_a_case_that_left_the_lane(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    cases = [*controls(), case("c-1"), case("c-2", label="fail"), case("g-1", slice="general")]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
    first = result(out)["cost"]
    # g-1 leaves the lane (its partition is now held_out), then the run is resumed: nothing new is paid.
    moved = [*controls(), case("c-1"), case("c-2", label="fail"), case("g-1", slice="general", partition="held_out")]
    write_suite(tmp_path / "s", moved, evaluator={"base_url": fake_openai.base_url})
    assert gate("run", "--policy", policy, "--out", out, "--resume", "--no-cache") == 0
    cost = result(out)["cost"]
    assert cost["http_attempts"] == fake_openai.count() == first["http_attempts"]
    assert cost["total"] == pytest.approx(first["total"]) == pytest.approx(billed(fake_openai))
    assert cost["budget_spent"] == pytest.approx(first["budget_spent"])
    assert cost["outside_lane"] == ["g-1"]


# -- defect 6: a crashed or interrupted shard names its own share; merge is incomplete, not a usage error


def merged_with_shard_2(policy: Path, stopped: Path, tmp_path: Path, unrun: set[str]) -> dict[str, Any]:
    """Shard 2/2 run whole, then merged with the stopped shard 1: incomplete (exit 3), never a usage
    error, its cases (`unrun`, the controls aside: shard 2 judged them) listed as not judged."""
    healthy = tmp_path / "shard-2"
    assert gate("run", "--policy", policy, "--out", healthy, "--shard", "2/2", "--no-cache") == 0
    merged = tmp_path / "merged"
    assert gate("merge", "--policy", policy, stopped, healthy, "--out", merged) == 3
    m = result(merged)
    assert m["state"] == "evaluation_incomplete"
    unjudged = {c for c in unrun if not c.startswith("ctl-")}
    assert unjudged and unjudged <= {i for b in m["blockers"] for i in b["case_ids"]}
    return m


def test_a_crashed_shard_names_its_share_and_merge_is_incomplete(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    cases = [*controls(), *(case(f"c-{i:02d}") for i in range(8))]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url})
    crashed = tmp_path / "shard-1"
    env = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(broken_package(tmp_path, "ragas")), str(ROOT)])
    proc = subprocess.run(
        [sys.executable, "-m", "gate.cli", "run", "--policy", str(policy), "--out", str(crashed), "--shard", "1/2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    res = result(crashed)
    assert (res["shard"]["index"], res["shard"]["count"]) == (1, 2)
    own = {c["case_id"] for c in cases if "expected_control_role" in c or shard_of(c["case_id"], 2) == 1}
    own -= {"ctl-missing"}  # withheld, never sent
    assert set(res["unrun_case_ids"]) == own
    merged_with_shard_2(policy, crashed, tmp_path, own)


def test_a_shard_stopped_by_sigterm_names_its_share_and_merge_is_incomplete(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    cases = [*controls(), *(case(f"c-{i:02d}") for i in range(12))]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url, "max_concurrency": 2})
    fake_openai.latency = 0.3  # judgments are in flight when the job is cancelled
    stopped = tmp_path / "shard-1"
    cmd = [sys.executable, "-m", "gate.cli", "run", "--policy", str(policy), "--out", str(stopped), "--shard", "1/2"]
    env = {**os.environ, KEY_ENV: "sk-test-seams", "RAGAS_DO_NOT_TRACK": "true"}
    proc = gate_process.popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while fake_openai.count() < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)  # what a cancelled CI job sends
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    res = result(stopped)
    assert (res["shard"]["index"], res["shard"]["count"]) == (1, 2) and res["state"] == "evaluation_incomplete"
    own = {c["case_id"] for c in cases if "expected_control_role" in c or shard_of(c["case_id"], 2) == 1}
    assert res["unrun_case_ids"] and set(res["unrun_case_ids"]) <= own
    fake_openai.latency = 0.0
    # Its cases (the controls were judged in shard 2) are listed as not judged.
    merged_with_shard_2(policy, stopped, tmp_path, set(res["unrun_case_ids"]))


def test_resume_bills_the_journalled_attempts_of_a_case_that_left_the_dataset(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    from gate.judge.journal import JOURNAL_FILE, recover
    from gate.model.records import read_records

    cases = [*controls(), *(case(f"c-{i:02d}") for i in range(8))]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url, "max_concurrency": 3})
    out = tmp_path / "out"
    fake_openai.latency = 0.4  # three judgments in flight when the run is killed
    run_until(command(policy, out), fake_openai, 8)  # SIGKILL once the provider has 8 requests
    fake_openai.latency = 0.0
    recorded = read_records(out / "records.jsonl") if (out / "records.jsonl").read_bytes().strip() else []
    in_flight = sorted({u.case_id for u in recover(out / JOURNAL_FILE, recorded)} - {c["case_id"] for c in controls()})
    assert in_flight, "no judgment was in flight at the kill"
    gone = in_flight[0]
    # The case leaves the dataset before --resume: its attempts were sent (and maybe billed) all the same.
    write_suite(
        tmp_path / "s",
        [c for c in cases if c["case_id"] != gone],
        evaluator={"base_url": fake_openai.base_url, "max_concurrency": 3},
    )
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--resume") == 0
    cost = result(out)["cost"]
    assert gone in cost["outside_lane"]
    # Every request the provider saw is billed (one cut off while being sent may be counted too).
    assert fake_openai.count() <= cost["http_attempts"] <= fake_openai.count() + 3
    assert cost["total"] <= billed(fake_openai) + 1e-12 <= cost["budget_spent"] + 2e-12


def test_a_shard_cancelled_before_judging_still_writes_its_result_and_merges_incomplete(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM while the judge is still loading (ragas' import, made slow), before the runner's own
    handlers. The provider comes from OPENAI_BASE_URL, as in the example: a shard that judged
    nothing then records no configuration (`lineage.config_fingerprint: ''`). An earlier run's
    judgments in its --out are not this run's: its result lists its cases as unrun."""
    cases = [*controls(), *(case(f"c-{i:02d}") for i in range(8))]
    policy = write_suite(tmp_path / "s", cases)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    out = tmp_path / "shard-1"
    assert gate("run", "--policy", policy, "--out", out, "--shard", "1/2", "--no-cache") == 0  # the earlier run
    shim = slow_import(tmp_path, "ragas")
    cmd = [sys.executable, "-m", "gate.cli", "run", "--policy", str(policy), "--out", str(out), "--shard", "1/2"]
    env = {**os.environ, KEY_ENV: "sk-test-seams", "RAGAS_DO_NOT_TRACK": "true"}
    env["PYTHONPATH"] = os.pathsep.join([str(shim.directory), str(ROOT)])
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    shim.wait_started(proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "Traceback" not in err
    res = result(out)
    assert (res["shard"]["index"], res["shard"]["count"]) == (1, 2) and res["state"] == "evaluation_incomplete"
    own = {c["case_id"] for c in cases if "expected_control_role" in c or shard_of(c["case_id"], 2) == 1}
    assert set(res["unrun_case_ids"]) == own - {"ctl-missing"}  # (withheld, never sent)
    # It judged nothing, so it has no configuration to disagree with: merged with a shard that ran,
    # the merge is incomplete (exit 3) listing its cases, not a usage error.
    assert not (out / "records.jsonl").exists() or not (out / "records.jsonl").read_bytes().strip()
    m = merged_with_shard_2(policy, out, tmp_path, own)
    assert m["merged_shards"]["indices"] == [1, 2] and m["lineage"]["config_fingerprint"]
