"""Publishing a run's result on GitHub from its --out directory: shared by `gate publish` and the Action.

Reads result.json and report.md, the target from the workflow environment (the event payload gives
a pull request's head commit and number), and hands them to `gate.github.publish`. A refused or
failed write is a warning and never changes the exit code.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from gate.github.client import DEFAULT_API_URL, ClientOptions, publish
from gate.model.escape import log_text
from gate.model.result import Result, ResultProblem
from gate.model.result import load_result as load_result_file
from gate.model.states import USAGE_ERROR_EXIT, State, exit_state
from gate.model.textfit import say

log = logging.getLogger(__name__)

STATES = tuple(state.value for state in State)


def read_text(path: Path) -> str | None:
    """The file's text, None when it cannot be read (an optional report)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def load_result(result_dir: Path) -> Result:
    """The run's result.json, validated; ValueError (one paragraph: file, field, fix) when it is
    missing or not a result."""
    try:
        return load_result_file(result_dir / "result.json", fix="restore the file the run wrote")
    except ResultProblem as exc:
        raise ValueError(exc.message) from None


def state_exit_code(result: Result) -> int:
    """The code of the result's state, never a stored `exit_code` that disagrees."""
    return exit_state(None, State(result.state))[1]


def read_event(env: Mapping[str, str]) -> tuple[str | None, int | None]:
    """(head SHA, PR number). A pull_request event gives its head commit, not the merge commit."""
    payload: dict[str, Any] = {}
    event_path = env.get("GITHUB_EVENT_PATH")
    if event_path:
        try:
            loaded = json.loads(Path(event_path).read_text(encoding="utf-8"))
            payload = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError) as exc:
            log.warning("could not read the event payload %s: %s", event_path, exc)
    pr = payload.get("pull_request")
    if isinstance(pr, dict):
        head = pr.get("head") if isinstance(pr.get("head"), dict) else {}
        sha = head.get("sha") if isinstance(head, dict) else None
        number = pr.get("number", payload.get("number"))
        return (str(sha) if sha else env.get("GITHUB_SHA") or None), (int(number) if number else None)
    return env.get("GITHUB_SHA") or None, None


def publish_result_dir(
    result_dir: Path,
    env: Mapping[str, str],
    *,
    options: ClientOptions | None = None,
    stream: TextIO | None = None,
) -> int:
    """`gate publish --result DIR`: publish an existing result; exit with the result's state code.

    Token: `GITHUB_TOKEN` (or `GH_TOKEN`). Target: `GITHUB_REPOSITORY`, the head SHA and PR from
    `GITHUB_EVENT_PATH` (else `GITHUB_SHA`), `GITHUB_API_URL`. `GATE_COMMENT=off` posts no comment;
    `GATE_COMMENT_AUTHOR` names the login whose sticky comment may be edited. A refused or failed
    write is a warning on stderr and never changes the exit code. An unreadable result exits 2.
    """
    stream = stream or sys.stderr
    try:
        result = load_result(result_dir)
    except ValueError as exc:
        say(stream, f"gate publish: {log_text(exc)}; pass --result the directory `gate run --out` wrote")
        return USAGE_ERROR_EXIT
    code = state_exit_code(result)
    token = env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or ""
    repository = env.get("GITHUB_REPOSITORY", "")
    if not token or not repository:
        missing = "GITHUB_TOKEN" if not token else "GITHUB_REPOSITORY"
        say(stream, f"gate publish: warning: {missing} is not set; nothing published")
        return code
    head_sha, pr_number = read_event(env)
    report_md = read_text(result_dir / "report.md") or read_text(result_dir / "summary.md") or ""
    outcome = publish(
        result,
        report_md,
        token=token,
        repository=repository,
        head_sha=head_sha,
        pr_number=pr_number,
        api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
        comment=env.get("GATE_COMMENT", "sticky").strip().lower() != "off",
        comment_author=env.get("GATE_COMMENT_AUTHOR") or None,
        annotation_path=env.get("GATE_POLICY_PATH") or "result.json",
        options=options,
    )
    for warning in outcome.warnings:
        say(stream, f"gate publish: warning: {log_text(warning)}")
    if outcome.check_run_url:
        say(stream, f"gate publish: check run {log_text(outcome.check_run_url)}")
    if outcome.comment_action in ("created", "edited", "unchanged"):
        say(stream, f"gate publish: sticky comment {outcome.comment_action}")
    return code
