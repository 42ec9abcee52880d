"""`gate calibrate`: its flags, and the edge that measures the judge (or a candidate judge beside it)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from gate.cli.parsing import (
    USAGE_ROW,
    Subcommand,
    examples,
    exit_table,
    max_cost_flag,
    path_flag,
    policy_flag,
    records_flag,
)
from gate.model.errors import UsageError
from gate.model.escape import log_text
from gate.model.states import State
from gate.model.textfit import say

CALIBRATE_EXIT = exit_table(
    (
        (0, "written", "the outputs are written; whatever they show, nothing is decided here"),
        USAGE_ROW,
        (
            3,
            "incomplete",
            "--candidate-model: cannot tell, a labelled case or a control has no verdict from the candidate (or an unexpected error)",
        ),
    )
)


def calibrate_flags(parser: argparse.ArgumentParser) -> None:
    policy_flag(parser)
    records_flag(parser, "runs to measure: each a `gate run --out` directory or its records.jsonl")
    path_flag(parser, "--causes", "classified disagreements: JSONL or CSV case_id,cause")
    path_flag(
        parser,
        "--out",
        "write calibration.json, .md and .svg here (default gate-calibration/)",
        Path("gate-calibration"),
    )
    parser.add_argument(
        "--candidate-model",
        default=None,
        metavar="NEW",
        help="a model to move the judge to: judge the records' lane's labelled cases with it (paid, under the "
        "cost boundary) and write both judges side by side, migration.json and .md; --records are the current "
        "judge's run of the calibration lane",
    )
    parser.add_argument(
        "--candidate-price",
        type=_price,
        default=None,
        metavar="IN,OUT",
        help="the candidate's prices per million input and output tokens (default: the policy's)",
    )
    max_cost_flag(parser, "with --candidate-model: the candidate's boundary (default limits.max_total_cost)")
    parser.add_argument("--no-cache", action="store_true", help="with --candidate-model: judge without the cache")


def _price(value: str) -> tuple[float, float]:
    parts = value.split(",")
    try:
        prices = tuple(float(p) for p in parts)
    except ValueError:
        prices = ()
    if len(prices) != 2 or not all(math.isfinite(p) and p >= 0 for p in prices):
        raise argparse.ArgumentTypeError(
            f"expected two prices per million tokens, input,output (e.g. 0.4,1.6), not {value!r}"
        )
    return prices[0], prices[1]


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.candidate_model is not None:
        return _calibrate_candidate(args)
    if args.candidate_price is not None or args.max_cost is not None or args.no_cache:
        raise UsageError(
            "--candidate-price, --max-cost and --no-cache apply to --candidate-model; fix: add it or drop them"
        )
    from gate.measure.calibrate.command import print_summary, run_calibrate

    print_summary(run_calibrate(args.policy, args.records, args.causes, args.out), sys.stdout)
    return 0


def _calibrate_candidate(args: argparse.Namespace) -> int:
    """`gate calibrate --candidate-model NEW`: 0 once written with a verdict; 3 when it cannot tell (a labelled
    case or a control without a verdict from the candidate)."""
    from gate.commands.migrate import MigrationOptions, run_migration, summary
    from gate.model.policy import Price

    price = args.candidate_price
    opts = MigrationOptions(
        policy=Path(args.policy),
        records=args.records,
        model=args.candidate_model,
        out_dir=args.out,
        price=Price(input_per_mtok=price[0], output_per_mtok=price[1]) if price is not None else None,
        max_cost=args.max_cost,
        use_cache=not args.no_cache,
        causes=args.causes,
    )
    migration = run_migration(opts)
    for line in summary(migration):
        say(sys.stdout, log_text(line), hang=2)
    return State.EVALUATION_INCOMPLETE.exit_code if migration.cannot_tell else 0


COMMAND = Subcommand(
    "calibrate",
    "measure the judge against human labels (no model call), or a candidate judge beside it",
    "Measure agreement, false-pass and false-fail rates of the judge against the human labels, per slice.",
    calibrate_flags,
    epilog="With --candidate-model, the records' lane is judged again by the candidate (a paid run into\n"
    "OUT/candidate-run/), and OUT gets the candidate's calibration.json beside migration.json and .md:\n"
    "both judges side by side, and the reviewed change that would adopt the candidate (the policy is\n"
    "never edited). docs/PROVIDERS.md walks through moving a judge whose model retires.",
    examples=examples(
        "gate calibrate --policy policies/example/policy.yaml --records gate-out-calibration",
        "gate calibrate --policy policies/example/policy.yaml --records gate-out-calibration \\",
        "    --causes causes.jsonl",
        "gate calibrate --policy policies/example/policy.yaml --records gate-out-calibration \\",
        "    --candidate-model NEW --out gate-migration",
    ),
    exits=CALIBRATE_EXIT,
    handler=cmd_calibrate,
)
