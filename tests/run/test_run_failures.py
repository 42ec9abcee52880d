"""The run's own failures: an unusable --out, a disk that fills mid-run, a worker that raises.

Real HTTP to the fake provider; the disk fills for real (RLIMIT_FSIZE in a subprocess, and a
64 KB tmpfs where this machine lets tests mount one). What is counted is what the provider saw.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import resource
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gate_process
import pytest
from fake_openai import FakeOpenAI
from suite import case, gate, write_suite

from gate.commands.run import RunOptions, default_factory, run

KEY_ENV = "GATE_TEST_KEY"
ROOT = Path(__file__).resolve().parents[2]
NO_CONTROLS = {"pr": {"partitions": ["sentinel"], "controls": False}}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-failures")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def suite_with(tmp_path: Path, fake: FakeOpenAI, n: int, concurrency: int = 4) -> Path:
    cases = [case(f"c-{i:03d}") for i in range(n)]
    ev = {"base_url": fake.base_url, "max_concurrency": concurrency}
    return write_suite(tmp_path / "s", cases, evaluator=ev, lanes=NO_CONTROLS)


def complete_lines(path: Path) -> int:
    if not path.exists():
        return 0
    n = 0
    for line in path.read_bytes().splitlines():
        with contextlib.suppress(ValueError):
            json.loads(line)
            n += 1
    return n


# -- --out checked before the first model call ------------------------------------------------------


def test_out_that_is_a_file_is_a_usage_error_and_nothing_is_paid(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = suite_with(tmp_path, fake_openai, 3)
    out = tmp_path / "out"
    out.write_text("not a directory")
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 2
    err = capsys.readouterr().err
    assert "exists and is not a directory" in err and str(out) in err and "Traceback" not in err
    assert fake_openai.count() == 0 and out.read_text() == "not a directory"


def test_out_that_cannot_be_created_is_a_usage_error(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = suite_with(tmp_path, fake_openai, 3)
    (tmp_path / "file").write_text("x")
    assert gate("run", "--policy", policy, "--out", tmp_path / "file" / "out", "--no-cache") == 2
    assert "cannot be created" in capsys.readouterr().err
    assert fake_openai.count() == 0


@contextlib.contextmanager
def tmpfs(path: Path, options: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip()})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_out_on_a_read_only_mount_is_a_usage_error(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = suite_with(tmp_path, fake_openai, 3)
    with tmpfs(tmp_path / "ro", "size=64k,ro") as ro:
        assert gate("run", "--policy", policy, "--out", ro, "--no-cache") == 2
    err = capsys.readouterr().err
    assert "cannot write into the directory" in err and "Read-only file system" in err
    assert fake_openai.count() == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_out_without_write_permission_is_a_usage_error(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    policy = suite_with(tmp_path, fake_openai, 3)
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o500)
    try:
        assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 2
    finally:
        out.chmod(0o700)
    assert fake_openai.count() == 0


# -- the disk fills mid-run -------------------------------------------------------------------------


def _assert_stopped_at_once(out: Path, fake: FakeOpenAI, concurrency: int, n: int) -> None:
    written = complete_lines(out / "records.jsonl")
    # The failing write, plus at most the other judgments already in flight; nothing after.
    assert 0 < fake.count() <= written + concurrency < n, (fake.count(), written)
    assert not list(out.glob("*.tmp"))


def test_disk_full_in_a_subprocess_stops_paying_and_exits_3(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    n, conc = 24, 4
    policy = suite_with(tmp_path, fake_openai, n, conc)
    out = tmp_path / "out"
    limit = 20 * 1024  # every file this process writes stops growing at 20 KB (EFBIG)
    env = {**os.environ, KEY_ENV: "sk-test-failures", "RAGAS_DO_NOT_TRACK": "true"}
    cmd = ["run", "--policy", str(policy), "--out", str(out), "--no-cache"]
    done = gate_process.run(
        cmd,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        rlimits={resource.RLIMIT_FSIZE: (limit, limit)},
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "records.jsonl failed" in done.stderr and "--resume" in done.stderr
    _assert_stopped_at_once(out, fake_openai, conc, n)
    res: dict[str, Any] = json.loads((out / "result.json").read_text())  # small enough to fit
    assert res["state"] == "evaluation_incomplete" and res["exit_code"] == 3
    blocker = next(b for b in res["blockers"] if b["kind"] == "output_failed")
    assert blocker["case_ids"] and "records.jsonl failed" in blocker["message"]
    # Every request the provider saw is in the bill result.json reports; a request cancelled while
    # being sent (at most one per worker) is counted too, as it may have reached the provider.
    assert fake_openai.count() <= res["cost"]["http_attempts"] <= fake_openai.count() + conc


def test_a_full_tmpfs_stops_paying_and_exits_3(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    n, conc = 60, 4
    policy = suite_with(tmp_path, fake_openai, n, conc)
    monkeypatch.chdir(tmp_path)
    with tmpfs(tmp_path / "small", "size=64k") as out:
        assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 3
        _assert_stopped_at_once(out, fake_openai, conc, n)
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err
    # The message names the file relative to the working directory, as every message does; which
    # of the run's two append-only files meets the full disk first depends on timing.
    assert re.search(r"writing small/(records|attempts)\.jsonl failed", err), err


# -- a worker's exception is surfaced ---------------------------------------------------------------


class BuggyEvaluator:
    """The real ragas evaluator, with a bug that raises on one case (as an unforeseen defect would)."""

    def __init__(self, inner: Any, bad_case: str) -> None:
        self.inner = inner
        self.bad_case = bad_case
        self.ragas_version = inner.ragas_version

    async def judge(self, case: Any, repeat_index: int, budget: Any) -> Any:
        if case.case_id == self.bad_case:
            raise KeyError("usage")
        return await self.inner.judge(case, repeat_index, budget)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_worker_exception_is_a_blocker_with_a_reason_per_case(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    policy = suite_with(tmp_path, fake_openai, 5, concurrency=1)
    out = tmp_path / "out"

    def factory(loaded: Any, api_key: str, cache_dir: Path | None) -> Any:
        return BuggyEvaluator(default_factory(loaded, api_key, cache_dir), "c-001")

    decision = run(policy, RunOptions(lane="pr", out_dir=out, use_cache=False, progress=io.StringIO()), factory=factory)
    res = decision.result.written()
    assert res["state"] == "evaluation_incomplete" and res["exit_code"] == 3
    blocker = next(b for b in res["blockers"] if b["kind"] == "internal_error")
    assert "KeyError" in blocker["message"] and "c-001" in blocker["message"]
    assert blocker["case_ids"] == ["c-001", "c-002", "c-003", "c-004"]
    assert fake_openai.count() == 1  # c-000 only: nothing was sent after the failure
    recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["case_id"] for r in recs if r["status"] == "ok"] == ["c-000"]
    skipped = [r for r in recs if r["status"] == "skipped"]
    assert [r["case_id"] for r in skipped] == ["c-001", "c-002", "c-003", "c-004"]
    assert all("KeyError" in r["error_message"] for r in skipped)
    assert "internal_error" in (out / "report.md").read_text()


def test_an_exception_in_a_worker_process_is_a_blocker_with_a_reason_per_case(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The multi-process path keeps the same promise: a bug in a forked worker is `internal_error`
    with the reason on each case it left, not a dead worker whose cases are silently unrun."""
    monkeypatch.setenv("GATE_WORKERS", "2")
    policy = suite_with(tmp_path, fake_openai, 6, concurrency=2)
    out = tmp_path / "out"
    progress = io.StringIO()

    def factory(loaded: Any, api_key: str, cache_dir: Path | None) -> Any:
        return BuggyEvaluator(default_factory(loaded, api_key, cache_dir), "c-002")

    decision = run(policy, RunOptions(lane="pr", out_dir=out, use_cache=False, progress=progress), factory=factory)
    res = decision.result.written()
    assert "worker 1/2" in progress.getvalue() and "worker 2/2" in progress.getvalue()  # really forked
    assert res["state"] == "evaluation_incomplete" and res["exit_code"] == 3
    blocker = next(b for b in res["blockers"] if b["kind"] == "internal_error")
    assert "KeyError" in blocker["message"] and "c-002" in blocker["message"]
    assert "c-002" in blocker["case_ids"] and "c-004" in blocker["case_ids"]  # worker 1's share after the bug
    assert not any("died" in n for n in res.get("notes", []))
    recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert sorted(r["case_id"] for r in recs) == [f"c-{i:03d}" for i in range(6)]  # one record per case
    assert {r["case_id"] for r in recs if r["status"] == "ok"} >= {"c-000"}
    unjudged = [r for r in recs if r["status"] != "ok"]
    assert {"c-002", "c-004"} <= {r["case_id"] for r in unjudged}
    bug = [r for r in unjudged if "interrupted" not in (r["error_message"] or "")]
    assert bug and all("KeyError" in r["error_message"] for r in bug)
    assert not list(out.glob("records.w*.jsonl"))


