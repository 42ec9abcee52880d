"""`gate decide`: its flags, and the edge that decides again from recorded runs."""

from __future__ import annotations

import argparse

from gate.cli.output import show_outcome, stdout_for
from gate.cli.parsing import (
    Subcommand,
    audit_flags,
    examples,
    format_flag,
    max_cost_flag,
    path_flag,
    policy_flag,
    records_flag,
    responses_flag,
)
from gate.model.states import exit_state


def decide_flags(parser: argparse.ArgumentParser) -> None:
    policy_flag(parser)
    records_flag(parser, "runs to decide from: each a `gate run --out` directory or its records.jsonl")
    parser.add_argument("--lane", default=None, help="the lane the records are for (default: the one they name)")
    path_flag(parser, "--out", "write result.json and the reports here (default: print only)")
    max_cost_flag(parser, "a lower cost boundary than the policy's")
    responses_flag(parser, "a product lane: the answers the run judged (a record of another answer is then stale)")
    path_flag(parser, "--base-result", "a product lane: the base branch's run, paired slice by slice")
    audit_flags(parser)
    format_flag(parser, "the result (result.json's content)")


def cmd_decide(args: argparse.Namespace) -> int:
    from gate.commands.decide import decide_from_records

    if args.out is not None:
        from gate.run.outdir import check_out_dir

        check_out_dir(args.out)
    with stdout_for(args.format):
        decision = decide_from_records(
            args.policy,
            args.records,
            args.lane,
            args.max_cost,
            out_dir=args.out,
            responses=args.responses,
            base_result=args.base_result,
            audit=args.audit,
            audit_queue=args.audit_queue,
        )
    # Without --out, the next steps name the run whose records these are (one run), not a placeholder.
    run_dir = args.records[0].parent if len(args.records) == 1 else None
    show_outcome(decision.result, args.out, args.format, args.policy, run_dir)
    return exit_state(None, decision.state)[1]


COMMAND = Subcommand(
    "decide",
    "re-apply the policy to recorded runs, no model call",
    "Decide again from records.jsonl files (after a policy or override change) without calling any model.",
    decide_flags,
    examples=examples(
        "gate decide --policy policies/example/policy.yaml --records gate-out",
        "gate decide --policy policies/example/policy.yaml --records gate-out --out gate-out-decided",
    ),
    handler=cmd_decide,
)
