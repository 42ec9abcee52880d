"""Every core: worker processes sharing one budget, one cache and one records stream. A killed
worker loses nothing paid: its cases are unrun and `--resume` judges only those."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gate_process
import pytest
from fake_openai import FakeOpenAI, server_error, slow
from suite import case, result, write_suite

from gate.judge.budget import BudgetExhausted
from gate.model.errors import UsageError
from gate.run.workers import SharedBudget, worker_count

KEY_ENV = "GATE_TEST_KEY"


def test_worker_count_follows_cores_concurrency_and_the_override() -> None:
    assert worker_count(10_000, 8, env={}) == 1  # one process drives 8 in flight
    assert worker_count(50, 128, env={}) == 1  # too little work to fork for
    cores = len(os.sched_getaffinity(0))
    assert worker_count(10_000, 128, env={}) == min(cores, 8)
    assert worker_count(10_000, 128, env={"GATE_WORKERS": "3"}) == 3
    assert worker_count(10_000, 2, env={"GATE_WORKERS": "3"}) == 2  # never more than in flight
    with pytest.raises(UsageError, match="GATE_WORKERS"):
        worker_count(10, 8, env={"GATE_WORKERS": "0"})


def _spend(budget: SharedBudget, granted: Any) -> None:
    for _ in range(400):
        try:
            r = budget.reserve(0.01)
        except BudgetExhausted:
            continue
        budget.settle(r, 0.01)
        with granted.get_lock():
            granted.value += 1


def test_shared_budget_holds_the_boundary_across_processes() -> None:
    budget = SharedBudget(2.0)
    ctx = multiprocessing.get_context("fork")
    granted = ctx.Value("i", 0)
    procs = [ctx.Process(target=_spend, args=(budget, granted)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert granted.value * 0.01 <= 2.0 + 1e-9 and granted.value >= 199  # nothing over, nearly all used
    assert budget.spent == pytest.approx(granted.value * 0.01) and budget.reserved == pytest.approx(0.0)
    assert budget.exhausted


def gate_env(**extra: str) -> dict[str, str]:
    return {**os.environ, KEY_ENV: "sk-test-workers", "RAGAS_DO_NOT_TRACK": "true", **extra}


def run_args(policy: Path, out: Path) -> list[str]:
    """`gate run` of the lane without controls, in a process of its own (tests/gate_process.py), without the cache."""
    run = ["run", "--policy", str(policy), "--lane", "nocontrols", "--out", str(out), "--no-cache"]
    return [sys.executable, "-m", "gate.cli", *run]


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line]


def test_two_workers_judge_every_case_once(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        cases = [case(f"k-{i:02d}", label="fail" if i % 3 == 0 else "pass") for i in range(24)]
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "max_concurrency": 4})
        out = tmp_path / "out"
        proc = gate_process.run(
            run_args(policy, out),
            env=gate_env(GATE_WORKERS="2"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        announced = [line for line in proc.stderr.splitlines() if line.startswith("gate: worker ") and " pid " in line]
        assert len(announced) == 2
        assert proc.stderr.splitlines()[-1].startswith("gate: 24/24 judgments, 0 errors")  # the run's one progress
        assert fake.count() == 24 and sorted(r["case_id"] for r in records(out)) == [c["case_id"] for c in cases]
        assert result(out)["counts"]["completed"] == 24 and not list(out.glob("records.w*.jsonl"))


def test_a_killed_worker_leaves_its_cases_unrun_and_resume_judges_only_those(tmp_path: Path) -> None:
    with FakeOpenAI(default=slow(0.25)) as fake:
        cases = [case(f"k-{i:02d}") for i in range(32)]
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "max_concurrency": 4})
        out = tmp_path / "out"
        args = run_args(policy, out)
        run = gate_process.popen(
            args, env=gate_env(GATE_WORKERS="2"), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
        )
        assert run.stderr is not None
        victim = None
        while victim is None:
            line = run.stderr.readline()
            assert line, "gate run ended before its workers were announced"
            if line.startswith("gate: worker 2/2 pid "):
                victim = int(line.split()[4].rstrip(":"))
        deadline = time.monotonic() + 120  # a bound on a hang, not on a busy machine
        worker_file = out / "records.w2.jsonl"
        while not (worker_file.exists() and worker_file.read_text().count("\n") >= 3):
            assert time.monotonic() < deadline, "the worker never recorded a judgment"
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        rest = run.stderr.read()
        assert run.wait(timeout=60) == 3, rest
        assert "worker 2/2" in rest and "died (signal 9)" in rest

        res = result(out)
        assert res["state"] == "evaluation_incomplete"
        unrun = set(res["unrun_case_ids"])
        assert unrun and res["counts"]["completed"] == 32 - len(unrun)
        assert any("worker 2/2 died" in n for n in res["notes"])
        judged = {r["case_id"] for r in records(out) if r["status"] == "ok"}
        assert judged == {c["case_id"] for c in cases} - unrun
        assert not list(out.glob("records.w*.jsonl"))  # folded into records.jsonl
        sent_before = fake.count()

        resumed = gate_process.run(
            [*args, "--resume"], env=gate_env(GATE_WORKERS="2"), capture_output=True, text=True, timeout=120
        )
        assert resumed.returncode == 0, resumed.stderr
        assert result(out)["state"] == "passed" and result(out)["counts"]["completed"] == 32
        # every judgment that completed before the kill was paid once; only the unrun ones were sent again
        assert fake.count() - sent_before == len(unrun)
        for cid in judged:
            assert fake.count(cid) == 1, cid


def test_sigterm_to_the_run_stops_every_worker_and_resume_finishes(tmp_path: Path) -> None:
    with FakeOpenAI(default=slow(0.25)) as fake:
        cases = [case(f"k-{i:02d}") for i in range(32)]
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "max_concurrency": 4})
        out = tmp_path / "out"
        run = gate_process.popen(
            run_args(policy, out), env=gate_env(GATE_WORKERS="2"), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        assert run.stderr is not None
        announced = 0
        while announced < 2:
            line = run.stderr.readline().decode()
            assert line, "gate run ended before its workers were announced"
            announced += line.startswith("gate: worker ") and " pid " in line
        deadline = time.monotonic() + 120  # a bound on a hang, not on a busy machine
        while fake.count() < 4:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=60) == 3
        res = result(out)
        assert res["state"] == "evaluation_incomplete" and res["unrun_case_ids"]
        assert any("interrupted" in n for n in res["notes"])
        done = {r["case_id"] for r in records(out) if r["status"] == "ok"}
        resumed = gate_process.run(
            [*run_args(policy, out), "--resume"], env=gate_env(GATE_WORKERS="2"), capture_output=True, timeout=120
        )
        assert resumed.returncode == 0 and result(out)["counts"]["completed"] == 32
        for cid in done:
            assert fake.count(cid) == 1, cid


def test_workers_never_spend_past_the_boundary_together(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        cases = [case(f"k-{i:02d}") for i in range(40)]
        # about a quarter of the cases fit: each attempt reserves its upper bound before it is sent
        policy = write_suite(
            tmp_path / "s",
            cases,
            evaluator={"base_url": fake.base_url, "max_concurrency": 8},
            limits={"max_evaluator_errors": 0, "max_total_cost": 0.0035},
        )
        out = tmp_path / "out"
        proc = gate_process.run(run_args(policy, out), env=gate_env(GATE_WORKERS="2"), capture_output=True, timeout=120)
        assert proc.returncode == 3, proc.stderr
        res = result(out)
        assert {b["kind"] for b in res["blockers"]} >= {"budget_exhausted"}
        assert 0 < res["counts"]["completed"] < 40
        assert res["cost"]["total"] <= 0.0035
        assert fake.count() == res["counts"]["completed"]  # nothing sent that was not recorded


def _torn_write(path: Path) -> None:
    """Bytes without a newline: the worker's next record lands on the same line, which is then unreadable."""
    with path.open("ab") as fh:
        fh.write(b'{"case_id": "torn-by-a-bad-disk", "sl')


