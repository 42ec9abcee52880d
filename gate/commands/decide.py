"""`gate decide`: the decision from records.jsonl files someone wrote, as `gate run` would decide it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path

from gate import __version__
from gate.decide.core import Decision, decide
from gate.judge.checks import evaluate_checks
from gate.measure import certify
from gate.measure.trend import TREND_RECORDS, summarize
from gate.measure.trend_lane import attach_trend, trend_cases
from gate.model.policy import today
from gate.model.records import Record, read_records
from gate.plan.inputs import load_inputs
from gate.run.lineage import make_lineage
from gate.validate.case_checks import attach_checks


def decide_from_records(
    policy_path: str | Path,
    record_paths: Sequence[Path],
    lane: str | None,
    max_cost: float | None = None,
    clock: Callable[[], dt.date] = today,
) -> Decision:
    records: list[Record] = []
    for p in record_paths:
        records += read_records(p)
    lanes = sorted({r.lane for r in records if r.lane})
    if lane is None:
        if len(lanes) != 1:
            from gate.model.errors import UsageError
            from gate.model.escape import visible

            files = ", ".join(str(p) for p in record_paths)
            named = ", ".join(visible(name, 60) for name in lanes[:5]) + (" ..." if len(lanes) > 5 else "")
            raise UsageError(
                f"{files}: the records name {'no lane' if not lanes else 'several lanes: ' + named}; "
                "fix: pass --lane with the lane to decide"
            )
        lane = lanes[0]
    loaded, dataset, plan, findings = load_inputs(policy_path, lane)
    lineage = make_lineage(loaded, dataset, records)
    check_results, check_blockers = evaluate_checks(loaded, plan.eligible)
    certification = certify.assess_records(loaded, plan, records, lineage.ragas_version)
    if certification is not None:
        findings = [*findings, *certification.findings]
    decision = decide(loaded, plan, [*findings, *check_blockers], records, lineage, clock(), max_cost=max_cost)
    assert decision.result is not None  # decide always decides
    result = attach_checks(decision.result, check_results, plan.eligible)
    result = certify.attach(result, certification, clock().isoformat(), __version__)
    if loaded.policy.trend is not None:
        # The trend's judgments sit beside each records.jsonl (trend.jsonl); the report shows them again.
        beside = [p.parent / TREND_RECORDS for p in record_paths]
        trend_records = [r for t in beside if t.is_file() for r in read_records(t)]
        result = attach_trend(result, summarize(loaded.policy.trend, trend_cases(plan), trend_records))
    decision.result = result
    return decision
