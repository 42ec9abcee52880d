"""`gate run --lane scheduled` on a policy with `drift:`: judge the sample, write what it found.

Outputs in `--out`: `drift-records.jsonl` (one line per judgment, metered like every judgment),
`attempts.jsonl` (each attempt written ahead when sent: after a kill, the bill of what was sent;
the next run there bills those attempts in its own result),
`drift.json`, `proposed-cases.jsonl` (for people, never for the gold cases), and the usual
`result.json` and reports. The state is `passed` unless the run could not complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate import __version__
from gate.decide.core import RESULT_SCHEMA_VERSION, Decision, cost_summary
from gate.decide.rules import key_fix
from gate.judge import Evaluator, Judgment, ragas_version
from gate.judge.budget import Budget
from gate.judge.journal import DRIFT_STREAM, JOURNAL_FILE, AttemptJournal, Unrecorded, recover
from gate.measure.drift.findings import against_previous, pass_rates, proposals, verdicts
from gate.model.cases import Case, load_dataset
from gate.model.escape import is_name
from gate.model.lineage import Lineage
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy
from gate.model.records import Record, RecordWriter
from gate.model.result import Result
from gate.model.states import Finding, State, overall_state
from gate.model.traces import (
    DRIFT_LANE,
    Trace,
    as_case,
    draw_sample,
    drift_config,
    drift_policy,
    load_traces,
    previous_drift,
)
from gate.model.wording import agree, plural
from gate.run.outdir import clear_outputs
from gate.run.sweep import judge_each

DRIFT_RECORDS = "drift-records.jsonl"
DRIFT_RESULT = "drift.json"
PROPOSED_CASES = "proposed-cases.jsonl"
DRIFT_FILES = (DRIFT_RECORDS, DRIFT_RESULT, PROPOSED_CASES)


@dataclass(frozen=True)
class DriftRun:
    out_dir: Path
    boundary: float  # the run's cost boundary (policy limit, or --max-cost when lower)
    api_key: str
    cache_dir: Path | None
    previous: Path | None = None  # a previous drift run's --out (or its drift.json)


# Builds one records line (gate.run.recording.make_record with the drift lane's lineage), passed in by
# gate.commands.drift.
RecordMaker = Callable[[Case, Judgment, LoadedPolicy, Lineage], Record]


def run_drift(
    loaded: LoadedPolicy,
    opts: DriftRun,
    factory: Callable[[LoadedPolicy, str, Path | None], Evaluator],
    record: RecordMaker,
) -> Decision:
    drift = drift_config(loaded)
    judged_by = drift_policy(loaded)  # refuses a prompt that needs {reference}, before anything else
    trace_file = load_traces(loaded)
    previous, previous_problem = previous_drift(opts.previous) if opts.previous is not None else (None, None)
    sample = [as_case(t, drift.default_slice) for t in draw_sample(trace_file.traces, drift.sample, drift.seed)]
    lineage = Lineage(
        policy_sha256=loaded.sha256,
        dataset_sha256=trace_file.sha256,
        prompt_sha256=judged_by.prompt_sha256,
        metric_version=loaded.policy.metric.version,
        evaluator_model=loaded.policy.evaluator.model,
        ragas_version=ragas_version(),
        gate_version=__version__,
    )
    out = opts.out_dir
    traces = {t.trace_id: t for t in trace_file.traces}
    records, unbilled = _judge_sample(loaded, judged_by, sample, lineage, opts, factory, record)
    carried = _carried_records(unbilled, traces, drift.default_slice, judged_by, lineage, record)

    vs = verdicts(sample, records)
    overall, slices = pass_rates(vs)
    # The gold cases are read, never written: proposals are compared with them, not added to them.
    proposed = proposals(vs, traces, load_dataset(loaded).cases, previous, loaded.policy.records.clear_text)
    with (out / PROPOSED_CASES).open("w", encoding="utf-8") as fh:
        for p in proposed:
            fh.write(json.dumps(p, ensure_ascii=False, sort_keys=True) + "\n")

    summary: dict[str, Any] = {
        "traces_file": drift.traces,
        "traces_sha256": trace_file.sha256,
        "skipped_lines": list(trace_file.bad_lines),
        "sample": {"requested": drift.sample, "seed": drift.seed, "drawn": len(sample), "of": len(trace_file.traces)},
        "overall": overall,
        "slices": slices,
        "previous": against_previous(overall, slices, previous, previous_problem),
        "proposed_cases": len(proposed),
        "proposed_by_reason": {
            why: sum(1 for p in proposed if why in p["why"]) for why in ("disagreement", "new_failure_shape")
        },
    }
    judgments = [
        {"trace_id": v.trace_id, "slice": v.slice, "verdict": v.label, "reason": v.reason,
         "input_sha256": v.input_sha256, "status": v.status, "error_kind": v.error_kind}
        for v in vs
    ]  # fmt: skip
    blockers = _incomplete(loaded, sample, records, opts)
    state = overall_state([b.state for b in blockers])
    result = _result(loaded, state, blockers, sample, records, lineage, opts, summary, carried)
    drift_json = {
        "schema_version": 1,
        "policy_id": loaded.policy.policy_id,
        "policy_version": loaded.policy.policy_version,
        "state": state.value,
        **summary,
        "judgments": judgments,
        "cost": result.cost.written(),
        "lineage": lineage.to_dict(),
    }
    (out / DRIFT_RESULT).write_text(json.dumps(drift_json, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return Decision(state=state, blockers=blockers, waived=[], outcomes=[], result=result)


def _judge_sample(
    loaded: LoadedPolicy,
    judged_by: LoadedPolicy,
    sample: Sequence[Case],
    lineage: Lineage,
    opts: DriftRun,
    factory: Callable[[LoadedPolicy, str, Path | None], Evaluator],
    record: RecordMaker,
) -> tuple[list[Record], list[Unrecorded]]:
    """Load the judge, clear the earlier outputs and the lane's files in --out, then judge the
    sample (without a key, nothing) into drift-records.jsonl.

    Also returns the attempts of earlier drift runs in --out that never finished (killed before
    drift.json), which no result has billed yet."""
    out = opts.out_dir
    out.mkdir(parents=True, exist_ok=True)
    # A judge the policy cannot have is a usage error: known before anything in --out changes.
    evaluator = factory(judged_by, opts.api_key, opts.cache_dir) if opts.api_key else None
    clear_outputs(out)  # the earlier run's result is never read as this one's
    journal_path = out / JOURNAL_FILE
    # Each attempt is written ahead to the journal (stream "drift"): the lane has no --resume, so
    # after a kill the journal is the bill of what was sent. A finished run (drift.json written)
    # billed its journal in its result: the next run starts a new one. One that did not finish
    # billed nothing: its journal is kept and appended to, and this run's result bills its attempts.
    finished = (out / DRIFT_RESULT).exists()
    unbilled = [] if finished else recover(journal_path, [], DRIFT_STREAM)
    if not unbilled:
        journal_path.unlink(missing_ok=True)
    for name in DRIFT_FILES:
        (out / name).unlink(missing_ok=True)

    records: list[Record] = []
    with RecordWriter(out / DRIFT_RECORDS) as writer, contextlib.closing(AttemptJournal(out / JOURNAL_FILE)) as journal:
        if evaluator is not None:

            def emit(case: Case, judgment: Judgment) -> None:
                rec = record(case, judgment, judged_by, lineage)
                writer.write(rec)
                records.append(rec)

            concurrency = loaded.policy.evaluator.max_concurrency
            budget = Budget(opts.boundary)
            budget.spent = math.fsum(u.cost + sum(a.held for a in u.attempts) for u in unbilled)  # one boundary
            asyncio.run(judge_each(evaluator, sample, budget, concurrency, emit, (journal, DRIFT_STREAM)))
    return records, unbilled


def _carried_records(
    unbilled: Sequence[Unrecorded],
    traces: Mapping[str, Trace],
    default_slice: str,
    judged_by: LoadedPolicy,
    lineage: Lineage,
    record: RecordMaker,
) -> list[Record]:
    """The unfinished earlier runs' attempts as `cancelled` records, billed in `cost`, never verdicts."""
    out: list[Record] = []
    for u in unbilled:
        # The journal is untrusted: an id the traces file no longer has (or never had) is billed
        # under a stand-in trace of the default slice.
        gone = Trace(trace_id=u.case_id if is_name(u.case_id) else "unknown", user_input="-", response="-")
        case = as_case(traces.get(u.case_id, gone), default_slice)
        judgment = Judgment(
            status="error",
            error_kind="cancelled",
            error_message="an attempt of an earlier drift run in this --out that was killed before it finished",
            attempts=list(u.attempts),
            input_tokens=sum(a.input_tokens for a in u.attempts),
            output_tokens=sum(a.output_tokens for a in u.attempts),
            cost=u.cost,
        )
        out.append(record(case, judgment, judged_by, lineage))
    return out


