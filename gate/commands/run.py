"""`gate run`: plan, judge under a hard cost boundary, record, decide, write the outputs.

This module schedules: `run` is a short pipeline (prepare the lane, take stock of an earlier
attempt, recover, judge, decide, write) and `gate.run.runner.Runner` judges the plan, controls first,
stopping at the boundary, a failed control or a violated pair. The pieces live beside it: estimates and the
boundary (gate.judge.cost), records (gate.run.recording), resume (gate.run.resume), the trend lane
(gate.measure.trend_lane), the drift lane (gate.commands.drift), the dry-run plan (gate.commands.dry_run) and the
output files (gate.commands.outputs). The decision itself is `gate.decide.core.decide`, a pure function, so
`gate decide` on the records this writes gives the same result.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import gc
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from gate.commands.assemble import RunEvidence, TrendEvidence, assemble
from gate.commands.batch_file import clear_collected, refuse_uncollected
from gate.commands.drift import print_drift_plan, run_drift_lane
from gate.commands.dry_run import print_plan
from gate.commands.outputs import write_assembled
from gate.decide import settled
from gate.decide.core import Decision
from gate.decide.product import seal
from gate.decide.product.audit_plan import refuse_other_queue
from gate.decide.product.seal import Sealed
from gate.decide.product.verdict import ProductEvidence, new_stop_check
from gate.decide.retirement import retired_message, shut_down_detail
from gate.judge import Evaluator, Judgment, installed_version, resolve_base_url
from gate.judge.cached import serve_from_cache
from gate.judge.checks import evaluate_checks
from gate.judge.cost import boundary, max_cost_notes, prices
from gate.judge.journal import JOURNAL_FILE, TREND_STREAM, AttemptJournal, Unrecorded, recover
from gate.judge.models_endpoint import judge_retirement
from gate.judge.pacing import Pacer, pacer_for, pacing
from gate.measure import certify
from gate.measure.calibrate import requirement
from gate.measure.drift.lane import DriftRun
from gate.measure.product_evidence import audit_of, product_evidence, read_base_verdicts
from gate.measure.trend import TREND_RECORDS, read_base_trend
from gate.measure.trend_lane import judge_trend, trend_todo
from gate.model.cases import Dataset
from gate.model.errors import UsageError
from gate.model.lineage import Lineage
from gate.model.overrides import waived_case_ids
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy, Price, load_policy, today, with_judge_model
from gate.model.records import (
    RECORDS_FILE,
    Record,
    RecordErrorKind,
    RecordsError,
    RecordsFile,
    RecordShard,
    RecordWriter,
    read_records,
)
from gate.model.retirement import Retirement
from gate.model.states import JUDGE_RETIRED, Finding, State, blocking_findings
from gate.model.traces import DRIFT_LANE
from gate.model.trend_rubric import load_trend
from gate.model.wording import agree, plural
from gate.plan.inputs import cache_dir_for, load_product_inputs
from gate.plan.responses import resumed_answers_problem
from gate.plan.selection import Plan, recorded_order_seed
from gate.plan.shard import Shard, lane_cases, select
from gate.run.lineage import JudgeSettings, make_lineage, run_retirement
from gate.run.order_seed import OrderSeed, order_seed_for, replay_note
from gate.run.outdir import OutputWriteError, check_out_dir, clear_outputs, describe
from gate.run.progress import Progress
from gate.run.recording import make_record, write_or_keep
from gate.run.resume import recovered_records, reusable_records
from gate.run.runner import JudgingTools, RecordContext, Runner, judge_all
from gate.run.stop import StopWhenDecided
from gate.run.worker_records import (
    WORKER_RECORDS_GLOB,
    WorkerReading,
    discard_worker_records,
    fold_worker_records,
    unfolded_worker_records,
)
from gate.run.workers import judge_in_workers, make_budget, worker_count
from gate.validate.case_checks import CheckResults, load_checks, run_checks_plain

if TYPE_CHECKING:
    from gate.model.result import Trend as BaseTrend


BatchMode = Literal["submit", "collect", "wait"]


@dataclass(frozen=True)
class BatchOptions:
    mode: BatchMode
    timeout_s: float | None = None  # --batch-timeout: how long `wait` polls (None: until the batch ends)
    poll_s: float = 60.0  # seconds between two status requests while waiting
    sleep: Callable[[float], None] = time.sleep  # injectable: tests never sleep
    clock: Callable[[], float] = time.monotonic


@dataclass
class RunOptions:
    lane: str
    out_dir: Path
    max_cost: float | None = None
    resume: bool = False
    rejudge_parse_errors: bool = False  # --resume sends parse_error / invalid_label judgments again
    dry_run: bool = False
    cache_dir: Path | None = None  # None: the policy's `cache_dir`, else .gate-cache
    use_cache: bool = True
    progress: IO[str] | None = None
    base_result: Path | None = None  # a base run's --out: the trend is compared against it
    shard: Shard | None = None  # `--shard I/N`: this share of the cases, 1/N of the boundary
    batch: BatchOptions | None = None  # `--batch submit|collect|wait` (gate.commands.batch)
    # None: the policy's (gate/judge/pacing.py). Tests and benches give their own (a clock they control).
    pacer: Pacer | None = None
    responses: Path | None = None  # `--responses FILE`: a product lane's answers (gate/plan/responses.py)
    order_seed: str | None = None  # `--order-seed S`: replay a recorded product run's seed (None: the run fixes one)
    audit: Path | None = None  # `--audit LEDGER`: people's labels on this run's answers (gate/review/audit_labels.py)
    audit_queue: Path | None = None  # `--audit-queue QUEUE`: the draw those labels were made on
    # Judge with this model (and these prices) instead of the policy's: a candidate judge
    # (`gate calibrate --candidate-model`, gate/commands/migrate.py). The policy file is untouched.
    judge_model: str | None = None
    judge_price: Price | None = None


EvaluatorFactory = Callable[[LoadedPolicy, str, Path | None], Evaluator]


def default_factory(loaded: LoadedPolicy, api_key: str, cache_dir: Path | None) -> Evaluator:
    # Imported here: this is the moment a model call is due, and only now is ragas worth loading.
    from gate.judge.ragas_judge import make_evaluator

    return make_evaluator(loaded, api_key=api_key, cache_dir=cache_dir)


def run(
    policy_path: str | Path,
    opts: RunOptions,
    *,
    env: dict[str, str] | None = None,
    factory: EvaluatorFactory = default_factory,
    clock: Callable[[], dt.date] = today,
) -> Decision:
    env = dict(os.environ) if env is None else env
    if opts.lane == DRIFT_LANE:
        drift_loaded = load_policy(policy_path)
        if drift_loaded.policy.drift is not None:
            return _run_drift(drift_loaded, opts, env, factory)
    stream = opts.progress if opts.progress is not None else sys.stderr
    if stream.isatty():  # on a terminal the checks and the judge's loading take seconds: say so
        stream.write(f"checking {shown_path(policy_path)} (lane {opts.lane})\n")
    lane = _prepare(policy_path, opts, env, factory, clock)
    # A batch submitted from this --out and not collected: judging its cases live would pay twice.
    # The dry run says so too: the run it shows would refuse.
    refuse_uncollected(lane.opts.out_dir, policy_path, lane.plan.lane)
    if lane.opts.dry_run:
        return _dry_run(lane)
    check_out_dir(lane.opts.out_dir)  # before anything is paid: a usage error (exit 2) if it cannot be written
    earlier = _take_stock(lane)
    if earlier.records and lane.retirement is not None:
        lane = dataclasses.replace(lane, retirement=run_retirement(lane.retirement, lane.loaded, earlier.records))
    lineage = make_lineage(lane.loaded, lane.dataset, earlier.records, lane.base_url, lane.retirement)
    # The team's deterministic checks: every eligible case, before any model call, at no cost.
    check_results = evaluate_checks(lane.loaded, lane.plan.eligible)
    got = _Gathered(
        prior=earlier.records,
        prior_trend=earlier.trend_records,
        findings=list(lane.findings),  # the checks' blockers come with `check_results`
        notes=[*max_cost_notes(lane.loaded, opts.max_cost), *lane.notes],
    )
    _gather(lane, earlier, got, lineage, check_results)
    return _write(_evidence(lane, earlier, got, check_results), lane.opts, got.failure)


@dataclass(frozen=True)
class _Lane:
    """One run of a lane, fixed before anything is paid: its inputs, this shard's plan, the judge."""

    loaded: LoadedPolicy
    dataset: Dataset
    plan: Plan
    findings: list[Finding]  # the validators', the certification's and the calibration's
    opts: RunOptions  # a shard's `max_cost` is its share of the boundary
    base_url: str
    judge: JudgeSettings
    certification: certify.Certification | None
    calibration: requirement.JudgeCalibration | None
    api_key: str  # "" when the policy's key variable is unset
    factory: EvaluatorFactory
    clock: Callable[[], dt.date]
    product: ProductEvidence | None = None  # a product lane's judge figures and base
    notes: tuple[str, ...] = ()  # what reading the inputs found worth saying (responses outside the lane)
    retirement: Retirement | None = None  # the judge model's shutdown date, asked once (not on a dry run)


