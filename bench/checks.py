"""Benchmark: the policy's deterministic checks over many cases, ragas' wrapper as is vs the gate's.

`gate run` wraps each check with `ragas.metrics.discrete_metric`. In ragas 0.4.3 that wrapper
rebuilds a pydantic input model from the function's signature on every call; the gate builds it
once per check (gate/validate/case_checks.py `_input_model_once`). Side by side, in one process, on the example
policy's two checks over N copies of its cases: the same values, and the time per case-check.

    .venv/bin/python bench/checks.py             # 20,000 cases x 2 checks
    .venv/bin/python bench/checks.py --cases 5000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["RAGAS_DO_NOT_TRACK"] = "true"

from gate.judge.checks import run_checks  # noqa: E402
from gate.plan.inputs import load_inputs  # noqa: E402
from gate.validate.case_checks import load_checks  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=20_000)
    args = ap.parse_args()
    loaded, dataset, _, _ = load_inputs(ROOT / "policies" / "example" / "policy.yaml", "pr")
    checks = load_checks(loaded)
    base = dataset.cases
    cases = [base[i % len(base)].model_copy(update={"case_id": f"c-{i}"}) for i in range(args.cases)]
    run_checks(checks, cases[:10])  # import ragas outside the timings

    from ragas.metrics import discrete_metric

    async def as_is() -> dict[str, dict[str, Any]]:
        metrics = {
            c.name: discrete_metric(name=c.name, allowed_values=list(c.spec.allowed_values))(c.func) for c in checks
        }
        out: dict[str, dict[str, Any]] = {}
        for case in cases:
            row: dict[str, Any] = {}
            for c in checks:
                kwargs, _ = c.inputs(case)
                row[c.name] = (await metrics[c.name].ascore(**kwargs)).value
            out[case.case_id] = row
        return out

    t0 = time.perf_counter()
    plain = asyncio.run(as_is())
    t1 = time.perf_counter()
    gated = run_checks(checks, cases)
    t2 = time.perf_counter()
    same = all(gated.for_record(cid) == row for cid, row in plain.items())
    calls = len(cases) * len(checks)
    a, b = (t1 - t0) / calls * 1e6, (t2 - t1) / calls * 1e6
    print(f"{len(cases)} cases x {len(checks)} checks = {calls} case-checks; same values: {same}")
    print(f"  ragas discrete_metric as is: {a:8.1f} us per case-check, {t1 - t0:6.2f} s")
    print(f"  gate run_checks:             {b:8.1f} us per case-check, {t2 - t1:6.2f} s")
    print(f"  ratio: {a / b:.1f}x faster")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
