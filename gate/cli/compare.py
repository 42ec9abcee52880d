"""`gate compare`: its flags, and the edge that compares two runs case by case."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gate.cli.parsing import USAGE_ROW, Subcommand, examples, exit_table, path_flag

MEASURE_EXIT = exit_table(
    (
        (0, "written", "the outputs are written; whatever they show, nothing is decided here"),
        USAGE_ROW,
        (3, "error", "an unexpected error"),
    )
)


def compare_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, type=Path, help="the base run's --out directory or records.jsonl")
    parser.add_argument("--head", required=True, type=Path, help="the head run's --out directory or records.jsonl")
    path_flag(parser, "--policy", "mark transitions in critical slices (max_false_passes 0)")
    path_flag(parser, "--out", "write compare.json and compare.md here (default gate-compare/)", Path("gate-compare"))


def cmd_compare(args: argparse.Namespace) -> int:
    from gate.measure.compare import compare_paths
    from gate.measure.compare_report import render_compare

    comparison = compare_paths(args.base, args.head, args.policy)
    markdown = render_compare(comparison)
    # An unwritable --out is an unexpected error: `main` reports it and exits 3.
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps(comparison.to_dict(), indent=2) + "\n", encoding="utf-8")
    (args.out / "compare.md").write_text(markdown, encoding="utf-8")
    from gate.measure.compare_report import print_compare
    from gate.report.terminal import make_console

    print_compare(comparison, [args.out / "compare.json", args.out / "compare.md"], make_console(sys.stdout))
    return 0


COMMAND = Subcommand(
    "compare",
    "verdict transitions between two runs and the first diverging artifact",
    "Compare two runs case by case: which verdicts changed and the first input that differs.",
    compare_flags,
    examples=examples("gate compare --base gate-base --head gate-out --policy policies/example/policy.yaml"),
    exits=MEASURE_EXIT,
    handler=cmd_compare,
)
