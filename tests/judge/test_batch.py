"""`gate run --batch submit|collect|wait` end to end: the real CLI, the real ragas judge and openai
client, real HTTP to the fake provider's chat completions and its Files + Batches API, answered by
the same scripted judge (tests/fake_batches.py). Every verdict is compared with a live run."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gate_process
import pytest
from fake_batches import FakeBatches
from fake_openai import BATCH_HEADER, FakeOpenAI, RecordedRequest, held, reply, server_error
from suite import case, controls, gate, result, write_suite

KEY_ENV = "GATE_TEST_KEY"
ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-SECRET-batch-123"
LIVE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0, "currency": "USD"}
BATCH = {"input_per_mtok": 0.5, "output_per_mtok": 1.0}
QUICK = ("validating", "completed")


@pytest.fixture(autouse=True)
def with_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


@pytest.fixture()
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line]


def kinds(res: dict[str, Any]) -> dict[str, list[str]]:
    return {b["kind"]: b["case_ids"] for b in res["blockers"]}


def suite_cases() -> list[dict[str, Any]]:
    return [
        *controls(),
        case("c-1"),
        case("c-2", label="fail"),
        case("c-3", label="fail", response="Answer for c-3: refunds any time. [[judge:pass]]"),  # a false pass
        case("g-1", slice="general"),
        case("g-2", slice="general", label="fail"),
    ]


def write(root: Path, fake: FakeOpenAI, cases: list[dict[str, Any]] | None = None, **evaluator: Any) -> Path:
    price = {**LIVE, "batch": BATCH}
    return write_suite(root, cases or suite_cases(), evaluator={"base_url": fake.base_url, "price": price, **evaluator})


def files_of(out: Path) -> dict[str, bytes]:
    """Every file under `out` and its bytes: what a refused command must leave as it found it."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def verdicts(out: Path) -> dict[tuple[str, int], tuple[str, str | None]]:
    return {(r["case_id"], r["repeat_index"]): (r["status"], r["judge_label"]) for r in records(out)}


def live_requests(fake: FakeOpenAI) -> list[RecordedRequest]:
    return [r for r in fake.requests if BATCH_HEADER not in r.headers]


def line_requests(fake: FakeOpenAI) -> list[RecordedRequest]:
    return [r for r in fake.requests if BATCH_HEADER in r.headers]


def batch_cost(rec: dict[str, Any]) -> float:
    return rec["input_tokens"] * BATCH["input_per_mtok"] / 1e6 + rec["output_tokens"] * BATCH["output_per_mtok"] / 1e6


def test_a_case_missing_evidence_under_review_goes_to_a_person_on_the_batch_lane_too(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """`missing_evidence: review` and a case with no reference that cites no evidence: the batch lane
    submits the other cases and the collected run is review_required for that case alone, as live."""
    bare = case("c-9", reference="")
    bare["human_adjudication"]["evidence"] = []
    policy = write(tmp_path / "s", fake, [*suite_cases(), bare])
    policy.write_text(policy.read_text().replace("missing_evidence: block", "missing_evidence: review"))
    FakeBatches(fake, script=QUICK)
    out = tmp_path / "batch"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "submit") == 3
    assert "input_contract" not in kinds(result(out)) and "c-9" not in kinds(result(out))["batch_pending"]
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "collect") == 1
    assert set(kinds(result(out))) == {"false_pass_limit", "missing_evidence"}  # c-3 is a false pass
    assert kinds(result(out))["missing_evidence"] == ["c-9"]


