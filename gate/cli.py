"""The `gate` command line: a thin layer over validate, run, decide and publish.

Every user-facing error is one paragraph naming the file, the field and the fix; exit 2 for
usage errors. ragas is never imported here: only `gate run` loads it, when a call is due.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gate import __version__
from gate.model.errors import UsageError
from gate.model.escape import log_text
from gate.model.process import exit_process, gc_paused, guarded_output, without_pydantic_plugins
from gate.model.states import Finding, State, blocking_findings, exit_state
from gate.model.textfit import say
from gate.model.wording import agree, plural

if TYPE_CHECKING:
    from gate.model.result import Result
    from gate.review.label_studio_ledger import Plan

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


def _seconds(value: str) -> float:
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
VALIDATE_EXIT = exit_table(
    (
        (0, "passed", "no finding"),
        (1, "findings", "a finding a run would block on or route to review (a broken case is input_contract)"),
        (
            2,
            "usage",
            "bad flags, or a policy that cannot be read or is invalid (the message names the key and the fix)",
        ),
        (3, "error", "an unexpected error (nothing was checked)"),
    )
)
MEASURE_EXIT = exit_table(
    (
        (0, "written", "the outputs are written; whatever they show, nothing is decided here"),
        USAGE_ROW,
        (3, "error", "an unexpected error"),
    )
)
CALIBRATE_EXIT = exit_table(
    (
        (0, "written", "the outputs are written; whatever they show, nothing is decided here"),
        USAGE_ROW,
        (
            3,
            "incomplete",
            "--candidate-model: the candidate's run judged only part of the cases (or an unexpected error)",
        ),
    )
)
PUBLISH_EXIT = exit_table(
    (
        ("0 1 3 4", "the state", "the code of the published result's state, whether or not GitHub took it"),
        (2, "usage", "the result cannot be read (the message names the file and the fix)"),
    )
)


def examples(*lines: str) -> str:
    return "\n".join(["examples:", *(f"  {line}" for line in lines)])


PUBLISH_ENV = """environment variables read by `gate publish`:
  GITHUB_TOKEN (or GH_TOKEN)  token allowed to write checks and pull-request comments
  GITHUB_REPOSITORY           owner/name of the repository to publish on
  GITHUB_EVENT_PATH           the event payload: the PR number and its head commit
  GITHUB_SHA                  the commit to attach the check run to when there is no PR event
  GITHUB_API_URL              the API root (default https://api.github.com; set it on
                              GitHub Enterprise)
  GATE_COMMENT                `off` posts the check run only, no PR comment (default: sticky)
  GATE_COMMENT_AUTHOR         the login whose sticky comment may be edited (default: the token's)
  GATE_POLICY_PATH            the file the check run's annotations point at (default result.json)
Without GITHUB_TOKEN or GITHUB_REPOSITORY nothing is published (a warning); the exit code is the
result's state code either way."""

RUN_ENV = """environment variables:
  $<evaluator.api_key_env>  the judge's API key, named by the policy (default OPENAI_API_KEY)
  OPENAI_BASE_URL           the provider's base URL when the policy sets no evaluator.base_url
  GATE_WORKERS              the number of judging processes (default: from max_concurrency)
  GATE_DEBUG=1              print the traceback of an unexpected error
  NO_COLOR                  set (not empty): plain text on a terminal too, no escape sequence"""


class _Help(argparse.HelpFormatter):
    """Descriptions wrap to the terminal (at most HELP_WIDTH); the exit-code, environment and example
    blocks keep their lines."""

    def __init__(self, prog: str) -> None:
        import shutil

        super().__init__(prog, width=min(shutil.get_terminal_size().columns, HELP_WIDTH) - 2)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _command(sub: Any, command: Subcommand) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        command.name,
        help=command.summary,
        description=command.description,
        epilog="\n\n".join(part for part in (command.epilog, command.examples, command.exits) if part),
        formatter_class=_Help,
    )
    return parser


def _format_flag(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help=f"text for a person (colour on a terminal, plain when piped) or json: {what} on stdout",
    )


def _policy_flag(parser: argparse.ArgumentParser, help: str = "the policy YAML file") -> None:
    parser.add_argument("--policy", required=True, help=help)


def _records_path(value: str) -> Path:
    from gate.model.paths import run_file
    from gate.model.records import RECORDS_FILE

    return run_file(value, RECORDS_FILE)


def _run_directory(value: str) -> Path:
    from gate.model.paths import run_directory

    return run_directory(value)