def _prepare(
    policy_path: str | Path,
    opts: RunOptions,
    env: dict[str, str],
    factory: EvaluatorFactory,
    clock: Callable[[], dt.date],
    continued: OrderSeed | None = None,
    sealed: Sealed | None = None,
) -> _Lane:
    """The lane's run, fixed before anything is paid. `continued`: the seed of the run this one
    continues (a batch's, kept in batch.json), in place of the one a fresh run draws; `sealed`: what
    sized that run's audit plans (batch.json's), which this one keeps."""
    # The order and the audit plan are fixed here, before anything is judged (gate/run/order_seed.py).
    where = shown_path(opts.out_dir / "batch.json")
    if continued is None and opts.resume:
        prior = _resumed_records(opts)
        recorded = recorded_order_seed(prior)
        continued = OrderSeed(recorded, "records") if recorded is not None else None
        where = f"the records in {shown_path(opts.out_dir)} (--resume)"
        sealed = seal.sealed_sizing(prior, opts.lane, where) if recorded is not None else None
    seed = order_seed_for(env, given=opts.order_seed, continued=continued)
    loaded, dataset, plan, findings, answers = load_product_inputs(
        policy_path,
        opts.lane,
        opts.responses,
        need_responses=not opts.dry_run,
        order_seed=seed.value,
        order_seed_from=seed.source,
    )
    if opts.judge_model is not None:
        loaded = with_judge_model(loaded, opts.judge_model, opts.judge_price)
    notes = answers.notes
    if plan.order_seed is not None and seed.source == "given":
        notes = (*notes, replay_note(plan.order_seed))
    base_url = resolve_base_url(loaded.policy.evaluator.base_url, env.get("OPENAI_BASE_URL"))
    judge = JudgeSettings.of(loaded, base_url)
    # Before sharding: the held-out set is the whole lane's, whichever share this process judges.
    certification = certify.assess(loaded, plan, judge, installed_version("ragas") or "")
    if certification is not None:
        findings = [*findings, *certification.findings]
    # Was this very judge measured against people? Known now; the lane still runs.
    calibration = requirement.check_calibration(loaded, opts.lane, judge, installed_version("ragas") or "", clock())
    if calibration is not None:
        findings = [*findings, *calibration.findings]
    lane_plan = plan  # the whole lane's, whose slices' cases every shard seals alike
    plan, opts = _share(loaded, plan, opts)
    api_key = env.get(loaded.policy.evaluator.api_key_env, "").strip()
    base = (
        read_base_verdicts(opts.base_result, opts.lane, loaded.policy.policy_id)
        if opts.base_result is not None
        else None
    )
    audit = audit_of(loaded, opts.lane, opts.audit, opts.audit_queue)
    if audit is not None and audit.queue is not None and plan.order_seed is not None:
        # Refused before anything is paid: a queue of another seed is another draw than this run's plan.
        refuse_other_queue(audit.queue, plan.order_seed)
    product = product_evidence(loaded, opts.lane, calibration, base, audit, opts.out_dir)
    plan, notes = _seal_sizing(loaded, opts.lane, (plan, lane_plan), product, sealed, where, notes)
    # When the judge's model shuts down: asked once, before anything is paid (a dry run asks nobody).
    retirement = judge_retirement(loaded, base_url, api_key, ask=not opts.dry_run)
    return _Lane(
        loaded,
        dataset,
        plan,
        findings,
        opts,
        base_url,
        judge,
        certification,
        calibration,
        api_key,
        factory,
        clock,
        product,
        (*notes, *retirement.notes),
        retirement,
    )


