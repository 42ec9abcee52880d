"""A `gate run --batch submit` SIGKILLed after the provider created its batch and before the gate
learned the batch's id: the next submit finds that batch (batch.json, written before the create
request, names its input file) and never creates a second one, billed a second time.

The real CLI in a process of its own, real HTTP to the fake Files + Batches API
(tests/fake_batches.py), which holds its answer to `POST /batches` until the test has killed the
gate process: the kill lands exactly between the two."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import gate_process
import pytest
from fake_batches import FakeBatches
from fake_openai import FakeOpenAI
from suite import case, controls, gate, result, write_suite

KEY_ENV = "GATE_TEST_KEY"
PRICE = {
    "input_per_mtok": 1.0,
    "output_per_mtok": 2.0,
    "currency": "USD",
    "batch": {"input_per_mtok": 0.5, "output_per_mtok": 1.0},
}


@pytest.fixture()
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.mark.timeout(300)  # two gate processes; a loaded machine's forkserver start counts too
def test_a_submit_killed_while_the_batch_is_created_never_creates_a_second_batch(
    tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-batch-kill")
    release = threading.Event()
    batches = FakeBatches(fake, script=("validating", "completed"), hold_create=release)
    cases = [*controls(), case("c-1"), case("c-2", label="fail"), case("g-1", slice="general")]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "price": PRICE})
    out = tmp_path / "out"
    argv = ["run", "--policy", str(policy), "--out", str(out), "--batch", "submit"]
    env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true"}
    with gate_process.popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) as proc:
        try:
            assert batches.create_arrived.wait(120), "the submit never asked for its batch to be created"
            proc.kill()  # the provider has created the batch; its id never reaches the gate
            assert proc.wait(60) == -signal.SIGKILL
        finally:
            release.set()
    assert len(batches.batches) == 1 and not (out / "result.json").exists()
    first = next(iter(batches.batches))

    # The next submit picks that batch up (and, completed by then, collects it): no second upload,
    # no second batch, each line answered and billed once.
    batches.hold_create = None
    again = gate_process.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert len(batches.batches) == 1, "a second batch was created: its lines would be billed twice"
    assert again.returncode == 0, again.stderr
    assert len(batches.files) == 2  # the one input file and the output file
    assert json.loads((out / "batch.json").read_text())["batch_id"] == first
    res = result(out)
    assert res["batch"]["batch_id"] == first and res["batch"]["collected"] is True
    assert batches.lines_run == len(batches.input_lines(first)) == 3


def test_a_create_whose_answer_is_lost_is_not_sent_again_blind(
    tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The provider created the batch and its answer was lost (a 500): the client must not simply
    send the create again (openai's own retries would), which makes a second batch billed again;
    it looks the batch up by its input file first."""
    monkeypatch.setenv(KEY_ENV, "sk-test-batch-lost")
    batches = FakeBatches(fake, script=("validating", "completed"), create_errors=1)
    cases = [*controls(), case("c-1"), case("c-2", label="fail"), case("g-1", slice="general")]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "price": PRICE})
    out = tmp_path / "out"
    code = gate("run", "--policy", policy, "--out", out, "--batch", "submit")
    assert len(batches.batches) == 1, "the create was sent again blind: a second batch, its lines billed twice"
    assert code == 3 and result(out)["batch"]["batch_id"] == next(iter(batches.batches))
    assert gate("run", "--policy", policy, "--out", out, "--batch", "collect") == 0
    assert len(batches.batches) == 1 and batches.lines_run == 3
