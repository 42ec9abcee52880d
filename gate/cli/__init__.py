"""The `gate` command line: a thin edge over validate, run, decide, publish and review.

Each command's module here holds its parser and the edge that calls the core (`gate/commands`,
`gate/measure`, ...) and prints what it returns; this one mounts them and runs one. Every
user-facing error is one paragraph naming the file, the field and the fix; exit 2 for usage
errors. Building the parser imports nothing heavy: a command loads what it needs when it runs,
and ragas only when a model call is due. It may import every stage; nothing imports it."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Sequence
from pathlib import Path

from gate import __version__
from gate.cli import calibrate, compare, decide, init, merge, publish, review, run, validate
from gate.cli.parsing import EXIT_CODES, Help, Parser, add_command
from gate.model.process import exit_process, guarded_output, without_pydantic_plugins

SUBCOMMANDS = (  # in the order `gate --help` lists them
    init.COMMAND,
    validate.COMMAND,
    run.COMMAND,
    decide.COMMAND,
    merge.COMMAND,
    calibrate.COMMAND,
    compare.COMMAND,
    publish.COMMAND,
    review.COMMAND,
)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="gate",
        description="A CI release gate: judge a reviewed pass/fail criterion with a Ragas LLM judge and decide "
        "one of four states. Run `gate COMMAND --help` for a command's flags.",
        epilog=EXIT_CODES,
        formatter_class=Help,
    )
    p.add_argument("--version", action="version", version=f"ragas-gate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    for command in SUBCOMMANDS:
        command.add_flags(add_command(sub, command))
    return p


COMMANDS = {command.name: command.handler for command in SUBCOMMANDS}


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The parser, built once a process: parsing leaves it as it was, and a process that runs `main`
    many times (the tests, a script calling it) need not build its hundreds of flags each time."""
    return build_parser()


def report_failure(args: argparse.Namespace | None, exc: BaseException) -> int:
    """A command that raised: its message and exit code (gate.commands.steps.exit_on_error); `gate run`
    and `gate decide --out` still write a result that claims no verdict."""
    from gate.commands import crash
    from gate.commands.steps import exit_on_error
    from gate.model.records import RECORDS_FILE
    from gate.plan.shard import ShardError, parse_shard

    command = getattr(args, "command", None)
    out_dir: Path | None = getattr(args, "out", None)
    write_result = None
    if (
        args is not None
        and out_dir is not None
        and command in ("run", "decide")
        and not getattr(args, "dry_run", False)
    ):
        sources = [out_dir / RECORDS_FILE] if command == "run" else list(args.records)
        try:
            shard = parse_shard(args.shard) if getattr(args, "shard", None) is not None else None
        except ShardError:
            shard = None

        def write_result(exc: BaseException) -> str | None:
            return crash.write_crash_note(exc, args.policy, args.lane, out_dir, sources, shard=shard)

    what = f"`gate {command}`" if command else "`gate`"
    return exit_on_error(exc, sys.stderr, what, write_result, resumable=command == "run")


def main(argv: Sequence[str] | None = None) -> int:
    without_pydantic_plugins()  # the gate's own models want none (tens of ms of every start)
    with guarded_output():  # no line this command prints is a workflow command
        args: argparse.Namespace | None = None
        try:
            args = _parser().parse_args(argv)
            return COMMANDS[args.command](args)
        except (Exception, KeyboardInterrupt) as exc:
            # a bug or a broken install is never a verdict
            return report_failure(args, exc)


def main_entry() -> None:
    exit_process(main())