def _share(loaded: LoadedPolicy, plan: Plan, opts: RunOptions) -> tuple[Plan, RunOptions]:
    """A `--shard` run's share of the lane's plan, and its options (the plan and options as given otherwise)."""
    if opts.shard is None:
        return plan, opts
    shard = dataclasses.replace(opts.shard, lane_cases=lane_cases(plan))
    # N shards each spend at most 1/N of the boundary, so together they never exceed it.
    max_cost = boundary(loaded, opts.max_cost) / opts.shard.count
    return select(plan, opts.shard), dataclasses.replace(opts, max_cost=max_cost, shard=shard)


def _resumed_records(opts: RunOptions) -> list[Record]:
    """On --resume: the lane's records the interrupted run left, its workers' files too; the order it
    judged in and what sized its audit plans are theirs (none: a fresh seed, and _take_stock says what
    is wrong)."""
    paths = [opts.out_dir / RECORDS_FILE, *sorted(opts.out_dir.glob(WORKER_RECORDS_GLOB))]
    return [r for path in paths if path.is_file() for r, _line in WorkerReading(path) if r.lane == opts.lane]


def _seal_sizing(
    loaded: LoadedPolicy,
    lane: str,
    plans: tuple[Plan, Plan],
    product: ProductEvidence | None,
    sealed: Sealed | None,
    where: str,
    notes: tuple[str, ...],
) -> tuple[Plan, tuple[str, ...]]:
    """What sizes each slice's audit plan, fixed now and written on every answer (gate/decide/product/seal.py).
    `plans`: this process's plan and the whole lane's (a shard's share is sealed with the lane's cases).
    A run it continues (--resume, a batch's collect) keeps that run's: refused when the policy, calibration
    and dataset given now would size it otherwise; an older run's records keep carrying what they carry."""
    plan, lane_plan = plans
    if product is None or plan.order_seed is None:
        return plan, notes
    if sealed is not None and sealed.unsealed:
        return plan, (*notes, seal.unsealed_note(lane))
    now = seal.sizing_of(loaded, lane, product, lane_plan)
    if sealed is None:
        return dataclasses.replace(plan, audit_sizing=now), notes
    seal.refuse_resized(sealed, loaded, lane, product, where, lane_plan)
    older = (seal.without_cases_note(lane),) if sealed.without_cases else ()
    return dataclasses.replace(plan, audit_sizing=sealed.keeping(now)), (*notes, *older)