def test_submit_then_collect_gives_the_live_verdicts_at_batch_prices(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = write(tmp_path / "s", fake)
    live = tmp_path / "live"
    live_exit = gate("run", "--policy", policy, "--out", live, "--no-cache")
    live_bodies = {r.prompt: r.body for r in fake.requests}
    fake.reset()

    batches = FakeBatches(fake, script=QUICK)
    out = tmp_path / "batch"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "submit") == 3
    submitted = result(out)
    assert submitted["state"] == "evaluation_incomplete"
    assert kinds(submitted)["batch_pending"] == ["c-1", "c-2", "c-3", "g-1", "g-2"]
    assert "unrun_cases" not in kinds(submitted)
    assert submitted["cost"]["batch"] is True and submitted["cost"]["batch_reserved"] > 0
    # controls were judged live, nothing else
    assert len(live_requests(fake)) == 5  # the controls (the missing-evidence one is withheld)
    bf = json.loads((out / "batch.json").read_text())
    assert bf["batch_id"] and bf["input_file_id"] and len(bf["judgments"]) == 5
    lines = batches.input_lines()
    assert [ln["custom_id"] for ln in lines] == [j["custom_id"] for j in bf["judgments"]]
    for ln in lines:
        assert ln["method"] == "POST" and ln["url"] == "/v1/chat/completions"
        prompt = next(m["content"] for m in ln["body"]["messages"] if m["role"] == "user")
        assert ln["body"] == live_bodies[prompt]  # exactly the live request for the same case

    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "collect") == live_exit == 1
    collected = result(out)
    assert collected["state"] == result(live)["state"] == "quality_failed"
    assert kinds(collected).keys() == kinds(result(live)).keys()
    assert verdicts(out) == verdicts(live)
    assert len(line_requests(fake)) == batches.lines_run == len(lines)
    answered = [json.loads(x)["custom_id"] for x in (out / "batch-output.jsonl").read_text().splitlines()]
    assert sorted(answered) == sorted(ln["custom_id"] for ln in lines)
    assert answered != [ln["custom_id"] for ln in lines]  # the provider's order is not ours: matched by custom_id
    assert len(live_requests(fake)) == 5
    for rec in records(out):
        if rec["control_role"] is None:
            assert rec.get("batch_id") == bf["batch_id"]
            assert rec["cost"] > 0 and math.isclose(rec["cost"], batch_cost(rec), rel_tol=0, abs_tol=1e-9)
        else:
            assert rec.get("batch_id") is None
    assert collected["cost"]["batch"] is True and collected["batch"]["collected"] is True
    report = (out / "report.md").read_text()
    assert f"Batch {bf['batch_id']} (collected; 5 lines)" in report and "batch prices" in report

    # collecting again pays nothing and changes nothing
    before = ((out / "records.jsonl").read_bytes(), collected["cost"], len(fake.requests), len(fake.api_calls))
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "collect") == 1
    after = ((out / "records.jsonl").read_bytes(), result(out)["cost"], len(fake.requests), len(fake.api_calls))
    assert after == before


