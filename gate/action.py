"""The GitHub Action's container entry point: `python -m gate.action`.

What it does, in order:
1. reads the inputs (`INPUT_<NAME>`, upper-cased with hyphens kept: `INPUT_GITHUB-TOKEN`), the event
   (`GITHUB_EVENT_PATH`: a `pull_request` gives the PR number and `pull_request.head.sha`; any other
   event uses `GITHUB_SHA` and posts no comment), `GITHUB_REPOSITORY` and `GITHUB_API_URL`;
2. masks the GitHub token and the evaluator key (`::add-mask::`);
3. runs the lane: `gate run --policy P --lane L --out <working-directory>/gate-out [--max-cost X]
   [--shard I/N]`, or with the `merge` input `gate merge --policy P DIR... --out ...gate-out`
   (a shard publishes nothing in step 4: the merge job publishes for the whole matrix);
4. reads `result.json`, `report.md`, `summary.md` from the output directory and publishes: a check
   run whenever there is a token and a SHA, the sticky comment on a PR when `comment: sticky`;
   a refused write (fork PRs: read-only token) is a warning and changes nothing else;
5. appends the summary to `$GITHUB_STEP_SUMMARY`, writes the outputs `state`, `exit-code`,
   `result-path`, `cost`, `unrun-case-ids` to `$GITHUB_OUTPUT` (heredoc form, random delimiters).

The state published (the check run, the outputs `state` and `exit-code`) is the most severe of
the run's exit code and result.json's state (`gate.model.states.exit_state`): a run that
exited 3 is never published as `passed`. The step's exit status: 1 when that state is listed in
`fail-on` (default: every state but `passed`), else 0. The state's own exit code (0, 1, 3 or
4) is the `exit-code` output. A usage error (bad input, invalid policy) or a run that left no result.json exits 2; an
internal error of the Action itself exits 3 with a one-paragraph `::error::`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import sys
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gate.commands import crash
from gate.github.client import DEFAULT_API_URL, ClientOptions, PublishResult, publish
from gate.github.publish import STATES, load_result, read_event, read_text, state_exit_code
from gate.model.escape import log_text, workflow_data
from gate.model.loading import FileProblem, read_yaml_mapping
from gate.model.money import money, plain_decimal
from gate.model.process import command_line, guarded_output, without_pydantic_plugins
from gate.model.records import RECORDS_FILE
from gate.model.result import Result
from gate.model.states import USAGE_ERROR_EXIT, State, exit_state
from gate.model.textfit import fit_bytes

if TYPE_CHECKING:
    from gate.commands.run import RunOptions

log = logging.getLogger(__name__)

DEFAULT_FAIL_ON = frozenset(("quality_failed", "evaluation_incomplete", "review_required"))
OUT_DIR_NAME = "gate-out"
INPUTS_JSON_VAR = "GATE_INPUTS"  # toJSON(inputs), from action.yml
STEP_SUMMARY_MAX_BYTES = 1_000_000  # the runner refuses more than 1 MiB per step
# Environment variables whose values are masked besides the token and the policy's api_key_env.
_SECRET_NAME = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_MIN_MASK_LEN = 8
_GITHUB_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")


BATCH_MODES = ("submit", "collect", "wait")


class InputError(ValueError):
    """A bad Action input: the message names the input and the fix."""


@dataclass(frozen=True)
class ActionContext:
    policy: str
    lane: str
    token: str
    comment: str  # sticky | off
    fail_on: frozenset[str]
    max_cost: str | None
    working_directory: Path
    comment_author: str | None
    repository: str
    api_url: str
    event_name: str
    head_sha: str | None
    pr_number: int | None
    workspace: Path
    output_file: Path | None
    summary_file: Path | None
    shard: str | None = None  # `I/N`: run one shard of a matrix; the merge job publishes
    merge: tuple[str, ...] = ()  # shard directories or globs: merge them and publish
    base_result: str | None = None  # a base run's --out, relative to working-directory
    batch: str | None = None  # `submit|collect|wait`: `gate run --batch` (the check run is posted when collected)
    responses: str | None = None  # a product lane's answers (`--responses`), relative to working-directory
    audit: str | None = (
        None  # a product lane: people's labels on the run's answers (`--audit`), relative to working-directory
    )

    @property
    def out_dir(self) -> Path:
        return self.working_directory / OUT_DIR_NAME


# ---- workflow commands, outputs, summary ------------------------------------------------------
def escape_data(value: str) -> str:
    return workflow_data(value)


def command(name: str, message: str, stream: TextIO | None = None) -> None:
    """Print a workflow command (`::warning::...`), the gate's own: past the output guard."""
    command_line(f"::{name}::{escape_data(message)}", stream)