def _dry_run(lane: _Lane) -> Decision:
    """The plan and its cost printed, and the decision a run of it has before any call: the run's own
    evidence with no records, through the one assembly (the checks by a plain call: no ragas)."""
    checks = run_checks_plain(load_checks(lane.loaded), lane.plan.eligible)
    notes = [*max_cost_notes(lane.loaded, lane.opts.max_cost), *lane.notes, "dry run: no model call"]
    got = _Gathered(prior=[], prior_trend=[], findings=[*lane.findings, *_retired_before_any_call(lane)], notes=notes)
    decision = assemble(_evidence(lane, _nothing_earlier(lane), got, checks))
    print_plan(lane.loaded, lane.plan, decision.blockers, lane.opts.max_cost, sys.stdout, bool(lane.api_key))
    return decision


def _retired_before_any_call(lane: _Lane) -> list[Finding]:
    """A dry run of a judge whose model the policy's pin says has shut down: the run's one blocker."""
    retirement, plan = lane.retirement, lane.plan
    if retirement is None or not retirement.retired(lane.clock()):
        return []
    ids = tuple(c.case_id for c in plan.scheduled)
    message = retired_message(retirement.model, shut_down_detail(retirement), len(ids))
    return [Finding(State.EVALUATION_INCOMPLETE, JUDGE_RETIRED, message, ids)]


@dataclass(frozen=True)
class _Earlier:
    """What an earlier, interrupted attempt at this run left in --out (nothing without --resume),
    and the trend's settings and base."""

    records: list[Record]
    unrecorded: list[Unrecorded]  # attempts it sent (and may have paid) that no record names
    trend_loaded: LoadedPolicy | None
    trend_records: list[Record]
    unrecorded_trend: list[Unrecorded]
    base_trend: BaseTrend | None  # the base run's validated `trend`
    base_problem: str | None


def _take_stock(lane: _Lane) -> _Earlier:
    """What an earlier attempt left in --out that this run keeps (--resume); a fresh run keeps
    nothing. Read only: what is not kept is cleared, and the workers' files of a run that died are
    folded into records.jsonl, by `_begin`, once nothing can refuse the run."""
    loaded, out, resume = lane.loaded, lane.opts.out_dir, lane.opts.resume
    records_path = out / RECORDS_FILE
    journal_path = out / JOURNAL_FILE
    prior: list[Record] = []
    if resume:
        if records_path.exists() and records_path.read_bytes().strip():
            prior = read_records(records_path)  # (empty when the run was killed before its first record)
        prior += unfolded_worker_records(out, records_path)  # what the workers of a run that died had recorded
        changed = resumed_answers_problem(prior, lane.plan.eligible, lane.opts.responses)
        if changed:
            raise UsageError(f"--resume {shown_path(out)}: {changed}")
    # Attempts an interrupted run sent (and may have paid) but never recorded in a judgment.
    unrecorded = recover(journal_path, prior) if resume else []
    trend_loaded = load_trend(loaded)
    # The trend's judgments are journaled too (stream "trend"): on --resume, those in trend.jsonl
    # are kept and those paid but never recorded are counted, so nothing is paid twice or forgotten.
    prior_trend: list[Record] = []
    trend_path = out / TREND_RECORDS
    if resume and trend_loaded is not None and trend_path.exists() and trend_path.read_bytes().strip():
        prior_trend = read_records(trend_path)
    unrecorded_trend = recover(journal_path, prior_trend, TREND_STREAM) if resume and trend_loaded else []
    base_trend, base_problem = _base_trend(lane, trend_loaded)
    return _Earlier(prior, unrecorded, trend_loaded, prior_trend, unrecorded_trend, base_trend, base_problem)


def begin_run(out_dir: Path, *, keep_evidence: bool, keep_trend: bool = True) -> None:
    """--out starts to change: every check that can refuse the run (a usage error, exit 2, changes
    nothing on disk) has passed. The earlier run's outputs go, so none is read as this run's; unless
    its evidence is kept (--resume, a batch's later steps), its records, attempt journal, trend,
    worker files and a collected batch go too: a fresh run never mixes with an older one's evidence.
    A batch not collected yet is never cleared (a live run on it was refused before this)."""
    clear_outputs(out_dir)
    if not keep_evidence:
        discard_worker_records(out_dir)
        clear_collected(out_dir)
        (out_dir / RECORDS_FILE).unlink(missing_ok=True)
        (out_dir / JOURNAL_FILE).unlink(missing_ok=True)
    if not (keep_evidence and keep_trend):
        (out_dir / TREND_RECORDS).unlink(missing_ok=True)