def _made_unreadable(path: Path) -> None:
    """The file's name now holds a directory (the worker keeps writing to the moved file, unseen)."""
    path.rename(path.with_name("elsewhere"))
    path.mkdir()


def _once_after(target: Path, lines: int, damage: Any) -> Any:
    """A provider-side hook: when a request arrives after `target` holds `lines` records, damage it
    once, then answer."""
    done: list[bool] = []

    def behave(_req: Any) -> Any:
        if not done and target.is_file() and target.read_bytes().count(b"\n") >= lines:
            damage(target)
            done.append(True)
        return slow(0.05)

    return behave


@pytest.mark.parametrize(
    ("damage", "problem", "lost"),
    [(_torn_write, "not valid JSON", 1), (_made_unreadable, "cannot be read", 12)],
    ids=["corrupt-line-mid-file", "unreadable-file"],
)
def test_a_worker_file_not_readable_whole_surfaces_keeps_what_it_can_and_resume_pays_nothing_twice(
    tmp_path: Path, damage: Any, problem: str, lost: int
) -> None:
    """Never dropped in silence: the readable records are kept and billed, a blocker names the file,
    the judgments lost with it are billed from attempts.jsonl and left unrun (no verdict claimed),
    and --resume completes them from the cache (no request sent twice)."""
    out = tmp_path / "out"
    with FakeOpenAI(default=_once_after(out / "records.w2.jsonl", 3, damage)) as fake:
        cases = [case(f"k-{i:02d}") for i in range(24)]
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "max_concurrency": 2})
        args = [*run_args(policy, out)[:-1], "--cache-dir", str(tmp_path / "cache")]
        proc = gate_process.run(args, env=gate_env(GATE_WORKERS="2"), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 3, proc.stderr
        assert fake.count() == 24 and "records.w2.jsonl" in proc.stderr
        res = result(out)
        assert res["state"] == "evaluation_incomplete"
        (blocker,) = [b for b in res["blockers"] if b["kind"] == "worker_records_unreadable"]
        assert "records.w2.jsonl" in blocker["message"] and problem in blocker["message"]
        unrun = set(blocker["case_ids"])
        assert len(unrun) == lost and set(res["unrun_case_ids"]) == unrun
        assert res["counts"]["completed"] == 24 - lost
        kept = records(out)
        assert {r["case_id"] for r in kept if r["status"] == "ok"} == {c["case_id"] for c in cases} - unrun
        # what was lost had been paid: billed from the journal, never a verdict
        billed = [r for r in kept if r["case_id"] in unrun]
        assert len(billed) == lost and all(r["error_kind"] == "cancelled" and r["cost"] > 0 for r in billed)
        assert res["cost"]["total"] == pytest.approx(sum(r["cost"] for r in kept))
        assert res["cost"]["http_attempts"] == 24
        assert (out / "records.w2.jsonl.unreadable").exists() and not list(out.glob("records.w*.jsonl"))

        resumed = gate_process.run(
            [*args, "--resume"], env=gate_env(GATE_WORKERS="2"), capture_output=True, text=True, timeout=120
        )
        assert resumed.returncode == 0, resumed.stderr
        again = result(out)
        assert again["state"] == "passed" and again["counts"]["completed"] == 24
        assert fake.count() == 24  # what was lost came from the cache: nothing was paid twice
        assert again["cost"]["total"] == pytest.approx(res["cost"]["total"])


def test_resume_folds_a_dead_runs_worker_file_with_a_corrupt_line_and_says_so(tmp_path: Path) -> None:
    """A run that died whole leaves its workers' files for --resume to fold: a corrupt line in the
    middle of one is named in a note, the rest is reused, and the lost judgment comes from the cache."""
    with FakeOpenAI() as fake:
        cases = [case(f"k-{i:02d}") for i in range(6)]
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "max_concurrency": 2})
        out = tmp_path / "out"
        args = [*run_args(policy, out)[:-1], "--cache-dir", str(tmp_path / "cache")]
        first = gate_process.run(args, env=gate_env(GATE_WORKERS="1"), capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        # As if the run had died with its judgments still in a worker's file, one line mangled.
        lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
        lines[2] = lines[2][:40] + "\n"
        (out / "records.w1.jsonl").write_text("".join(lines))
        (out / "records.jsonl").unlink()
        resumed = gate_process.run(
            [*args, "--resume"], env=gate_env(GATE_WORKERS="1"), capture_output=True, text=True, timeout=120
        )
        assert resumed.returncode == 0, resumed.stderr
        res = result(out)
        assert res["state"] == "passed" and res["counts"]["completed"] == 6
        assert any("records.w1.jsonl:3" in n and "5 records kept" in n for n in res["notes"])
        assert fake.count() == 6  # the mangled judgment was served by the cache
        assert (out / "records.w1.jsonl.unreadable").exists()


def test_resume_after_a_parent_died_between_folding_and_removing_bills_each_record_once(tmp_path: Path) -> None:
    """The parent folded a worker's file into records.jsonl, then died before removing the file (the
    last fold line torn): --resume folds it again, and must not append what is already there."""
    with FakeOpenAI() as fake:
        cases = [case(f"k-{i:02d}") for i in range(6)]
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "max_concurrency": 2})
        out = tmp_path / "out"
        args = run_args(policy, out)
        first = gate_process.run(args, env=gate_env(GATE_WORKERS="1"), capture_output=True, text=True, timeout=120)
        assert first.returncode == 0, first.stderr
        lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
        (out / "records.w1.jsonl").write_text("".join(lines))  # the worker's file, still there
        (out / "records.jsonl").write_text("".join(lines[:-1]) + lines[-1][:30])  # the fold cut mid-line
        resumed = gate_process.run(
            [*args, "--resume"], env=gate_env(GATE_WORKERS="1"), capture_output=True, text=True, timeout=120
        )
        assert resumed.returncode == 0, resumed.stderr
        res = result(out)
        assert res["state"] == "passed" and res["counts"]["completed"] == 6
        assert res["cost"]["http_attempts"] == fake.count() == 6  # the bill is what the provider saw, once
        assert sorted(r["case_id"] for r in records(out)) == [c["case_id"] for c in cases]
        assert not list(out.glob("records.w*"))