def mask(values: Iterable[str], stream: TextIO | None = None) -> None:
    for value in values:
        for line in value.splitlines():
            if line.strip():
                command_line(f"::add-mask::{line.strip()}", stream)


def write_outputs(path: Path, outputs: Mapping[str, str]) -> None:
    """Append `name<<DELIM / value / DELIM` blocks (multiline-safe) to `$GITHUB_OUTPUT`."""
    with path.open("a", encoding="utf-8") as f:
        for name, value in outputs.items():
            delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
            while delimiter in value:
                delimiter = f"ghadelimiter_{uuid.uuid4().hex}"
            f.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def append_summary(path: Path, markdown: str) -> None:
    note = "\n\n_Summary trimmed to the runner's 1 MiB limit; the full report is in the artifact._\n"
    markdown = fit_bytes(markdown, STEP_SUMMARY_MAX_BYTES, note)
    with path.open("a", encoding="utf-8") as f:
        f.write(markdown if markdown.endswith("\n") else markdown + "\n")


# ---- inputs and event -------------------------------------------------------------------------
def get_input(env: Mapping[str, str], name: str, default: str = "") -> str:
    """`INPUT_<NAME>` with hyphens kept, as the runner sets it (underscored spelling accepted too)."""
    key = f"INPUT_{name.upper()}"
    value = env.get(key)
    if value is None:
        value = env.get(key.replace("-", "_"))
    value = (value or "").strip()
    return value or default


def expand_json_inputs(env: Mapping[str, str]) -> dict[str, str]:
    """`env` plus every input of `GATE_INPUTS` as `INPUT_<NAME>` (an INPUT_* already set wins).

    action.yml passes `toJSON(inputs)` to the container in `GATE_INPUTS`, so that an input needs
    only its declaration there (scripts/action-run never names inputs one by one).
    """
    merged = dict(env)
    raw = env.get(INPUTS_JSON_VAR, "").strip()
    if not raw:
        return merged
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InputError(f"{INPUTS_JSON_VAR} is not JSON ({exc}); action.yml sets it to toJSON(inputs)") from None
    if not isinstance(data, dict):
        raise InputError(f"{INPUTS_JSON_VAR} must be a JSON object of inputs; action.yml sets it to toJSON(inputs)")
    for name, value in data.items():
        if isinstance(value, (dict, list)):
            raise InputError(f"input {name!r} must be a string, not {type(value).__name__}")
        merged.setdefault(f"INPUT_{str(name).upper()}", "" if value is None else str(value))
    return merged


def parse_fail_on(raw: str) -> frozenset[str]:
    if not raw.strip():
        return DEFAULT_FAIL_ON
    items = {item.strip() for item in re.split(r"[,\s]+", raw) if item.strip()}
    if items == {"none"}:
        return frozenset()
    unknown = sorted(items - set(STATES))
    if unknown:
        raise InputError(
            f"input 'fail-on': unknown {'state' if len(unknown) == 1 else 'states'} {', '.join(unknown)}; use a comma list of "
            f"{', '.join(STATES)} (or 'none')"
        )
    return frozenset(items)


