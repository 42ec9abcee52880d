"""`gate review ACTION`: each action's flags, and the edges of queue, serve, status, export, import
and chain."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.cli.parsing import (
    USAGE_ROW,
    Parser,
    Subcommand,
    add_command,
    examples,
    exit_table,
    format_flag,
    path_flag,
    policy_flag,
    positive,
)
from gate.model.errors import UsageError
from gate.model.escape import log_text
from gate.model.textfit import say
from gate.model.wording import agree, plural

if TYPE_CHECKING:
    from gate.review.label_studio_ledger import Plan


REVIEW_EXIT = exit_table(
    (
        (0, "done", "the file is written (or the figures shown)"),
        USAGE_ROW,
        (3, "error", "an unexpected error"),
    )
)


def _review_queue_flags(parser: argparse.ArgumentParser) -> None:
    policy_flag(parser, "the policy the labels are for (its allowed labels and rubric)")
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
        type=positive,
        metavar="N",
        help="draw the first N of each slice's seeded order (default: all); refused for a product run, whose "
        "queue is the audit plan the run fixed",
    )
    parser.add_argument(
        "--seed",
        help="the draw's seed (default: the source's sha256); refused for a product run, whose seed the run fixed",
    )
    path_flag(
        parser, "--responses", "the answers a product run judged, when it kept no copy (records.clear_text false)"
    )
    path_flag(
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
    path_flag(parser, "--policy", "the policy (default: the one the queue's header names, relative to the queue)")
    parser.add_argument(
        "--reviewers-per-item",
        type=positive,
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
    path_flag(parser, "--policy", "the policy (default: the one the queue's header names, relative to the queue)")
    parser.add_argument(
        "--reviewers-per-item",
        type=positive,
        metavar="K",
        help="independent labels an item needs (default: the policy's review.reviewers_per_item, 2)",
    )


def _review_status_flags(parser: argparse.ArgumentParser) -> None:
    _queue_arg(parser)
    _ledger_flag(parser)
    _labelled_flags(parser)
    format_flag(parser, "the figures per slice")


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
        handler=cmd_review_queue,
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
        handler=cmd_review_serve,
    ),
    Subcommand(
        "status",
        "how far labelling has come and whether people agree, per slice",
        "Per slice: items, items with K labels, the unanimous share, Krippendorff's alpha with a bootstrap 95% "
        "interval, Cohen's kappa for two reviewers, abstentions and disagreements awaiting adjudication.",
        _review_status_flags,
        examples=examples("gate review status queue.jsonl --ledger labels/"),
        exits=REVIEW_EXIT,
        handler=cmd_review_status,
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
        handler=cmd_review_export,
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
        handler=cmd_review_import,
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
        handler=cmd_review_chain,
    ),
)


def review_flags(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="review_command", required=True, parser_class=Parser, metavar="ACTION")
    for action in REVIEW_ACTIONS:
        action.add_flags(add_command(sub, action))


REVIEW_COMMANDS = {action.name: action.handler for action in REVIEW_ACTIONS}


def cmd_review(args: argparse.Namespace) -> int:
    return REVIEW_COMMANDS[args.review_command](args)


COMMAND = Subcommand(
    "review",
    "people's labels: queue, status, export, import",
    "Where people label answers, blind to the judge and to each other, and where the gate reads their labels "
    "back. Run `gate review ACTION --help` for an action's flags.",
    review_flags,
    examples=examples(
        "gate review queue --policy policies/example/policy.yaml --from gate-out --out queue.jsonl",
        "gate review status queue.jsonl --ledger labels/",
    ),
    exits=REVIEW_EXIT,
    handler=cmd_review,
)