def _begin(lane: _Lane, earlier: _Earlier) -> list[str]:
    """--out starts to change (`begin_run`); on --resume, the workers' files of the run that died are
    folded into records.jsonl: a note for each that could not be read whole."""
    out = lane.opts.out_dir
    begin_run(out, keep_evidence=lane.opts.resume, keep_trend=bool(earlier.trend_records))
    return fold_worker_records(out, out / RECORDS_FILE) if lane.opts.resume else []


def _nothing_earlier(lane: _Lane) -> _Earlier:
    """No earlier attempt (a dry run's), with the trend's settings and base read as a run reads them."""
    trend_loaded = load_trend(lane.loaded)
    return _Earlier([], [], trend_loaded, [], [], *_base_trend(lane, trend_loaded))


def _base_trend(lane: _Lane, trend_loaded: LoadedPolicy | None) -> tuple[BaseTrend | None, str | None]:
    """With --base-result and a trend: the base run's trend, or why it cannot be read."""
    if lane.opts.base_result is None or trend_loaded is None:
        return None, None
    return read_base_trend(lane.opts.base_result)


@dataclass
class _Gathered:
    """The evidence the run gathers and what it says about it, filled in stage by stage."""

    prior: list[Record]  # kept from the earlier attempt, with the records recovered for its journal
    prior_trend: list[Record]
    findings: list[Finding]
    notes: list[str]
    # The run's records file once it is open (None: nothing recorded, a dry run's), and the records
    # it could not take, kept in memory for the decision. Every other record is on file only.
    records_path: Path | None = None
    unwritten: list[Record] = field(default_factory=list)
    trend_records: list[Record] = field(default_factory=list)
    failure: Finding | None = None  # the run's own failure (outputs not writable, a bug)
    journal: AttemptJournal | None = None
    # Journaled attempts of cases no longer in the dataset: billed, never a verdict.
    unrecorded: list[Unrecorded] = field(default_factory=list)

    def output_failed(self, path: Path, exc: OSError) -> None:
        if self.failure is None:
            msg = f"writing {shown_path(path)} failed ({describe(exc)})"
            self.failure = Finding(State.EVALUATION_INCOMPLETE, "output_failed", msg)

    def record(self, writer: RecordWriter, rec: Record) -> None:
        """Write `rec` (or, once a write failed, keep it in memory only), as the runner records its own."""
        if self.failure is not None:
            self.unwritten.append(rec)
            return
        try:
            write_or_keep(writer, rec, self.unwritten)
        except OSError as exc:
            self.output_failed(writer.path, exc)

    def records(self) -> Iterable[Record]:
        """Every verdict record of this run, read from its records file when the decision asks (an
        earlier attempt's, the recovered, the new), then those the file could not take."""
        if self.records_path is None:
            return tuple(self.prior)
        return RecordsFile(self.records_path, tuple(self.unwritten))


def _gather(lane: _Lane, earlier: _Earlier, got: _Gathered, lineage: Lineage, checks: CheckResults) -> None:
    """Load the judge, begin (--out changes from here on), recover, then judge (or say why nothing is
    judged); a write that fails ends in `got.failure`."""
    retired = lane.retirement is not None and lane.retirement.retired(lane.clock())
    judging = not blocking_findings(got.findings) and not retired and bool(lane.api_key)
    # A judge the policy cannot have (JudgeConfigError, a usage error) is known only once it loads:
    # before anything in --out changes.
    judge = _load_judge(lane, got) if judging else None
    got.notes += _begin(lane, earlier)
    writer = RecordWriter(lane.opts.out_dir / RECORDS_FILE)
    got.records_path = writer.path
    try:
        _recover(lane, earlier, got, writer, lineage)
        if judge is not None:
            _judge(lane, earlier, got, writer, lineage, checks, judge)
        elif blocking_findings(got.findings):
            got.notes.append("deterministic checks blocked: no model call was made")
        elif retired and lane.retirement is not None:
            _record_unsent(lane, got, writer, lineage, checks, "model_retired", _retired_why(lane.retirement))
        else:
            _record_missing_credentials(lane, got, writer, lineage, checks)
    except OSError as exc:  # the recovered records or the journal could not be written
        got.output_failed(lane.opts.out_dir, exc)
    finally:
        if got.journal is not None:
            got.journal.close()
        try:
            writer.close()
        except OSError as exc:
            got.output_failed(writer.path, exc)