def _records_flag(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--records", required=True, nargs="+", type=_records_path, metavar="RUN", help=help)


def _path_flag(parser: argparse.ArgumentParser, flag: str, help: str, default: Path | None = None) -> None:
    parser.add_argument(flag, type=Path, default=default, help=help)


def _responses_flag(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--responses", type=Path, default=None, metavar="FILE", help=help)


def _audit_flags(parser: argparse.ArgumentParser) -> None:
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


def _max_cost_flag(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--max-cost", type=_cost, default=None, help=help)


def _validate_flags(parser: argparse.ArgumentParser) -> None:
    _policy_flag(parser, "the policy YAML file (cases and evidence are relative to it)")
    parser.add_argument(
        "--lane",
        default=None,
        help="check this lane only, as a run of it would (default: every lane, no network)",
    )
    _format_flag(parser, "the findings")


def _order_seed(text: str) -> str:
    """--order-seed: any short printable text (it is hashed with each case id)."""
    if not text or len(text) > 200 or not text.isprintable():
        raise argparse.ArgumentTypeError(
            "the seed must be 1 to 200 printable characters: the `product.order_seed` of the run's result.json that "
            "this run replays; fix: pass it as it is written there"
        )
    return text


def _run_flags(parser: argparse.ArgumentParser) -> None:
    _policy_flag(parser)
    parser.add_argument(
        "--lane", default="pr", help="pr, release, scheduled or any lane the policy defines (default pr)"
    )
    parser.add_argument("--out", default="gate-out", type=Path, help="the output directory (default gate-out/)")
    _max_cost_flag(parser, "a lower cost boundary than the policy's, in its currency")
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
    _path_flag(parser, "--cache-dir", "the judgment cache (default: the policy's cache_dir or .gate-cache)")
    parser.add_argument("--no-cache", action="store_true", help="judge without reading or writing the cache")
    _path_flag(
        parser,
        "--base-result",
        "a base run's --out directory: the report shows the trend's change (a product lane: each slice's answers "
        "paired with the base's)",
    )
    _responses_flag(parser, "a product lane's answers: one JSON line per case {case_id, response, generation}")
    _audit_flags(parser)
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
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="--batch wait: stop polling after this long (batch_pending, exit 3; collect later)",
    )
    parser.add_argument(
        "--batch-poll", type=_seconds, default=60.0, metavar="SECONDS", help="--batch wait: seconds between polls"
    )
    _format_flag(parser, "the result (result.json's content)")


def _decide_flags(parser: argparse.ArgumentParser) -> None:
    _policy_flag(parser)
    _records_flag(parser, "runs to decide from: each a `gate run --out` directory or its records.jsonl")
    parser.add_argument("--lane", default=None, help="the lane the records are for (default: the one they name)")
    _path_flag(parser, "--out", "write result.json and the reports here (default: print only)")
    _max_cost_flag(parser, "a lower cost boundary than the policy's")
    _responses_flag(parser, "a product lane: the answers the run judged (a record of another answer is then stale)")
    _path_flag(parser, "--base-result", "a product lane: the base branch's run, paired slice by slice")
    _audit_flags(parser)
    _format_flag(parser, "the result (result.json's content)")


def _merge_flags(parser: argparse.ArgumentParser) -> None:
    _policy_flag(parser, "the policy YAML file the shards ran")
    parser.add_argument(
        "shards",
        nargs="+",
        type=_run_directory,
        metavar="DIR",
        help="the --out directory of each shard (or its result.json)",
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="write the merged result.json, reports and records here"
    )
    _responses_flag(parser, "a product lane: the answers the shards judged (the same file every shard was given)")
    _path_flag(parser, "--base-result", "a product lane: the base branch's run, paired slice by slice")
    _audit_flags(parser)
    _format_flag(parser, "the merged result")


def _calibrate_flags(parser: argparse.ArgumentParser) -> None:
    _policy_flag(parser)
    _records_flag(parser, "runs to measure: each a `gate run --out` directory or its records.jsonl")
    _path_flag(parser, "--causes", "classified disagreements: JSONL or CSV case_id,cause")
    _path_flag(
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
    _max_cost_flag(parser, "with --candidate-model: the candidate's boundary (default limits.max_total_cost)")
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


def _compare_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", required=True, type=Path, help="the base run's --out directory or records.jsonl")
    parser.add_argument("--head", required=True, type=Path, help="the head run's --out directory or records.jsonl")
    _path_flag(parser, "--policy", "mark transitions in critical slices (max_false_passes 0)")
    _path_flag(parser, "--out", "write compare.json and compare.md here (default gate-compare/)", Path("gate-compare"))


def _publish_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--result", required=True, type=_run_directory, metavar="RUN", help="a run's --out directory or its result.json"
    )


@dataclass(frozen=True)
class Subcommand:
    name: str
    summary: str  # the line `gate --help` lists it with
    description: str
    add_flags: Callable[[argparse.ArgumentParser], None]
    epilog: str = ""  # before the examples
    examples: str = ""
    exits: str = EXIT_CODES  # this command's own exit codes


def _init_flags(parser: argparse.ArgumentParser) -> None:
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


REVIEW_EXIT = exit_table(
    (
        (0, "done", "the file is written (or the figures shown)"),
        USAGE_ROW,
        (3, "error", "an unexpected error"),
    )
)


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {value!r}")
    return n


def _review_queue_flags(parser: argparse.ArgumentParser) -> None:
    _policy_flag(parser, "the policy the labels are for (its allowed labels and rubric)")
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        type=Path,
        metavar="SOURCE",
        help="a product run's --out (the audit), a drift run's --out, a metric run's --out, or a CSV/JSONL of answers",
    )
    parser.add_argument(
        "--sample",
        type=_positive,
        metavar="N",
        help="draw the first N of each slice's seeded order (default: all); refused for a product run, whose "
        "queue is the audit plan the run fixed",
    )
    parser.add_argument(
        "--seed",
        help="the draw's seed (default: the source's sha256); refused for a product run, whose seed the run fixed",
    )
    _path_flag(
        parser, "--responses", "the answers a product run judged, when it kept no copy (records.clear_text false)"
    )
    _path_flag(
        parser,
        "--ledger",
        "a product run: the ledger whose earlier labels on the plan's answers carry over (default: the lane's "
        "`audit` ledger, when the policy names one)",
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="QUEUE.jsonl", help="the queue to write (a new file)"
    )


def _serve_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", type=Path, metavar="QUEUE", help="the queue file `gate review queue` wrote")
    parser.add_argument(
        "--ledger",
        required=True,
        help="where labels go: a .jsonl file, or a directory (each reviewer appends to <name>.jsonl in it; "
        "a path ending in / is made a directory when it does not exist)",
    )
    parser.add_argument("--port", type=int, default=8765, help="the port (default 8765; 0 lets the system pick)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1; another needs --token)"
    )
    parser.add_argument(
        "--token", default=None, help="a secret of 16 characters or more that every request must carry (in the address)"
    )
    _path_flag(parser, "--policy", "the policy (default: the one the queue's header names, relative to the queue)")
    parser.add_argument(
        "--reviewers-per-item",
        type=_positive,
        metavar="K",
        help="independent labels an item needs before it leaves the queue (default: the policy's "
        "review.reviewers_per_item, 2); give status and export the same",
    )
    parser.add_argument(
        "--allow-self-adjudication",
        action="store_true",
        help="let an adjudicator settle an item they labelled (each such line says so)",
    )


SERVE_EXIT = exit_table(
    (
        (0, "stopped", "the page was stopped (Ctrl-C); every label it confirmed is in the ledger"),
        (
            2,
            "usage",
            "bad flags, or a queue or ledger line the gate cannot use (the message names the file and the line)",
        ),
        (3, "error", "an unexpected error"),
    )
)


def _queue_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("queue", type=Path, metavar="QUEUE", help="the queue `gate review queue` wrote")


def _ledger_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--ledger",
        required=True,
        type=Path,
        metavar="LEDGER",
        help="the ledger: a JSON Lines file, or a directory of one file per reviewer (read as their union)",
    )


