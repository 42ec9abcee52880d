"""The cached path: a re-run whose judgments are all in the cache, or reused from `--out`, pays
nothing for ragas. Each re-run is a fresh `gate run` process that reports which modules it loaded;
the fake provider counts the requests. The paid first runs only fill the cache or `--out`, so they
run in-process; the one paid fresh process (a new case) shows the probe sees ragas when it loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import case, controls, gate, result, write_suite

KEY_ENV = "GATE_TEST_KEY"
HEAVY = ("ragas", "openai", "instructor", "httpx2", "litellm")

# Runs the real CLI, then prints its exit code and which heavy modules it imported.
PROBE = f"""
import json, sys
from gate.cli import main
code = main(sys.argv[1:])
print(json.dumps({{"code": code, "loaded": sorted(m for m in {HEAVY!r} if m in sys.modules)}}))
"""


def gate_process(*args: str | Path) -> dict[str, Any]:
    env = {**os.environ, KEY_ENV: "sk-test-cached", "RAGAS_DO_NOT_TRACK": "true"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *map(str, args)], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-cached")  # for the in-process runs
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def suite_cases(extra: int = 0) -> list[dict[str, Any]]:
    return [*controls(), *(case(f"c-{i}") for i in range(8 + extra)), case("f-1", label="fail")]


def test_all_cached_rerun_imports_no_ragas_and_sends_nothing(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        policy = write_suite(tmp_path / "s", suite_cases(), evaluator={"base_url": fake.base_url})
        cache = tmp_path / "cache"
        run = ("run", "--policy", policy, "--cache-dir", cache)
        assert gate(*run, "--out", tmp_path / "first") == 0
        paid = fake.count()
        assert paid == 14  # 5 judged controls + 9 cases

        again = gate_process(*run, "--out", tmp_path / "again")
        assert again == {"code": 0, "loaded": []}
        assert fake.count() == paid  # nothing sent
        one, two = result(tmp_path / "first"), result(tmp_path / "again")
        assert two["counts"] == {**one["counts"], "cached": 14}
        assert two["state"] == "passed" and two["cost"]["total"] == 0 and two["cost"]["cached_calls"] == 14
        assert two["slices"] == one["slices"]
        # the records of a cache hit carry the same input hashes as the paid judgment
        paid_records = {r["case_id"]: r for r in map(json.loads, (tmp_path / "first" / "records.jsonl").open())}
        for r in map(json.loads, (tmp_path / "again" / "records.jsonl").open()):
            assert r["cache"] == "hit" and r["attempts"] == []
            assert (r["prompt_sha256"], r["judge_label"]) == (
                paid_records[r["case_id"]]["prompt_sha256"],
                paid_records[r["case_id"]]["judge_label"],
            )

        # one new case: the ordinary path loads ragas and pays for that case only
        write_suite(tmp_path / "s", suite_cases(extra=1), evaluator={"base_url": fake.base_url})
        partial = gate_process(*run, "--out", tmp_path / "partial")
        assert partial["code"] == 0 and "ragas" in partial["loaded"]
        assert fake.count() == paid + 1 and result(tmp_path / "partial")["counts"]["cached"] == 14


def test_resumed_run_with_every_judgment_in_out_imports_no_ragas(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        policy = write_suite(tmp_path / "s", suite_cases(), evaluator={"base_url": fake.base_url})
        out = tmp_path / "out"
        assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
        paid = fake.count()
        resumed = gate_process("run", "--policy", policy, "--out", out, "--no-cache", "--resume")
        assert resumed == {"code": 0, "loaded": []}
        assert fake.count() == paid
        res = result(out)
        assert res["state"] == "passed" and res["counts"]["completed"] == 14
        assert any("resumed: 14 completed judgments" in n for n in res["notes"])


def test_a_trend_policy_all_cached_or_in_out_imports_no_ragas_and_equals_the_paid_run(tmp_path: Path) -> None:
    """The trend lane takes the cached path too: every verdict and every trend grade in the cache
    (or in --out on --resume) and nothing loads ragas, nothing is sent, the decision and trend agree."""
    from test_trend import trend, trend_or_verdict

    with FakeOpenAI(default=trend_or_verdict({"c-1": "5", "c-2": "2"})) as fake:
        policy = write_suite(tmp_path / "s", suite_cases(), evaluator={"base_url": fake.base_url}, trend=trend())
        cache = tmp_path / "cache"
        run = ("run", "--policy", policy, "--cache-dir", cache)
        assert gate(*run, "--out", tmp_path / "first") == 0
        paid = fake.count()
        assert paid == 14 + 9  # the verdicts, then a grade for each of the 9 non-control cases

        again = gate_process(*run, "--out", tmp_path / "again")
        assert again == {"code": 0, "loaded": []}
        assert fake.count() == paid
        one, two = result(tmp_path / "first"), result(tmp_path / "again")
        assert (two["state"], two["slices"], two["blockers"]) == (one["state"], one["slices"], one["blockers"])
        graded = {k: one["trend"][k] for k in ("overall", "slices")}
        assert {k: two["trend"][k] for k in graded} == graded and graded["overall"]["n"] == 9
        assert graded["overall"]["distribution"]["5"] == 1 and graded["overall"]["distribution"]["2"] == 1
        assert two["cost"]["total"] == 0 and two["trend"]["cost"]["total"] == 0
        grades = [json.loads(line) for line in (tmp_path / "again" / "trend.jsonl").open()]
        assert len(grades) == 9 and {g["cache"] for g in grades} == {"hit"}

        # resumed with every verdict and grade in --out, without the cache
        resumed = gate_process("run", "--policy", policy, "--out", tmp_path / "first", "--no-cache", "--resume")
        assert resumed == {"code": 0, "loaded": []}
        assert fake.count() == paid
        assert {k: result(tmp_path / "first")["trend"][k] for k in graded} == graded
