"""SIGKILL at five points of a run, then `--resume`: judged once, same state, the bill complete.

Each kill point runs in its own process against its own fake provider (in parallel, to keep the
suite fast). The fake's own request and usage log is the ground truth the result is compared to.
"""

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
from fake_openai import FakeOpenAI, reply
from suite import case, controls, write_suite

from gate.cli import main
from gate.judge.journal import JOURNAL_FILE, recover
from gate.model.records import Attempt, Record, read_records

ROOT = Path(__file__).resolve().parents[2]
KEY_ENV = "GATE_TEST_KEY"
CONC = 4
KILL_AT = (1, 4, 8, 12, 15)  # requests the provider has received when the run is killed (17 judgments)
PRICE_IN, PRICE_OUT = 1.0, 2.0


def suite_for(root: Path, fake: FakeOpenAI) -> Path:
    fake.latency = 0.15  # replies in flight at every kill point
    fake.script("c-05", reply("pass", "Looks fine."))  # a false pass: the state is quality_failed
    cases = [*controls(), *(case(f"c-{i:02d}", label="fail" if i == 5 else "pass") for i in range(12))]
    return write_suite(root, cases, evaluator={"base_url": fake.base_url, "max_concurrency": CONC})


def command(policy: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gate.cli", "run", "--policy", str(policy), "--out", str(out), "--no-cache", *extra]


def env() -> dict[str, str]:
    return {**os.environ, KEY_ENV: "sk-test-kill", "RAGAS_DO_NOT_TRACK": "true"}


def load(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "result.json").read_text())
    return data


def _ok_records(out: Path) -> list[Record]:
    path = out / "records.jsonl"
    if not path.exists() or not path.read_bytes().strip():
        return []
    return [r for r in read_records(path) if r.status == "ok"]


def comparable(res: dict[str, Any]) -> dict[str, Any]:
    counts = {k: v for k, v in res["counts"].items() if k != "cached"}
    blockers = sorted((b["kind"], tuple(sorted(b["case_ids"]))) for b in res["blockers"])
    return {"state": res["state"], "counts": counts, "slices": res["slices"], "blockers": blockers}


