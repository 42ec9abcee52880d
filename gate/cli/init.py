"""`gate init`: its flags, and the edge that writes a new suite to fill in."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gate.cli.parsing import USAGE_ROW, Subcommand, examples, exit_table
from gate.model.escape import log_text
from gate.model.textfit import say


def init_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", nargs="?", default=".", type=Path, help="where to write the suite (default: here)")
    parser.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        metavar="FILE",
        help="a CSV or JSON Lines file of labelled answers: user_input, response, label, slice (and optionally "
        "case_id, reference, evidence, group, reason)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the seed of the partition split (default 0)")
    parser.add_argument(
        "--model",
        default=None,
        metavar="NAME",
        help="the judge model (default gpt-4o-mini, a placeholder to choose); with $OPENAI_API_KEY set, init asks "
        "the provider when it shuts down",
    )


INIT_EXIT = exit_table(
    (
        (0, "written", "the suite is written (a file that existed is kept, never overwritten)"),
        USAGE_ROW,
        (3, "error", "an unexpected error"),
    )
)


def cmd_init(args: argparse.Namespace) -> int:
    from gate.commands.init import model_notes, run_init
    from gate.model.paths import shown_path
    from gate.model.policy import today

    report = run_init(args.dir, args.source, args.seed, args.model)
    if args.dir / "policy.yaml" in report.written:  # the model it names, and when it shuts down
        report.notes += model_notes(args.model, os.environ, today(), shown_path(args.dir / "policy.yaml"))
    out = sys.stdout
    for path in report.written:
        say(out, f"wrote {shown_path(path)}")
    for path in report.kept:
        say(out, f"kept {shown_path(path)} (it exists; gate init never overwrites a file)")
    for message in report.appended:
        say(out, log_text(message))
    for message in report.relabel:
        say(out, f"re-label first: {log_text(message)}")
    for message in report.notes:
        say(out, f"note: {log_text(message)}")
    policy = shown_path(args.dir / "policy.yaml")
    todo = ", ".join(_init_todo(args.dir))
    say(
        out,
        f"\nnext: {todo + ', then check' if todo else 'check'} the suite, and run it offline (that checks the wiring, "
        "not the prompt):\n"
        f"  gate validate --policy {policy}\n"
        f"  python scripts/demo_offline.py --policy {policy}",
        hang=len("next: "),
    )
    return 0


def _init_todo(suite: Path) -> list[str]:
    """What of the suite `gate init` wrote still says `TO FILL`: the next step asks for that only."""
    from gate.model.paths import shown_path
    from gate.validate.templates import TEMPLATE_MARK

    def marked(path: Path) -> bool:
        try:
            return TEMPLATE_MARK in path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return False

    controls, criterion = suite / "cases" / "controls.jsonl", suite / "prompts" / "criterion.txt"
    card = marked(suite / "DATASET_CARD.md")
    todo = []
    if marked(controls):
        todo.append(
            f"fill the six control templates in {shown_path(controls)} (gate validate refuses them until they are filled)"
        )
    if marked(criterion):
        todo.append(f"write the criterion in {shown_path(criterion)}" + (" and the dataset card" if card else ""))
    elif card:
        todo.append(f"write the dataset card {shown_path(suite / 'DATASET_CARD.md')}")
    return todo


COMMAND = Subcommand(
    "init",
    "write a new suite to fill in, from nothing or from labelled answers",
    "Write a policy with every key commented, a criterion prompt, a dataset card, the evidence, the "
    "cases (from --from, hashes computed, split into partitions by group) and the six control roles as "
    "templates that `gate validate` refuses until they are filled. Never overwrites a file: into a suite "
    "that exists, --from appends the answers it does not hold yet.",
    init_flags,
    examples=examples(
        "gate init suites/support --from answers.csv", "gate validate --policy suites/support/policy.yaml"
    ),
    exits=INIT_EXIT,
    handler=cmd_init,
)