def _labelled_flags(parser: argparse.ArgumentParser) -> None:
    _path_flag(parser, "--policy", "the policy (default: the one the queue's header names, relative to the queue)")
    parser.add_argument(
        "--reviewers-per-item",
        type=_positive,
        metavar="K",
        help="independent labels an item needs (default: the policy's review.reviewers_per_item, 2)",
    )


def _review_status_flags(parser: argparse.ArgumentParser) -> None:
    _queue_arg(parser)
    _ledger_flag(parser)
    _labelled_flags(parser)
    _format_flag(parser, "the figures per slice")


def _review_export_flags(parser: argparse.ArgumentParser) -> None:
    _queue_arg(parser)
    parser.add_argument(
        "--ledger",
        type=Path,
        metavar="LEDGER",
        help="the ledger (a file, or a directory of one file per reviewer); needed for --format cases",
    )
    parser.add_argument(
        "--partition", help="the partition the new cases go into (e.g. calibration); for --format cases"
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        help="cases: a new CASES.jsonl (never an existing file); label-studio: a directory for tasks.json and config.xml",
    )
    parser.add_argument(
        "--format",
        choices=["cases", "label-studio"],
        default="cases",
        help="cases (the final labels as a new dataset version's cases) or label-studio (tasks and config to label there)",
    )
    _labelled_flags(parser)
    parser.add_argument(
        "--accept-low-agreement",
        action="store_true",
        help="export a slice whose alpha is below review.min_alpha anyway (each of its cases records it)",
    )
    parser.add_argument(
        "--partial",
        action="store_true",
        help="export while items still await adjudication, leaving them out (the output and the dataset card "
        "list them)",
    )


def _review_import_flags(parser: argparse.ArgumentParser) -> None:
    _queue_arg(parser)
    _ledger_flag(parser)
    parser.add_argument(
        "--format", choices=["label-studio"], required=True, help="the tool the export comes from (label-studio)"
    )
    parser.add_argument(
        "export", type=Path, metavar="EXPORT.json", help="Label Studio's JSON or JSON_MIN export of the project"
    )
    parser.add_argument(
        "--server",
        default="default",
        metavar="NAME",
        help="a name for the Label Studio server the export comes from (default: default); each server numbers its "
        "annotations and users from 1, so another server needs a name of its own, and its user 1 is another person "
        "(label-studio:NAME:1)",
    )
    parser.add_argument(
        "--blind",
        action="store_true",
        help="the Label Studio project hid other annotators' work (recorded in each line; default: not blind)",
    )


def _review_chain_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "ledger",
        type=Path,
        metavar="LEDGER",
        help="the ledger to link: a JSON Lines file, or a directory of one file per reviewer",
    )


REVIEW_EXPORT_EXIT = exit_table(
    (
        (0, "written", "the cases (or the Label Studio files) are written"),
        (
            1,
            "refused",
            "a slice's alpha is below review.min_alpha (--accept-low-agreement), or items await adjudication "
            "(--partial): nothing written",
        ),
        USAGE_ROW,
        (3, "error", "an unexpected error"),
    )
)