def run_until(cmd: list[str], fake: FakeOpenAI, kill_at: int) -> None:
    """Start `cmd`; SIGKILL it once the provider has received `kill_at` requests in all."""
    proc = gate_process.popen(cmd, env=env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while fake.count() < kill_at and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert proc.poll() is None, f"the run ended before its kill point ({kill_at} requests)"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL


def test_sigkill_at_five_points_then_resume(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-kill")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    # One run killed at five points: the first run, then each --resume in turn, then a last
    # --resume that finishes. Replies take 0.15 s, so judgments are in flight at every kill.
    policy = suite_for(tmp_path / "s", fake_openai)
    out = tmp_path / "out"
    done_before: dict[str, int] = {}  # case -> requests the provider had for it when it was recorded ok
    for n, kill_at in enumerate(KILL_AT):
        run_until(command(policy, out, *(["--resume"] if n else [])), fake_openai, kill_at)
        for r in _ok_records(out):
            done_before.setdefault(r.case_id, fake_openai.count(f"Answer for {r.case_id}:"))
    last = gate_process.run(command(policy, out, "--resume"), env=env(), cwd=ROOT, capture_output=True, text=True)
    assert last.returncode == 1, last.stderr

    with FakeOpenAI() as clean:  # the same suite, never interrupted
        base_policy = suite_for(tmp_path / "base", clean)
        assert main(["run", "--policy", str(base_policy), "--out", str(tmp_path / "base-out"), "--no-cache"]) == 1
    expected = comparable(load(tmp_path / "base-out"))
    assert expected["state"] == "quality_failed"
    res = load(out)
    assert comparable(res) == expected

    records = read_records(out / "records.jsonl")
    ok = [(r.case_id, r.repeat_index) for r in records if r.status == "ok"]
    assert len(ok) == len(set(ok)) == 17  # every judged case exactly once (5 controls, 12 cases)
    # Nothing lost: every request the provider saw is in the bill. A journaled attempt cut off
    # while being sent (at most one per worker per kill) is counted too, as it may have arrived.
    http = res["cost"]["http_attempts"]
    assert fake_openai.count() <= http <= fake_openai.count() + CONC * len(KILL_AT)
    for cid in {r.case_id for r in records}:
        sent = [a for r in records if r.case_id == cid for a in r.attempts]
        # A case in flight at several kills may have one cut-off attempt per kill in its bill.
        seen = fake_openai.count(f"Answer for {cid}:")
        assert seen <= len(sent) <= seen + len(KILL_AT)
    # Nothing paid twice: a judgment recorded before a kill was never requested again.
    for cid, n_sent in done_before.items():
        assert fake_openai.count(f"Answer for {cid}:") == n_sent, cid
    # The spend: reported usage is at most what the provider billed (answers lost in the kill were
    # billed but never read), and the budget, which holds each unanswered attempt at its
    # reservation, at least that.
    pt, ct = fake_openai.usage_totals()
    billed = (pt * PRICE_IN + ct * PRICE_OUT) / 1e6
    assert res["cost"]["total"] <= billed + 1e-12 <= res["cost"]["budget_spent"] + 2e-12
    assert fake_openai.count() > 17  # the kills did cost requests: the test exercised the gap


def test_recover_skips_torn_and_foreign_lines_and_holds_unanswered(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL_FILE
    lines = [
        {"event": "sent", "id": "a1", "case_id": "c-1", "repeat_index": 0, "reserved": 0.002},
        {"event": "settled", "id": "a1", "cost": 0.0003, "attempt": {"status_code": 200, "input_tokens": 100}},
        {"event": "sent", "id": "a2", "case_id": "c-2", "repeat_index": 0, "reserved": 0.004},
        {"event": "sent", "id": "a3", "case_id": "c-3", "repeat_index": 0, "reserved": 0.001},
        {"event": "sent", "id": "a4", "case_id": 7, "repeat_index": 0, "reserved": 1.0},
    ]
    text = "".join(json.dumps(x) + "\n" for x in lines) + '{"event": "settled", "id": "a2", "co'
    path.write_text(text)
    covered = Record(
        case_id="c-3",
        slice="s",
        partition="p",
        human_label="pass",
        status="ok",
        attempts=[Attempt(status_code=200, attempt_id="a3")],
    )
    got = {u.case_id: u for u in recover(path, [covered])}
    assert sorted(got) == ["c-1", "c-2"]
    assert got["c-1"].cost == 0.0003 and got["c-1"].attempts[0].status_code == 200
    assert got["c-2"].unanswered == 1 and got["c-2"].attempts[0].held == 0.004


def test_sigkill_in_the_trend_then_resume_bills_every_trend_attempt_and_pays_none_twice(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """The trend's judgments are journaled like the verdicts': a kill while the trend is judged,
    then --resume, keeps its recorded trend judgments and counts the attempts it sent."""
    from test_trend import BAND_ASK, trend, trend_or_verdict

    fake_openai.latency = 0.15
    fake_openai.default = trend_or_verdict({})
    cases = [*controls(), *(case(f"t-{i:02d}") for i in range(8))]
    policy = write_suite(
        tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url, "max_concurrency": CONC}, trend=trend()
    )
    out = tmp_path / "out"
    run_until(command(policy, out), fake_openai, 13 + 3)  # 13 verdicts, then the trend under way
    recorded = (out / "trend.jsonl").read_text().splitlines() if (out / "trend.jsonl").exists() else []
    before = fake_openai.count()
    assert fake_openai.count(BAND_ASK) > 0  # killed while the trend was judged
    last = gate_process.run(command(policy, out, "--resume"), env=env(), cwd=ROOT, capture_output=True, text=True)
    assert last.returncode == 0, last.stderr
    res = load(out)
    assert res["trend"]["overall"]["n"] == 8 and fake_openai.count() - before == 8 - len(recorded)
    # Nothing lost: every request the provider saw, trend ones included, is in the bill.
    http = res["cost"]["http_attempts"]
    assert fake_openai.count() <= http <= fake_openai.count() + CONC
    pt, ct = fake_openai.usage_totals()
    billed = (pt * PRICE_IN + ct * PRICE_OUT) / 1e6
    assert res["cost"]["total"] <= billed + 1e-12 <= res["cost"]["budget_spent"] + 2e-12