def _recover(lane: _Lane, earlier: _Earlier, got: _Gathered, writer: RecordWriter, lineage: Lineage) -> None:
    """Records (never verdicts) for the attempts an interrupted run paid for but never recorded."""
    loaded, dataset, plan = lane.loaded, lane.dataset, lane.plan
    recovered, got.unrecorded = recovered_records(
        earlier.unrecorded, dataset, loaded, lineage, plan.lane, lane.judge, record_shard(lane.opts.shard)
    )
    for rec in recovered:
        got.record(writer, rec)
    got.prior = [*got.prior, *recovered]
    unrecorded = earlier.unrecorded
    trend_loaded = earlier.trend_loaded
    if trend_loaded is not None and earlier.unrecorded_trend:
        trend_judge = JudgeSettings.of(trend_loaded, lane.base_url)
        trend_lineage = make_lineage(trend_loaded, dataset, base_url=lane.base_url)
        found, trend_unknown = recovered_records(
            earlier.unrecorded_trend, dataset, trend_loaded, trend_lineage, plan.lane, trend_judge
        )
        got.unrecorded += trend_unknown
        with RecordWriter(lane.opts.out_dir / TREND_RECORDS) as trend_writer:
            for rec in found:
                trend_writer.write(rec)
        got.prior_trend = [*got.prior_trend, *found]
        unrecorded = [*unrecorded, *earlier.unrecorded_trend]  # said in the note below
    got.trend_records = list(got.prior_trend)
    if unrecorded:
        n = sum(len(u.attempts) for u in unrecorded)
        gone = sum(u.unanswered for u in unrecorded)
        got.notes.append(
            f"recovered {plural(n, 'attempt')} from {shown_path(lane.opts.out_dir / JOURNAL_FILE)} that no record named "
            f"(sent before the run was killed); {gone} of them had no answer and count at their reserved upper bound"
        )


def _record_missing_credentials(
    lane: _Lane, got: _Gathered, writer: RecordWriter, lineage: Lineage, checks: CheckResults
) -> None:
    """No API key: every scheduled judgment is recorded as skipped (auth), and nobody is called."""
    why = f"missing credentials: ${lane.loaded.policy.evaluator.api_key_env} is not set"
    _record_unsent(lane, got, writer, lineage, checks, "auth", why)


def _retired_why(retirement: Retirement) -> str:
    return f"not sent: {retirement.model} {shut_down_detail(retirement)}"


def _record_unsent(
    lane: _Lane,
    got: _Gathered,
    writer: RecordWriter,
    lineage: Lineage,
    checks: CheckResults,
    kind: RecordErrorKind,
    why: str,
) -> None:
    """Every scheduled judgment recorded as skipped for one reason (no key; a judge model past its
    shutdown date), and nobody is called; on --resume, those an earlier attempt completed keep their
    record alone."""
    loaded, plan = lane.loaded, lane.plan
    done = (
        reusable_records(
            loaded, got.prior, plan, lane.judge.config_fingerprint, rejudge_parse_errors=lane.opts.rejudge_parse_errors
        )
        if lane.opts.resume
        else {}
    )
    for case in plan.scheduled:
        for i in range(plan.repeats):
            if (case.case_id, i) in done:
                continue
            missing = Judgment(status="skipped", error_kind=kind, error_message=why)
            rec = make_record(
                case,
                i,
                missing,
                loaded,
                lineage,
                plan.lane,
                lineage.ragas_version,
                lane.judge,
                checks.for_record(case.case_id),
            )
            got.record(writer, rec)


@dataclass(frozen=True)
class _Judge:
    """The run's judge, loaded before --out changes: what it reuses, serves or judges, and how."""

    evaluator: Evaluator
    new_evaluator: Callable[[LoadedPolicy], Evaluator]
    reuse: dict[tuple[str, int], Record]
    workers: int
    progress: Progress


def _load_judge(lane: _Lane, got: _Gathered) -> _Judge:
    """The evaluator of this plan (the cache's when it holds every judgment still wanted, else
    ragas'), and how many processes judge it."""
    loaded, plan, opts = lane.loaded, lane.plan, lane.opts
    cache = cache_dir_for(loaded, opts.use_cache, opts.cache_dir)

    def new_evaluator(judged_by: LoadedPolicy) -> Evaluator:
        return lane.factory(judged_by, lane.api_key, cache)

    reuse = (
        reusable_records(
            loaded, got.prior, plan, lane.judge.config_fingerprint, rejudge_parse_errors=opts.rejudge_parse_errors
        )
        if opts.resume
        else {}
    )
    # All already paid for (in the cache or reused from --out): serve them without ragas.
    wanted = [(c, i) for c in plan.scheduled for i in range(plan.repeats) if (c.case_id, i) not in reuse]
    served = serve_from_cache(loaded, cache, wanted)
    # A product lane that stops once decided looks after each answer, in one sequence: one process.
    one_sequence = served is not None or (lane.product is not None and lane.product.sequential)
    workers = 1 if one_sequence else worker_count(len(wanted), loaded.policy.evaluator.max_concurrency)
    stream = opts.progress if opts.progress is not None else sys.stderr
    progress = Progress(
        len(plan.scheduled) * plan.repeats,
        stream,
        prices(loaded).currency,
        boundary=boundary(loaded, opts.max_cost),
        reused=len(reuse),
    )
    if served is None:
        progress.status(f"loading the judge ({loaded.policy.evaluator.model} through ragas)")
    return _Judge(served or new_evaluator(loaded), new_evaluator, reuse, workers, progress)