def read_context(env: Mapping[str, str]) -> ActionContext:
    policy = get_input(env, "policy")
    if not policy:
        raise InputError("input 'policy' is required: the path of the policy YAML, relative to working-directory")
    comment = get_input(env, "comment", "sticky").lower()
    if comment not in ("sticky", "off"):
        raise InputError(f"input 'comment' must be 'sticky' or 'off', not {comment!r}")
    max_cost = get_input(env, "max-cost") or None
    if max_cost is not None:
        try:
            if not math.isfinite(float(max_cost)) or float(max_cost) < 0:
                raise ValueError
        except ValueError:
            raise InputError(f"input 'max-cost' must be a non-negative number, not {max_cost!r}") from None
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    working_directory = workspace / get_input(env, "working-directory", ".")
    if not working_directory.resolve().is_relative_to(workspace.resolve()):
        raise InputError(
            f"input 'working-directory' must be a directory inside the workspace (a relative path such as "
            f"'evals'), not {get_input(env, 'working-directory')!r}: only the workspace is mounted"
        )
    if not working_directory.is_dir():
        raise InputError(f"input 'working-directory': {working_directory} is not a directory")
    comment_author = get_input(env, "comment-author")
    if comment_author and not _GITHUB_LOGIN.fullmatch(comment_author):
        raise InputError(
            f"input 'comment-author' must be a GitHub login (e.g. octocat or github-actions[bot]), "
            f"not {comment_author[:100]!r}"
        )
    shard, merge = read_shard_inputs(env)
    batch = get_input(env, "batch") or None
    if batch is not None and batch not in BATCH_MODES:
        raise InputError(f"input 'batch' must be one of {', '.join(BATCH_MODES)} (or empty), not {batch[:50]!r}")
    head_sha, pr_number = read_event(env)
    output_file = env.get("GITHUB_OUTPUT")
    summary_file = env.get("GITHUB_STEP_SUMMARY")
    return ActionContext(
        policy=policy,
        lane=get_input(env, "lane", "pr"),
        token=get_input(env, "github-token"),
        comment=comment,
        fail_on=parse_fail_on(get_input(env, "fail-on")),
        max_cost=max_cost,
        working_directory=working_directory,
        comment_author=comment_author or None,
        repository=env.get("GITHUB_REPOSITORY", ""),
        api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
        event_name=env.get("GITHUB_EVENT_NAME", ""),
        head_sha=head_sha,
        pr_number=pr_number,
        workspace=workspace,
        output_file=Path(output_file) if output_file else None,
        summary_file=Path(summary_file) if summary_file else None,
        shard=shard,
        merge=merge,
        base_result=get_input(env, "base-result") or None,
        batch=batch,
        responses=get_input(env, "responses") or None,
        audit=get_input(env, "audit") or None,
    )


def read_shard_inputs(env: Mapping[str, str]) -> tuple[str | None, tuple[str, ...]]:
    """`shard: I/N` (one matrix job) or `merge: <dirs or globs>` (the job after the matrix)."""
    from gate.plan.shard import ShardError, parse_shard

    shard = get_input(env, "shard") or None
    merge = tuple(get_input(env, "merge").split())
    if shard is not None and merge:
        raise InputError(
            "inputs 'shard' and 'merge' exclude each other: a matrix job runs one shard, the job after it merges"
        )
    if shard is not None:
        try:
            shard = str(parse_shard(shard, "input 'shard'"))
        except ShardError as exc:
            raise InputError(exc.message) from None
    return shard, merge


def secrets_to_mask(ctx: ActionContext, env: Mapping[str, str]) -> list[str]:
    """The token, the evaluator key the policy names, and any *_API_KEY/*_TOKEN/... value."""
    names = {name for name in env if _SECRET_NAME.search(name)}
    try:
        # The shared reader: a FIFO or a device as the policy must not hang the Action here.
        policy = read_yaml_mapping(ctx.working_directory / ctx.policy, "policy file")
        evaluator = policy.get("evaluator")
        key_env = evaluator.get("api_key_env") if isinstance(evaluator, dict) else None
        if isinstance(key_env, str):
            names.add(key_env)
    except FileProblem:
        pass  # the run reports an unreadable policy as a usage error
    values = [ctx.token] + [env[n] for n in sorted(names) if n in env]
    return [v for v in dict.fromkeys(values) if v and len(v.strip()) >= _MIN_MASK_LEN]