def test_submit_twice_into_one_out_picks_the_batch_up(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    batches = FakeBatches(fake)  # validating -> in_progress -> finalizing -> completed
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    shown = capsys.readouterr().out  # what a person sees: the batch, its price, how to collect it
    assert "batch prices" in shown and "batch.json" in shown and "--batch collect" in shown
    bf = json.loads((out / "batch.json").read_text())
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    assert len(batches.batches) == 1 and len(batches.files) == 1  # one upload, one batch
    assert json.loads((out / "batch.json").read_text())["batch_id"] == bf["batch_id"]
    res = result(out)
    assert res["batch"]["status"] == "finalizing" and "finalizing" in kinds_message(res, "batch_pending")
    assert len(live_requests(fake)) == 5  # the controls were not judged again
    # the next status request finds it completed: collected, still one batch
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 1
    assert len(batches.batches) == 1 and result(out)["batch"]["collected"] is True


def kinds_message(res: dict[str, Any], kind: str) -> str:
    return next(str(b["message"]) for b in res["blockers"] if b["kind"] == kind)


def test_a_submit_that_died_after_uploading_creates_the_batch_once(tmp_path: Path, fake: FakeOpenAI) -> None:
    batches = FakeBatches(fake, script=QUICK)
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    # as if the process died between creating the batch and recording its id
    bf = json.loads((out / "batch.json").read_text())
    (out / "batch.json").write_text(json.dumps({**bf, "batch_id": None}))
    assert gate("run", "--policy", policy, "--out", out, "--batch", "collect") == 1
    assert len(batches.batches) == 1
    assert json.loads((out / "batch.json").read_text())["batch_id"] == bf["batch_id"]


def test_batch_lines_failed_expired_or_missing_are_evaluator_errors_never_verdicts(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    cases = [*controls(), *(case(f"c-{i}") for i in range(1, 7))]
    policy = write(tmp_path / "s", fake, cases, repeats=1)
    out = tmp_path / "out"
    batches = FakeBatches(fake, script=("validating", "in_progress", "expired"), answer_first=4)
    fake.script("Answer for c-2:", server_error())  # its line lands in the error file with status 500
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    order = [j["case_id"] for j in json.loads((out / "batch.json").read_text())["judgments"]]
    batches.missing = {batches.input_lines()[order.index("c-3")]["custom_id"]}  # in neither file
    assert gate("run", "--policy", policy, "--out", out, "--batch", "collect") == 3
    res = result(out)
    by_case = {r["case_id"]: r for r in records(out)}
    assert by_case["c-1"]["status"] == "ok" and by_case["c-4"]["status"] == "ok"
    assert by_case["c-2"]["status"] == "error" and by_case["c-2"]["error_kind"] == "server_error"
    assert by_case["c-3"]["status"] == "error" and "no line" in by_case["c-3"]["error_message"]
    for cid in ("c-5", "c-6"):  # past the 4 lines answered before the batch expired
        assert by_case[cid]["status"] == "error" and by_case[cid]["error_kind"] == "timeout"
        assert by_case[cid]["judge_label"] is None and by_case[cid]["cost"] == 0
    assert sorted(kinds(res)["evaluator_errors"]) == ["c-2", "c-3", "c-5", "c-6"]
    assert res["counts"]["errored"] == 4 and res["state"] == "evaluation_incomplete"
    assert (out / "batch-errors.jsonl").exists() and (out / "batch-output.jsonl").exists()
    # only the lines answered were billed
    answered = [r for r in records(out) if r.get("batch_id") and r["cost"] > 0]
    assert sorted(r["case_id"] for r in answered) == ["c-1", "c-4"]


def test_a_batch_that_fails_validation_is_incomplete_and_bills_nothing(tmp_path: Path, fake: FakeOpenAI) -> None:
    FakeBatches(fake, fail_validation=True)
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    assert gate("run", "--policy", policy, "--out", out, "--batch", "collect") == 3
    res = result(out)
    assert kinds(res)["batch_failed"] == ["c-1", "c-2", "c-3", "g-1", "g-2"]
    assert "failed validation" in kinds_message(res, "batch_failed")
    assert "unrun_cases" not in kinds(res) and res["counts"]["unrun"] == 5
    assert not line_requests(fake)


def test_a_failed_control_stops_before_anything_is_submitted(tmp_path: Path, fake: FakeOpenAI) -> None:
    batches = FakeBatches(fake)
    policy = write(tmp_path / "s", fake)
    fake.script("Answer for ctl-negative", reply("pass"))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 1
    res = result(out)
    assert "control_failed" in kinds(res) and not batches.files and not (out / "batch.json").exists()


def test_batch_needs_batch_prices(tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path / "s", suite_cases(), evaluator={"base_url": fake.base_url, "price": LIVE})
    assert gate("run", "--policy", policy, "--out", tmp_path / "out", "--batch", "submit") == 2
    err = capsys.readouterr().err
    assert "evaluator.price.batch" in err and "policy.yaml" in err and "Traceback" not in err
    assert not fake.requests


def test_the_boundary_holds_the_reservation_before_submitting(tmp_path: Path, fake: FakeOpenAI) -> None:
    batches = FakeBatches(fake, script=QUICK)
    policy = write(tmp_path / "s", fake, max_concurrency=1)
    out = tmp_path / "out"
    # room for the controls live (one reservation at a time) and a few lines at batch prices
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit", "--max-cost", "0.004") == 3
    bf = json.loads((out / "batch.json").read_text())
    res = result(out)
    assert 0 < len(bf["judgments"]) < 5
    assert res["controls"]["ok"] and res["cost"]["total"] + bf["reserved_cost"] <= 0.004
    assert len(batches.input_lines()) == len(bf["judgments"])
    assert "budget_exhausted" in kinds(res)


def test_wait_polls_until_done_and_times_out_as_pending(tmp_path: Path, fake: FakeOpenAI) -> None:
    from gate.commands.run import BatchOptions, RunOptions
    from gate.commands.steps import run_into

    long = ("validating", *("in_progress",) * 6, "finalizing", "completed")
    batches = FakeBatches(fake, script=long)
    policy = write(tmp_path / "s", fake)
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    def opts(out: Path, mode: str, timeout: float | None) -> RunOptions:
        batch = BatchOptions(mode, timeout, 30.0, sleep, lambda: now[0])  # type: ignore[arg-type]
        return RunOptions(lane="pr", out_dir=out, batch=batch, use_cache=False)

    out = tmp_path / "out"
    decision = run_into(policy, opts(out, "wait", 90.0))
    assert decision.state.exit_code == 3 and "batch_pending" in kinds(result(out))
    assert slept == [30.0, 30.0, 30.0]
    decision = run_into(policy, opts(out, "wait", None))
    assert decision.state.exit_code == 1 and result(out)["batch"]["collected"] is True
    assert len(batches.batches) == 1 and batches.lines_run == 5


def test_azure_openai_v1_shape(tmp_path: Path) -> None:
    with FakeOpenAI(prefix="/openai/v1") as azure:
        batches = FakeBatches(azure, script=QUICK)
        policy = write(tmp_path / "s", azure, model="gpt-4o-mini-global-batch")
        out = tmp_path / "out"
        assert gate("run", "--policy", policy, "--out", out, "--batch", "wait", "--batch-poll", "0") == 1
        lines = batches.input_lines()
        assert {ln["url"] for ln in lines} == {"/chat/completions"}
        assert {ln["body"]["model"] for ln in lines} == {"gpt-4o-mini-global-batch"}
        assert next(iter(batches.batches.values())).endpoint == "/chat/completions"
        assert {r.path for r in azure.api_calls} >= {"/openai/v1/files", "/openai/v1/batches"}
        assert all(r["status"] == "ok" for r in records(out))


def test_action_submits_then_a_later_job_collects_and_posts_the_check_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeOpenAI
) -> None:
    """The example workflow's two jobs through the container entry point: submit posts nothing,
    gate-out/ travels as an artifact, collect posts one check run once the batch has ended."""
    from fake_github import FakeGitHub
    from runner_env import parse_github_output, runner_env

    from gate.action import main as action_main

    batches = FakeBatches(fake)  # collect #1 finds it finalizing, #2 completed
    with FakeGitHub(user_status=403) as github:
        monkeypatch.chdir(tmp_path)
        evals = tmp_path / "workspace" / "evals"
        price = {**LIVE, "batch": BATCH}
        evaluator = {"base_url": fake.base_url, "api_key_env": "JUDGE_KEY", "price": price}

        def job(mode: str) -> tuple[int, dict[str, str]]:
            env = runner_env(tmp_path, api_url=github.base_url, fail_on="quality_failed", batch=mode)
            env["RAGAS_DO_NOT_TRACK"] = "true"
            write_suite(evals, suite_cases(), evaluator=evaluator)
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            code = action_main()
            return code, parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())

        code, out = job("submit")  # as in the example: batch_pending does not fail the job
        assert code == 0 and out["state"] == "evaluation_incomplete" and out["exit-code"] == "3"
        assert github.check_runs == [] and github.comments("acme/support-bot", 17) == []
        artifact = tmp_path / "artifact"
        (evals / "gate-out").rename(artifact)  # upload-artifact; the next job starts clean
        artifact.rename(evals / "gate-out")  # download-artifact
        code, out = job("collect")
        assert code == 0 and out["exit-code"] == "3" and github.check_runs == []  # still finalizing: nothing posted
        code, out = job("collect")
        assert code == 1 and out["state"] == "quality_failed" and out["exit-code"] == "1"
        (run,) = github.check_runs
        assert run["conclusion"] == "failure"
        assert len(batches.batches) == 1 and batches.lines_run == 5