def _incomplete(loaded: LoadedPolicy, sample: Sequence[Case], records: list[Record], opts: DriftRun) -> list[Finding]:
    """Only what kept the run from completing blocks: the drift lane judges no product."""
    if not opts.api_key:
        env = loaded.policy.evaluator.api_key_env
        return [
            Finding(
                State.EVALUATION_INCOMPLETE,
                "missing_credentials",
                f"no API key in ${env}, so no trace was judged; fix: {key_fix(env)}",
                case_ids=tuple(c.case_id for c in sample),
            )
        ]
    done = {r.case_id: r for r in records}
    errored = [c.case_id for c in sample if c.case_id in done and done[c.case_id].status == "error"]
    budget = [c.case_id for c in sample if c.case_id in done and done[c.case_id].error_kind == "budget"]
    unrun = [c.case_id for c in sample if c.case_id not in done or done[c.case_id].status == "skipped"]
    out: list[Finding] = []
    limit = loaded.policy.limits.max_evaluator_errors
    if len(errored) > limit:
        out.append(
            Finding(
                State.EVALUATION_INCOMPLETE,
                "evaluator_errors",
                f"{plural(len(errored), 'trace')} got no verdict (evaluator errors), limit {limit}",
                case_ids=tuple(errored),
            )
        )
    if unrun:
        kind = "budget_exhausted" if budget else "unrun_cases"
        why = f"the cost boundary ({opts.boundary:g}) stopped scheduling" if budget else "they were not judged"
        out.append(
            Finding(
                State.EVALUATION_INCOMPLETE,
                kind,
                f"{plural(len(unrun), 'sampled trace')} unjudged: {why}",
                case_ids=tuple(unrun),
            )
        )
    return out


