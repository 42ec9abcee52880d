"""`gate run` and `gate decide` end to end: the real CLI, the real ragas judge, real HTTP to the
fake provider on 127.0.0.1. One scenario per state and per blocker kind the runner produces."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gate_process
import pytest
from fake_openai import FakeOpenAI, reply, server_error, slow
from suite import case, controls, gate, result, write_suite

KEY_ENV = "GATE_TEST_KEY"
SECRET = "sk-test-SECRET-value-123"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture()
def with_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


def evaluator(fake: FakeOpenAI, **kw: Any) -> dict[str, Any]:
    return {"base_url": fake.base_url, **kw}


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line]


def kinds(res: dict[str, Any]) -> dict[str, list[str]]:
    return {b["kind"]: b["case_ids"] for b in res["blockers"]}


@pytest.mark.usefixtures("with_key")
def test_passing_run_writes_every_output_with_lineage(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = write_suite(tmp_path / "s", evaluator=evaluator(fake))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
    res = result(out)
    assert res["state"] == "passed" and res["exit_code"] == 0
    assert res["counts"] == {
        "eligible": 9,
        "completed": 8,
        "errored": 0,
        "withheld": 1,
        "unrun": 0,
        "cached": 0,
        "review": 0,
    }
    recs = records(out)
    assert len(recs) == 8 == fake.count()
    for r in recs:
        for k in ("prompt_sha256", "input_sha256", "policy_sha256", "dataset_sha256"):
            assert re.fullmatch(r"[0-9a-f]{64}", r[k]), k
        assert r["ragas_version"] == "0.4.3" and r["evaluator_model"] == "gpt-4o-mini"
        assert r["attempts"][0]["status_code"] == 200
    for k, v in res["lineage"].items():
        assert v, k
    # Cost equals the tokens the provider reported times the policy's prices, unrounded.
    inp, outp = fake.usage_totals()
    assert res["cost"]["input_tokens"] == inp and res["cost"]["output_tokens"] == outp
    assert res["cost"]["total"] == pytest.approx(inp * 1.0 / 1e6 + outp * 2.0 / 1e6, rel=1e-12)
    assert res["cost"]["http_attempts"] == 8
    # Controls ran before every other case.
    order = [r["case_id"] for r in recs]
    assert all(cid.startswith("ctl-") for cid in order[:5])
    report = (out / "report.md").read_text()
    assert report.startswith("<!-- ragas-gate:test-policy:pr -->")
    assert "`passed`" in report
    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("tests") == "9" and suite.get("failures") == "0"
    assert SECRET not in "".join(p.read_text() for p in out.iterdir())


def test_no_key_means_no_call_and_missing_credentials(
    tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    policy = write_suite(tmp_path / "s", evaluator=evaluator(fake))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out) == 3
    res = result(out)
    assert res["state"] == "evaluation_incomplete"
    assert len(kinds(res)["missing_credentials"]) == 8
    assert res["counts"]["unrun"] == 8 and res["cost"]["total"] == 0
    assert fake.count() == 0


@pytest.mark.usefixtures("with_key")
def test_deterministic_blockers_make_no_call(tmp_path: Path, fake: FakeOpenAI) -> None:
    cases = [*controls(), case("c-1", slice="unreviewed")]
    policy = write_suite(tmp_path / "s", cases, evaluator=evaluator(fake))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out) == 1
    res = result(out)
    assert "unknown_slice" in kinds(res)
    assert res["counts"]["unrun"] == res["counts"]["eligible"] == 7
    assert fake.count() == 0


@pytest.mark.usefixtures("with_key")
def test_failed_control_stops_scheduling(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("ctl-injection", reply("pass", "The response says to return pass."))
    policy = write_suite(tmp_path / "s", evaluator=evaluator(fake))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 1
    res = result(out)
    assert kinds(res)["control_failed"] == ["ctl-injection"]
    # Never sent because no other verdict could count: not_needed, neither unrun nor control_error.
    assert res["unrun_case_ids"] == [] and "control_error" not in kinds(res)
    # The controls judged beside the failed one may or may not have been sent before it ended (timing).
    not_needed = {c["case_id"] for c in res["cases"] if c["bucket"] == "not_needed"}
    assert {"c-1", "c-2", "g-1"} <= not_needed and all(
        cid.startswith("ctl-") for cid in not_needed - {"c-1", "c-2", "g-1"}
    )
    assert fake.requests and all("ctl-" in r.prompt for r in fake.requests)  # only controls were sent


@pytest.mark.usefixtures("with_key")
def test_a_control_cut_between_its_repeats_by_a_control_stop_is_not_needed_like_one_never_sent(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """Three repeats, two at a time: the boundary control's third and the injection control's first
    are out together. The boundary control fails and stops scheduling while the injection control's
    first repeat is still out (it takes 2 s), so its others are never sent. Both it and the controls
    never started were not wanted: `not_needed`, and no `unrun_cases` blocker for one of them."""
    fake.script("ctl-boundary", reply("pass"), reply("pass"), reply("pass"))
    fake.script("ctl-injection", slow(2.0, then=reply("fail")))
    ev = {**evaluator(fake), "repeats": 3, "max_concurrency": 2}
    policy = write_suite(tmp_path / "s", evaluator=ev)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 1
    res = result(out)
    assert kinds(res)["control_failed"] == ["ctl-boundary"] and "unrun_cases" not in kinds(res)
    assert fake.count("ctl-injection") == 1  # cut between its repeats
    buckets = {c["case_id"]: c["bucket"] for c in res["cases"]}
    assert buckets["ctl-injection"] == buckets["ctl-negative"] == "not_needed"
    assert res["unrun_case_ids"] == []


@pytest.mark.usefixtures("with_key")
def test_false_pass_fails_quality_with_reason_in_report(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("c-2", reply("pass", "Looks right <img src=x onerror=alert(1)> [click](https://evil.example)"))
    policy = write_suite(tmp_path / "s", evaluator=evaluator(fake))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 1
    res = result(out)
    assert kinds(res)["false_pass_limit"] == ["c-2"]
    report = (out / "report.md").read_text()
    assert "false_pass_limit" in report and "`c-2`" in report
    assert "<img" not in report and "](https://evil" not in report
    failures = ET.parse(out / "junit.xml").getroot().findall("testcase/failure")
    assert [f.get("type") for f in failures] == ["false_pass"]


@pytest.mark.usefixtures("with_key")
def test_provider_errors_are_incomplete_with_exact_attempts(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("c-1", server_error())
    policy = write_suite(tmp_path / "s", evaluator=evaluator(fake))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 3
    res = result(out)
    assert kinds(res)["evaluator_errors"] == ["c-1"]
    assert fake.count("c-1") == 2  # max_attempts: 2 HTTP requests, no hidden retries
    assert res["slices"]["critical"]["errors"] == 1
    assert res["slices"]["critical"]["true_pass"] == 0 and res["slices"]["critical"]["false_fail"] == 0
    rec = next(r for r in records(out) if r["case_id"] == "c-1")
    assert rec["status"] == "error" and rec["judge_label"] is None and len(rec["attempts"]) == 2
    assert res["cost"]["retries"] == 1
    errors = ET.parse(out / "junit.xml").getroot().findall("testcase/error")
    assert len(errors) == 1


@pytest.mark.usefixtures("with_key")
def test_unstable_repeats_require_review(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("c-1", reply("pass"), reply("fail"), reply("pass"))
    ev = evaluator(fake, repeats=3)
    policy = write_suite(tmp_path / "s", evaluator=ev)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--cache-dir", tmp_path / "cache") == 4
    res = result(out)
    assert kinds(res)["unstable_verdict"] == ["c-1"]
    assert sorted(r["repeat_index"] for r in records(out) if r["case_id"] == "c-1") == [0, 1, 2]
    # A second run is served from the cache: every repeat has its own entry, nothing is paid.
    before = fake.count()
    assert gate("run", "--policy", policy, "--out", tmp_path / "out2", "--cache-dir", tmp_path / "cache") == 4
    assert fake.count() == before
    res2 = result(tmp_path / "out2")
    assert res2["counts"]["cached"] == 24 and res2["cost"]["total"] == 0


@pytest.mark.usefixtures("with_key")
def test_budget_boundary_is_never_exceeded_and_critical_goes_first(tmp_path: Path, fake: FakeOpenAI) -> None:
    cases = [*controls()]
    cases += [case(f"crit-{i:02d}") for i in range(10)]
    cases += [case(f"gen-{i:02d}", slice="general") for i in range(10)]
    # Each attempt reserves ~(request bytes) x $1/Mtok + 64 x $2/Mtok (~$0.002) but costs ~$0.0003.
    policy = write_suite(tmp_path / "s", cases, evaluator=evaluator(fake, max_concurrency=3))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--max-cost", "0.004") == 3
    res = result(out)
    assert 0 < res["cost"]["total"] <= 0.004
    assert res["state"] == "evaluation_incomplete"
    unrun = res["unrun_case_ids"]
    assert unrun and set(kinds(res)["budget_exhausted"]) == set(unrun)
    done = [r["case_id"] for r in records(out) if r["status"] == "ok"]
    # Critical before general: no general case was judged while a critical one stayed unrun.
    if any(u.startswith("crit-") for u in unrun):
        assert not any(d.startswith("gen-") for d in done)
    assert "budget" in (out / "report.md").read_text()


@pytest.mark.usefixtures("with_key")
def test_decide_on_records_equals_the_run(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("c-2", reply("pass"))
    fake.script("g-1", server_error())
    policy = write_suite(tmp_path / "s", evaluator=evaluator(fake))
    out = tmp_path / "out"
    code = gate("run", "--policy", policy, "--out", out, "--no-cache")
    n = fake.count()
    again = tmp_path / "again"
    assert gate("decide", "--policy", policy, "--records", out / "records.jsonl", "--out", again) == code == 1
    a, b = result(out), result(again)
    a.pop("notes"), b.pop("notes")
    assert a == b
    assert fake.count() == n


@pytest.mark.usefixtures("with_key")
def test_dry_run_prints_plan_and_calls_nobody(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path / "s", evaluator=evaluator(fake))
    assert gate("run", "--policy", policy, "--out", tmp_path / "out", "--dry-run") == 0
    text = capsys.readouterr().out
    assert "eligible: 9 cases" in text and "estimated cost" in text and "ctl-positive" in text
    assert fake.count() == 0 and not (tmp_path / "out" / "records.jsonl").exists()


@pytest.mark.usefixtures("with_key")
def test_a_case_missing_evidence_under_review_goes_to_a_person_and_the_run_judges_the_rest(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """`missing_evidence: review` and a case with no reference that cites no evidence: it goes to a
    person, as the policy says; it is not also an input_contract blocker stopping every model call.
    The run, `gate decide` on its records and the dry run agree."""
    bare = case("c-3", reference="")
    bare["human_adjudication"]["evidence"] = []
    cases = [*controls(), case("c-1"), case("c-2", label="fail"), bare]
    policy = write_suite(tmp_path / "s", cases, evaluator=evaluator(fake), missing_evidence="review")
    out, again = tmp_path / "out", tmp_path / "again"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 4
    assert gate("decide", "--policy", policy, "--records", out, "--out", again) == 4
    for res in (result(out), result(again)):
        assert res["state"] == "review_required"
        assert kinds(res) == {"missing_evidence": ["c-3"]}
        assert res["counts"]["completed"] == 7 and res["counts"]["review"] == 1
    assert fake.count() == 7
    capsys.readouterr()
    # The dry run: nothing stops the run's calls, and it can end no better than review_required.
    assert gate("run", "--policy", policy, "--out", tmp_path / "dry", "--dry-run") == 4
    text = capsys.readouterr().out
    assert "deterministic checks block" not in text and "input_contract" not in text
    assert "before any call: review_required (missing_evidence)" in text


def test_invalid_policy_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path / "s", limits={"max_total_cost": 1.0, "max_false_pases": 2})
    assert gate("run", "--policy", policy, "--out", tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert "policy.yaml" in err and "limits.max_false_pases" in err and "Traceback" not in err


def test_unknown_lane_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path / "s")
    assert gate("run", "--policy", policy, "--lane", "nightly", "--out", tmp_path / "o") == 2
    assert "nightly" in capsys.readouterr().err


def _wait_for(predicate: Any, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def test_sigint_then_resume_never_pays_twice(tmp_path: Path, fake: FakeOpenAI) -> None:
    cases = [*controls()] + [case(f"case-{i:02d}") for i in range(12)]
    for i in range(12):
        fake.script(f"case-{i:02d}", slow(0.4, reply("pass")))
    policy = write_suite(tmp_path / "s", cases, evaluator=evaluator(fake, max_concurrency=2))
    out = tmp_path / "out"
    env = {**os.environ, KEY_ENV: SECRET, "RAGAS_DO_NOT_TRACK": "true"}
    cmd = [sys.executable, "-m", "gate.cli", "run", "--policy", str(policy), "--out", str(out), "--no-cache"]
    proc = gate_process.popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rec_path = out / "records.jsonl"
    _wait_for(lambda: rec_path.exists() and len(rec_path.read_text().splitlines()) >= 8)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 3, stderr
    first = result(out)
    assert first["state"] == "evaluation_incomplete"
    recs = records(out)
    cancelled = [r for r in recs if r["error_kind"] == "cancelled"]
    assert cancelled
    # In-flight requests were sent (and may be billed): their attempts stay in the evidence.
    assert any(r["attempts"] for r in cancelled)
    # Every request the provider saw is metered; one cut off while being sent (at most one per
    # worker, max_concurrency 2) is metered too, as it may have reached the provider.
    assert fake.count() <= first["cost"]["http_attempts"] <= fake.count() + 2
    done_first = {r["case_id"] for r in recs if r["status"] == "ok"}
    assert first["unrun_case_ids"]
    resumed = gate_process.run([*cmd, "--resume"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert result(out)["state"] == "passed"
    for cid in done_first:
        assert fake.count(f"for {cid}:") == 1, cid  # judged once, never paid again


@pytest.mark.usefixtures("with_key")
def test_policy_cache_dir_is_used_and_a_rerun_pays_nothing(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = write_suite(tmp_path / "s", evaluator=evaluator(fake), cache_dir="judgments")
    assert gate("run", "--policy", policy, "--out", tmp_path / "o1") == 0
    assert (tmp_path / "s" / "judgments").is_dir()
    sent = fake.count()
    assert gate("run", "--policy", policy, "--out", tmp_path / "o2") == 0
    assert fake.count() == sent
    res = result(tmp_path / "o2")
    assert res["counts"]["cached"] == 8 and res["cost"]["cached_calls"] == 8 and res["cost"]["total"] == 0
    assert all(r["cache"] == "hit" for r in records(tmp_path / "o2"))


@pytest.mark.usefixtures("with_key")
def test_a_key_echoed_in_the_judge_reason_never_reaches_outputs(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("c-1", reply("pass", f"I was called with {SECRET}"))
    policy = write_suite(tmp_path / "s", evaluator=evaluator(fake))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
    assert "I was called with ***" in (out / "records.jsonl").read_text()
    assert SECRET not in "".join(p.read_text() for p in out.iterdir())


@pytest.mark.usefixtures("with_key")
def test_a_violated_pair_stops_scheduling(tmp_path: Path, fake: FakeOpenAI) -> None:
    flip = {"id": "p-1", "kind": "flip"}
    cases = [*controls(), case("p-a", pair=flip), case("p-b", label="fail", pair=flip)]
    cases += [case(f"z-{i}") for i in range(4)]
    fake.script("p-b", reply("pass", "Same as the other one."))  # a flip pair must differ
    policy = write_suite(tmp_path / "s", cases, evaluator=evaluator(fake, max_concurrency=1))
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 1
    res = result(out)
    assert sorted(kinds(res)["pair_violated"]) == ["p-a", "p-b"]
    assert res["unrun_case_ids"] == ["z-0", "z-1", "z-2", "z-3"]
    assert fake.count("z-") == 0


def test_a_run_leaves_no_temporary_directory_behind(tmp_path: Path, fake: FakeOpenAI) -> None:
    """ragas keeps its data in a private temporary directory while gate runs (no cache dir set):
    gone when the process ends, so runs on a workstation or a reused runner do not pile them up."""
    policy = write_suite(tmp_path / "s", [*controls(), case("c-1")], evaluator=evaluator(fake))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, KEY_ENV: SECRET, "RAGAS_DO_NOT_TRACK": "true", "TMPDIR": str(scratch)}
    cmd = ["run", "--policy", str(policy), "--out", str(tmp_path / "out"), "--no-cache"]
    done = gate_process.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert fake.count() == 6  # it judged, so ragas ran and used its directory
    assert list(scratch.iterdir()) == []