# ---- running and publishing -------------------------------------------------------------------
def _base_path(ctx: ActionContext) -> Path | None:
    """The base run's directory when `base-result` names one that holds a result."""
    base = ctx.working_directory / ctx.base_result if ctx.base_result else None
    return base if base is not None and _is_file(base / "result.json") else None


def run_options(ctx: ActionContext) -> RunOptions:
    """The lane's run: --out is <working-directory>/gate-out, the base result only when it exists."""
    from gate.commands.run import BatchOptions, RunOptions
    from gate.plan.shard import parse_shard

    return RunOptions(
        lane=ctx.lane,
        out_dir=ctx.out_dir,
        max_cost=float(ctx.max_cost) if ctx.max_cost is not None else None,
        shard=parse_shard(ctx.shard) if ctx.shard is not None else None,
        # the trend's change against the base; a missing base is said in the report, not an error
        base_result=_base_path(ctx),
        batch=BatchOptions(ctx.batch) if ctx.batch in ("submit", "collect", "wait") else None,  # type: ignore[arg-type]
        responses=_responses_path(ctx),
        audit=_audit_path(ctx),
    )


def _audit_path(ctx: ActionContext) -> Path | None:
    return ctx.working_directory / ctx.audit if ctx.audit else None


def _responses_path(ctx: ActionContext) -> Path | None:
    return ctx.working_directory / ctx.responses if ctx.responses else None


def _is_file(path: Path) -> bool:
    """`path.is_file()`, False where even asking fails (a name too long): the base never fails a run."""
    try:
        return path.is_file()
    except OSError:
        return False


def merge_dirs(ctx: ActionContext) -> list[str]:
    """The `merge` input's directories, globs expanded in working-directory (sorted, deduplicated).

    A pattern that matches nothing is passed as written, so `gate merge` names it in its error.
    """
    found: list[str] = []
    for pattern in ctx.merge:
        matches = sorted(str(p) for p in ctx.working_directory.glob(pattern) if p.is_dir())
        for item in matches or [str(ctx.working_directory / pattern)]:
            if item not in found:
                found.append(item)
    return found


def run_gate(ctx: ActionContext) -> int:
    """Run the lane (or merge the shards) in working-directory through the core; its exit code.

    The policy path, the default cache and every message are relative to working-directory, as the
    workflow author wrote them (what `cd DIR && gate run` gives), without changing the process's
    current directory: `gate.model.paths.working_in` scopes it to this call.

    The step's log gets the outcome on success and one message otherwise; an error is never a
    verdict: bad input exits 2, a failed write or an interruption 3, an unexpected error 3 with a
    result.json that says so when the run got far enough to write one.
    """
    from gate.commands.steps import merge_into, run_into
    from gate.model.paths import working_in
    from gate.report.terminal import make_console, print_outcome

    with working_in(ctx.working_directory):
        try:
            if ctx.merge:
                dirs = [Path(d) for d in merge_dirs(ctx)]
                decision = merge_into(
                    ctx.policy, dirs, ctx.out_dir, _responses_path(ctx), _base_path(ctx), _audit_path(ctx)
                ).decision
            else:
                decision = run_into(ctx.policy, run_options(ctx))
        except (Exception, KeyboardInterrupt) as exc:
            return _report_failure(ctx, exc)
        if decision.result is not None:
            print_outcome(decision.result, ctx.out_dir, make_console(sys.stdout), ctx.policy)  # as `gate run`
    return exit_state(None, decision.state)[1]


