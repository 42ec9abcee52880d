"""What every command's parser shares: the parser that reports a usage error, the help layout, the
exit-code tables, and the flags several commands take."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gate.model.errors import UsageError


class Parser(argparse.ArgumentParser):
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


def seconds(value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, not {value!r}")
    return v


HELP_WIDTH = 100  # every help page fits a terminal this wide


def exit_table(rows: Sequence[tuple[int | str, str, str]]) -> str:
    """`exit codes:` and one row a code; a meaning that wraps continues under its own first word."""
    import textwrap

    code_width = max(2, *(len(str(code)) + 1 for code, _, _ in rows))
    name_width = max(len(name) for _, name, _ in rows)
    lines = ["exit codes:"]
    for code, name, meaning in rows:
        lead = f"  {code!s:<{code_width}} {name:<{name_width}}  "
        lines += textwrap.wrap(
            meaning, HELP_WIDTH - 2, initial_indent=lead, subsequent_indent=" " * len(lead), break_on_hyphens=False
        )
    return "\n".join(lines)


USAGE_ROW = (
    2,
    "usage",
    "bad flags, or a file that cannot be read as given (the message names the file, the field and the fix)",
)


STATE_ROWS: tuple[tuple[int | str, str, str], ...] = (
    (0, "passed", "nothing blocks"),
    (1, "quality_failed", "the change is wrong: a false-pass limit, a failed control, a broken case (input_contract)"),
    USAGE_ROW,
    (
        3,
        "evaluation_incomplete",
        "the evidence is not complete: key, provider, budget, unrun cases, an unexpected error",
    ),
    (4, "review_required", "a person must look at the cases named"),
)


EXIT_CODES = exit_table(STATE_ROWS)


def examples(*lines: str) -> str:
    return "\n".join(["examples:", *(f"  {line}" for line in lines)])


class Help(argparse.HelpFormatter):
    """Descriptions wrap to the terminal (at most HELP_WIDTH); the exit-code, environment and example
    blocks keep their lines."""

    def __init__(self, prog: str) -> None:
        import shutil

        super().__init__(prog, width=min(shutil.get_terminal_size().columns, HELP_WIDTH) - 2)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_command(sub: Any, command: Subcommand) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        command.name,
        help=command.summary,
        description=command.description,
        epilog="\n\n".join(part for part in (command.epilog, command.examples, command.exits) if part),
        formatter_class=Help,
    )
    return parser


def format_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help=f"text for a person (colour on a terminal, plain when piped) or json: {what} on stdout",
    )


def policy_flag(parser: argparse.ArgumentParser, help: str = "the policy YAML file") -> None:
    parser.add_argument("--policy", required=True, help=help)


def _records_path(value: str) -> Path:
    from gate.model.paths import run_file
    from gate.model.records import RECORDS_FILE

    return run_file(value, RECORDS_FILE)


def run_directory(value: str) -> Path:
    from gate.model.paths import run_directory

    return run_directory(value)


def records_flag(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--records", required=True, nargs="+", type=_records_path, metavar="RUN", help=help)


def path_flag(parser: argparse.ArgumentParser, flag: str, help: str, default: Path | None = None) -> None:
    parser.add_argument(flag, type=Path, default=default, help=help)


def responses_flag(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--responses", type=Path, default=None, metavar="FILE", help=help)


def audit_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--audit",
        type=Path,
        default=None,
        metavar="LEDGER",
        help="a product lane: the ledger of people's labels on this run's audit queue (file or directory); "
        "with usable labels the audit decides each slice",
    )
    parser.add_argument(
        "--audit-queue",
        type=Path,
        default=None,
        metavar="QUEUE",
        help="the audit queue the labels were made on (default: the run's seeded draw rebuilt)",
    )


def max_cost_flag(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--max-cost", type=_cost, default=None, help=help)


@dataclass(frozen=True)
class Subcommand:
    name: str
    summary: str  # the line `gate --help` lists it with
    description: str
    add_flags: Callable[[argparse.ArgumentParser], None]
    epilog: str = ""  # before the examples
    examples: str = ""
    exits: str = EXIT_CODES  # this command's own exit codes
    handler: Callable[[argparse.Namespace], int] = field(kw_only=True)  # runs it: its exit code


def positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {value!r}")
    return n