# -- a usage error changes nothing in --out ------------------------------------------------------------


def files_of(out: Path) -> dict[str, bytes]:
    """Every file under `out` and its bytes: what a refused command must leave as it found it."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_usage_error_of_gate_run_leaves_the_last_decision_as_it_was(
    tmp_path: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lane the policy does not have, and a judge the policy cannot have (ragas sends temperature
    1 to a reasoning model: known only once the judge loads) are usage errors (exit 2): the last
    run's decision and evidence in --out stay as they were."""
    policy = suite_with(tmp_path, fake_openai, 3)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
    before = files_of(out)
    assert {"result.json", "report.md", "junit.xml", "records.jsonl", "attempts.jsonl"} <= set(before)
    assert gate("run", "--policy", policy, "--lane", "nope", "--out", out, "--no-cache") == 2
    assert files_of(out) == before
    policy.write_text(policy.read_text().replace("model: gpt-4o-mini", "model: o3-mini"))
    capsys.readouterr()
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 2
    assert "temperature" in capsys.readouterr().err
    assert files_of(out) == before


def test_a_refused_merge_leaves_the_last_merge_as_it_was(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    policy = suite_with(tmp_path, fake_openai, 6)
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    for i, shard in enumerate(shards, 1):
        assert gate("run", "--policy", policy, "--out", shard, "--shard", f"{i}/2", "--no-cache") == 0
    merged = tmp_path / "merged"
    assert gate("merge", "--policy", policy, *shards, "--out", merged) == 0
    before = files_of(merged)
    assert gate("merge", "--policy", policy, shards[0], shards[0], "--out", merged) == 2  # one index twice
    assert files_of(merged) == before
