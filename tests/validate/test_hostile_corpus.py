"""The hostile-input corpus (tests/hostile_corpus.py) through the real CLI: a small, fixed sample
in `make test`; `bench/fuzz_inputs.py` runs a large random one."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hostile_corpus import FILES, Mutation, check, exercise, mutations, write_base
from hypothesis import HealthCheck, given, settings

ROOT = Path(__file__).resolve().parents[2]


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # the same sample on every run: `make test` stays reproducible
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutation=mutations())
def test_every_hostile_input_ends_in_a_message_or_findings(mutation: Mutation) -> None:
    os.environ.pop("GATE_TEST_KEY", None)  # nothing may be called
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        check(root, mutation, exercise(root, mutation))


def _limited() -> None:
    # A memory bound a reader that slurps /dev/zero would hit at once.
    resource.setrlimit(resource.RLIMIT_AS, (1536 * 1024 * 1024, 1536 * 1024 * 1024))


@pytest.mark.parametrize("target", ["policy", "prompt", "cases", "evidence"])
def test_special_files_end_quickly_within_a_memory_bound(tmp_path: Path, target: str) -> None:
    """Subprocess runs of the real `gate` entry, under RLIMIT_AS and a timeout: a FIFO, /dev/zero or
    /dev/urandom in place of a file ends in a message, never a hang or an out-of-memory kill."""
    policy = write_base(tmp_path)
    path = tmp_path / FILES[target]
    for special in ("fifo", "/dev/zero", "/dev/urandom"):
        path.unlink()
        if special == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to(special)
        target_policy = path if target == "policy" else policy
        proc = subprocess.run(
            [sys.executable, "-m", "gate.cli", "validate", "--policy", str(target_policy)],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
            preexec_fn=_limited,
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "fix" in proc.stderr
