"""`stop_when_decided` with worker processes (GATE_WORKERS=2): the worker that finds the verdict
decided stops the other one too, at its next case (one flag in shared memory), so the run pays for
the judgments it needed, not for the other worker's whole share.

The real CLI in a process of its own that forks its workers, real HTTP to the fake provider. The
fake answers the false pass only once the other worker's first request has arrived, and holds that
request until the false pass is in the first worker's records file (written after the stop flag is
set), so the order is the test's, not the machine's load."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import gate_process
import pytest
from fake_openai import FakeOpenAI, held, reply
from suite import case, controls, result, write_suite

KEY_ENV = "GATE_TEST_KEY"
SENT_CONTROLS = 5  # the missing-evidence control is withheld, never sent
LANES = {"pr": {"partitions": ["sentinel"], "controls": True, "stop_when_decided": True}}


def recorded_in_worker_files(out: Path, case_id: str) -> bool:
    for path in out.glob("records.w*.jsonl"):
        for line in path.read_text().splitlines():
            if line.endswith("}") and json.loads(line)["case_id"] == case_id:
                return True
    return False


@pytest.mark.timeout(300)  # a gate process; a loaded machine's forkserver start counts too
def test_two_workers_stop_together_once_the_verdict_is_decided(tmp_path: Path) -> None:
    release, k01_arrived = threading.Event(), threading.Event()
    with FakeOpenAI() as fake:
        # k-00, the first case of worker 1's share, is a false pass: quality_failed is certain once it
        # is judged. k-01 is worker 2's first case (the shares are interleaved): k-00's answer waits
        # until k-01 is in flight (a worker started late would otherwise see the flag and rightly
        # never send it), and k-01's answer waits until k-00 is recorded.
        fake.script("Answer for k-00:", held(k01_arrived, reply("pass")))
        fake.script("Answer for k-01:", held(release))
        cases = [case("k-00", label="fail"), *(case(f"k-{i:02d}") for i in range(1, 24))]
        policy = write_suite(
            tmp_path / "s",
            [*controls(), *cases],
            evaluator={"base_url": fake.base_url, "max_concurrency": 2},
            lanes=LANES,
        )
        out = tmp_path / "out"
        argv = [sys.executable, "-m", "gate.cli", "run", "--policy", str(policy), "--out", str(out), "--no-cache"]
        env = {**os.environ, KEY_ENV: "sk-test-workers-stop", "RAGAS_DO_NOT_TRACK": "true", "GATE_WORKERS": "2"}
        with gate_process.popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
            try:
                deadline = time.monotonic() + 120
                while not k01_arrived.is_set() and proc.poll() is None:
                    assert time.monotonic() < deadline, "worker 2 never sent k-01"
                    if fake.count("Answer for k-01:"):
                        k01_arrived.set()
                    time.sleep(0.02)
                while not recorded_in_worker_files(out, "k-00") and proc.poll() is None:
                    assert time.monotonic() < deadline, "worker 1 never recorded k-00"
                    time.sleep(0.02)
            finally:
                k01_arrived.set()
                release.set()
            _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err
        assert sum(1 for line in err.splitlines() if line.startswith("gate: worker ") and " pid " in line) == 2
        # The controls, the false pass, and worker 2's one judgment already in flight: nothing else.
        sent = [m.group(1) for r in fake.requests if (m := re.search(r"Answer for ([\w-]+):", r.prompt))]
        assert len(sent) == SENT_CONTROLS + 2, sorted(sent)
    res = result(out)
    assert res["state"] == "quality_failed"
    assert [b["kind"] for b in res["blockers"]] == ["false_pass_limit"]
    assert res["stopped_early"]["judged"] == SENT_CONTROLS + 2
    assert res["stopped_early"]["not_needed"] == [f"k-{i:02d}" for i in range(2, 24)]
    assert res["counts"]["not_needed"] == 22 and res["counts"]["unrun"] == 0
