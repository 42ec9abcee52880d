"""The bill of a run SIGKILLed with judgments in flight, decided from what it left (`gate decide`):
the attempts only the journal names (sent, never recorded) are billed as the provider saw them.
Each was one request, not a retry; each unanswered one holds its reservation in `budget_spent`,
so the spend the boundary counted is never below what the provider billed.

The real CLI in a process of its own, real HTTP to the fake provider, which holds the lane's
requests until the test has killed the gate: four are in flight at the kill, one of them a retry
after a 500. result.json is compared with the fake provider's own log (requests, usage)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import gate_process
import pytest
from fake_openai import FakeOpenAI, held, server_error
from suite import case, controls, gate, result, write_suite

KEY_ENV = "GATE_TEST_KEY"
PRICE_IN, PRICE_OUT = 1.0, 2.0  # the suite's prices, per million tokens
CONC = 4
SENT_CONTROLS = 5  # the missing-evidence control is withheld, never sent


def sent_per_case(fake: FakeOpenAI) -> Counter[str]:
    return Counter(m.group(1) for r in fake.requests if (m := re.search(r"Answer for ([\w-]+):", r.prompt)))


@pytest.mark.timeout(300)  # a gate process; a loaded machine's forkserver start counts too
def test_a_killed_runs_journal_only_attempts_are_billed_as_the_provider_saw_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-journal-bill")
    release = threading.Event()
    with FakeOpenAI() as fake:
        fake.script("Answer for c-0:", server_error(), held(release))  # a 500, then its retry is held
        fake.script("Answer for c-", held(release))
        cases = [*controls(), *(case(f"c-{i}") for i in range(8))]
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "max_concurrency": CONC})
        out = tmp_path / "out"
        argv = [sys.executable, "-m", "gate.cli", "run", "--policy", str(policy), "--out", str(out), "--no-cache"]
        env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true"}
        with gate_process.popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
            try:
                deadline = time.monotonic() + 120
                while (fake.in_flight < CONC or fake.count("Answer for c-0:") < 2) and proc.poll() is None:
                    assert time.monotonic() < deadline, "the lane's judgments never reached the provider"
                    time.sleep(0.02)
                proc.kill()
                assert proc.wait(60) == -signal.SIGKILL
            finally:
                release.set()  # the provider answers (and bills) what the dead gate sent
        deadline = time.monotonic() + 60
        while fake.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        seen = sent_per_case(fake)
        pt, ct = fake.usage_totals()
    assert seen["c-0"] == 2 and sum(seen.values()) == SENT_CONTROLS + CONC + 1 == fake.count()

    assert gate("decide", "--policy", policy, "--records", out, "--out", tmp_path / "decided") == 3
    cost = result(tmp_path / "decided")["cost"]
    assert cost["http_attempts"] == fake.count()
    assert cost["retries"] == sum(n - 1 for n in seen.values()) == 1  # c-0's second request, no other
    assert cost["unanswered_attempts"] == CONC
    billed = (pt * PRICE_IN + ct * PRICE_OUT) / 1e6
    # Reported usage is what the gate read (the controls); the provider billed more (the answers the
    # kill lost); the spend the boundary counted holds each unanswered attempt at its reservation.
    assert cost["total"] < billed <= cost["budget_spent"]
