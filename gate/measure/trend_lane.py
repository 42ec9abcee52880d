"""The trend lane: a second metric graded beside the verdict, under the same cost boundary.

Its judgments go to trend.jsonl (journaled as the stream "trend"); its summary and its spend join
the run's result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.decide.core import add_costs
from gate.judge import Evaluator, Judgment
from gate.judge.budget import Budget
from gate.judge.journal import TREND_STREAM, AttemptJournal
from gate.measure.trend import TREND_RECORDS
from gate.model.cases import Case, Dataset
from gate.model.policy import LoadedPolicy
from gate.model.records import Record, RecordWriter
from gate.plan.selection import Plan
from gate.run.lineage import JudgeSettings, make_lineage
from gate.run.recording import make_record
from gate.run.sweep import judge_each

if TYPE_CHECKING:
    from gate.model.result import Result


def trend_cases(plan: Plan) -> list[Case]:
    """The trend grades the lane's own cases: controls are evaluator checks, not product answers."""
    return [c for c in plan.scheduled if not c.is_control]


def trend_todo(plan: Plan, prior: Sequence[Record]) -> list[Case]:
    """The cases still to grade: a case with a grade in the run being resumed is not paid again."""
    done = {r.case_id for r in prior if r.status == "ok"}
    return [c for c in trend_cases(plan) if c.case_id not in done]


def judge_trend(
    trend_loaded: LoadedPolicy,
    plan: Plan,
    dataset: Dataset,
    evaluator: Evaluator,
    budget: Budget,
    out: Path,
    base_url: str,
    journal: AttemptJournal | None = None,
    prior: Sequence[Record] = (),
) -> list[Record]:
    """The trend beside the verdict, under the same boundary; its judgments go to trend.jsonl.

    `prior`: the trend judgments of the run being resumed; a case with a verdict there is not
    judged (nor paid) again."""
    settings = JudgeSettings.of(trend_loaded, base_url)
    lineage = make_lineage(trend_loaded, dataset, base_url=base_url)
    records: list[Record] = list(prior)
    with RecordWriter(out / TREND_RECORDS) as writer:

        def emit(case: Case, judgment: Judgment) -> None:
            rec = make_record(case, 0, judgment, trend_loaded, lineage, plan.lane, evaluator.ragas_version, settings)
            writer.write(rec)
            records.append(rec)

        concurrency = trend_loaded.policy.evaluator.max_concurrency
        todo = trend_todo(plan, prior)
        stream = (journal, TREND_STREAM) if journal is not None else None
        asyncio.run(judge_each(evaluator, todo, budget, concurrency, emit, stream))
    return records


def attach_trend(result: Result, trend: dict[str, Any], bill: dict[str, Any]) -> Result:
    """The trend goes beside the decision; its spend is part of the run's cost (same boundary).

    `bill`: `gate.decide.core.cost_summary` of the trend's records, added to every figure of the
    run's cost (usage_missing, retries and by_slice too), its total also kept as `trend_total`."""
    written = result.cost.written()
    cost = add_costs(written, {k: v for k, v in bill.items() if k in written})
    cost["budget_spent"] = result.cost.spent + bill["budget_spent"]
    cost["trend_total"] = trend["cost"]["total"]
    return result.with_(trend=trend, cost=cost)
