"""`make migration-check`: the staged diagnosis after a ragas, instructor, openai or prompt upgrade.

Handling a Ragas API migration safely: library behaviour first, judge behaviour after.
1. Deterministic checks: the ragas import contract pinned to the lock (import, constructor,
   placeholders, MetricResult, allowed labels, saved configuration, async path) and every stored
   records/result schema version (tests/judge/test_ragas_contract.py, tests/model/test_schema_versions.py).
   A failure here is an API migration defect: stop, fix the code, never the criterion.
2. The frozen controls and the PR lane under the current environment: against the real provider
   when the policy's key is set, else offline against the fake provider answering as the human
   reviewers did (which exercises the whole library path, not the model).
3. `gate compare` of that run against a stored run (tests/fixtures/migration/example-pr/): every
   verdict transition with its first diverging artifact, and both rollback bundles.
Exit 0 when nothing moved, 1 when a stage found something, 2 on usage errors.
`--update-baseline` stores this run as the new baseline (after people accepted it).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from demo_offline import careful_judge  # noqa: E402
from fake_openai import FakeOpenAI  # noqa: E402

from gate.cli import main as gate_main  # noqa: E402

BASELINE = ROOT / "tests" / "fixtures" / "migration" / "example-pr"
BASELINE_FILES = ("records.jsonl", "result.json", "rollback.json")
# What each first divergence means for a migration (the staged reading).
READING = {
    "none": "same rendered inputs and configuration, another verdict: evaluator behaviour (judge stability)",
    "ragas_version": "only the library moved: inspect imports, placeholders, result types, allowed values",
    "allowed_values": "the label set changed: inspect the metric definition",
    "parser": "only the gate changed: inspect label mapping and policy parsing",
    "provider_settings": "sampling or provider changed: inspect the evaluator settings",
    "evaluator_model": "the model changed: a new judge needs calibration",
    "prompt": "the prompt changed: a new candidate; calibrate before certifying",
}


def stage(title: str) -> None:
    print(f"\n=== {title}", flush=True)


def contract_stage() -> bool:
    stage("1/3 deterministic checks: import contract and stored schema versions")
    tests = ["tests/judge/test_ragas_contract.py", "tests/model/test_schema_versions.py"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], cwd=ROOT)
    if proc.returncode != 0:
        print("API migration defect: the library no longer matches what the gate relies on. Fix the code")
        print("(imports, constructor, placeholders, result handling) before judging anything.")
    return proc.returncode == 0


def _quiet_run(args: list[str]) -> None:
    """`gate run`, its report kept in the run's files rather than on this screen."""
    with contextlib.redirect_stdout(io.StringIO()):
        gate_main(args)


def run_stage(policy: Path, lane: str, out: Path, flips: Sequence[str] = ()) -> dict[str, Any]:
    """`flips`: cases the offline judge answers against the humans (to see a moved judge)."""
    judge, key_env = careful_judge(policy, flips)
    live = bool(os.environ.get(key_env, "").strip())
    args = ["run", "--policy", str(policy), "--lane", lane, "--out", str(out), "--no-cache"]
    if live:
        stage(f"2/3 controls and lane {lane!r} under this environment: the real provider (${key_env} is set)")
        _quiet_run(args)
    else:
        with FakeOpenAI(default=judge) as fake:  # type: ignore[arg-type]
            stage(f"2/3 controls and lane {lane!r} under this environment: offline, fake provider {fake.base_url}")
            os.environ["OPENAI_BASE_URL"] = fake.base_url
            os.environ[key_env] = "sk-migration-check"
            try:
                _quiet_run(args)
            finally:
                os.environ.pop("OPENAI_BASE_URL", None)
                os.environ.pop(key_env, None)
    result: dict[str, Any] = json.loads((out / "result.json").read_text(encoding="utf-8"))
    counts = result.get("counts") or {}
    print(f"{counts.get('completed', 0)} cases judged; outputs in {out}")
    controls = result.get("controls") or {}
    if controls.get("failures"):
        ids = ", ".join(f["case_id"] for f in controls["failures"])
        print(f"controls FAILED under this environment: {ids}")
    else:
        print(f"controls ok; state {result['state']}")
    return result


def compare_stage(baseline: Path, head: Path, policy: Path, out: Path) -> dict[str, Any]:
    stage(
        f"3/3 compare against the stored run {baseline.relative_to(ROOT) if baseline.is_relative_to(ROOT) else baseline}"
    )
    gate_main(["compare", "--base", str(baseline), "--head", str(head), "--policy", str(policy), "--out", str(out)])
    data: dict[str, Any] = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    return data


def diagnose(result: dict[str, Any], comparison: dict[str, Any]) -> bool:
    stage("diagnosis")
    transitions = comparison["transitions"]
    failures = (result.get("controls") or {}).get("failures") or []
    if not transitions and not failures:
        print("No verdict moved and every control held: the upgrade did not change what the gate decides.")
        return True
    by_step: dict[str, list[str]] = {}
    for t in transitions:
        by_step.setdefault(t["first_divergence"], []).append(t["case_id"])
    for step, ids in by_step.items():
        reading = READING.get(step, "the cases or gold changed: not a migration effect; re-run on the same data")
        print(
            f"- {step}: {len(ids)} {'case' if len(ids) == 1 else 'cases'} ({', '.join(ids[:8])}{' ...' if len(ids) > 8 else ''}): {reading}"
        )
    if failures:
        print(
            f"- {len(failures)} {'control' if len(failures) == 1 else 'controls'} failed: review every critical transition before accepting the upgrade"
        )
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", type=Path, default=ROOT / "policies/example/policy.yaml")
    ap.add_argument("--lane", default="pr")
    ap.add_argument("--baseline", type=Path, default=BASELINE, help="the stored run to compare against")
    ap.add_argument("--out", type=Path, default=Path("migration-check-out"))
    ap.add_argument("--update-baseline", action="store_true", help="store this run as the new baseline")
    args = ap.parse_args()
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")

    if not contract_stage():
        return 1
    head = args.out / "run"
    result = run_stage(args.policy, args.lane, head)
    if args.update_baseline:
        args.baseline.mkdir(parents=True, exist_ok=True)
        for name in BASELINE_FILES:
            shutil.copy(head / name, args.baseline / name)
        print(f"\nstored this run as the baseline in {args.baseline}")
        return 0
    if not (args.baseline / "records.jsonl").is_file():
        print(f"error: no stored run in {args.baseline}; fix: run with --update-baseline once", file=sys.stderr)
        return 2
    comparison = compare_stage(args.baseline, head, args.policy, args.out / "compare")
    return 0 if diagnose(result, comparison) else 1


if __name__ == "__main__":
    sys.exit(main())
