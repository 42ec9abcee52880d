"""`gate run`: its flags, and the edge that judges a lane and prints the decision."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gate.cli.output import format_findings_text, show_outcome, stdout_for
from gate.cli.parsing import (
    Subcommand,
    audit_flags,
    examples,
    format_flag,
    max_cost_flag,
    path_flag,
    policy_flag,
    responses_flag,
    seconds,
)
from gate.model.errors import UsageError
from gate.model.states import blocking_findings, exit_state

RUN_ENV = """environment variables:
  $<evaluator.api_key_env>  the judge's API key, named by the policy (default OPENAI_API_KEY)
  OPENAI_BASE_URL           the provider's base URL when the policy sets no evaluator.base_url
  GATE_WORKERS              the number of judging processes (default: from max_concurrency)
  GATE_DEBUG=1              print the traceback of an unexpected error
  NO_COLOR                  set (not empty): plain text on a terminal too, no escape sequence"""


def _order_seed(text: str) -> str:
    """--order-seed: any short printable text (it is hashed with each case id)."""
    if not text or len(text) > 200 or not text.isprintable():
        raise argparse.ArgumentTypeError(
            "the seed must be 1 to 200 printable characters: the `product.order_seed` of the run's result.json that "
            "this run replays; fix: pass it as it is written there"
        )
    return text


def run_flags(parser: argparse.ArgumentParser) -> None:
    policy_flag(parser)
    parser.add_argument(
        "--lane", default="pr", help="pr, release, scheduled or any lane the policy defines (default pr)"
    )
    parser.add_argument("--out", default="gate-out", type=Path, help="the output directory (default gate-out/)")
    max_cost_flag(parser, "a lower cost boundary than the policy's, in its currency")
    parser.add_argument(
        "--resume", action="store_true", help="reuse the completed judgments in --out and the cache; pay for the rest"
    )
    parser.add_argument(
        "--rejudge-parse-errors",
        action="store_true",
        help="with --resume: send again the judgments whose reply could not be read (parse_error, invalid_label), "
        "which --resume otherwise keeps: the same judge would likely answer the same",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan and the estimated cost; call no model; exit with the state the run has before any call",
    )
    path_flag(parser, "--cache-dir", "the judgment cache (default: the policy's cache_dir or .gate-cache)")
    parser.add_argument("--no-cache", action="store_true", help="judge without reading or writing the cache")
    path_flag(
        parser,
        "--base-result",
        "a base run's --out directory: the report shows the trend's change (a product lane: each slice's answers "
        "paired with the base's)",
    )
    responses_flag(parser, "a product lane's answers: one JSON line per case {case_id, response, generation}")
    audit_flags(parser)
    parser.add_argument(
        "--order-seed",
        default=None,
        metavar="S",
        type=_order_seed,
        help="a product lane: replay a recorded run's seed (its result.json's product.order_seed), which fixes the "
        "order its answers are judged in and its audit plan (default: the run fixes one when it starts: the "
        "workflow run's in GitHub Actions, where this flag is refused, else a fresh random one)",
    )
    parser.add_argument(
        "--shard", default=None, metavar="I/N", help="judge shard I of N (a stable hash share; controls in every shard)"
    )
    parser.add_argument(
        "--batch",
        choices=("submit", "collect", "wait"),
        default=None,
        help="judge through the provider's Batch API at its batch prices: controls live, then submit the rest, "
        "collect the answers later (same --out), or wait for them",
    )
    parser.add_argument(
        "--batch-timeout",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="--batch wait: stop polling after this long (batch_pending, exit 3; collect later)",
    )
    parser.add_argument(
        "--batch-poll", type=seconds, default=60.0, metavar="SECONDS", help="--batch wait: seconds between polls"
    )
    format_flag(parser, "the result (result.json's content)")


def cmd_run(args: argparse.Namespace) -> int:
    from gate.commands.run import BatchOptions, RunOptions
    from gate.commands.steps import run_into
    from gate.plan.shard import parse_shard

    if args.batch is None and args.batch_timeout is not None:
        raise UsageError("--batch-timeout applies to --batch wait; fix: add --batch wait or drop --batch-timeout")

    opts = RunOptions(
        lane=args.lane,
        out_dir=args.out,
        max_cost=args.max_cost,
        resume=args.resume,
        rejudge_parse_errors=args.rejudge_parse_errors,
        dry_run=args.dry_run,
        cache_dir=args.cache_dir,
        use_cache=not args.no_cache,
        base_result=args.base_result,
        shard=parse_shard(args.shard) if args.shard is not None else None,
        batch=BatchOptions(args.batch, args.batch_timeout, args.batch_poll) if args.batch else None,
        responses=args.responses,
        order_seed=args.order_seed,
        audit=args.audit,
        audit_queue=args.audit_queue,
    )
    with stdout_for(args.format):
        decision = run_into(args.policy, opts)
    if args.dry_run:
        from gate.commands.dry_run import outcome_line, state_before_any_call

        blocking = blocking_findings(decision.blockers)
        code = exit_state(None, state_before_any_call(decision.blockers))[1]
        if args.format == "json":
            show_outcome(decision.result, None, "json")
        else:
            if blocking:
                format_findings_text(blocking, sys.stdout)
            sys.stdout.write(outcome_line(decision.blockers, code))
        return code
    show_outcome(decision.result, args.out, args.format, args.policy, cache=_cache_row(args))
    return exit_state(None, decision.state)[1]


def _cache_row(args: argparse.Namespace) -> tuple[str, str] | None:
    """Where this run's judgment cache is (a Files row), so a user knows what a re-run reads."""
    if args.no_cache:
        return "(no cache)", "--no-cache: nothing was read from or written to the judgment cache"
    from gate.model.errors import GateError
    from gate.model.paths import shown_path
    from gate.model.policy import load_policy
    from gate.plan.inputs import cache_dir_for

    try:
        where = cache_dir_for(load_policy(args.policy), True, args.cache_dir)
    except GateError:
        return None
    if where is None:
        return None
    return (
        f"{shown_path(where)}/",
        "the judgment cache: a re-run of these judgments is served from it (--no-cache skips it)",
    )


COMMAND = Subcommand(
    "run",
    "judge a lane's cases and decide",
    "Judge the lane's cases with the policy's LLM judge, then decide and write result.json, "
    "report.md, summary.md, junit.xml and records.jsonl in --out.",
    run_flags,
    RUN_ENV,
    examples(
        "gate run --policy policies/example/policy.yaml --lane pr --out gate-out",
        "gate run --policy policies/example/policy.yaml --lane pr --shard 1/2 --out gate-out-1",
    ),
    handler=cmd_run,
)
