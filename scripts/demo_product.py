"""The product gate on two app versions, offline: `make demo-product`.

Runs the real `gate run` on policies/example-product's `app` lane twice, each time with one app
version's answers (`--responses`), judged by the offline provider's rule judge (scripts/demo_offline.py
--rule-judge: it fails a figure written in digits that the reference lacks, and misses one written
in words). Version 2.3 should pass; version 2.4, which quotes a 30-day refund window for annual
plans, is review_required on the calibration estimate alone (billing-policy-critical's 12.5% limit
lies inside its interval); then `gate decide --audit` re-decides v2.4's run with people's labels on
its own answers (policies/example-product/audit/, made by scripts/make_product_audit.py through the
review API), and the audit estimate makes it quality_failed (failure_rate_exceeded). v2.4 runs with
v2.3's run as its base (`--base-result`), so each slice also shows the answers that turned from
pass to fail, with the exact McNemar p-value; account-security is a zero-tolerance slice
(`max_failures: 0`). Prints the verdicts, then a summary per slice from each result.json; exits 0
when every verdict is the expected one, 1 otherwise (saying which), 2 on a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import demo_offline  # noqa: E402

from gate.estimate.failure_rate import percent  # noqa: E402
from gate.model.textfit import say  # noqa: E402

POLICY = Path("policies/example-product/policy.yaml")
VERSIONS = (  # version, its answers, the verdict expected, the version it is compared with
    ("v2.3", "responses/app-v2.3.jsonl", "passed", None),
    ("v2.4", "responses/app-v2.4.jsonl", "review_required", "v2.3"),
)
AUDIT = ("v2.4", "audit/ledger", "audit/queue.jsonl", "quality_failed")  # the run re-decided with people's labels


NAME_COLUMN = 24  # the summary's slice-name column


def _pct(x: float | None, rounding: Literal["near", "down", "up"] = "near") -> str:
    """As the gate prints a rate; an interval's ends round outwards, as on its terminal."""
    return "n/a" if x is None else percent(x, rounding)


def _span(low: float, high: float) -> str:
    return f"[{_pct(low, 'down')}, {_pct(high, 'up')}]"


def slice_lines(result: dict[str, Any]) -> list[str]:
    """One line per product slice: k of n, raw share, corrected estimate, interval, limit, verdict."""
    product = result.get("product") or {}
    lines = []
    for name, s in sorted((product.get("slices") or {}).items()):
        n, k = int(s["n"]), int(s["judged_fail"])
        raw = k / n if n else None
        judge = s["judge"]
        # The calibration estimate's own verdict: the audit's, when it decided, is on the next line.
        alone = s.get("calibration_verdict") or s["verdict"]
        lines.append(
            f"    {name:<{NAME_COLUMN}} judged fail {k:>3}/{n:<3} ({_pct(raw)} raw) -> corrected {_pct(s['estimate'])} "
            f"{_span(s['low'], s['high'])} vs limit {_pct(s['max_failure_rate'])}: {alone}"
            f"  (judge Se {judge['se']['x']}/{judge['se']['n']}, Sp {judge['sp']['x']}/{judge['sp']['n']})"
        )
        audit = s.get("audit")
        if audit:
            f, p = audit["judged_fail"], audit["judged_pass"]
            # A plan sized to show a slice exceeded labels none of the answers the judge passed: a bound, no estimate.
            estimate = _pct(audit["estimate"]) if audit["estimate"] is not None else f">= {_pct(audit['low'], 'down')}"
            passed = f"{p['people_fail']}/{p['audited']} it passed" if p["audited"] else "none it passed in the plan"
            # A slice the judge failed nothing of: "0/0 the judge failed" reads as a figure; say it in words.
            failed = (
                f"people failed {f['people_fail']}/{f['audited']} the judge failed, {passed}"
                if k
                else f"the judge failed none; people failed {passed}"
            )
            lines.append(
                f"    {'':<{NAME_COLUMN}} people's audit: {estimate} {_span(audit['low'], audit['high'])}"
                f": {audit['verdict']} ({failed}); decided by {s['decided_by']}"
            )
        zero = s.get("zero_tolerance")
        if zero:
            lines.append(
                f"    {'':<{NAME_COLUMN}} zero tolerance (max_failures {zero['max_failures']}): {zero['verdict']}, "
                f"{len(zero['confirmed']) + len(zero.get('missed', []))} confirmed failing, {len(zero['unaudited'])} awaiting people"
            )
        base = s.get("base")
        if base:
            lines.append(
                f"    {'':<{NAME_COLUMN}} against the base: {base['pass_to_fail']} turned pass -> fail, {base['fail_to_pass']} "
                f"fail -> pass (exact McNemar p = {base['p_value']:.2g})"
            )
    return lines


