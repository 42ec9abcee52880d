"""One assembly: every result (run, --resume, decide, merge, crash, signal) from one body of evidence.

A command gathers `RunEvidence` (the records, the trend's, the journal's unrecorded attempts, the
shard, the checks, the certification, the findings of its inputs and of its own failures) and
`assemble` turns it into the decision and result.json, always the same way; no command attaches
a section on its own. A new lane plugs in by adding to the evidence: a `Finding` (a blocker of
its kind, through gate/model/states.py), a note, or a section of result.json (`sections`,
validated by gate/model/result.py). `read_out_dir` reads the evidence a run left in a directory,
so `gate decide`, `gate merge` and the crash path see what the run saw.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate import __version__
from gate.decide.bill import Bill
from gate.decide.core import Decision, add_costs, cost_summary, decide
from gate.decide.product.verdict import ProductEvidence
from gate.judge.journal import JOURNAL_FILE, TREND_STREAM, Unrecorded, recover
from gate.measure import certify
from gate.measure.trend import TREND_RECORDS, compare_to_base, summarize
from gate.measure.trend_lane import attach_trend, trend_cases
from gate.model.cases import Dataset
from gate.model.lineage import Lineage
from gate.model.policy import LoadedPolicy
from gate.model.records import Record, read_records
from gate.model.states import Finding
from gate.plan.selection import Plan
from gate.plan.shard import Shard
from gate.validate.case_checks import NO_CHECKS, CheckResults, attach_checks

if TYPE_CHECKING:
    from gate.model.result import Trend as BaseTrend


@dataclass(frozen=True)
class TrendEvidence:
    """The trend's judgments (trend.jsonl) and, with --base-result, the base run's trend."""

    records: tuple[Record, ...] = ()
    compare: bool = False  # a base was asked for: the result says what the comparison found
    base: BaseTrend | None = None
    base_problem: str | None = None


@dataclass(frozen=True)
class RunEvidence:
    """Everything a result rests on. `plan` is the share decided (a shard's, or the whole lane)."""

    loaded: LoadedPolicy
    dataset: Dataset
    plan: Plan
    lineage: Lineage
    today: dt.date
    # Every verdict record paid for this result, in the lane or not: a tuple, or a run's records file
    # (`RecordsFile`), read once by `assemble`, one record at a time.
    records: Iterable[Record] = ()
    findings: tuple[Finding, ...] = ()  # the inputs', the certification's, a lane's, a failure's
    notes: tuple[str, ...] = ()
    max_cost: float | None = None
    checks: CheckResults = NO_CHECKS  # the team's checks on the plan's cases, with the blockers they raise
    certification: certify.Certification | None = None
    trend: TrendEvidence = TrendEvidence()
    # Attempts the journal holds that no record names (a killed run's): paid, so billed; never a verdict.
    unrecorded: tuple[Unrecorded, ...] = ()
    shard: Shard | None = None
    # Sections of result.json a lane contributes (e.g. `merged_shards`), each validated by `Result`.
    sections: Mapping[str, Any] = field(default_factory=dict)
    # `gate run --batch`: the upper bound the boundary held for the batch at submission; the bill
    # then says `batch: true` (its records are billed at the batch prices already).
    batch_reserved: float | None = None
    # A product lane: the judge's figures per slice and the base run's verdicts (gate/decide/product/verdict.py).
    product: ProductEvidence | None = None

    def adding(self, *findings: Finding, notes: Sequence[str] = ()) -> RunEvidence:
        """The same evidence with more findings (a failure found while writing, an interruption)."""
        return dataclasses.replace(self, findings=(*self.findings, *findings), notes=(*self.notes, *notes))


def assemble(ev: RunEvidence) -> Decision:
    """The decision and result.json of `ev`: the rules, then every section, then the whole bill.
    The records are read once: each is billed as the decision reads it."""
    loaded, plan = ev.loaded, ev.plan
    bill = _LaneBill(ev)
    decision = decide(
        loaded,
        plan,
        (*ev.findings, *ev.checks.findings),  # the checks' blockers join here, once, on every path
        bill.reading(ev.records),
        ev.lineage,
        ev.today,
        max_cost=ev.max_cost,
        notes=ev.notes,
        product=ev.product,
    )
    assert decision.result is not None  # decide always decides
    result = attach_checks(decision.result, ev.checks, plan.eligible)
    result = result.with_(cost=bill.summary(result.cost.currency))
    if loaded.policy.trend is not None:
        summary = summarize(loaded.policy.trend, trend_cases(plan), ev.trend.records)
        if ev.trend.compare:
            summary = compare_to_base(summary, ev.trend.base, ev.trend.base_problem)
        result = attach_trend(result, summary, cost_summary(ev.trend.records, result.cost.currency))
    result = certify.attach(result, ev.certification, ev.today.isoformat(), __version__)
    if ev.shard is not None:
        result = result.with_(shard=ev.shard.share_of(plan))
    if ev.sections:
        result = result.with_(**ev.sections)
    decision.result = result
    return decision


class _LaneBill:
    """Every verdict attempt paid for the evidence: the records of every case, in the lane or not
    (those outside it listed in `outside_lane`), and the journal's unrecorded attempts."""

    def __init__(self, ev: RunEvidence) -> None:
        self.ev = ev
        self.in_lane = {c.case_id: c.slice for c in ev.plan.eligible}
        self.bill = Bill()
        self.outside: set[str] = set()

    def reading(self, records: Iterable[Record]) -> Iterator[Record]:
        """`records`, each billed as it is read."""
        for r in records:
            # A record of a lane case is billed to the case file's slice (the answer key), as the decision reads it.
            self.bill.add(r, self.in_lane.get(r.case_id))
            if r.case_id not in self.in_lane:
                self.outside.add(r.case_id)
            yield r

    def summary(self, currency: str) -> dict[str, Any]:
        ev = self.ev
        known = {c.case_id: c.slice for c in ev.dataset.cases}
        cost = add_costs(self.bill.summary(currency), _unrecorded_bill(ev.unrecorded, known, currency))
        outside = sorted(self.outside | {u.case_id for u in ev.unrecorded if u.case_id not in self.in_lane})
        if outside:
            cost["outside_lane"] = outside
        if ev.batch_reserved is not None:
            cost["batch"], cost["batch_reserved"] = True, ev.batch_reserved
        return cost


def _unrecorded_bill(unrecorded: Sequence[Unrecorded], slice_of: Mapping[str, str], currency: str) -> dict[str, Any]:
    by_slice: dict[str, float] = {}
    for u in unrecorded:
        if u.case_id in slice_of:
            by_slice[slice_of[u.case_id]] = by_slice.get(slice_of[u.case_id], 0.0) + u.cost
    attempts = [a for u in unrecorded for a in u.attempts]
    total = sum(u.cost for u in unrecorded)
    return {
        "total": total,
        "currency": currency,
        "input_tokens": sum(a.input_tokens for a in attempts),
        "output_tokens": sum(a.output_tokens for a in attempts),
        "http_attempts": len(attempts),
        "retries": sum(max(0, len(u.attempts) - 1) for u in unrecorded),
        "cached_calls": 0,
        "unanswered_attempts": sum(1 for a in attempts if a.status_code is None),
        "usage_missing": sum(1 for a in attempts if a.usage_missing),
        "budget_spent": total + sum(a.held for a in attempts),
        "over_reservation": sum(1 for a in attempts if a.over_reservation),
        "by_slice": by_slice,
    }


@dataclass(frozen=True)
class OutDirEvidence:
    """What one run left in its --out: verdict records, trend records, and the journal's unrecorded attempts."""

    records: tuple[Record, ...]
    trend_records: tuple[Record, ...]
    unrecorded: tuple[Unrecorded, ...]


def read_out_dir(records_path: Path, *, lenient: bool = False) -> OutDirEvidence:
    """The evidence a run left beside `records_path` (its records.jsonl): trend.jsonl and the attempt
    journal's unrecorded attempts too. `lenient` (the crash path): an unreadable file is no evidence."""
    return read_out_dirs([records_path], lenient=lenient)[0]


def read_out_dirs(records_paths: Sequence[Path], *, lenient: bool = False) -> list[OutDirEvidence]:
    """`read_out_dir` of each directory the records files are in (a directory once, in order)."""
    by_dir: dict[Path, list[Path]] = {}
    for p in records_paths:
        by_dir.setdefault(p.parent, []).append(p)
    found: list[OutDirEvidence] = []
    for directory, paths in by_dir.items():
        records = [r for p in paths for r in (_read_if_readable(p) if lenient else read_records(p))]
        found.append(beside(directory, records, lenient=lenient))
    return found


def beside(directory: Path, records: Sequence[Record], *, lenient: bool = False) -> OutDirEvidence:
    """`records` with what their run left beside them in `directory`: the trend's records and the
    journal's attempts that no record names."""
    trend = _read_if_readable(directory / TREND_RECORDS) if lenient else _read(directory / TREND_RECORDS)
    journal = directory / JOURNAL_FILE
    unrecorded = [*recover(journal, records), *recover(journal, trend, TREND_STREAM)] if journal.is_file() else []
    return OutDirEvidence(tuple(records), tuple(trend), tuple(unrecorded))


def _read(path: Path) -> list[Record]:
    return read_records(path) if path.is_file() else []


def _read_if_readable(path: Path) -> list[Record]:
    try:
        return _read(path)
    except Exception:
        return []  # unreadable evidence is no evidence; its cases show as unrun