REVIEW_ACTIONS = (  # `gate review ACTION`, in the order `gate review --help` lists them
    Subcommand(
        "queue",
        "build a queue of answers for people to label, with nothing of the judge",
        "Build a review queue (JSON Lines) from a product run (the audit), a drift run, a metric run, or a "
        "file of answers; the queue never holds the judge's verdict, reason or model, nor any label.",
        _review_queue_flags,
        examples=examples(
            "gate review queue --policy policies/example/policy.yaml --from gate-out --out queue.jsonl",
            "gate review queue --policy policies/example/policy.yaml --from answers.csv --out queue.jsonl",
        ),
        exits=REVIEW_EXIT,
    ),
    Subcommand(
        "serve",
        "the labelling page: reviewers label a queue, an adjudicator settles disagreements",
        "Serve a local web page on which people label the queue's items one at a time, blind to the judge "
        "and to each other, and a page that settles disagreements. Every label is a line appended to the "
        "ledger, on disk before the page moves on.",
        _serve_flags,
        examples=examples(
            "gate review serve queue.jsonl --ledger labels/",
            'gate review serve queue.jsonl --ledger labels/ --host 0.0.0.0 --token "$SECRET"',
        ),
        exits=SERVE_EXIT,
    ),
    Subcommand(
        "status",
        "how far labelling has come and whether people agree, per slice",
        "Per slice: items, items with K labels, the unanimous share, Krippendorff's alpha with a bootstrap 95% "
        "interval, Cohen's kappa for two reviewers, abstentions and disagreements awaiting adjudication.",
        _review_status_flags,
        examples=examples("gate review status queue.jsonl --ledger labels/"),
        exits=REVIEW_EXIT,
    ),
    Subcommand(
        "export",
        "the final labels as the cases of a new dataset version, or tasks for Label Studio",
        "Write one case per item with a unanimous or adjudicated label (a final abstain is listed, not exported), "
        "with full provenance; a case a label corrects gets a new id that supersedes it. --format label-studio "
        "writes tasks.json and config.xml instead, with nothing of the judge.",
        _review_export_flags,
        examples=examples(
            "gate review export queue.jsonl --ledger labels/ --partition calibration --out new-cases.jsonl",
            "gate review export queue.jsonl --format label-studio --out label-studio/",
        ),
        exits=REVIEW_EXPORT_EXIT,
    ),
    Subcommand(
        "import",
        "append the annotations of a Label Studio export to the ledger",
        "Read Label Studio's JSON or JSON_MIN export of a project made from `export --format label-studio`: each "
        "annotation not skipped becomes a ledger line by the annotator's email when the export carries it, else "
        "label-studio:<server>:<user id>. An annotation edited there since the last import replaces its line (a "
        "retraction, then the new label), one deleted there is retracted; the same export again appends nothing. "
        "A task whose text was changed in Label Studio is exit 2; a task made there by hand is skipped.",
        _review_import_flags,
        examples=examples("gate review import queue.jsonl --ledger labels/ --format label-studio export.json"),
        exits=REVIEW_EXIT,
    ),
    Subcommand(
        "chain",
        "link the lines of a ledger written before lines were chained, once",
        "Each ledger line names the sha256 of the line before it in its file, so an edited, deleted or "
        "reordered line is found. A ledger written by an earlier gate has no such links: check it against git "
        "(`git log -p`), then run this once and commit the result. Each line gains `prev` and a retraction "
        "follows its line's new sha256; nothing else changes. A file already chained is left as it is.",
        _review_chain_flags,
        examples=examples("gate review chain labels/", "git diff --stat labels/"),
        exits=REVIEW_EXIT,
    ),
)


def _review_flags(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="review_command", required=True, parser_class=_Parser, metavar="ACTION")
    for action in REVIEW_ACTIONS:
        action.add_flags(_command(sub, action))


