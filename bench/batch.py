"""Benchmark: the batch lane against the live run, side by side in one process (issue 21).

For each suite: `gate run` live, then `gate run --batch submit` and `--batch collect` into another
--out, both against the same fake provider (tests/fake_openai.py, with the Files + Batches API of
tests/fake_batches.py), answered by the same scripted judge. It prints, per suite:
- the verdict of every judgment and the state, live against batch (target: identical);
- each batch judgment's cost against its tokens x the batch price (target: within 1e-9) and the
  batch/live cost ratio per judgment (the same tokens at the batch price: 0.5 in both suites);
- the requests the provider saw for the batch against the lines submitted (target: equal);
- the wall of the live run, of submit and of collect.

    .venv/bin/python bench/batch.py                 # the example's release lane and 2,000 generated cases
    .venv/bin/python bench/batch.py --cases 200     # a smaller generated suite
"""

from __future__ import annotations

import os

os.environ["RAGAS_DO_NOT_TRACK"] = "true"

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench", ROOT / "tests", ROOT / "scripts"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from batch_offline import parity, read_records, read_result  # noqa: E402
from demo_offline import careful_judge  # noqa: E402
from fake_batches import FakeBatches  # noqa: E402
from fake_openai import BATCH_HEADER, FakeOpenAI  # noqa: E402
from run import KEY_ENV, make_cases, write_bench_suite  # noqa: E402
from suite import controls  # noqa: E402

from gate.cli import main as gate_main  # noqa: E402

EXAMPLE = ROOT / "policies" / "example" / "policy.yaml"


def timed(args: Sequence[str | Path]) -> tuple[int, float]:
    start = time.perf_counter()
    code = gate_main([str(a) for a in args])
    return code, time.perf_counter() - start


def compare(name: str, policy: Path, lane: str, work: Path, default: Any = None) -> dict[str, Any]:
    live, out = work / f"{name}-live", work / f"{name}-batch"
    common = ["run", "--policy", policy, "--lane", lane, "--no-cache", "--format", "json"]
    devnull = open(os.devnull, "w")  # noqa: SIM115 -- the CLI's JSON output is not the figure
    stdout, stderr = sys.stdout, sys.stderr
    with FakeOpenAI(default=default) as fake:
        os.environ["OPENAI_BASE_URL"] = fake.base_url
        sys.stdout = sys.stderr = devnull
        try:
            live_code, live_s = timed([*common, "--out", live])
            batches = FakeBatches(fake, script=("validating", "completed"))
            before = len(fake.requests)
            submit_code, submit_s = timed([*common, "--out", out, "--batch", "submit"])
            collect_code, collect_s = timed([*common, "--out", out, "--batch", "collect"])
        finally:
            sys.stdout, sys.stderr = stdout, stderr
            devnull.close()
        seen = sum(1 for r in fake.requests[before:] if BATCH_HEADER in r.headers)
        lines = len(batches.input_lines())
    problems = parity(policy, live, out, seen)
    live_cost = {(r["case_id"], r["repeat_index"]): r["cost"] for r in read_records(live)}
    price = yaml.safe_load(policy.read_text())["evaluator"]["price"]["batch"]
    worst, ratios = 0.0, []
    for r in read_records(out):
        if not r.get("batch_id"):
            continue
        expect = r["input_tokens"] * price["input_per_mtok"] / 1e6 + r["output_tokens"] * price["output_per_mtok"] / 1e6
        worst = max(worst, abs(r["cost"] - expect))
        live_one = live_cost.get((r["case_id"], r["repeat_index"]), 0.0)
        if live_one > 0:
            ratios.append(r["cost"] / live_one)
    return {
        "suite": name,
        "judgments": len(read_records(out)),
        "lines": lines,
        "requests_seen": seen,
        "state_live": read_result(live)["state"],
        "state_batch": read_result(out)["state"],
        "exits": [live_code, submit_code, collect_code],
        "mismatches": problems,
        "max_cost_error": worst,
        "cost_ratio_min": min(ratios) if ratios else math.nan,
        "cost_ratio_max": max(ratios) if ratios else math.nan,
        "total_live": read_result(live)["cost"]["total"],
        "total_batch": read_result(out)["cost"]["total"],
        "live_s": live_s,
        "submit_s": submit_s,
        "collect_s": collect_s,
    }


def generated(root: Path, n: int) -> Path:
    """N cases (every third labelled fail) plus the six controls, lane `pr`, batch prices half the live."""
    policy = write_bench_suite(root, [*controls(), *make_cases(n)], "http://unused.invalid/v1", 32)
    data = yaml.safe_load(policy.read_text())
    data["evaluator"].pop("base_url", None)  # OPENAI_BASE_URL: the fake of this comparison
    price = data["evaluator"]["price"]
    price["batch"] = {"input_per_mtok": price["input_per_mtok"] / 2, "output_per_mtok": price["output_per_mtok"] / 2}
    policy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return policy


def row(r: dict[str, Any]) -> str:
    same = "same" if not r["mismatches"] else f"DIFFER ({'; '.join(r['mismatches'])})"
    return (
        f"{r['suite']:<22} {r['judgments']:>6} {r['lines']:>6} {r['requests_seen']:>6}  "
        f"{r['state_live']:<21} {r['state_batch']:<21} {same:<6} {r['max_cost_error']:>9.1e} "
        f"{r['cost_ratio_min']:.3f}-{r['cost_ratio_max']:.3f} {r['total_batch'] / r['total_live']:>6.3f} "
        f"{r['live_s']:>7.1f} {r['submit_s']:>7.1f} {r['collect_s']:>8.1f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=2000, help="size of the generated suite (default 2000)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    from gate.judge.ragas_judge import prepare_ragas_environment

    prepare_ragas_environment(None)
    import ragas.metrics  # noqa: F401  -- imported before anything is timed (~2 s, once per process)

    with tempfile.TemporaryDirectory(prefix="gate-bench-batch-") as tmp:
        work = Path(tmp)
        judge, key_env = careful_judge(EXAMPLE)
        os.environ.setdefault(key_env, "sk-bench-not-a-real-key")
        os.environ.setdefault(KEY_ENV, "sk-bench-not-a-real-key")
        runs: list[tuple[str, Path, str, Callable[..., Any] | None]] = [
            ("example release", EXAMPLE, "release", judge),
            (f"generated {args.cases}", generated(work / "suite", args.cases), "pr", None),
        ]
        rows = [compare(name.replace(" ", "-"), policy, lane, work, default) for name, policy, lane, default in runs]
    print(
        f"{'suite':<22} {'judged':>6} {'lines':>6} {'seen':>6}  {'state live':<21} {'state batch':<21} {'verdicts':<6} "
        f"{'cost err':>9} {'batch/live':<11} {'total':>6} {'live s':>7} {'submit':>7} {'collect':>8}"
    )
    for r in rows:
        print(row(r))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    ok = all(not r["mismatches"] and r["max_cost_error"] <= 1e-9 and r["lines"] == r["requests_seen"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
