"""`gate validate` starts fast: on a small suite it imports neither numpy (the near-duplicate search
compares all pairs exactly instead) nor ragas, openai or an HTTP client."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

from gate.validate.minhash import near_duplicates
from gate.validate.shingles import near_duplicates_exact

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import json, sys
from gate.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def test_validate_on_the_example_loads_no_numpy_nor_the_judge() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "validate", "--policy", str(ROOT / "policies/example/policy.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    loaded = set(report["modules"])
    for heavy in ("numpy", "ragas", "openai", "instructor", "httpx2", "litellm"):
        assert heavy not in loaded, heavy


def test_exact_search_finds_what_minhash_finds() -> None:
    rng = random.Random(5)
    words = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(120)]
    for i in range(0, 40, 4):  # near copies with two words changed, in another group
        copy = texts[i].split()
        copy[3], copy[17] = "edited", "again"
        texts[i + 1] = " ".join(copy)
    groups = [i % 2 for i in range(len(texts))]

    def skip(i: int, j: int) -> bool:
        return i == 0

    exact = near_duplicates_exact(texts, groups, 0.6, 3, skip=skip)
    assert exact == near_duplicates(texts, groups, 0.6, 3, skip=skip)
    assert len(exact) == 9  # ten planted, the one with case 0 skipped