def _report_failure(ctx: ActionContext, exc: BaseException) -> int:
    """A run or merge that raised: its message and exit code, as the CLI's (gate.commands.steps.exit_on_error);
    a run (a shard too) still writes a result.json that claims no verdict."""
    from gate.commands.steps import exit_on_error
    from gate.plan.shard import parse_shard

    def write_result(exc: BaseException) -> str | None:
        shard = parse_shard(ctx.shard) if ctx.shard is not None else None
        records = [ctx.out_dir / RECORDS_FILE]
        return crash.write_crash_note(exc, ctx.policy, ctx.lane, ctx.out_dir, records, shard=shard)

    what = "`gate merge`" if ctx.merge else "`gate run`"
    return exit_on_error(exc, sys.stderr, what, None if ctx.merge else write_result, resumable=not ctx.merge)


def outputs_for(result: Result, result_path: str) -> dict[str, str]:
    return {
        "state": result.state,
        "exit-code": str(state_exit_code(result)),
        "result-path": result_path,
        "cost": plain_decimal(result.cost.total),
        "unrun-case-ids": json.dumps(result.unrun_case_ids),
    }


def _display_path(path: Path, workspace: Path) -> str:
    try:
        return str(path.resolve().relative_to(workspace.resolve()))
    except ValueError:
        return str(path)


def _publishing_note(outcome: PublishResult | None, reason: str | None) -> str:
    if outcome is None:
        return f"\n> **ragas-gate:** nothing published to GitHub: {reason}.\n"
    if not outcome.warnings:
        return ""
    lines = ["", "> **ragas-gate: publishing incomplete** (the state above is unchanged)"]
    lines += [f"> - {w}" for w in outcome.warnings]
    lines.append(
        "> A pull request from a fork gets a read-only token: the check run and the comment are "
        "refused there, and this summary is the report."
    )
    return "\n".join(lines) + "\n"


def publish_and_report(
    result_dir: Path,
    ctx: ActionContext,
    *,
    run_exit: int | None = None,
    options: ClientOptions | None = None,
    stream: TextIO | None = None,
) -> int:
    """Publish the result in `result_dir`, write the summary and the outputs; the step's exit code."""
    stream = stream or sys.stdout
    try:
        if run_exit == USAGE_ERROR_EXIT:
            raise ValueError(
                f"`gate run` exited {USAGE_ERROR_EXIT} (usage error: bad input or invalid policy; "
                "its message above names the file, the field and the fix)"
            )
        result = load_result(result_dir)
    except ValueError as exc:
        command("error", f"ragas-gate produced no result: {exc}", stream)
        if ctx.summary_file is not None:
            append_summary(ctx.summary_file, f"## ragas-gate: no result\n\n{exc}\n")
        if ctx.output_file is not None:
            write_outputs(ctx.output_file, {"state": "", "exit-code": str(run_exit if run_exit else 2)})
        return run_exit if run_exit not in (None, 0) else USAGE_ERROR_EXIT

    report_md = read_text(result_dir / "report.md")
    summary_md = read_text(result_dir / "summary.md") or report_md
    if report_md is None:
        report_md = summary_md or f"ragas-gate: `{result.state}` (see result.json)"
    if summary_md is None:
        summary_md = report_md
    result, overruled = _with_run_exit(result, run_exit)
    if overruled:
        command("error", f"ragas-gate: {overruled}", stream)
        report_md, summary_md = (
            f"> **ragas-gate:** {overruled}\n\n{report_md}",
            f"> **ragas-gate:** {overruled}\n\n{summary_md}",
        )
    if ctx.base_result and ctx.shard is None:
        from gate.measure.compare_base import base_section

        base = ctx.working_directory / ctx.base_result
        section = base_section(base, result_dir, ctx.working_directory / ctx.policy, ctx.base_result)
        report_md, summary_md = report_md + "\n" + section, summary_md + "\n" + section

    outcome, reason = _publish_to_github(result, report_md, ctx, options, stream)
    state = result.state
    print(
        f"ragas-gate: {log_text(state)} (exit code {state_exit_code(result)}), cost "
        f"{money(result.cost.total, result.cost.currency)}, {len(result.unrun_case_ids)} unrun",
        file=stream,
        flush=True,
    )
    if ctx.summary_file is not None:
        append_summary(ctx.summary_file, summary_md + _publishing_note(outcome, reason))
    if ctx.output_file is not None:
        result_path = _display_path(result_dir / "result.json", ctx.workspace)
        write_outputs(ctx.output_file, outputs_for(result, result_path))
    return 1 if state in ctx.fail_on else 0