def test_action_batch_input_is_checked(tmp_path: Path) -> None:
    from runner_env import runner_env

    from gate.action import InputError, read_context, run_options

    ctx = read_context(runner_env(tmp_path, api_url="http://x", batch="wait"))
    batch = run_options(ctx).batch
    assert batch is not None and batch.mode == "wait"
    assert run_options(read_context(runner_env(tmp_path, api_url="http://x"))).batch is None
    with pytest.raises(InputError, match="input 'batch'"):
        read_context(runner_env(tmp_path, api_url="http://x", batch="later"))


def test_the_example_batch_workflow_submits_on_a_tag_and_collects_that_artifact() -> None:
    import yaml

    root = Path(__file__).resolve().parents[2]
    flow = yaml.safe_load((root / "examples" / "workflows" / "ragas-gate-batch.yml").read_text())
    on = flow[True]  # YAML 1.1 reads `on` as true
    assert on["push"]["tags"] and "schedule" in on and "workflow_dispatch" in on
    submit, collect = flow["jobs"]["submit"], flow["jobs"]["collect"]
    (s,) = [x for x in submit["steps"] if "ragas-gate/ragas-gate@" in str(x.get("uses"))]
    (c,) = [x for x in collect["steps"] if "ragas-gate/ragas-gate@" in str(x.get("uses"))]
    assert s["with"]["batch"] == "submit" and c["with"]["batch"] == "collect"
    assert s["with"]["lane"] == c["with"]["lane"] and s["with"]["policy"] == c["with"]["policy"]
    upload = next(x for x in submit["steps"] if "upload-artifact" in str(x.get("uses")))
    download = next(x for x in collect["steps"] if "download-artifact" in str(x.get("uses")))
    assert upload["with"]["name"] == download["with"]["name"]
    assert upload["with"]["path"] == download["with"]["path"] == "gate-out/"
    assert "github-token" in c["with"] and collect["permissions"]["checks"] == "write"