def _judge(
    lane: _Lane,
    earlier: _Earlier,
    got: _Gathered,
    writer: RecordWriter,
    lineage: Lineage,
    checks: CheckResults,
    judge: _Judge,
) -> None:
    """Judge the plan (in this process or in workers), then the trend; say why scheduling stopped."""
    plan, opts = lane.plan, lane.opts
    cache = cache_dir_for(lane.loaded, opts.use_cache, opts.cache_dir)
    new_evaluator = judge.new_evaluator
    runner = _make_runner(lane, got, writer, lineage, checks, judge)
    workers = judge.workers
    budget = runner.budget
    # ragas' import leaves ~300k long-lived objects that every full collection rescans
    # (~0.45 s each, 10-15 s over 20k judgments); take them out of the collector's view.
    gc.freeze()
    if workers > 1:
        ended = judge_in_workers(runner, new_evaluator, workers, opts.out_dir, runner.progress.stream)
        got.notes, got.findings = [*got.notes, *ended.notes], [*got.findings, *ended.findings]
    else:
        asyncio.run(judge_all(runner))
    runner.progress.close(runner.stop_reason, budget.spent, budget.reserved, signal_name=runner.stopped_by)
    trend_loaded = earlier.trend_loaded
    if trend_loaded is not None and runner.stop_reason is None:
        # Every grade in the cache (or in --out): served without ragas, as the verdicts are.
        graded = serve_from_cache(trend_loaded, cache, [(c, 0) for c in trend_todo(plan, got.prior_trend)])
        trend_evaluator = graded or new_evaluator(trend_loaded)
        with pacing(runner.pacer):  # the same windows as the verdicts: one provider, one key
            got.trend_records = judge_trend(
                trend_loaded,
                plan,
                lane.dataset,
                trend_evaluator,
                budget,
                opts.out_dir,
                lane.base_url,
                got.journal,
                got.prior_trend,
            )
    if runner.failure is not None:
        got.failure = runner_failure(runner, plan)
    got.unwritten += runner.unwritten
    got.notes += _stop_notes(runner, resumed=bool(got.prior), records_path=writer.path)


def record_shard(shard: Shard | None) -> RecordShard | None:
    """What a record says of the `--shard I/N` that made it (nothing on a run of the whole lane)."""
    return RecordShard(index=shard.index, count=shard.count) if shard is not None else None


def _make_runner(
    lane: _Lane, got: _Gathered, writer: RecordWriter, lineage: Lineage, checks: CheckResults, judge: _Judge
) -> Runner:
    """The runner of this plan under the run's boundary."""
    loaded, plan, opts = lane.loaded, lane.plan, lane.opts
    workers = judge.workers
    budget = make_budget(boundary(loaded, opts.max_cost), workers)
    # Money already spent by the interrupted run counts against the same boundary.
    budget.spent = sum(r.budget_charge for r in [*got.prior, *got.prior_trend]) + sum(
        u.budget_charge for u in got.unrecorded
    )
    got.journal = AttemptJournal(opts.out_dir / JOURNAL_FILE)
    runner = Runner(
        plan,
        JudgingTools(
            evaluator=judge.evaluator,
            budget=budget,
            writer=writer,
            progress=judge.progress,
            journal=got.journal,
            # One pacer for the run; forked workers share its windows (see gate/judge/pacing.py).
            pacer=opts.pacer or pacer_for(loaded.policy.evaluator.rate_limit, shared=workers > 1),
        ),
        RecordContext(
            loaded=loaded,
            dataset=lane.dataset,
            lineage=lineage,
            judge=lane.judge,
            check_results=checks,
            shard=record_shard(opts.shard),
        ),
        reuse=judge.reuse,
        waived_pairs=waived_case_ids(loaded.policy.overrides, "pair_violated", lane.clock()),
        stop_rule=_stop_rule(lane, workers, checks, got.prior),
    )
    if runner.pacer is not None:
        runner.pacer.on_wait = judge.progress.waiting
    return runner


def _stop_rule(lane: _Lane, workers: int, checks: CheckResults, prior: list[Record]) -> StopWhenDecided | None:
    """The lane's `stop_when_decided`, or None when it judges every case. It asks the rules over the
    findings the decision will have: the inputs' and the checks'; a product lane's answers go to its
    incremental check, the judgments an earlier attempt recorded (`prior`) first, in their order."""
    if not settled.stops_when_decided(lane.loaded, lane.plan):
        return None
    decision = settled.Settling(
        lane.loaded,
        lane.plan,
        [*lane.findings, *checks.findings],
        lane.clock(),
        fingerprint=lane.judge.config_fingerprint,
        product=lane.product,
    )
    if lane.product is None:
        return StopWhenDecided.of(decision, shared=workers > 1)
    answers = new_stop_check(lane.loaded.policy, lane.plan, lane.product)
    return StopWhenDecided.of(decision, prior=prior, shared=workers > 1, answers=answers, repeats=lane.plan.repeats)


