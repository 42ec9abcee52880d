"""The `gate` command line: a thin layer over validate, run, decide and publish.

Every user-facing error is one paragraph naming the file, the field and the fix; exit 2 for
usage errors. ragas is never imported here: only `gate run` loads it, when a call is due.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from gate import __version__
from gate.errors import GateError, UsageError
from gate.escape import log_text
from gate.outdir import OutputWriteError
from gate.states import USAGE_ERROR_EXIT, Finding, State

STATE_LABEL = {
    State.QUALITY_FAILED: "quality_failed (the change is wrong)",
    State.EVALUATION_INCOMPLETE: "evaluation_incomplete (the evidence is not complete)",
    State.REVIEW_REQUIRED: "review_required (a person must look)",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"gate: {message}; run `{self.prog} --help` for the usage")


def _cost(value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--max-cost must be a number, not {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"--max-cost must be a finite number greater than 0, not {value!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gate", description="A CI release gate for a reviewed pass/fail criterion judged by Ragas.")
    p.add_argument("--version", action="version", version=f"ragas-gate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    v = sub.add_parser("validate", help="deterministic checks only, no network")
    v.add_argument("--policy", required=True, help="the policy YAML file")
    v.add_argument("--lane", default=None, help="check the controls of this lane only")
    v.add_argument("--format", choices=["text", "json"], default="text")

    r = sub.add_parser("run", help="judge a lane's cases and decide")
    r.add_argument("--policy", required=True)
    r.add_argument("--lane", default="pr", help="pr, release, scheduled or any lane the policy defines (default pr)")
    r.add_argument("--out", default="gate-out", type=Path, help="output directory (default gate-out/)")
    r.add_argument("--max-cost", type=_cost, default=None, help="a lower cost boundary than the policy's")
    r.add_argument("--resume", action="store_true", help="reuse completed judgments in --out and the cache")
    r.add_argument("--dry-run", action="store_true", help="print the plan and estimated cost; no model call")
    r.add_argument(
        "--cache-dir", type=Path, default=None, help="judgment cache (default: policy cache_dir or .gate-cache)"
    )
    r.add_argument("--no-cache", action="store_true", help="judge without the cache")
    r.add_argument(
        "--base-result", type=Path, default=None, help="a base run's --out dir: the report shows the trend's change"
    )
    r.add_argument(
        "--shard", default=None, metavar="I/N", help="judge shard I of N (a stable hash share; controls in every shard)"
    )

    d = sub.add_parser("decide", help="re-apply the policy to recorded runs, no model call")
    d.add_argument("--policy", required=True)
    d.add_argument("--records", required=True, nargs="+", type=Path)
    d.add_argument("--lane", default=None, help="the lane the records are for (default: the one they name)")
    d.add_argument("--out", type=Path, default=None, help="write result.json and the reports here")
    d.add_argument("--max-cost", type=_cost, default=None)

    m = sub.add_parser("merge", help="combine the outputs of `gate run --shard I/N` into one decision")
    m.add_argument("--policy", required=True)
    m.add_argument("shards", nargs="+", type=Path, metavar="DIR", help="the --out directory of each shard")
    m.add_argument("--out", required=True, type=Path, help="write the merged result.json, reports and records here")

    cal = sub.add_parser("calibrate", help="measure the judge against human labels from recorded runs, no model call")
    cal.add_argument("--policy", required=True)
    cal.add_argument("--records", required=True, nargs="+", type=Path, help="records.jsonl file(s) of runs")
    cal.add_argument("--causes", type=Path, default=None, help="classified disagreements: JSONL or CSV case_id,cause")
    cal.add_argument("--out", type=Path, default=Path("gate-calibration"), help="output directory")

    cmp = sub.add_parser("compare", help="verdict transitions between two runs and the first diverging artifact")
    cmp.add_argument("--base", required=True, type=Path, help="the base run's --out directory or records.jsonl")
    cmp.add_argument("--head", required=True, type=Path, help="the head run's --out directory or records.jsonl")
    cmp.add_argument(
        "--policy", type=Path, default=None, help="mark transitions in critical slices (max_false_passes 0)"
    )
    cmp.add_argument("--out", type=Path, default=Path("gate-compare"), help="write compare.json and compare.md here")

    pub = sub.add_parser("publish", help="post the check run and the sticky PR comment for a result")
    pub.add_argument("--result", required=True, type=Path, help="the --out directory of a run")
    return p


def format_findings_text(findings: Sequence[Finding], out: IO[str]) -> None:
    if not findings:
        out.write("No findings: the policy and dataset validate clean.\n")
        return
    by_state: dict[State, list[Finding]] = {}
    for f in findings:
        by_state.setdefault(f.state, []).append(f)
    for state in (State.QUALITY_FAILED, State.EVALUATION_INCOMPLETE, State.REVIEW_REQUIRED):
        group = by_state.get(state, [])
        if not group:
            continue
        kinds = Counter(f.kind for f in group)
        out.write(
            f"{STATE_LABEL[state]}: {len(group)} finding(s) ({', '.join(f'{k} {n}' for k, n in kinds.items())})\n"
        )
        for f in group:
            shown = ", ".join(log_text(i) for i in f.case_ids[:10])
            ids = f" [cases: {shown}{' ...' if len(f.case_ids) > 10 else ''}]" if f.case_ids else ""
            out.write(f"  - {f.kind}: {log_text(f.message)}{ids}\n")


def cmd_validate(args: argparse.Namespace) -> int:
    from gate.cases import load_dataset
    from gate.plan import LaneError
    from gate.policy import load_policy
    from gate.validate import run_validators

    loaded = load_policy(args.policy)
    if args.lane == "scheduled" and loaded.policy.drift is not None:
        args.lane = None  # the drift lane judges traces: its prompt is checked with the policy
    if args.lane is not None and args.lane not in loaded.policy.lanes:
        raise LaneError(
            f"{args.policy}: lane {args.lane!r} is not defined under `lanes:`; fix: pass one of "
            f"{', '.join(sorted(loaded.policy.lanes))}"
        )
    dataset = load_dataset(loaded)
    findings = run_validators(loaded, dataset, args.lane)
    blocking = [f for f in findings if f.state is not State.PASSED]
    if args.format == "json":
        json.dump(
            {
                "policy_id": loaded.policy.policy_id,
                "cases": len(dataset.cases),
                "policy_sha256": loaded.sha256,
                "dataset_sha256": dataset.sha256,
                "blocking": bool(blocking),
                "counts": dict(Counter(f.state.value for f in findings)),
                "findings": [f.to_dict() for f in findings],
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    else:
        sys.stdout.write(
            f"{args.policy}: policy {loaded.policy.policy_id} ({loaded.policy.policy_version}), "
            f"{len(dataset.cases)} cases, policy sha256 {loaded.sha256[:12]}, dataset sha256 {dataset.sha256[:12]}\n"
        )
        format_findings_text(findings, sys.stdout)
    return 1 if blocking else 0


def _print_outcome(result: dict[str, object], out_dir: Path | None) -> None:
    from gate.report.markdown import render_summary

    sys.stdout.write(render_summary(result))
    if out_dir is not None:
        sys.stdout.write(f"\nWrote {out_dir}/result.json, report.md, summary.md, junit.xml\n")
        cert = result.get("certification")
        if isinstance(cert, dict) and cert.get("ledger_entry"):
            sys.stdout.write(
                f"and {out_dir}/certification-entry.json: append it to the ledger {cert.get('ledger')} "
                "(relative to the policy) once people accept it\n"
            )


def cmd_run(args: argparse.Namespace) -> int:
    from gate.run import RunOptions, run
    from gate.shard import parse_shard

    opts = RunOptions(
        lane=args.lane,
        out_dir=args.out,
        max_cost=args.max_cost,
        resume=args.resume,
        dry_run=args.dry_run,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        base_result=args.base_result,
        shard=parse_shard(args.shard) if args.shard is not None else None,
    )
    if args.base_result is not None and args.base_result.resolve() == args.out.resolve():
        raise UsageError(
            f"--base-result {args.base_result} is the --out directory this run replaces; fix: pass the base run's own directory"
        )
    if not args.dry_run:
        from gate.outdir import check_out_dir

        check_out_dir(args.out)  # exit 2 before anything is paid when --out cannot be written
        # A result left by an earlier run must never be read (or published) as this run's.
        for name in OUTPUT_FILES:
            (args.out / name).unlink(missing_ok=True)
    decision = run(args.policy, opts)
    if args.dry_run:
        blocking = [b for b in decision.blockers if b.state is State.QUALITY_FAILED]
        if blocking:
            format_findings_text(blocking, sys.stdout)
        return 1 if blocking else 0
    _print_outcome(decision.result, args.out)
    return decision.state.exit_code


def cmd_decide(args: argparse.Namespace) -> int:
    from gate.run import decide_from_records, write_outputs

    if args.out is not None:
        from gate.outdir import check_out_dir

        check_out_dir(args.out)
    decision = decide_from_records(args.policy, args.records, args.lane, args.max_cost)
    if args.out is not None:
        write_outputs(args.out, decision)
    _print_outcome(decision.result, args.out)
    return decision.state.exit_code


def cmd_merge(args: argparse.Namespace) -> int:
    from gate.merge import merge, write_merged

    if any(args.out.resolve() == d.resolve() for d in args.shards):
        raise UsageError(f"gate merge: --out {args.out} is one of the shard directories; fix: merge into a new one")
    for name in OUTPUT_FILES:  # a result left by an earlier merge must never pass for this one's
        (args.out / name).unlink(missing_ok=True)
    merged = merge(args.policy, args.shards)
    write_merged(args.out, merged)
    _print_outcome(merged.decision.result, args.out)
    return merged.decision.state.exit_code


def cmd_calibrate(args: argparse.Namespace) -> int:
    from gate.calibrate.command import print_summary, run_calibrate

    print_summary(run_calibrate(args.policy, args.records, args.causes, args.out), sys.stdout)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from gate.compare import compare_paths
    from gate.report.compare import render_compare

    comparison = compare_paths(args.base, args.head, args.policy)
    markdown = render_compare(comparison)
    # An unwritable --out is an unexpected error (SPEC 8): `main` reports it and exits 3.
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps(comparison.to_dict(), indent=2) + "\n", encoding="utf-8")
    (args.out / "compare.md").write_text(markdown, encoding="utf-8")
    sys.stdout.write(markdown + f"\nWrote {args.out}/compare.json and compare.md\n")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    import os

    from gate.action import publish_result_dir

    return publish_result_dir(args.result, os.environ)


OUTPUT_FILES = ("result.json", "report.md", "summary.md", "junit.xml", "certification-entry.json", "rollback.json")
COMMANDS = {
    "validate": cmd_validate,
    "run": cmd_run,
    "decide": cmd_decide,
    "merge": cmd_merge,
    "calibrate": cmd_calibrate,
    "compare": cmd_compare,
    "publish": cmd_publish,
}


def report_crash(args: argparse.Namespace | None, exc: Exception) -> int:
    """An unexpected error: one paragraph on stderr, a result.json that claims no verdict, exit 3."""
    from gate import crash

    command = getattr(args, "command", None)
    written = None
    out_dir: Path | None = getattr(args, "out", None)
    if (
        args is not None
        and out_dir is not None
        and command in ("run", "decide")
        and not getattr(args, "dry_run", False)
    ):
        sources = [out_dir / "records.jsonl"] if command == "run" else list(args.records)
        if crash.write_crash_result(exc, args.policy, args.lane, out_dir, sources):
            written = f"{out_dir}/result.json says so, with the cases left unjudged."
    crash.print_traceback_if_debug(exc, sys.stderr)
    what = f"`gate {command}`" if command else "`gate`"
    message = crash.crash_message(what, exc, written, resumable=command == "run")
    sys.stderr.write(f"error: {message}\n")
    return crash.INTERNAL_ERROR_EXIT


def main(argv: Sequence[str] | None = None) -> int:
    # pydantic scans every installed distribution for plugins before building its first model
    # (tens of ms of `gate validate`'s start); the gate's own models want none.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    args: argparse.Namespace | None = None
    try:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)
    except OutputWriteError as exc:  # outputs failed mid-run: never a verdict
        sys.stderr.write(f"error: {exc.message}\n")
        return State.EVALUATION_INCOMPLETE.exit_code
    except GateError as exc:
        # One visible line per line of the message: file content can never start a log line.
        shown = "\n".join(log_text(line) for line in exc.message.split("\n"))
        sys.stderr.write(f"error: {shown}\n")
        return USAGE_ERROR_EXIT
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return State.EVALUATION_INCOMPLETE.exit_code
    except Exception as exc:  # a bug or a broken install is never a verdict (SPEC section 8)
        return report_crash(args, exc)


def main_entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    main_entry()