def test_make_batch_offline_runs_the_example_release_lane_with_parity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make batch-offline` (scripts/batch_offline.py): the shipped example, its checks included,
    live and through every --batch step, offline; it exits 0 only when the batch matches live."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("batch_offline", root / "scripts" / "batch_offline.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAGAS_DO_NOT_TRACK"):  # the script sets them: restored after
        monkeypatch.setenv(name, "")
    monkeypatch.delenv("OPENAI_API_KEY")
    assert demo.main(["--out", str(tmp_path / "gate-out-batch")]) == 0
    res = result(tmp_path / "gate-out-batch")
    assert res["state"] == result(tmp_path / "gate-out-batch-live")["state"] and res["batch"]["collected"]
    assert res["checks"] is not None  # the example's deterministic checks ran beside the batch
    # The release lane requires a calibrated judge (SPEC 17): the batch result shows it as the live one does.
    live = result(tmp_path / "gate-out-batch-live")
    assert res["calibration"] == live["calibration"] and res["calibration"]["ok"] is True
    for out in ("gate-out-batch", "gate-out-batch-live"):
        assert "Judge calibration (calibration/calibration.json" in (tmp_path / out / "report.md").read_text()


def test_a_cancelled_batch_keeps_what_was_answered_and_the_rest_are_errors(tmp_path: Path, fake: FakeOpenAI) -> None:
    FakeBatches(fake, script=("validating", "in_progress", "cancelled"), answer_first=2)
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--batch", "wait", "--batch-poll", "0") == 3
    batched = [r for r in records(out) if r.get("batch_id")]
    assert sorted(r["status"] for r in batched) == ["error", "error", "error", "ok", "ok"]
    for r in batched:
        if r["status"] == "error":
            assert r["error_kind"] == "timeout" and "batch_cancelled" in r["error_message"] and r["cost"] == 0
    res = result(out)
    assert res["batch"]["status"] == "cancelled" and len(kinds(res)["evaluator_errors"]) == 3


def test_a_provider_that_cannot_be_asked_leaves_the_batch_pending(tmp_path: Path, fake: FakeOpenAI) -> None:
    batches = FakeBatches(fake, script=QUICK)
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    batches.status_errors = 10  # every status request (and the client's retries) answers 500
    assert gate("run", "--policy", policy, "--out", out, "--batch", "collect") == 3
    res = result(out)
    assert "HTTP 500" in kinds_message(res, "batch_pending") and res["counts"]["unrun"] == 5
    assert SECRET not in (out / "result.json").read_text()
    batches.status_errors = 0
    assert gate("run", "--policy", policy, "--out", out, "--batch", "collect") == 1  # back: collected
    assert len(batches.batches) == 1


def test_a_line_that_is_not_the_request_the_judge_builds_now_is_never_read(tmp_path: Path, fake: FakeOpenAI) -> None:
    FakeBatches(fake, script=QUICK)
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    lines = [json.loads(x) for x in (out / "batch-input.jsonl").read_text().splitlines()]
    lines[0]["body"]["seed"] = 8  # the line on record is not what this judge sends for that judgment
    (out / "batch-input.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert gate("run", "--policy", policy, "--out", out, "--batch", "collect") == 1  # c-3's false pass wins
    first = json.loads((out / "batch.json").read_text())["judgments"][0]["case_id"]
    (rec,) = [r for r in records(out) if r["case_id"] == first]
    assert rec["status"] == "error" and rec["error_kind"] == "bad_request" and rec["judge_label"] is None
    assert "differs from the line submitted" in rec["error_message"]
    assert kinds(result(out))["evaluator_errors"] == [first]


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--resume"], "--resume"),
        (["--shard", "1/2"], "--shard"),
        (["--dry-run"], "--dry-run"),
        (["--batch-timeout", "5"], "--batch wait"),
    ],
)
def test_batch_flags_that_do_not_combine_are_usage_errors(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str], extra: list[str], says: str
) -> None:
    policy = write(tmp_path / "s", fake)
    mode = [] if extra[0] == "--batch-timeout" else ["--batch", "submit"]
    assert gate("run", "--policy", policy, "--out", tmp_path / "out", *mode, *extra) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and not fake.requests


@pytest.mark.parametrize("again", [["--resume"], [], ["--dry-run"]])
def test_a_live_run_on_an_out_with_an_uncollected_batch_refuses_and_says_collect_it(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str], again: list[str]
) -> None:
    # A live run here would judge the batched cases again while the batch runs, and a later collect
    # would bill both: it refuses before any call, naming the command that collects the batch. A
    # dry run says the same: it shows what the run would do, and the run would refuse.
    batches = FakeBatches(fake, script=QUICK)
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "submit") == 3
    capsys.readouterr()
    sent = len(fake.requests)
    before = files_of(out)
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", *again) == 2
    assert files_of(out) == before  # the submit's result.json (batch_pending) and reports stay
    err = capsys.readouterr().err
    assert "collect it" in err and f"gate run --policy {policy} --lane pr --out {out} --batch collect" in err
    assert "Traceback" not in err and len(fake.requests) == sent  # nothing was sent
    # The batch is collected once and billed once: every judgment has one record.
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "collect") == 1
    res = result(out)
    assert len(records(out)) == 5 + 5 and res["cost"]["http_attempts"] == 5 + batches.lines_run
    # Once collected, a resume has nothing left to pay for.
    fake.reset()
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--resume") == 1
    assert live_requests(fake) == [] and result(out)["state"] == "quality_failed"


def test_a_custom_id_answered_twice_is_billed_twice_and_disagreeing_goes_to_a_person(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    cases = [*controls(), case("c-1"), case("c-2", label="fail"), case("g-1", slice="general")]
    policy = write(tmp_path / "s", fake, cases)
    out = tmp_path / "out"
    batches = FakeBatches(fake, script=("validating", "in_progress", "completed"))
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    ids = {j["case_id"]: j["custom_id"] for j in json.loads((out / "batch.json").read_text())["judgments"]}
    # The provider answers c-1's line twice (pass, then fail) and sends a line nobody submitted.
    fake.script("Answer for c-1:", reply("pass"), reply("fail"))
    batches.duplicate, batches.foreign = {ids["c-1"]}, ["not-ours-1"]
    assert gate("run", "--policy", policy, "--out", out, "--batch", "collect") == 4
    res = result(out)
    c1 = [r for r in records(out) if r["case_id"] == "c-1"]
    assert sorted(r["judge_label"] for r in c1) == ["fail", "pass"]
    assert all(r["batch_id"] and r["cost"] > 0 for r in c1)  # both answers billed
    assert math.isclose(res["cost"]["total"], sum(r["cost"] for r in records(out)), rel_tol=1e-12)
    row = {c["case_id"]: c for c in res["cases"]}["c-1"]
    assert row["outcome"] == "review" and res["state"] == "review_required"
    assert any("not-ours-1" in n and "custom_id it was not sent with" in n for n in res["notes"])
    # Collecting again reads and pays nothing more.
    before = len(records(out))
    assert gate("run", "--policy", policy, "--out", out, "--batch", "collect") == 4
    assert len(records(out)) == before


def test_a_submit_whose_upload_failed_is_picked_up_by_the_same_command_and_pays_nothing_twice(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    batches = FakeBatches(fake, upload_errors=10)  # every upload (and the client's retries) fails
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    first = result(out)
    assert kinds(first)["batch_failed"] == ["c-1", "c-2", "c-3", "g-1", "g-2"] and not batches.files
    message = kinds_message(first, "batch_failed")
    assert "same --out" in message and "not judged or paid again" in message
    shown = capsys.readouterr().out
    assert f"--out {out} --lane pr --batch submit again, into the same --out" in shown
    paid = (out / "records.jsonl").read_bytes()
    assert len(live_requests(fake)) == first["cost"]["http_attempts"] == 5  # the controls, live

    batches.upload_errors = 0
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3  # as the message says
    again = result(out)
    assert "batch_failed" not in kinds(again) and kinds(again)["batch_pending"] == ["c-1", "c-2", "c-3", "g-1", "g-2"]
    assert len(live_requests(fake)) == 5  # the controls were not judged again
    assert (out / "records.jsonl").read_bytes() == paid  # nor their records dropped
    assert again["cost"]["http_attempts"] == 5 and again["cost"]["total"] == first["cost"]["total"]
    assert len(batches.files) == 1 and len(batches.batches) == 1
    assert gate("run", "--policy", policy, "--out", out, "--batch", "wait", "--batch-poll", "0") == 1
    done = result(out)
    assert len(records(out)) == 10 and done["cost"]["http_attempts"] == 5 + batches.lines_run


def test_a_submit_whose_kept_lines_were_edited_is_refused_before_uploading(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    batches = FakeBatches(fake, script=QUICK, upload_errors=10)
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 3
    (out / "batch-input.jsonl").write_text("")
    batches.upload_errors = 0
    capsys.readouterr()
    before = files_of(out)
    assert gate("run", "--policy", policy, "--out", out, "--batch", "submit") == 2
    assert files_of(out) == before
    err = capsys.readouterr().err
    assert "batch-input.jsonl" in err and "new --out" in err and "Traceback" not in err
    assert not batches.files and len(live_requests(fake)) == 5


def test_a_live_run_after_a_collected_batch_starts_afresh_and_the_next_one_is_not_refused(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeBatches(fake, script=QUICK)
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "submit") == 3
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "collect") == 1
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 1  # live, fresh: the batch's records go
    assert not (out / "batch.json").exists() and not (out / "batch-output.jsonl").exists()
    capsys.readouterr()
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 1  # never "not collected"
    assert "not collected" not in capsys.readouterr().err
    assert len(records(out)) == 10 and not [r for r in records(out) if r.get("batch_id")]
    assert result(out)["cost"]["http_attempts"] == 10 and "batch" not in result(out)
    before = files_of(out)
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "collect") == 2
    assert "nothing was submitted from this --out" in capsys.readouterr().err
    # A usage error changes nothing: the live run's decision (result.json, report.md, summary.md,
    # junit.xml, rollback.json) and its evidence stay as they were.
    assert files_of(out) == before and "result.json" in before


def test_a_collected_batch_is_never_read_into_records_that_are_not_its_own(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeBatches(fake, script=QUICK)
    policy = write(tmp_path / "s", fake)
    out, live = tmp_path / "out", tmp_path / "live"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "wait", "--batch-poll", "0") == 1
    assert gate("run", "--policy", policy, "--out", live, "--no-cache") == 1
    (out / "records.jsonl").write_bytes((live / "records.jsonl").read_bytes())  # another run's records
    capsys.readouterr()
    before = files_of(out)
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "collect") == 2
    assert files_of(out) == before
    err = capsys.readouterr().err
    assert "was collected" in err and "new --out" in err and "Traceback" not in err
    assert len(records(out)) == 10 and not [r for r in records(out) if r.get("batch_id")]


def test_a_live_run_on_an_out_whose_batch_upload_failed_says_submit_again_not_collect(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeBatches(fake, upload_errors=10)
    policy = write(tmp_path / "s", fake)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "submit") == 3
    capsys.readouterr()
    sent = len(fake.requests)
    before = files_of(out)
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 2
    assert files_of(out) == before
    err = " ".join(capsys.readouterr().err.split())
    assert "upload failed" in err and f"--out {out} --batch submit" in err and "--batch collect" not in err
    assert len(fake.requests) == sent


def test_a_submit_killed_before_batch_json_pays_for_no_recorded_control_again(tmp_path: Path, fake: FakeOpenAI) -> None:
    """`--batch submit` killed (SIGKILL) while its controls are judged live, before batch.json is
    written: four controls recorded, the fifth in flight. The same submit again, with --no-cache,
    reuses the recorded ones from records.jsonl and bills the one in flight from the journal; only
    that one is asked again."""
    answer = threading.Event()
    fake.script("Answer for ctl-injection:", held(answer, reply("fail")))
    policy = write(tmp_path / "s", fake, max_concurrency=5)
    batches = FakeBatches(fake, script=QUICK)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "gate.cli", "run", "--policy", str(policy), "--out", str(out), "--no-cache"]
    env = {**os.environ, KEY_ENV: SECRET, "RAGAS_DO_NOT_TRACK": "true"}
    proc = gate_process.popen([*cmd, "--batch", "submit"], env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while (len(ok_lines(out)) < 4 or not fake.count("Answer for ctl-injection:")) and time.monotonic() < deadline:
        assert proc.poll() is None, "the submit ended before its kill point"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    answer.set()
    assert not (out / "batch.json").exists() and len(ok_lines(out)) == 4
    asked = {c["case_id"]: fake.count(f"Answer for {c['case_id']}:") for c in controls()}
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "submit") == 3
    again = {c["case_id"]: fake.count(f"Answer for {c['case_id']}:") - asked[c["case_id"]] for c in controls()}
    assert again == {**dict.fromkeys(asked, 0), "ctl-injection": 1}  # only the one in flight at the kill
    res = result(out)
    assert kinds(res)["batch_pending"] == ["c-1", "c-2", "c-3", "g-1", "g-2"] and res["controls"]["ok"]
    assert res["cost"]["http_attempts"] == len(live_requests(fake)) == 6  # every live request, billed once
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--batch", "collect") == 1
    assert len(live_requests(fake)) == 6 and len(batches.batches) == 1


def ok_lines(out: Path) -> list[dict[str, Any]]:
    path = out / "records.jsonl"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line torn by the kill
        if row.get("status") == "ok":
            rows.append(row)
    return rows