def blocker_kinds(result: dict[str, Any]) -> list[str]:
    return sorted({str(b.get("kind")) for b in result.get("blockers") or []})


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", default=str(POLICY if POLICY.is_file() else ROOT / POLICY))
    ap.add_argument("--out", default="gate-out-product", help="outputs go to OUT/v2.3 and OUT/v2.4")
    ap.add_argument("--port", type=int, default=None, help="the offline provider's port (default as demo_offline)")
    args = ap.parse_args(argv)
    policy_dir = Path(args.policy).parent
    summary: list[str] = []
    wrong: list[str] = []
    for version, responses, expected, base in VERSIONS:
        out = Path(args.out) / version
        extra = ["--port", str(args.port)] if args.port is not None else []
        against = ""
        if base is not None:
            extra += ["--base-result", str(Path(args.out) / base)]
            against = f" --base-result {Path(args.out) / base}"
        say(sys.stdout, f"\n=== app {version}: gate run --lane app --responses {policy_dir / responses}{against} ===\n")
        sys.stdout.flush()
        if version == AUDIT[0]:
            # The run people audited (audit/, made from a recorded run of v2.4), replayed: its order seed, so
            # its audit plan is the one they labelled. A run of its own would draw another seed, and its plan
            # other answers than those labelled.
            seed = audited_seed(policy_dir / AUDIT[2])
            extra += ["--order-seed", seed]
            say(sys.stdout, f"(a replay of the run people audited: --order-seed {seed}, from {AUDIT[2]})\n")
        run = ["--policy", args.policy, "--lane", "app", "--out", str(out), "--rule-judge"]
        code = demo_offline.main([*run, "--responses", str(policy_dir / responses), *extra])
        result_path = out / "result.json"
        if code not in (0, 1, 2, 3, 4) or not result_path.is_file():
            print(f"demo_product: app {version}: gate run ended {code} without {result_path}", file=sys.stderr)
            return code if code else 1
        result = json.loads(result_path.read_text(encoding="utf-8"))
        state = str(result.get("state"))
        kinds = ", ".join(blocker_kinds(result)) or "no blockers"
        summary.append(f"  app {version}: {state} (exit {code}; {kinds})")
        summary += slice_lines(result)
        if state != expected:
            wrong.append(f"app {version} ended {state}, expected {expected}")
    code = _audited(args.out, args.policy, policy_dir, summary, wrong)
    if code is not None:
        return code
    print_summary(summary, sys.stdout)
    if wrong:
        say(sys.stderr, "\nUnexpected: " + "; ".join(wrong))
        return 1
    say(
        sys.stdout,
        "\nAs expected: v2.3 may ship; v2.4 may not (its refund-window answers for annual plans are wrong):\n"
        "the calibration estimate alone left billing-policy-critical open, people's audit of v2.4's own answers decided it.\n"
        "'raw' is the share the judge failed; 'corrected' allows for the failures the judge misses, so it is higher.",
    )
    return 0


def audited_seed(queue: Path) -> str:
    """The order seed of the run the committed audit was made on: its queue's header names it."""
    header = json.loads(queue.read_text(encoding="utf-8").splitlines()[0])
    seed: str = header["queue"]["design"]["seed"]
    return seed


def print_summary(summary: Sequence[str], out: IO[str]) -> None:
    """The summary, wrapped between words on a terminal (a slice's figures hang under its first
    figure, past the name column); in a log each line stays one line."""
    say(out, "\nProduct gate summary (policies/example-product, offline rule judge)")
    for line in summary:
        named = line.startswith("    ") and not line.startswith("     ")  # a slice's first line: its name
        say(out, line, hang=NAME_COLUMN + 1 if named else 2)


def _audited(out: str, policy: str, policy_dir: Path, summary: list[str], wrong: list[str]) -> int | None:
    """v2.4's run re-decided with people's audit: no model call. None when it ran (its verdict noted)."""
    from gate.cli import main as gate

    version, ledger, queue, expected = AUDIT
    run, decided = Path(out) / version, Path(out) / f"{version}-audited"
    shown = (
        f"gate decide --records {run} --audit {policy_dir / ledger} --audit-queue {policy_dir / queue} --out {decided}"
    )
    say(sys.stdout, f"\n=== app {version} with people's audit: {shown} ===\n")
    sys.stdout.flush()
    code = gate(
        ["decide", "--policy", policy, "--records", str(run), "--audit", str(policy_dir / ledger),
         "--audit-queue", str(policy_dir / queue), "--out", str(decided)]
    )  # fmt: skip
    result_path = decided / "result.json"
    if code not in (0, 1, 3, 4) or not result_path.is_file():
        print(
            f"demo_product: app {version} with the audit: gate decide ended {code} without {result_path}",
            file=sys.stderr,
        )
        return code if code else 1
    result = json.loads(result_path.read_text(encoding="utf-8"))
    state = str(result.get("state"))
    kinds = ", ".join(blocker_kinds(result)) or "no blockers"
    summary.append(f"  app {version} with people's audit: {state} (exit {code}; {kinds})")
    summary += slice_lines(result)
    if state != expected:
        wrong.append(f"app {version} with the audit ended {state}, expected {expected}")
    return None


if __name__ == "__main__":
    sys.exit(main())
