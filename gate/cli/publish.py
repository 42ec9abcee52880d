"""`gate publish`: its flags, and the edge that posts a result on GitHub."""

from __future__ import annotations

import argparse
import os

from gate.cli.parsing import Subcommand, examples, exit_table, run_directory

PUBLISH_EXIT = exit_table(
    (
        ("0 1 3 4", "the state", "the code of the published result's state, whether or not GitHub took it"),
        (2, "usage", "the result cannot be read (the message names the file and the fix)"),
    )
)


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


def publish_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--result", required=True, type=run_directory, metavar="RUN", help="a run's --out directory or its result.json"
    )


def cmd_publish(args: argparse.Namespace) -> int:
    from gate.github.publish import publish_result_dir

    return publish_result_dir(args.result, os.environ)


COMMAND = Subcommand(
    "publish",
    "post the check run and the sticky PR comment for a result",
    "Post a run's check run and its one sticky PR comment (report.md) on GitHub; exit with the result's code.",
    publish_flags,
    PUBLISH_ENV,
    examples("GITHUB_TOKEN=... GITHUB_REPOSITORY=owner/name gate publish --result gate-out"),
    PUBLISH_EXIT,
    handler=cmd_publish,
)
