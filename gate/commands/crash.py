"""What the gate does when it crashes: one paragraph, exit 3, and a result that claims no verdict.

An unexpected exception (a bug, a broken install) is never `quality_failed` nor `passed`:
the message says what failed and where, without a traceback unless
`GATE_DEBUG=1`; `gate run` and `gate decide --out` still write a result.json whose
`internal_error` blocker (evaluation_incomplete) lists the cases left without a judgment.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.model.states import Finding, State
from gate.model.wording import agree, plural

if TYPE_CHECKING:
    from gate.plan.shard import Shard

INTERNAL_ERROR_EXIT = State.EVALUATION_INCOMPLETE.exit_code
DEBUG_ENV = "GATE_DEBUG"
INTERNAL_ERROR_KIND = "internal_error"
INTERRUPTED_KIND = "interrupted"


class Interrupted(KeyboardInterrupt):
    """A stop signal turned into an interruption (SIGTERM, SIGHUP), naming it; a bare
    KeyboardInterrupt is SIGINT (Ctrl-C)."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def signal_name(exc: BaseException) -> str:
    """The signal that interrupted the run: the one `Interrupted` names, else SIGINT."""
    return exc.signal_name if isinstance(exc, Interrupted) else "SIGINT"


# Values of variables with these names never reach a message (an exception may quote them).
_SECRET_NAME = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_MIN_SECRET_LEN = 8
_MAX_DETAIL = 300


def debug_enabled(env: Mapping[str, str] | None = None) -> bool:
    value = (os.environ if env is None else env).get(DEBUG_ENV, "")
    return value.strip().lower() not in ("", "0", "false", "no")


