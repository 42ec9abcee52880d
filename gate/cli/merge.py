"""`gate merge`: its flags, and the edge that combines a sharded run's outputs into one decision."""

from __future__ import annotations

import argparse
from pathlib import Path

from gate.cli.output import show_outcome, stdout_for
from gate.cli.parsing import (
    Subcommand,
    audit_flags,
    examples,
    format_flag,
    path_flag,
    policy_flag,
    responses_flag,
    run_directory,
)
from gate.model.states import exit_state


def merge_flags(parser: argparse.ArgumentParser) -> None:
    policy_flag(parser, "the policy YAML file the shards ran")
    parser.add_argument(
        "shards",
        nargs="+",
        type=run_directory,
        metavar="DIR",
        help="the --out directory of each shard (or its result.json)",
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="write the merged result.json, reports and records here"
    )
    responses_flag(parser, "a product lane: the answers the shards judged (the same file every shard was given)")
    path_flag(parser, "--base-result", "a product lane: the base branch's run, paired slice by slice")
    audit_flags(parser)
    format_flag(parser, "the merged result")


def cmd_merge(args: argparse.Namespace) -> int:
    from gate.commands.steps import merge_into

    with stdout_for(args.format):
        merged = merge_into(
            args.policy, args.shards, args.out, args.responses, args.base_result, args.audit, args.audit_queue
        )
    show_outcome(merged.decision.result, args.out, args.format, args.policy)
    return exit_state(None, merged.decision.state)[1]


COMMAND = Subcommand(
    "merge",
    "combine the outputs of `gate run --shard I/N` into one decision",
    "Combine the --out directories of every shard of one run into one decision; a missing shard "
    "makes the result evaluation_incomplete.",
    merge_flags,
    examples=examples("gate merge --policy policies/example/policy.yaml gate-out-1 gate-out-2 --out gate-out"),
    handler=cmd_merge,
)