SUBCOMMANDS = (  # in the order `gate --help` lists them
    Subcommand(
        "init",
        "write a new suite to fill in, from nothing or from labelled answers",
        "Write a policy with every key commented, a criterion prompt, a dataset card, the evidence, the "
        "cases (from --from, hashes computed, split into partitions by group) and the six control roles as "
        "templates that `gate validate` refuses until they are filled. Never overwrites a file: into a suite "
        "that exists, --from appends the answers it does not hold yet.",
        _init_flags,
        examples=examples(
            "gate init suites/support --from answers.csv", "gate validate --policy suites/support/policy.yaml"
        ),
        exits=INIT_EXIT,
    ),
    Subcommand(
        "validate",
        "deterministic checks; with --lane, the judge model's shutdown date too",
        "Check the policy and its cases without calling any model: schema, ids, slices, evidence, "
        "controls, duplicates and leaks between partitions. With --lane, also what a run of the lane would "
        "find before any call, the judge model's shutdown date among it (the provider's models endpoint, asked "
        "with the judge's key: no tokens). Exit 1 when a finding would block.",
        _validate_flags,
        examples=examples(
            "gate validate --policy policies/example/policy.yaml",
            "gate validate --policy policies/example/policy.yaml --lane pr --format json",
        ),
        exits=VALIDATE_EXIT,
    ),
    Subcommand(
        "run",
        "judge a lane's cases and decide",
        "Judge the lane's cases with the policy's LLM judge, then decide and write result.json, "
        "report.md, summary.md, junit.xml and records.jsonl in --out.",
        _run_flags,
        RUN_ENV,
        examples(
            "gate run --policy policies/example/policy.yaml --lane pr --out gate-out",
            "gate run --policy policies/example/policy.yaml --lane pr --shard 1/2 --out gate-out-1",
        ),
    ),
    Subcommand(
        "decide",
        "re-apply the policy to recorded runs, no model call",
        "Decide again from records.jsonl files (after a policy or override change) without calling any model.",
        _decide_flags,
        examples=examples(
            "gate decide --policy policies/example/policy.yaml --records gate-out",
            "gate decide --policy policies/example/policy.yaml --records gate-out --out gate-out-decided",
        ),
    ),
    Subcommand(
        "merge",
        "combine the outputs of `gate run --shard I/N` into one decision",
        "Combine the --out directories of every shard of one run into one decision; a missing shard "
        "makes the result evaluation_incomplete.",
        _merge_flags,
        examples=examples("gate merge --policy policies/example/policy.yaml gate-out-1 gate-out-2 --out gate-out"),
    ),
    Subcommand(
        "calibrate",
        "measure the judge against human labels (no model call), or a candidate judge beside it",
        "Measure agreement, false-pass and false-fail rates of the judge against the human labels, per slice.",
        _calibrate_flags,
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
    ),
    Subcommand(
        "compare",
        "verdict transitions between two runs and the first diverging artifact",
        "Compare two runs case by case: which verdicts changed and the first input that differs.",
        _compare_flags,
        examples=examples("gate compare --base gate-base --head gate-out --policy policies/example/policy.yaml"),
        exits=MEASURE_EXIT,
    ),
    Subcommand(
        "publish",
        "post the check run and the sticky PR comment for a result",
        "Post a run's check run and its one sticky PR comment (report.md) on GitHub; exit with the result's code.",
        _publish_flags,
        PUBLISH_ENV,
        examples("GITHUB_TOKEN=... GITHUB_REPOSITORY=owner/name gate publish --result gate-out"),
        PUBLISH_EXIT,
    ),
    Subcommand(
        "review",
        "people's labels: queue, status, export, import",
        "Where people label answers, blind to the judge and to each other, and where the gate reads their labels "
        "back. Run `gate review ACTION --help` for an action's flags.",
        _review_flags,
        examples=examples(
            "gate review queue --policy policies/example/policy.yaml --from gate-out --out queue.jsonl",
            "gate review status queue.jsonl --ledger labels/",
        ),
        exits=REVIEW_EXIT,
    ),
)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="gate",
        description="A CI release gate: judge a reviewed pass/fail criterion with a Ragas LLM judge and decide "
        "one of four states. Run `gate COMMAND --help` for a command's flags.",
        epilog=EXIT_CODES,
        formatter_class=_Help,
    )
    p.add_argument("--version", action="version", version=f"ragas-gate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    for command in SUBCOMMANDS:
        command.add_flags(_command(sub, command))
    return p


def validate_summary(policy: str, cases: int, findings: Sequence[Finding]) -> str:
    """`gate validate`'s first line: "valid" or how many findings, and what they would do to a run."""
    if not findings:
        return f"valid: {policy}, {plural(cases, 'case')}, no findings"
    counts = Counter(f.state.value for f in findings)
    states = ", ".join(f"{n} {state}" for state, n in counts.most_common())
    return f"{plural(len(findings), 'finding')} in {policy} ({plural(cases, 'case')}): {states}"


def format_findings_text(
    findings: Sequence[Finding], out: IO[str], header: str | None = None, summary: str | None = None
) -> None:
    """The findings for a person; with `summary` (`gate validate`) that line first, linter-style."""
    heads = [log_text(line) for line in (summary, header) if line is not None]
    if not findings and not out.isatty() and summary is not None:
        # Piped or in CI rich would write these lines as they are: not loading it is ~15 ms of
        # `gate validate`'s start (tests/cli/test_startup.py pins the bytes to rich's).
        out.write("".join(f"{line}\n" for line in heads))
        return
    from rich.text import Text

    from gate.report.terminal import make_console, print_findings

    shown = Text("\n".join(heads)) if heads else None
    print_findings([f.to_dict() for f in findings], make_console(out), shown, lint=summary is not None)


@gc_paused()  # a short command whose objects all live to its end: a collection would find nothing
def cmd_validate(args: argparse.Namespace) -> int:
    from gate.model.cases import load_dataset
    from gate.model.policy import load_policy
    from gate.plan.selection import LaneError
    from gate.validate import Context, run_validators
    from gate.validate.lint import lint

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
    found = lint(Context(loaded, dataset, args.lane))  # what a run would meet later, known now
    findings += found.findings
    notes = list(found.notes)
    if args.lane is not None:  # a product lane: what `gate run` would find of its limits and calibration
        from gate.measure.product_evidence import product_lane_check
        from gate.model.policy import today

        product = product_lane_check(loaded, dataset, args.lane, os.environ, today())
        findings += product.findings
        notes += product.notes
        # When the judge's model shuts down: the one question validate asks the provider.
        from gate.measure.retirement import lane_retirement_check

        retiring = lane_retirement_check(loaded, dataset, args.lane, os.environ, today())
        findings += retiring.findings
        notes += retiring.notes
    # Any finding fails `validate` (a review route too): each would be a blocker of the run. Which of
    # them stop the run before a model call is `blocking_findings`; the dry run exits with the state
    # of every blocker the run has before any call (gate.commands.dry_run).
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
                "notes": notes,
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    else:
        from gate.model.paths import shown_path

        header = (
            f"  policy {loaded.policy.policy_id} ({loaded.policy.policy_version}), policy sha256 "
            f"{loaded.sha256[:12]}, dataset sha256 {dataset.sha256[:12]}"
        )
        summary = validate_summary(shown_path(args.policy), len(dataset.cases), findings)
        format_findings_text(findings, sys.stdout, header, summary)
        for note in notes:
            say(sys.stdout, f"note: {log_text(note)}")
    return 1 if blocking else 0


def _print_outcome(
    result: Result | None,
    out_dir: Path | None,
    fmt: str = "text",
    policy: str | None = None,
    run_dir: Path | None = None,
    cache: tuple[str, str] | None = None,
) -> None:
    """The decision for a person (or, with --format json, result.json's content; `{}` for a plan)."""
    if fmt == "json":
        json.dump(result.written() if result is not None else {}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from gate.report.terminal import make_console, print_outcome

    if result is not None:
        print_outcome(result, out_dir, make_console(sys.stdout), policy, run_dir, cache)


@contextlib.contextmanager
def _stdout_for(fmt: str) -> Iterator[None]:
    """With --format json, stdout carries the JSON only: anything else the command says goes to stderr."""
    if fmt != "json":
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield


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
    with _stdout_for(args.format):
        decision = run_into(args.policy, opts)
    if args.dry_run:
        from gate.commands.dry_run import outcome_line, state_before_any_call

        blocking = blocking_findings(decision.blockers)
        code = exit_state(None, state_before_any_call(decision.blockers))[1]
        if args.format == "json":
            _print_outcome(decision.result, None, "json")
        else:
            if blocking:
                format_findings_text(blocking, sys.stdout)
            sys.stdout.write(outcome_line(decision.blockers, code))
        return code
    _print_outcome(decision.result, args.out, args.format, args.policy, cache=_cache_row(args))
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


def cmd_decide(args: argparse.Namespace) -> int:
    from gate.commands.decide import decide_from_records

    if args.out is not None:
        from gate.run.outdir import check_out_dir

        check_out_dir(args.out)
    with _stdout_for(args.format):
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
    _print_outcome(decision.result, args.out, args.format, args.policy, run_dir)
    return exit_state(None, decision.state)[1]


def cmd_merge(args: argparse.Namespace) -> int:
    from gate.commands.steps import merge_into

    with _stdout_for(args.format):
        merged = merge_into(
            args.policy, args.shards, args.out, args.responses, args.base_result, args.audit, args.audit_queue
        )
    _print_outcome(merged.decision.result, args.out, args.format, args.policy)
    return exit_state(None, merged.decision.state)[1]


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
    """`gate calibrate --candidate-model NEW`: 0 once written; 3 when the candidate's run is incomplete."""
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
    return 3 if migration.candidate_state == "evaluation_incomplete" else 0


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


def cmd_publish(args: argparse.Namespace) -> int:
    from gate.github.publish import publish_result_dir

    return publish_result_dir(args.result, os.environ)


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


def cmd_review_queue(args: argparse.Namespace) -> int:
    from gate.commands.review import QueueRequest, build_queue, summary_lines

    written = build_queue(
        QueueRequest(Path(args.policy), args.source, args.out, args.sample, args.seed, args.responses, args.ledger)
    )
    for line in summary_lines(written):
        say(sys.stdout, line)
    return 0


def cmd_review_serve(args: argparse.Namespace) -> int:
    from gate.web.serve import ServeOptions, serve

    options = ServeOptions(
        queue=args.queue,
        ledger=Path(args.ledger),
        ledger_directory=args.ledger.endswith(("/", os.sep)),
        port=args.port,
        host=args.host,
        token=args.token,
        reviewers_per_item=args.reviewers_per_item,
        policy=args.policy,
        allow_self_adjudication=args.allow_self_adjudication,
    )
    return serve(options)


def cmd_review_status(args: argparse.Namespace) -> int:
    from gate.commands.review import read_labelled, review_status, status_json
    from gate.review.status import status_text

    labelled = read_labelled(args.queue, args.ledger, args.policy, args.reviewers_per_item)
    rows = review_status(labelled)
    if args.format == "json":
        print(json.dumps(status_json(labelled, rows), indent=2))
    else:
        for line in status_text(rows, labelled.k):
            say(sys.stdout, log_text(line))
    return 0


def cmd_review_export(args: argparse.Namespace) -> int:
    from gate.commands.review import export_label_studio, run_export
    from gate.model.paths import shown_path

    if args.format == "label-studio":
        for path in export_label_studio(args.queue, args.out):
            say(sys.stdout, f"wrote {shown_path(path)}")
        say(sys.stdout, "  the tasks are shuffled (seeded by the queue), so their order says nothing of the judge")
        say(
            sys.stdout,
            "next: create a Label Studio project with config.xml, import tasks.json, label, export as JSON or JSON_MIN,",
        )
        say(
            sys.stdout,
            f"  then gate review import {shown_path(args.queue)} --ledger labels/ --format label-studio EXPORT.json",
        )
        return 0
    if args.ledger is None or args.partition is None:
        raise UsageError("gate review export: --format cases needs --ledger and --partition; fix: pass both")
    outcome = run_export(
        args.queue,
        args.ledger,
        args.partition,
        args.out,
        policy=args.policy,
        k=args.reviewers_per_item,
        accept_low_agreement=args.accept_low_agreement,
        partial=args.partial,
    )
    return _print_export(outcome, args)


def _print_export(outcome: Any, args: argparse.Namespace) -> int:
    from gate.model.paths import shown_path
    from gate.model.wording import listed
    from gate.review.status import status_text

    if outcome.exported is None:
        _print_refusal(outcome, args)
        return 1
    exported = outcome.exported
    corrected = [c["case_id"] for c in exported.cases if "supersedes" in c]
    say(
        sys.stdout,
        f"wrote {shown_path(args.out)}: {plural(len(exported.cases), 'case')} into partition {args.partition}",
    )
    for line in status_text(outcome.rows, outcome.k):  # the agreement the cases rest on, as status shows it
        say(sys.stdout, log_text(f"  {line}"))
    if corrected:
        say(
            sys.stdout,
            log_text(f"  {len(corrected)} supersede a case whose label people corrected: {listed(corrected, 20)}"),
        )
    if exported.confirmed:
        say(
            sys.stdout,
            log_text(
                f"  {len(exported.confirmed)} confirmed as labelled, left as they are: {listed(exported.confirmed, 20)}"
            ),
        )
    if exported.abstained:
        say(sys.stdout, log_text(f"  final abstain, not exported: {listed(exported.abstained, 20)}"))
    if outcome.awaiting:
        say(sys.stdout, log_text(f"  left out, awaiting adjudication: {listed(outcome.awaiting, 20)} (--partial)"))
    pending = exported.not_final - len(outcome.awaiting)
    if pending:
        say(
            sys.stdout,
            f"  {plural(pending, 'item')} {agree(pending, 'has', 'have')} fewer labels than an item needs yet (pending)",
        )
    for row in outcome.refused:
        say(
            sys.stdout,
            log_text(
                f"  slice {row.slice}: exported with --accept-low-agreement (alpha {row.alpha:.3f}), recorded in each case"
            ),
        )
    for line in outcome.card_lines:
        say(sys.stdout, log_text(line))
    say(sys.stdout, "next: append them to the policy's cases file, then gate validate and gate calibrate")
    return 0


def _print_refusal(outcome: Any, args: argparse.Namespace) -> None:
    """Why export wrote nothing: slices people disagree on, items awaiting adjudication (stderr)."""
    from gate.model.paths import shown_path
    from gate.model.wording import listed
    from gate.review.status import LOW_AGREEMENT

    for row in outcome.refused:
        say(
            sys.stderr,
            log_text(f"slice {row.slice}: alpha {row.alpha:.3f} is below {row.min_alpha:g}: {LOW_AGREEMENT}"),
        )
    if outcome.refused:
        names = ", ".join(row.slice for row in outcome.refused)
        say(
            sys.stderr,
            log_text(
                f"nothing was written; fix the rubric and label again, or pass --accept-low-agreement (recorded in "
                f"each of their cases) to export {names}"
            ),
        )
    if outcome.awaiting:
        n = len(outcome.awaiting)
        say(
            sys.stderr,
            log_text(
                f"{plural(n, 'item')} {agree(n, 'awaits', 'await')} adjudication ({listed(outcome.awaiting, 20)}): "
                "people disputed them, and a dataset without them leans to the easy answers; nothing was written; fix: "
                f"settle them on the page's /adjudicate (gate review serve {shown_path(args.queue)} --ledger "
                f"{shown_path(args.ledger)}, then open /adjudicate), or pass --partial to export the rest, listing "
                f"what it leaves out"
            ),
        )


def cmd_review_import(args: argparse.Namespace) -> int:
    from gate.commands.review import import_label_studio
    from gate.model.paths import shown_path

    plan = import_label_studio(args.queue, args.ledger, args.export, server=args.server, blind=args.blind)
    for line in import_lines(plan, shown_path(args.export), shown_path(args.ledger)):
        say(sys.stdout, log_text(line))
    return 0


def cmd_review_chain(args: argparse.Namespace) -> int:
    from gate.model.paths import shown_path
    from gate.review.ledger import chain_ledger

    done = chain_ledger(args.ledger)
    for one in done:
        what = f"linked; its sha256 before: {one.before_sha256}" if one.linked else "already chained, left as it was"
        say(sys.stdout, log_text(f"{shown_path(one.file)}: {plural(one.lines, 'line')}, {what}"))
    if any(one.linked for one in done):
        # The chain links whatever the file held: a file whose `prev` was stripped and whose labels were
        # rewritten is linked as readily as one an earlier gate wrote. Only git tells the two apart.
        first = shown_path(next(one.file for one in done if one.linked))
        shown = first if first.startswith("/") else f"./{first}"  # git show reads ./ from where it runs
        say(
            sys.stdout,
            log_text(
                "next: before committing, check each file linked against git: its sha256 before must be the "
                f"committed file's (`git show HEAD:{shown} | sha256sum`), and `git log -S'\"prev\"' --oneline -- "
                f"{shown_path(args.ledger)}` must list no commit (no gate ever takes `prev` away: a file that "
                "had it and lost it was edited by hand); git diff then shows `prev` added to each line and "
                "nothing else; commit the ledger"
            ),
        )
    return 0


def import_lines(plan: Plan, export: str, ledger: str) -> list[str]:
    """What `gate review import` says: the export read, the lines appended, and every change it saw."""
    from gate.review.label_studio_ledger import changes

    got = plan.export
    if got.form == "JSON_MIN":
        source = f"JSON_MIN export (server {plan.server})"
    elif got.projects:
        projects = ", ".join(str(p) for p in got.projects)
        source = f"JSON export of Label Studio {agree(len(got.projects), 'project', 'projects')} {projects} (server {plan.server})"
    else:
        source = f"JSON export (server {plan.server})"
    skips = f" ({plan.cancelled} skipped in Label Studio, not a label)" if plan.cancelled else ""
    lines = [
        f"{export}: {source}: {plural(plan.tasks, 'task')}, {plural(plan.annotations, 'annotation')}{skips}",
        f"  appended {plural(len(plan.appends), 'ledger line')} to {ledger}",
    ]
    if got.form == "JSON_MIN":
        lines.append("  JSON_MIN names no project and leaves out skips: a label turned into a skip reads as deleted")
    if plan.edited:
        n = len(plan.edited)
        lines.append(
            f"  {plural(n, 'annotation')} edited in Label Studio since {agree(n, 'it was', 'they were')} imported: "
            f"{agree(n, 'its earlier label', 'their earlier labels')} retracted, the new "
            f"{agree(n, 'one', 'ones')} appended ({changes(plan.edited)})"
        )
    for what, found in (("deleted in Label Studio", plan.deleted), ("now a skip in Label Studio", plan.skipped)):
        if found:
            n = len(found)
            lines.append(
                f"  {plural(n, 'annotation')} {what} since {agree(n, 'it was', 'they were')} imported: "
                f"{agree(n, 'its label', 'their labels')} retracted ({changes(found)})"
            )
    if plan.already:
        lines.append(f"  {plan.already} {agree(plan.already, 'was', 'were')} already there")
    return lines + _import_notes(plan)


def _import_notes(plan: Plan) -> list[str]:
    """What an import left alone, and why: labels it could not see, tasks gate did not write, names."""
    from gate.model.wording import listed

    lines: list[str] = []
    if plan.left_out:
        lines.append(
            f"  {plural(plan.left_out, 'label')} imported before {agree(plan.left_out, 'is', 'are')} on tasks this "
            "export leaves out: kept (the default export leaves out tasks nobody annotated; export with all tasks "
            "to see a deletion there)"
        )
    if plan.partial:
        lines.append(
            f"  {plural(plan.partial, 'label')} imported before {agree(plan.partial, 'is', 'are')} on tasks this "
            "export lists only in part (an annotation filter): kept"
        )
    if plan.handmade:
        tasks = listed([str(t) for t, _ in plan.handmade])
        dropped = sum(n for _, n in plan.handmade)
        lines.append(
            f"  {plural(len(plan.handmade), 'task')} made in Label Studio, not by gate (no item_id in its data): "
            f"skipped with {agree(dropped, 'its', 'their')} {plural(dropped, 'annotation')} (task {tasks})"
        )
    for project, before in plan.other_projects:
        lines.append(
            f"  project {project} is another Label Studio project of this queue than the one imported before "
            f"(project {', '.join(str(p) for p in before)}): its labels are added to those; where a person "
            "labelled an item in both, their later label counts"
        )
    for user, email, kept in plan.renamed:
        lines.append(
            f"  user {user} of server {plan.server} is {email} in this export; their lines already name them "
            f"{kept}, which they keep (one person, one name)"
        )
    unlabelled = [
        *([f"{plural(plan.without_annotations, 'task')} without annotations"] if plan.without_annotations else []),
        *([f"{plural(plan.not_in_export, 'item')} of the queue not in the export"] if plan.not_in_export else []),
    ]
    if unlabelled:
        lines.append(f"  {'; '.join(unlabelled)} (Label Studio's default export leaves out tasks nobody annotated)")
    return lines


REVIEW_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "queue": cmd_review_queue,
    "serve": cmd_review_serve,
    "status": cmd_review_status,
    "export": cmd_review_export,
    "import": cmd_review_import,
    "chain": cmd_review_chain,
}


def cmd_review(args: argparse.Namespace) -> int:
    return REVIEW_COMMANDS[args.review_command](args)


COMMANDS = {
    "init": cmd_init,
    "validate": cmd_validate,
    "run": cmd_run,
    "decide": cmd_decide,
    "merge": cmd_merge,
    "calibrate": cmd_calibrate,
    "compare": cmd_compare,
    "publish": cmd_publish,
    "review": cmd_review,
}


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
            args = build_parser().parse_args(argv)
            return COMMANDS[args.command](args)
        except (Exception, KeyboardInterrupt) as exc:
            # a bug or a broken install is never a verdict
            return report_failure(args, exc)


def main_entry() -> None:
    exit_process(main())


if __name__ == "__main__":
    main_entry()