def scrub_secrets(text: str, env: Mapping[str, str] | None = None, extra: Sequence[str] = ()) -> str:
    env = os.environ if env is None else env
    secrets = [v for k, v in env.items() if _SECRET_NAME.search(k)] + list(extra)
    for value in sorted({s.strip() for s in secrets if len(s.strip()) >= _MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(value, "***")
    return text


def where(exc: BaseException) -> str:
    """The innermost frame of ours (else the innermost one): `gate/commands/run.py:495 in run`."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "an unknown place"
    ours = [f for f in frames if f"{os.sep}gate{os.sep}" in f.filename]
    frame = (ours or frames)[-1]
    path = frame.filename
    marker = f"{os.sep}gate{os.sep}"
    if marker in path:
        path = "gate" + os.sep + path.rsplit(marker, 1)[1]
    return f"{path}:{frame.lineno} in {frame.name}"


def describe(exc: BaseException) -> str:
    """`RuntimeError: ragas is half installed (at gate/judge/ragas_judge.py:145 in __init__)`."""
    detail = " ".join(str(exc).split())
    if len(detail) > _MAX_DETAIL:
        detail = detail[: _MAX_DETAIL - 1] + "…"
    return f"{type(exc).__name__}{': ' + detail if detail else ''} (at {where(exc)})"


def crash_message(what: str, exc: BaseException, written: str | None, *, resumable: bool = False) -> str:
    """One paragraph: what failed, where, what was kept, what to do."""
    kept = f" {written}" if written else ""
    resume = "; `gate run --resume` keeps every judgment already recorded" if resumable else ""
    return scrub_secrets(
        f"internal error in {what}: {describe(exc)}. This is a bug or a broken installation, not a verdict: "
        f"the state is evaluation_incomplete (exit {INTERNAL_ERROR_EXIT}).{kept} Fix: rerun with "
        f"{DEBUG_ENV}=1 to see the traceback and report it to the ragas-gate maintainers{resume}."
    )


def print_traceback_if_debug(exc: BaseException, stream: Any) -> None:
    if debug_enabled():
        traceback.print_exception(exc, file=stream)


def internal_error_finding(exc: BaseException, unrun_ids: Sequence[str]) -> Finding:
    if isinstance(exc, KeyboardInterrupt):
        return Finding(
            State.EVALUATION_INCOMPLETE,
            INTERRUPTED_KIND,
            f"the run was interrupted ({signal_name(exc)}) before it finished; {plural(len(unrun_ids), 'case')} "
            f"{agree(len(unrun_ids), 'has', 'have')} no complete judgment; fix: run again with --resume (every judgment already recorded is kept)",
            case_ids=tuple(unrun_ids),
        )
    have = agree(len(unrun_ids), "has", "have")
    tail = (
        f"; {plural(len(unrun_ids), 'eligible case')} {have} no complete judgment"
        if unrun_ids
        else "; every case was judged"
    )
    return Finding(
        State.EVALUATION_INCOMPLETE,
        INTERNAL_ERROR_KIND,
        scrub_secrets(
            f"an internal error stopped the run ({describe(exc)}), so its evidence cannot be trusted as a "
            f"verdict{tail}; fix: rerun (with {DEBUG_ENV}=1 for the traceback) and report the error"
        ),
        case_ids=tuple(unrun_ids),
    )


def write_crash_result(
    exc: BaseException,
    policy_path: str | Path,
    lane: str | None,
    out_dir: Path,
    record_paths: Sequence[Path],
    clock: Callable[[], dt.date] | None = None,
    shard: Shard | None = None,
) -> bool:
    """Write result.json (and the reports) for a crashed or interrupted run; True when result.json was written.

    The result is assembled (gate.commands.assemble) from whatever the run left in --out, with an
    `internal_error` (or `interrupted`) blocker on top: never a verdict, and every case of this
    run's share (`shard`) without a complete judgment listed. When the decision itself fails, a
    minimal result with every case of the share unrun is written instead.
    """
    from gate.commands.assemble import assemble, read_out_dirs
    from gate.commands.decide import evidence_of_records
    from gate.commands.outputs import write_assembled
    from gate.model.policy import today
    from gate.plan.inputs import load_inputs
    from gate.plan.shard import select

    found = read_out_dirs([p for p in record_paths if p.is_file()], lenient=True)
    if lane is None:
        lanes = {r.lane for d in found for r in d.records if r.lane}
        if len(lanes) != 1:
            return False
        lane = lanes.pop()
    day = (clock or today)()
    interrupted = isinstance(exc, KeyboardInterrupt)
    notes = [
        f"the run was interrupted ({signal_name(exc)}); see the interrupted blocker"
        if interrupted
        else "an internal error stopped the run; see the internal_error blocker"
    ]
    try:
        ev = evidence_of_records(policy_path, lane, found, None, day, shard=shard, notes=notes)
        first = assemble(ev)
        unrun = first.result.unrun_case_ids if first.result is not None else []
        ev = ev.adding(internal_error_finding(exc, unrun))
        assemble(ev)
    except Exception:
        try:
            loaded, _dataset, plan, _findings = load_inputs(policy_path, lane)
        except Exception:
            return False  # without the policy and the plan there is no result to write
        if shard is not None:
            plan = select(plan, shard)
        policy = loaded.policy
        return _write_minimal(exc, policy.policy_id, policy.policy_version, plan, out_dir, notes, shard)
    try:
        write_assembled(out_dir, ev)
    except Exception:
        return (out_dir / "result.json").is_file() and _result_is_incomplete(out_dir)
    return True


def write_crash_note(
    exc: BaseException,
    policy_path: str | Path,
    lane: str | None,
    out_dir: Path,
    record_paths: Sequence[Path],
    shard: Shard | None = None,
) -> str | None:
    """`write_crash_result`, and the sentence for the crash message saying where it is (None: not written)."""
    if write_crash_result(exc, policy_path, lane, out_dir, record_paths, shard=shard):
        return f"{out_dir}/result.json says so, with the cases left unjudged."
    return None


def _result_is_incomplete(out_dir: Path) -> bool:
    from gate.model.result import ResultProblem, load_result

    try:
        return load_result(out_dir / "result.json").exit_code == INTERNAL_ERROR_EXIT
    except ResultProblem:
        return False


def _write_minimal(
    exc: BaseException,
    policy_id: str,
    policy_version: str,
    plan: Any,
    out_dir: Path,
    notes: list[str],
    shard: Shard | None = None,
) -> bool:
    """A result.json built by hand, for when the decision itself is what failed."""
    import json

    from gate.commands.outputs import write_text_atomic
    from gate.decide.core import RESULT_SCHEMA_VERSION
    from gate.model.result import Result

    ids = [c.case_id for c in plan.eligible]
    state = State.EVALUATION_INCOMPLETE
    result: dict[str, Any] = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "policy_id": policy_id,
        "policy_version": policy_version,
        "lane": plan.lane,
        "state": state.value,
        "exit_code": state.exit_code,
        "blockers": [internal_error_finding(exc, ids).to_dict()],
        "counts": {
            "eligible": len(ids),
            "completed": 0,
            "errored": 0,
            "withheld": 0,
            "unrun": len(ids),
            "cached": 0,
            "review": 0,
        },
        "unrun_case_ids": ids,
        "slices": {},
        "controls": {"ok": False, "failures": []},
        "cost": {
            "total": 0.0,
            "currency": "USD",
            "input_tokens": 0,
            "output_tokens": 0,
            "http_attempts": 0,
            "retries": 0,
            "cached_calls": 0,
            "by_slice": {},
        },
        "notes": [*notes, "the decision itself failed: the counts and cost above are not known"],
    }
    if shard is not None:
        result["shard"] = shard.to_dict()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        # Through the model, like every result.json (the same bytes: this file was always ASCII-escaped).
        text = json.dumps(Result.model_validate(result).written(), indent=2)
        write_text_atomic(out_dir / "result.json", text + "\n")
    except OSError:
        return False
    return True