def _publish_to_github(
    result: Result, report_md: str, ctx: ActionContext, options: ClientOptions | None, stream: TextIO
) -> tuple[PublishResult | None, str | None]:
    """The check run and the comment, when this step publishes; (what was published, or why not)."""
    outcome: PublishResult | None = None
    reason: str | None = None
    if ctx.shard is not None:
        reason = f"shard {ctx.shard} of a matrix: the merge job publishes one check run and comment for the run"
    elif result.batch is not None and not result.batch.collected:
        reason = f"batch {result.batch.batch_id} is {result.batch.status}: the check run is posted when it is collected"
    elif not ctx.token:
        reason = "no github-token given"
    elif not ctx.repository:
        reason = "GITHUB_REPOSITORY is not set"
    else:
        outcome = publish(
            result,
            report_md,
            token=ctx.token,
            repository=ctx.repository,
            head_sha=ctx.head_sha,
            pr_number=ctx.pr_number,
            api_url=ctx.api_url,
            comment=ctx.comment == "sticky",
            comment_author=ctx.comment_author,
            annotation_path=_display_path(ctx.working_directory / ctx.policy, ctx.workspace),
            options=options,
        )
        for warning in outcome.warnings:
            command("warning", f"ragas-gate: {warning}", stream)
        if outcome.check_run_url:
            print(f"check run: {log_text(outcome.check_run_url)}", file=stream)
    if reason:
        command("notice", f"ragas-gate: nothing published to GitHub ({reason})", stream)
    return outcome, reason


def _with_run_exit(result: Result, run_exit: int | None) -> tuple[Result, str | None]:
    """The result as published: its state is the most severe of the run's exit and what result.json
    says (`gate.model.states.exit_state`), so a run that exited 3 is never published as `passed`."""
    state, code = exit_state(run_exit, State(result.state))
    if state is None or state.value == result.state:
        return result, None
    why = (
        f"the run exited {run_exit} although result.json says {result.state}: published as {state.value} "
        f"(exit code {code}); its log above says what failed"
    )
    return result.with_(state=state.value, exit_code=code, notes=[*result.notes, why]), why


def configure_logging(env: Mapping[str, str]) -> None:
    """Our own INFO lines (DEBUG with the runner's debug logging); other libraries only from WARNING,
    so httpx's `HTTP Request: POST ...` per judge call never reaches the step log."""
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logging.getLogger("gate").setLevel(logging.DEBUG if env.get("RUNNER_DEBUG") == "1" else logging.INFO)


def main(env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    without_pydantic_plugins()  # as `gate.cli.main`: no plugin scan
    with guarded_output():  # untrusted text never forms a workflow command; ours pass
        configure_logging(env)
        try:
            return _main(env)
        except Exception as exc:  # a bug in the Action itself: a message and exit 3, never a state's code
            crash.print_traceback_if_debug(exc, sys.stderr)
            command("error", crash.crash_message("the ragas-gate Action", exc, None))
            output_file = env.get("GITHUB_OUTPUT")
            if output_file:
                with contextlib.suppress(Exception):
                    write_outputs(Path(output_file), {"exit-code": str(crash.INTERNAL_ERROR_EXIT)})
            return crash.INTERNAL_ERROR_EXIT


def _main(env: Mapping[str, str]) -> int:
    try:
        env = expand_json_inputs(env)
        ctx = read_context(env)
    except InputError as exc:
        command("error", str(exc))
        return USAGE_ERROR_EXIT
    mask(secrets_to_mask(ctx, env))
    # A result.json left by an earlier run in the same workspace must not be published as this one's.
    (ctx.out_dir / "result.json").unlink(missing_ok=True)
    run_exit = run_gate(ctx)
    return publish_and_report(ctx.out_dir, ctx, run_exit=run_exit)


if __name__ == "__main__":
    sys.exit(main())