def _stop_notes(runner: Runner, resumed: bool, records_path: Path) -> list[str]:
    notes: list[str] = []
    if runner.stop_reason == "cancelled":
        notes.append(f"the run was interrupted ({runner.stopped_by or 'SIGINT'}); resume it with --resume")
    elif runner.stop_reason == "budget":
        notes.append("the cost boundary stopped scheduling; completed evidence is kept")
    elif runner.stop_reason in ("control_failed", "control_error", "pair_violated"):
        notes.append(f"scheduling stopped: {runner.stop_reason.replace('_', ' ')}")
    elif runner.stop_reason == "auth":
        notes.append(
            "scheduling stopped at the provider's first auth error (401/403): every later request would meet it"
        )
    elif runner.stop_reason == "model_not_found":
        notes.append(
            "scheduling stopped at the provider's first 404 model_not_found: every later request would meet it"
        )
    if resumed:
        notes.append(
            f"resumed: {plural(len(runner.reuse), 'completed judgment')} reused from {shown_path(records_path)}"
        )
    return notes


def _evidence(lane: _Lane, earlier: _Earlier, got: _Gathered, checks: CheckResults) -> RunEvidence:
    """What this run's result rests on: every record of --out (kept, recovered, new), the trend's,
    the journal's unrecorded attempts, this shard, the checks and the certification."""
    loaded, plan, opts = lane.loaded, lane.plan, lane.opts
    all_records = got.records()
    findings = got.findings if got.failure is None else [*got.findings, got.failure]
    calibration_section = requirement.evidence(lane.calibration)[1]  # its findings are in `got.findings`
    return RunEvidence(
        loaded=loaded,
        dataset=lane.dataset,
        plan=plan,
        lineage=make_lineage(loaded, lane.dataset, all_records, lane.base_url, lane.retirement),
        today=lane.clock(),
        records=all_records,
        findings=tuple(findings),
        notes=tuple(got.notes),
        max_cost=opts.max_cost,
        checks=checks,
        certification=lane.certification,
        trend=TrendEvidence(
            tuple(got.trend_records), opts.base_result is not None, earlier.base_trend, earlier.base_problem
        ),
        unrecorded=tuple(got.unrecorded),
        shard=opts.shard,
        sections=calibration_section,
        product=lane.product,
    )


def _write(ev: RunEvidence, opts: RunOptions, failure: Finding | None) -> Decision:
    """Assemble and write the outputs; after the run's own write failure, write what can be, then
    raise (exit 3)."""
    out = opts.out_dir
    if failure is not None and failure.kind == "output_failed":
        # Write what can be written (result.json last), then end with exit 3 and the message.
        try:
            write_assembled(out, ev)
            written = f"{shown_path(out / 'result.json')} was written"
        except OutputWriteError:
            written = "result.json could not be written either"
        detail = str(failure.extra.get("detail", failure.message))
        raise OutputWriteError(
            f"{detail}; {plural(len(failure.case_ids), 'case')} {agree(len(failure.case_ids), 'was', 'were')} not judged and {written}. The run is "
            f"evaluation_incomplete, not a verdict; fix: free space in (or repair) {shown_path(out)}, then run again with "
            "--resume to keep the judgments already recorded"
        )
    return write_assembled(out, ev)


def _run_drift(loaded: LoadedPolicy, opts: RunOptions, env: dict[str, str], factory: EvaluatorFactory) -> Decision:
    """The scheduled lane of a policy with `drift:` judges production traces (gate/drift)."""
    limit = boundary(loaded, opts.max_cost)
    if opts.dry_run:
        return print_drift_plan(loaded, limit)
    drift_run = DriftRun(
        out_dir=opts.out_dir,
        boundary=limit,
        api_key=env.get(loaded.policy.evaluator.api_key_env, "").strip(),
        cache_dir=cache_dir_for(loaded, opts.use_cache, opts.cache_dir),
        previous=opts.base_result,
    )
    return run_drift_lane(loaded, drift_run, env, factory)


def runner_failure(runner: Runner, plan: Plan) -> Finding:
    """The blocker for a run stopped by its own failure; each judgment it left undone gets a
    `skipped` record saying why (in memory when records.jsonl cannot be written)."""
    try:
        recorded = {(r.case_id, r.repeat_index) for r in runner.records()}
    except RecordsError:  # its own file, unreadable now: only what it kept in memory is known
        recorded = {(r.case_id, r.repeat_index) for r in runner.unwritten}
    done = recorded | set(runner.reuse)
    undone: list[str] = []
    for case in plan.scheduled:
        for i in range(plan.repeats):
            if (case.case_id, i) in done:
                continue
            if case.case_id not in undone:
                undone.append(case.case_id)
            why = Judgment(status="skipped", error_kind="cancelled", error_message=f"not judged: {runner.failure}")
            runner.emit(runner.to_record(case, i, why))
    kind = runner.failure_kind or "internal_error"
    return Finding(
        State.EVALUATION_INCOMPLETE,
        kind,
        f"the run stopped on its own failure, not a verdict: {runner.failure}; {plural(len(undone), 'case')} {agree(len(undone), 'was', 'were')} "
        "not judged; fix: "
        + ("free space in (or repair) the output directory" if kind == "output_failed" else "report this bug")
        + ", then run again with --resume",
        case_ids=tuple(undone),
        extra={"detail": runner.failure},
    )