def progress_lines(stderr: str) -> list[tuple[int, int, int, int]]:
    """(done, total, reused, errors) of each plain progress line."""
    found = re.findall(
        r"^gate: (\d+)/(\d+) judgments(?: \((\d+) reused\))?, (\d+) errors?, [\d.]+ spent \+ [\d.]+ reserved of 1 USD",
        stderr,
        re.M,
    )
    return [(int(d), int(t), int(r or 0), int(e)) for d, t, r, e in found]


def test_workers_show_one_progress_with_errors_spend_against_the_boundary_and_reused_judgments(
    tmp_path: Path,
) -> None:
    """Piped (a CI log): one plain line every ~10% for the whole run, not one per worker; on --resume
    the reused judgments count toward the total, as in one process."""
    with FakeOpenAI(default=slow(0.02)) as fake:
        for i in (3, 17, 22):
            fake.script(f"k-{i:02d}", server_error())
        cases = [case(f"k-{i:02d}") for i in range(40)]
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "max_concurrency": 4})
        out = tmp_path / "out"
        proc = gate_process.run(
            run_args(policy, out), env=gate_env(GATE_WORKERS="2"), capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 3, proc.stderr
        lines = progress_lines(proc.stderr)
        assert 3 <= len(lines) <= 6 and lines[-1] == (40, 40, 0, 3), proc.stderr
        assert [d for d, *_ in lines] == sorted({d for d, *_ in lines})  # forward only, no line twice
        assert "gate: worker 1/2:" not in proc.stderr  # no worker of its own

        fake.reset()
        resumed = gate_process.run(
            [*run_args(policy, out), "--resume"],
            env=gate_env(GATE_WORKERS="2"),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert "gate: worker 2/2 pid" in resumed.stderr  # the 3 left were judged by two workers
        assert progress_lines(resumed.stderr)[-1] == (40, 40, 37, 0), resumed.stderr