def _result(
    loaded: LoadedPolicy,
    state: State,
    blockers: list[Finding],
    sample: Sequence[Case],
    records: list[Record],
    lineage: Lineage,
    opts: DriftRun,
    summary: Mapping[str, Any],
    carried: Sequence[Record] = (),
) -> Result:
    """A result.json in the shape of every other run, so publish, the Action and reports read it.

    `cost` bills this run's records and `carried`: what earlier unfinished runs here paid."""
    done = {r.case_id: r for r in records}
    unrun = [c.case_id for c in sample if c.case_id not in done or done[c.case_id].status == "skipped"]
    price = loaded.policy.evaluator.price
    return Result.model_validate(
        {
            "schema_version": RESULT_SCHEMA_VERSION,
            "policy_id": loaded.policy.policy_id,
            "policy_version": loaded.policy.policy_version,
            "lane": DRIFT_LANE,
            "state": state.value,
            "exit_code": state.exit_code,
            "blockers": [b.to_dict() for b in blockers],
            "counts": {
                "eligible": len(sample),
                "completed": sum(1 for r in records if r.status == "ok"),
                "errored": sum(1 for r in records if r.status == "error"),
                "withheld": 0,
                "unrun": len(unrun),
                "cached": sum(1 for r in records if r.cache == "hit"),
                "review": 0,
            },
            "unrun_case_ids": unrun,
            "slices": {},
            "controls": {"ok": True, "failures": []},
            "cost": cost_summary([*records, *carried], price.currency if price else "USD"),
            "lineage": lineage.to_dict(),
            "waived": [],
            "overrides": [],
            "limits": {
                "max_total_cost": opts.boundary,
                "max_evaluator_errors": loaded.policy.limits.max_evaluator_errors,
            },
            "notes": [
                "drift lane: production traces, no human labels; the state says only whether the run completed",
                f"{plural(summary['proposed_cases'], 'proposed case')} in {PROPOSED_CASES} for independent human review: "
                f"gate review queue --policy {shown_path(loaded.path)} --from {shown_path(opts.out_dir)} "
                "--out proposed-queue.jsonl",
                *_carried_note(carried),
            ],
            "cases": [],
            "drift": dict(summary),
        }
    )


def _carried_note(carried: Sequence[Record]) -> list[str]:
    if not carried:
        return []
    attempts = sum(len(r.attempts) for r in carried)
    return [
        f"{plural(attempts, 'attempt')} of an earlier drift run in this --out, killed before it finished, {agree(attempts, 'is', 'are')} billed "
        f"in this run's cost ({math.fsum(r.budget_charge for r in carried):.6g} counted against the boundary)"
    ]
