"""A reader that goes away is not an error (SPEC 14, issue 19 defect 12): `gate ... | head -1`.

Each command runs as its own process with stdout a real pipe whose reading end is already closed
(what `| head -1` leaves once head has its line); its exit code is the decision's, the same as with
stdout on /dev/null, and it prints no internal error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply
from suite import case, controls, gate, write_suite

ROOT = Path(__file__).resolve().parents[2]


def run_with_closed_stdout(argv: Sequence[str | Path]) -> tuple[int, str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    try:
        env = {k: v for k, v in os.environ.items() if k != "GATE_DEBUG"}
        proc = subprocess.run(
            [sys.executable, "-m", "gate.cli", *map(str, argv)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=ROOT,
            env=env,
        )
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr


def test_every_command_keeps_its_exit_code_when_stdout_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-pipe")
    cases = [*controls(), *(case(f"c-{i}", label="fail" if i % 3 == 0 else "pass") for i in range(12))]
    with FakeOpenAI() as fake:
        fake.script("Answer for c-0:", reply("pass", "Close enough."))  # a false pass: quality_failed
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url})
        shards = [tmp_path / f"shard-{i}" for i in (1, 2)]
        for i, out in enumerate(shards, start=1):
            gate("run", "--policy", policy, "--out", out, "--shard", f"{i}/2", "--no-cache")
    capsys.readouterr()
    merged, records = tmp_path / "merged", shards[0] / "records.jsonl"
    commands: list[tuple[list[str | Path], int]] = [
        (["validate", "--policy", policy], 0),
        (["run", "--dry-run", "--policy", policy, "--out", tmp_path / "dry"], 0),
        (["decide", "--policy", policy, "--records", records, shards[1] / "records.jsonl", "--out", tmp_path / "d"], 1),
        (["decide", "--policy", policy, "--records", records, "--format", "json"], 3),  # one shard: unrun
        (["merge", "--policy", policy, *shards, "--out", merged], 1),
        (["compare", "--base", shards[0], "--head", shards[1], "--out", tmp_path / "cmp"], 0),
    ]
    for argv, expected in commands:
        code, err = run_with_closed_stdout(argv)
        assert code == expected, f"gate {argv[0]}: exit {code}\n{err}"
        assert "internal error" not in err and "Broken pipe" not in err and "Traceback" not in err, err
    assert (merged / "result.json").is_file()
