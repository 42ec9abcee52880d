"""The batch lane end to end without a key or network: `make batch-offline`.

Starts the fake provider the tests use (tests/fake_openai.py) with its Files + Batches API
(tests/fake_batches.py), both answered by one careful judge (each case as its reviewers labelled
it, `--flip CASE_ID` to disagree), then runs the real CLI as a release job would:

1. `gate run --lane release`                    live, for comparison (into OUT-live/)
2. `gate run --lane release --batch submit`     controls live, the rest as one batch (OUT/)
3. `gate run --lane release --batch collect`    the batch is still finalizing: batch_pending
4. `gate run --lane release --batch collect`    completed: collected and decided
5. `gate run --lane release --batch collect`    again: nothing asked, paid or changed
6. `gate run --lane release --batch wait`       submit, poll, collect in one step (OUT-wait/)

and checks what the batch lane promises: the same verdict per judgment and the same state as the
live run, each batch judgment billed at the batch price (to 1e-9), one request seen per line.
Exit 0 when every check holds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT / "tests", ROOT / "scripts"):
    sys.path.insert(0, str(p))

from demo_offline import careful_judge  # noqa: E402
from fake_batches import FakeBatches  # noqa: E402
from fake_openai import BATCH_HEADER, FakeOpenAI  # noqa: E402

from gate.cli import main as gate_main  # noqa: E402
from gate.model.wording import agree, plural  # noqa: E402


def read_records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]


def read_result(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "result.json").read_text())
    return data


def batch_prices(policy: Path) -> tuple[float, float]:
    import yaml

    batch = yaml.safe_load(policy.read_text())["evaluator"]["price"]["batch"]
    return float(batch["input_per_mtok"]), float(batch["output_per_mtok"])


def parity(policy: Path, live: Path, batch: Path, lines_run: int) -> list[str]:
    """What differs between the live run and the collected batch (empty: nothing)."""
    problems: list[str] = []
    live_recs, batch_recs = read_records(live), read_records(batch)

    def verdicts(recs: list[dict[str, Any]]) -> dict[tuple[str, int], Any]:
        return {(r["case_id"], r["repeat_index"]): (r["status"], r["judge_label"]) for r in recs}

    lv, bv = verdicts(live_recs), verdicts(batch_recs)
    differing = sorted(k for k in lv.keys() | bv.keys() if lv.get(k) != bv.get(k))
    if differing:
        problems.append(
            f"{plural(len(differing), 'judgment')} {agree(len(differing), 'differs', 'differ')}, first {differing[0]}: {lv.get(differing[0])} vs {bv.get(differing[0])}"
        )
    if read_result(live)["state"] != read_result(batch)["state"]:
        problems.append(f"state {read_result(live)['state']} live vs {read_result(batch)['state']} batch")
    pin, pout = batch_prices(policy)
    lines = [r for r in batch_recs if r.get("batch_id")]
    off = [
        r
        for r in lines
        if not math.isclose(
            r["cost"], r["input_tokens"] * pin / 1e6 + r["output_tokens"] * pout / 1e6, rel_tol=0, abs_tol=1e-9
        )
    ]
    if off:
        problems.append(f"{plural(len(off), 'batch judgment')} not billed at the batch price")
    if lines_run != len(lines):
        problems.append(f"the provider ran {plural(lines_run, 'line')} for {plural(len(lines), 'batch judgment')}")
    return problems


def step(title: str, args: Sequence[str | Path]) -> int:
    print(f"\n$ gate {' '.join(str(a) for a in args)}    # {title}", flush=True)
    code = gate_main([str(a) for a in args])
    print(f"-> exit {code}", flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", type=Path, default=ROOT / "policies/example/policy.yaml")
    ap.add_argument("--lane", default="release")
    ap.add_argument("--out", type=Path, default=Path("gate-out-batch"))
    ap.add_argument("--flip", action="append", default=[], help="case id the fake judge gets wrong")
    args = ap.parse_args(argv)
    os.environ["RAGAS_DO_NOT_TRACK"] = "true"
    judge, key_env = careful_judge(args.policy, args.flip)
    live, out, wait = args.out.with_name(args.out.name + "-live"), args.out, args.out.with_name(args.out.name + "-wait")
    for d in (live, out, wait):
        shutil.rmtree(d, ignore_errors=True)
    common = ["run", "--policy", args.policy, "--lane", args.lane, "--no-cache"]
    with FakeOpenAI(default=judge) as fake:  # type: ignore[arg-type]
        os.environ.setdefault(key_env, "sk-offline-demo-not-a-real-key")
        os.environ["OPENAI_BASE_URL"] = fake.base_url
        step("live, for comparison", [*common, "--out", live])
        batches = FakeBatches(fake)  # validating -> in_progress -> finalizing -> completed
        step("controls live, the rest submitted as one batch", [*common, "--out", out, "--batch", "submit"])
        step("the batch is still running", [*common, "--out", out, "--batch", "collect"])
        step("the batch has ended: collected and decided", [*common, "--out", out, "--batch", "collect"])
        before = (out / "records.jsonl").read_bytes()
        asked = len(fake.api_calls)
        step("collected again: nothing asked, paid or changed", [*common, "--out", out, "--batch", "collect"])
        problems = parity(args.policy, live, out, batches.lines_run)
        if (out / "records.jsonl").read_bytes() != before or len(fake.api_calls) != asked:
            problems.append("collecting again changed the records or asked the provider")
        ran = batches.lines_run
        step("submit, poll and collect in one step", [*common, "--out", wait, "--batch", "wait", "--batch-poll", "0"])
        problems += [f"wait: {p}" for p in parity(args.policy, live, wait, batches.lines_run - ran)]
        lines = sum(1 for r in fake.requests if BATCH_HEADER in r.headers)
    res = read_result(out)
    live_cost = read_result(live)["cost"]["total"]
    print(
        f"\nbatch lane: state {res['state']} (live: {read_result(live)['state']}); {plural(lines, 'batch line')} answered; "
        f"cost {res['cost']['total']:.6f} {res['cost']['currency']} against {live_cost:.6f} live "
        f"({res['cost']['total'] / live_cost:.2f}x; the controls are judged live at full price)"
    )
    if problems:
        print("MISMATCH:\n  " + "\n  ".join(problems))
        return 1
    print(
        "parity: the same verdict per judgment and the same state as live; every batch judgment billed at the batch price"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
