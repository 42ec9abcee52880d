"""`gate run`: plan, judge under a hard cost boundary, record, decide, write the outputs.

I/O lives here; the decision itself is `gate.decide.decide`, a pure function, so `gate decide`
on the records this writes gives the same result.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import gc
import json
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gate import __version__, certify
from gate.budget import Budget, Prices, cost_boundary
from gate.cases import Case, Dataset, load_dataset
from gate.checks import NO_CHECKS, CheckResults, attach_checks, evaluate_checks
from gate.clear_text import kept_reason
from gate.decide import Decision, Lineage, decide
from gate.drift.lane import DriftRun, run_drift
from gate.drift.traces import DRIFT_LANE, draw_sample, drift_policy, load_traces
from gate.evidence import majority
from gate.fingerprint import config_fingerprint
from gate.journal import CURRENT as JOURNAL_CONTEXT
from gate.journal import JOURNAL_FILE, TREND_STREAM, AttemptJournal, JournalContext, Unrecorded, recover
from gate.judge import Evaluator, Judgment, partial_judgment, resolve_base_url
from gate.judge.cached import serve_from_cache
from gate.judge.render import RenderError, render_case
from gate.lineage import JudgeSettings
from gate.outdir import OutputWriteError, check_out_dir, describe
from gate.overrides import waived_case_ids
from gate.paths import from_working_directory, shown_path
from gate.plan import Plan, make_plan
from gate.policy import LoadedPolicy, load_policy, today
from gate.progress import Progress
from gate.record_vetting import vet_record
from gate.records import Record, RecordWriter, read_records
from gate.report.junit import render_junit
from gate.report.markdown import render_report, render_summary
from gate.rollback import metric_definition_sha256, write_rollback
from gate.shard import Shard, select
from gate.states import Finding, State, blocking_findings
from gate.sweep import judge_each
from gate.trend import TREND_RECORDS, compare_to_base, load_trend, read_base_trend, summarize
from gate.validate import run_validators
from gate.worker_records import discard_worker_records, fold_worker_records
from gate.workers import judge_in_workers, make_budget, worker_count

# An upper bound on the request bytes that are not the rendered prompt: the JSON envelope, the
# instructor system message with the response schema, model name and sampling fields.
REQUEST_OVERHEAD_BYTES = 2_048
DEFAULT_CACHE_DIR = ".gate-cache"


@dataclass
class RunOptions:
    lane: str
    out_dir: Path
    max_cost: float | None = None
    resume: bool = False
    dry_run: bool = False
    cache_dir: Path | None = None  # None: the policy's `cache_dir`, else .gate-cache
    use_cache: bool = True
    progress: IO[str] | None = None
    base_result: Path | None = None  # a base run's --out: the trend is compared against it
    shard: Shard | None = None  # `--shard I/N`: this share of the cases, 1/N of the boundary


EvaluatorFactory = Callable[[LoadedPolicy, str, Path | None], Evaluator]


def installed_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return ""


def make_lineage(
    loaded: LoadedPolicy, dataset: Dataset, records: Sequence[Record] = (), base_url: str | None = None
) -> Lineage:
    """The run's lineage; `base_url` None resolves the policy's (or OPENAI_BASE_URL) now."""
    ragas = next((r.ragas_version for r in records if r.ragas_version), "") or installed_version("ragas")
    url = resolve_base_url(loaded.policy.evaluator.base_url) if base_url is None else base_url
    return Lineage(
        policy_sha256=loaded.sha256,
        dataset_sha256=dataset.sha256,
        prompt_sha256=loaded.prompt_sha256,
        metric_version=loaded.policy.metric.version,
        evaluator_model=loaded.policy.evaluator.model,
        ragas_version=ragas,
        gate_version=__version__,
        metric_definition_sha256=metric_definition_sha256(loaded),
        config_fingerprint=config_fingerprint(loaded, url, installed_version("ragas")),
        dataset_card_sha256=loaded.card.sha256 if loaded.card is not None else "",
    )


def boundary(loaded: LoadedPolicy, max_cost: float | None) -> float:
    return cost_boundary(loaded.policy.limits.max_total_cost, max_cost)


def prices(loaded: LoadedPolicy) -> Prices:
    p = loaded.policy.evaluator.price
    assert p is not None  # load_policy refuses a policy without prices
    return Prices(p.input_per_mtok, p.output_per_mtok, p.currency)


def prompt_bytes(loaded: LoadedPolicy, case: Case) -> int:
    try:
        return len(render_case(loaded.prompt_text, loaded.placeholders, case).prompt.encode("utf-8"))
    except RenderError:
        fields = sum(len((case.field_text(n) or "").encode("utf-8")) for n in loaded.placeholders)
        return len(loaded.prompt_text.encode("utf-8")) + fields


def current_input_sha256(loaded: LoadedPolicy, case: Case) -> str | None:
    try:
        return render_case(loaded.prompt_text, loaded.placeholders, case).input_sha256
    except RenderError:
        return None


def judgment_upper_bound(loaded: LoadedPolicy, case: Case) -> float:
    """What one attempt may cost at most: request bytes bound prompt tokens from above."""
    ev = loaded.policy.evaluator
    return prices(loaded).cost(prompt_bytes(loaded, case) + REQUEST_OVERHEAD_BYTES, ev.max_output_tokens)


def judgment_typical(loaded: LoadedPolicy, case: Case) -> float:
    """A typical cost: ~4 bytes a token, the schema message, a short JSON verdict."""
    return prices(loaded).cost((prompt_bytes(loaded, case) + 1_200) // 4, 80)


def make_record(
    case: Case,
    repeat: int,
    j: Judgment,
    loaded: LoadedPolicy,
    lineage: Lineage,
    lane: str,
    ragas_version: str,
    judge: JudgeSettings,
    checks: dict[str, str | None] | None = None,
) -> Record:
    """One records.jsonl line: the judgment plus the lineage that explains it."""
    return Record(
        case_id=case.case_id,
        slice=case.slice,
        partition=case.partition,
        control_role=case.expected_control_role,
        human_label=case.human_label,
        judge_label=j.label if j.status == "ok" else None,
        judge_reason=kept_reason(loaded, j.reason) if j.status == "ok" else None,
        status=j.status,
        error_kind=j.error_kind,
        error_message=j.error_message,
        repeat_index=repeat,
        attempts=j.attempts,
        input_tokens=j.input_tokens,
        output_tokens=j.output_tokens,
        cost=j.cost,
        cache=j.cache,
        prompt_sha256=j.prompt_sha256,
        input_sha256=j.input_sha256,
        metric_version=lineage.metric_version,
        evaluator_model=lineage.evaluator_model,
        ragas_version=ragas_version,
        policy_id=loaded.policy.policy_id,
        policy_version=loaded.policy.policy_version,
        policy_sha256=lineage.policy_sha256,
        dataset_sha256=lineage.dataset_sha256,
        dataset_card_sha256=lineage.dataset_card_sha256,
        gate_version=__version__,
        lane=lane,
        **judge.for_case(case, loaded.placeholders),
        checks=checks,
    )


@dataclass
class Runner:
    loaded: LoadedPolicy
    dataset: Dataset
    plan: Plan
    evaluator: Evaluator
    writer: RecordWriter
    budget: Budget
    lineage: Lineage
    progress: Progress
    judge: JudgeSettings
    reuse: dict[tuple[str, int], Record] = field(default_factory=dict)
    waived_pairs: set[str] = field(default_factory=set)  # case ids an active pair_violated override names
    emitted: list[Record] = field(default_factory=list)
    # case id -> labels of its completed judgments, for the control and pair checks mid-run
    ok_labels: dict[str, list[str]] = field(default_factory=dict)
    pair_members: dict[str, list[Case]] = field(default_factory=dict)
    check_results: CheckResults = NO_CHECKS

    def __post_init__(self) -> None:
        for c in self.plan.scheduled:
            if c.pair is not None:
                self.pair_members.setdefault(c.pair.id, []).append(c)

    stop_reason: str | None = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    # Why the run stopped on a failure of its own (outputs not writable, a bug in a worker).
    failure_kind: str | None = None  # "output_failed" | "internal_error"
    failure: str | None = None
    journal: AttemptJournal | None = None  # attempts written ahead (attempts.jsonl)

    def to_record(self, case: Case, repeat: int, j: Judgment) -> Record:
        # A cached verdict is read back from storage CI restores: it meets the same contract.
        return vet_record(self._make_record(case, repeat, j), self.loaded.policy.metric, case)

    def _make_record(self, case: Case, repeat: int, j: Judgment) -> Record:
        return make_record(
            case,
            repeat,
            j,
            self.loaded,
            self.lineage,
            self.plan.lane,
            self.evaluator.ragas_version,
            self.judge,
            self.check_results.for_record(case.case_id),
        )

    def emit(self, record: Record) -> None:
        self.emitted.append(record)  # kept in memory even when it cannot be written, for result.json
        self.remember(record)
        if self.failure_kind == "output_failed":
            return
        try:
            self.writer.write(record)
        except OSError as exc:
            self.fail(
                "output_failed",
                f"writing {self.writer.path} failed ({describe(exc)}): scheduling stopped at once and the "
                "judgments in flight were abandoned",
            )

    def fail(self, kind: str, message: str) -> None:
        """Stop at once: no new judgment, no retry; the judgments in flight are cancelled."""
        if self.failure is None:
            self.failure_kind, self.failure = kind, message
        self.stop_reason = kind
        try:
            current = asyncio.current_task()
        except RuntimeError:  # after the loop: nothing left to cancel
            return
        for t in list(self.tasks):
            if t is not current:
                t.cancel()

    def remember(self, record: Record) -> None:
        if record.status == "ok":
            self.ok_labels.setdefault(record.case_id, []).append(record.judge_label or "")

    async def judge_one(self, case: Case, repeat: int) -> None:
        reused = self.reuse.get((case.case_id, repeat))
        if reused is not None:
            # Completed in an earlier attempt of this run: already in records.jsonl, nothing to pay.
            self.remember(reused)
            return
        journal = self.journal
        token = JOURNAL_CONTEXT.set(JournalContext(journal, case.case_id, repeat)) if journal is not None else None
        try:
            j = await self.evaluator.judge(case, repeat, self.budget)
        except asyncio.CancelledError as exc:
            # The evaluator attaches what it sent before the interrupt: those attempts were paid.
            partial = partial_judgment(exc) or Judgment(status="skipped", error_kind="cancelled")
            partial.error_message = partial.error_message or "interrupted while in flight"
            self.emit(self.to_record(case, repeat, partial))
            raise
        finally:
            if token is not None:
                JOURNAL_CONTEXT.reset(token)
        self.emit(self.to_record(case, repeat, j))
        if journal is not None and journal.error is not None and self.failure_kind != "output_failed":
            self.fail(
                "output_failed",
                f"writing {shown_path(journal.path)} failed ({describe(journal.error)}): scheduling stopped at once and the "
                "judgments in flight were abandoned",
            )
        self.progress.tick(j, self.budget.spent + self.budget.reserved)
        if j.error_kind == "budget" and self.stop_reason is None:
            self.stop_reason = "budget"

    async def run_phase(self, items: Sequence[tuple[Case, int]], after_case: Callable[[Case], None]) -> None:
        queue: deque[tuple[Case, int]] = deque(items)
        remaining: dict[str, int] = {}
        for case, _ in items:
            remaining[case.case_id] = remaining.get(case.case_id, 0) + 1

        async def worker() -> None:
            while queue and self.stop_reason is None:
                case, repeat = queue.popleft()
                try:
                    await self.judge_one(case, repeat)
                    remaining[case.case_id] -= 1
                    if remaining[case.case_id] == 0:
                        after_case(case)
                except Exception as exc:  # a bug, never a verdict: stop, and say so per case
                    self.fail("internal_error", f"a worker failed on {case.case_id}: {type(exc).__name__}: {exc}")
                    return

        n = min(self.loaded.policy.evaluator.max_concurrency, len(items))
        workers = [asyncio.create_task(worker()) for _ in range(n)]
        self.tasks.update(workers)
        # Workers catch their own exceptions (see `worker`); what is left here is cancellation.
        await asyncio.gather(*workers, return_exceptions=True)
        self.tasks.difference_update(workers)

    def verdict(self, case: Case) -> str | None:
        labels = self.ok_labels.get(case.case_id, [])
        return majority(labels) if len(labels) >= self.plan.repeats else None

    def check_pair(self, case: Case) -> None:
        if case.pair is None or self.stop_reason is not None:
            return
        mates = [c for c in self.pair_members.get(case.pair.id, []) if c.case_id != case.case_id]
        if len(mates) != 1:
            return
        a, b = self.verdict(case), self.verdict(mates[0])
        if a is None or b is None:
            return
        violated = (case.pair.kind == "invariant" and a != b) or (case.pair.kind == "flip" and a == b)
        # A violation an active override waives for both cases blocks nothing: decide agrees.
        if violated and not {case.case_id, mates[0].case_id} <= self.waived_pairs:
            self.stop_reason = "pair_violated"

    def controls_failed(self) -> bool:
        for case in self.plan.scheduled:
            if case.expected_control_role is None:
                continue
            v = self.verdict(case)
            if v is not None and v != case.human_label:
                return True
        return False

    def cancel(self) -> None:
        if self.stop_reason is None:
            self.stop_reason = "cancelled"
        for t in list(self.tasks):
            t.cancel()

    async def execute(self) -> None:
        scheduled = self.plan.scheduled
        controls = [c for c in scheduled if c.is_control]
        others = [c for c in scheduled if not c.is_control]
        reps = range(self.plan.repeats)
        await self.run_phase([(c, i) for c in controls for i in reps], self.check_pair)
        if self.stop_reason is None and self.controls_failed():
            self.stop_reason = "control_failed"
        if self.stop_reason is None:
            await self.run_phase([(c, i) for c in others for i in reps], self.check_pair)


def _reusable(
    loaded: LoadedPolicy, prior: Sequence[Record], plan: Plan, fingerprint: str
) -> dict[tuple[str, int], Record]:
    """Completed judgments of an earlier run of the same judge (`gate.fingerprint`) that `--resume`
    may keep; records older than the fingerprint need the same policy file."""
    cases = {c.case_id: c for c in plan.scheduled}
    out: dict[tuple[str, int], Record] = {}
    for r in prior:
        case = cases.get(r.case_id)
        # Untrusted like any records file: a line outside the contract is judged again, not reused.
        r = vet_record(r, loaded.policy.metric, case)
        if (
            r.status != "ok"
            or not 0 <= r.repeat_index < plan.repeats
            or case is None
            or (r.config_fingerprint != fingerprint if r.config_fingerprint else r.policy_sha256 != loaded.sha256)
            or r.input_sha256 != current_input_sha256(loaded, case)
        ):
            continue
        out[(r.case_id, r.repeat_index)] = r
    return out


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # a partial file must never be read as an output
        raise


def write_outputs(out_dir: Path, decision: Decision) -> None:
    """Write result.json first, then the reports; each that fails is named in OutputWriteError."""
    result = decision.result
    files: list[tuple[str, Callable[[], str]]] = [
        ("result.json", lambda: json.dumps(result, indent=2, ensure_ascii=False) + "\n"),
        ("report.md", lambda: render_report(result)),
        ("summary.md", lambda: render_summary(result)),
        ("junit.xml", lambda: render_junit(result)),
    ]
    entry = certify.entry_line(result)
    if entry is not None:  # the ledger line people append once they accept the certification
        files.append((certify.ENTRY_FILE, lambda: entry))
    failed: list[str] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputWriteError(f"{out_dir}: cannot create the output directory ({describe(exc)})") from None
    for name, text in files:
        try:
            _write_text_atomic(out_dir / name, text())
        except OSError as exc:
            failed.append(f"{name} ({describe(exc)})")
    try:
        write_rollback(out_dir, result)
    except OSError as exc:
        failed.append(f"the rollback bundle ({describe(exc)})")
    if failed:
        raise OutputWriteError(f"{out_dir}: could not write {', '.join(failed)}")


def print_plan(
    loaded: LoadedPolicy,
    plan: Plan,
    findings: Sequence[Finding],
    max_cost: float | None,
    out: IO[str],
    has_key: bool = True,
) -> None:
    ev = loaded.policy.evaluator
    cur = ev.price.currency if ev.price else "USD"
    scheduled = plan.scheduled
    # "At most" is the worst case: every judgment uses all of its `max_attempts` requests.
    per_judgment = plan.repeats * ev.retries.max_attempts
    upper = sum(judgment_upper_bound(loaded, c) for c in scheduled) * per_judgment
    typical = sum(judgment_typical(loaded, c) for c in scheduled) * plan.repeats
    limit = boundary(loaded, max_cost)
    out.write(f"Plan for lane {plan.lane!r} of policy {loaded.policy.policy_id} ({loaded.policy.policy_version})\n")
    out.write(
        f"  eligible: {len(plan.eligible)} cases ({sum(1 for c in plan.eligible if c.is_control)} controls first), "
        f"withheld: {len(plan.withheld)}, judgments: {len(scheduled) * plan.repeats} "
        f"({plan.repeats} per case), model {ev.model}\n"
    )
    out.write(
        f"  estimated cost: ~{typical:.4f} {cur} typical, at most {upper:.4f} {cur} (every judgment using all "
        f"{ev.retries.max_attempts} attempts); boundary {limit:g} {cur}\n"
    )
    if upper > limit:
        fit, acc = 0, 0.0
        for c in scheduled:
            acc += judgment_upper_bound(loaded, c) * per_judgment
            if acc > limit:
                break
            fit += 1
        out.write(f"  the worst case does not fit: at least the first {fit} cases fit under the boundary\n")
    trend_loaded = load_trend(loaded)
    if trend_loaded is not None:
        graded = _trend_cases(plan)
        t_typical = sum(judgment_typical(trend_loaded, c) for c in graded)
        t_upper = sum(judgment_upper_bound(trend_loaded, c) for c in graded) * ev.retries.max_attempts
        out.write(
            f"  then the trend: {len(graded)} judgments, ~{t_typical:.4f} {cur} typical, at most {t_upper:.4f} {cur}, "
            "under the same boundary (verdicts are paid first)\n"
        )
    blocking = blocking_findings(findings)
    if blocking:
        out.write(f"  deterministic checks block ({len(blocking)} finding(s)): no model call would be made\n")
    elif not has_key:
        out.write(f"  no API key in ${ev.api_key_env}: a real run would call nobody and end missing_credentials\n")
    out.write("  order:\n")
    held = {c.case_id for c in plan.withheld}
    for i, c in enumerate(plan.eligible, start=1):
        tag = (c.expected_control_role and f"control:{c.expected_control_role}") or c.partition
        note = "  (withheld: no reference)" if c.case_id in held else ""
        out.write(f"    {i:4d}. {c.case_id}  [{c.slice}, {tag}]{note}\n")


def load_inputs(policy_path: str | Path, lane: str) -> tuple[LoadedPolicy, Dataset, Plan, list[Finding]]:
    loaded = load_policy(policy_path)
    dataset = load_dataset(loaded)
    plan = make_plan(loaded, dataset, lane)
    findings = run_validators(loaded, dataset, lane)
    return loaded, dataset, plan, findings


def cache_dir_for(loaded: LoadedPolicy, opts: RunOptions) -> Path | None:
    if not opts.use_cache:
        return None
    if opts.cache_dir is not None:
        return opts.cache_dir
    if loaded.policy.cache_dir:
        return loaded.resolve(loaded.policy.cache_dir)
    return from_working_directory(DEFAULT_CACHE_DIR)


def default_factory(loaded: LoadedPolicy, api_key: str, cache_dir: Path | None) -> Evaluator:
    # Imported here: this is the moment a model call is due, and only now is ragas worth loading.
    from gate.judge import make_evaluator

    return make_evaluator(loaded, api_key=api_key, cache_dir=cache_dir)


async def _judge_all(runner: Runner) -> None:
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(RuntimeError, ValueError):  # no signal support here (e.g. Windows)
            loop.add_signal_handler(sig, runner.cancel)
            installed.append(sig)
    try:
        await runner.execute()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await runner.evaluator.aclose()


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
    loaded, dataset, plan, findings = load_inputs(policy_path, opts.lane)
    base_url = resolve_base_url(loaded.policy.evaluator.base_url, env.get("OPENAI_BASE_URL"))
    judge = JudgeSettings.of(loaded, base_url)
    # Before sharding: the held-out set is the whole lane's, whichever share this process judges.
    certification = certify.assess(loaded, plan, judge, installed_version("ragas"))
    if certification is not None:
        findings = [*findings, *certification.findings]
    if opts.shard is not None:
        plan = select(plan, opts.shard)
        # N shards each spend at most 1/N of the boundary, so together they never exceed it.
        opts = dataclasses.replace(opts, max_cost=boundary(loaded, opts.max_cost) / opts.shard.count)
    out = opts.out_dir
    progress_stream = opts.progress if opts.progress is not None else sys.stderr
    if opts.dry_run:
        has_key = bool(env.get(loaded.policy.evaluator.api_key_env, "").strip())
        print_plan(loaded, plan, findings, opts.max_cost, sys.stdout, has_key)
        lineage = make_lineage(loaded, dataset)
        return with_shard(
            decide(
                loaded, plan, findings, [], lineage, clock(), max_cost=opts.max_cost, notes=["dry run: no model call"]
            ),
            opts.shard,
        )

    check_out_dir(out)  # before anything is paid: a usage error (exit 2) if it cannot be written
    records_path = out / "records.jsonl"
    journal_path = out / JOURNAL_FILE
    prior: list[Record] = []
    folded: list[str] = []  # notes on worker files a run that died left unreadable
    if opts.resume:
        folded = fold_worker_records(out, records_path)  # what the workers of a run that died had recorded
    else:
        discard_worker_records(out)
    if opts.resume and records_path.exists() and records_path.read_bytes().strip():
        prior = read_records(records_path)  # (empty when the run was killed before its first record)
    elif records_path.exists():
        records_path.unlink()  # a fresh run never mixes with an older one's evidence
    # Attempts an interrupted run sent (and may have paid) but never recorded in a judgment.
    unrecorded = recover(journal_path, prior) if opts.resume else []
    if not opts.resume:
        journal_path.unlink(missing_ok=True)
    trend_loaded = load_trend(loaded)
    # The trend's judgments are journaled too (stream "trend"): on --resume, those in trend.jsonl
    # are kept and those paid but never recorded are counted, so nothing is paid twice or forgotten.
    prior_trend: list[Record] = []
    trend_path = out / TREND_RECORDS
    if opts.resume and trend_loaded is not None and trend_path.exists() and trend_path.read_bytes().strip():
        prior_trend = read_records(trend_path)
    else:
        trend_path.unlink(missing_ok=True)
    unrecorded_trend = recover(journal_path, prior_trend, TREND_STREAM) if opts.resume and trend_loaded else []
    base_trend, base_problem = (None, None)
    if opts.base_result is not None and trend_loaded is not None:
        base_trend, base_problem = read_base_trend(opts.base_result)
    trend_records: list[Record] = []

    notes: list[str] = list(folded)
    new_records: list[Record] = []
    failure: Finding | None = None
    lineage = make_lineage(loaded, dataset, prior, base_url)
    # The team's deterministic checks: every eligible case, before any model call, at no cost.
    check_results, check_blockers = evaluate_checks(loaded, plan.eligible)
    findings = [*findings, *check_blockers]
    api_key = env.get(loaded.policy.evaluator.api_key_env, "").strip()
    writer = RecordWriter(records_path)
    journal: AttemptJournal | None = None
    try:
        recovered, lost = recovered_records(unrecorded, dataset, loaded, lineage, plan.lane, judge)
        for rec in recovered:
            writer.write(rec)
        prior = [*prior, *recovered]
        if trend_loaded is not None and unrecorded_trend:
            trend_judge = JudgeSettings.of(trend_loaded, base_url)
            trend_lineage = make_lineage(trend_loaded, dataset)
            found, trend_lost = recovered_records(
                unrecorded_trend, dataset, trend_loaded, trend_lineage, plan.lane, trend_judge
            )
            lost += trend_lost
            with RecordWriter(trend_path) as trend_writer:
                for rec in found:
                    trend_writer.write(rec)
            prior_trend += found
            unrecorded = [*unrecorded, *unrecorded_trend]  # said in the note below
        trend_records = list(prior_trend)
        if unrecorded:
            n = sum(len(u.attempts) for u in unrecorded)
            gone = sum(u.unanswered for u in unrecorded)
            notes.append(
                f"recovered {n} attempt(s) from {shown_path(journal_path)} that no record named (sent before the run was "
                f"killed); {gone} of them had no answer and count at their reserved upper bound"
            )
        if blocking_findings(findings):
            notes.append("deterministic checks blocked: no model call was made")
        elif not api_key:
            for case in plan.scheduled:
                for i in range(plan.repeats):
                    missing = Judgment(
                        status="skipped",
                        error_kind="auth",
                        error_message=f"missing credentials: ${loaded.policy.evaluator.api_key_env} is not set",
                    )
                    rec = make_record(
                        case,
                        i,
                        missing,
                        loaded,
                        lineage,
                        plan.lane,
                        lineage.ragas_version,
                        judge,
                        check_results.for_record(case.case_id),
                    )
                    new_records.append(rec)
                    if failure is None:
                        try:
                            writer.write(rec)
                        except OSError as exc:
                            msg = f"writing {shown_path(records_path)} failed ({describe(exc)})"
                            failure = Finding(State.EVALUATION_INCOMPLETE, "output_failed", msg)
        else:
            cache = cache_dir_for(loaded, opts)
            reuse = _reusable(loaded, prior, plan, judge.config_fingerprint) if opts.resume else {}
            # All already paid for (in the cache or reused from --out): serve them without ragas.
            wanted = [(c, i) for c in plan.scheduled for i in range(plan.repeats) if (c.case_id, i) not in reuse]
            served = serve_from_cache(loaded, cache, wanted)
            workers = 1 if served is not None else worker_count(len(wanted), loaded.policy.evaluator.max_concurrency)
            budget = make_budget(boundary(loaded, opts.max_cost), workers)
            # Money already spent by the interrupted run counts against the same boundary.
            budget.spent = sum(r.budget_charge for r in [*prior, *prior_trend]) + lost
            journal = AttemptJournal(journal_path)
            evaluator = served or factory(loaded, api_key, cache)
            runner = Runner(
                loaded=loaded,
                dataset=dataset,
                plan=plan,
                evaluator=evaluator,
                writer=writer,
                budget=budget,
                lineage=lineage,
                progress=Progress(
                    len(plan.scheduled) * plan.repeats,
                    progress_stream,
                    prices(loaded).currency,
                    boundary=budget.limit,
                    reused=len(reuse),
                ),
                judge=judge,
                reuse=reuse,
                waived_pairs=waived_case_ids(loaded.policy.overrides, "pair_violated", clock()),
                check_results=check_results,
                journal=journal,
            )
            # ragas' import leaves ~300k long-lived objects that every full collection rescans
            # (~0.45 s each, 10-15 s over 20k judgments); take them out of the collector's view.
            gc.freeze()
            if workers > 1:
                ended = judge_in_workers(runner, lambda lp: factory(lp, api_key, cache), workers, out, progress_stream)
                notes, findings = [*notes, *ended.notes], [*findings, *ended.findings]
            else:
                asyncio.run(_judge_all(runner))
            runner.progress.close(runner.stop_reason, budget.spent + budget.reserved)
            if trend_loaded is not None and runner.stop_reason is None:
                trend_evaluator = factory(trend_loaded, api_key, cache)
                trend_records = _judge_trend(
                    trend_loaded, plan, dataset, trend_evaluator, budget, out, base_url, journal, prior_trend
                )
            new_records = runner.emitted
            if runner.failure is not None:
                failure = runner_failure(runner, plan, writer)
                new_records = runner.emitted
            if runner.stop_reason == "cancelled":
                notes.append("the run was interrupted (SIGINT/SIGTERM); resume it with --resume")
            elif runner.stop_reason == "budget":
                notes.append("the cost boundary stopped scheduling; completed evidence is kept")
            elif runner.stop_reason in ("control_failed", "pair_violated"):
                notes.append(f"scheduling stopped: {runner.stop_reason.replace('_', ' ')}")
            if prior:
                notes.append(
                    f"resumed: {len(runner.reuse)} completed judgment(s) reused from {shown_path(records_path)}"
                )
    except OSError as exc:  # the recovered records or the journal could not be written
        if failure is None:
            failure = Finding(
                State.EVALUATION_INCOMPLETE, "output_failed", f"writing {shown_path(out)} failed ({describe(exc)})"
            )
    finally:
        if journal is not None:
            journal.close()
        try:
            writer.close()
        except OSError as exc:
            if failure is None:
                msg = f"writing {shown_path(records_path)} failed ({describe(exc)})"
                failure = Finding(State.EVALUATION_INCOMPLETE, "output_failed", msg)

    all_records = prior + new_records
    lineage = make_lineage(loaded, dataset, all_records, base_url)
    if failure is not None:
        findings = [*findings, failure]
    decision = decide(loaded, plan, findings, all_records, lineage, clock(), max_cost=opts.max_cost, notes=notes)
    attach_checks(decision.result, check_results, plan.eligible)
    if trend_loaded is not None and loaded.policy.trend is not None:
        summary = summarize(loaded.policy.trend, _trend_cases(plan), trend_records)
        attach_trend(
            decision.result, compare_to_base(summary, base_trend, base_problem) if opts.base_result else summary
        )
    certify.attach(decision.result, certification, clock().isoformat(), __version__)
    if failure is not None and failure.kind == "output_failed":
        # Write what can be written (result.json first), then end with exit 3 and the message.
        try:
            write_outputs(out, with_shard(decision, opts.shard))
            written = f"{shown_path(out / 'result.json')} was written"
        except OutputWriteError:
            written = "result.json could not be written either"
        detail = str(failure.extra.get("detail", failure.message))
        raise OutputWriteError(
            f"{detail}; {len(failure.case_ids)} case(s) were not judged and {written}. The run is "
            f"evaluation_incomplete, not a verdict; fix: free space in (or repair) {shown_path(out)}, then run again with "
            "--resume to keep the judgments already recorded"
        )
    write_outputs(out, with_shard(decision, opts.shard))
    return decision


def _run_drift(loaded: LoadedPolicy, opts: RunOptions, env: dict[str, str], factory: EvaluatorFactory) -> Decision:
    """The scheduled lane of a policy with `drift:` judges production traces (gate/drift)."""
    limit = boundary(loaded, opts.max_cost)
    if opts.dry_run:
        drift = loaded.policy.drift
        assert drift is not None
        drift_policy(loaded)
        traces = load_traces(loaded)
        drawn = len(draw_sample(traces.traces, drift.sample, drift.seed))
        sys.stdout.write(
            f"Plan for the drift lane of policy {loaded.policy.policy_id}: {drawn} of {len(traces.traces)} traces "
            f"from {drift.traces} (seed {drift.seed}), one judgment each, model {loaded.policy.evaluator.model}; "
            f"boundary {limit:g}\n"
        )
        return Decision(state=State.PASSED, blockers=[], waived=[], outcomes=[], result={})
    drift_run = DriftRun(
        out_dir=opts.out_dir,
        boundary=limit,
        api_key=env.get(loaded.policy.evaluator.api_key_env, "").strip(),
        cache_dir=cache_dir_for(loaded, opts),
        previous=opts.base_result,
    )
    base_url = resolve_base_url(loaded.policy.evaluator.base_url, env.get("OPENAI_BASE_URL"))

    def record(case: Case, judgment: Judgment, judged_by: LoadedPolicy, lineage: Lineage) -> Record:
        settings = JudgeSettings.of(judged_by, base_url)
        return make_record(case, 0, judgment, judged_by, lineage, DRIFT_LANE, lineage.ragas_version, settings)

    decision = run_drift(loaded, drift_run, factory, record)
    write_outputs(opts.out_dir, decision)
    return decision


def _trend_cases(plan: Plan) -> list[Case]:
    """The trend grades the lane's own cases: controls are evaluator checks, not product answers."""
    return [c for c in plan.scheduled if not c.is_control]


def _judge_trend(
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
    lineage = make_lineage(trend_loaded, dataset)
    records: list[Record] = list(prior)
    done = {r.case_id for r in prior if r.status == "ok"}
    with RecordWriter(out / TREND_RECORDS) as writer:

        def emit(case: Case, judgment: Judgment) -> None:
            rec = make_record(case, 0, judgment, trend_loaded, lineage, plan.lane, evaluator.ragas_version, settings)
            writer.write(rec)
            records.append(rec)

        concurrency = trend_loaded.policy.evaluator.max_concurrency
        todo = [c for c in _trend_cases(plan) if c.case_id not in done]
        stream = (journal, TREND_STREAM) if journal is not None else None
        asyncio.run(judge_each(evaluator, todo, budget, concurrency, emit, stream))
    return records


def attach_trend(result: dict[str, Any], trend: dict[str, Any]) -> None:
    """The trend goes beside the decision; its spend is part of the run's cost (same boundary)."""
    result["trend"] = trend
    cost = result.get("cost")
    if isinstance(cost, dict):
        for key in ("total", "input_tokens", "output_tokens", "http_attempts", "budget_spent", "unanswered_attempts"):
            cost[key] = cost.get(key, 0) + trend["cost"].get(key, 0)
        cost["trend_total"] = trend["cost"]["total"]


def recovered_records(
    unrecorded: Sequence[Unrecorded],
    dataset: Dataset,
    loaded: LoadedPolicy,
    lineage: Lineage,
    lane: str,
    judge: JudgeSettings,
) -> tuple[list[Record], float]:
    """Records for journaled attempts no record named, and what those of unknown cases cost.

    Each becomes an `error` record with `error_kind: cancelled` (like a judgment interrupted in
    flight): never a verdict, but its attempts count in cost, `http_attempts` and the budget.
    """
    cases = {c.case_id: c for c in dataset.cases}
    out: list[Record] = []
    lost = 0.0
    for u in unrecorded:
        case = cases.get(u.case_id)
        if case is None:
            lost += u.cost + sum(a.held for a in u.attempts)
            continue
        j = Judgment(
            status="error",
            error_kind="cancelled",
            error_message=(
                f"recovered from the attempt journal: {len(u.attempts)} attempt(s) sent before the run was killed "
                "and never recorded"
            ),
            attempts=list(u.attempts),
            input_tokens=sum(a.input_tokens for a in u.attempts),
            output_tokens=sum(a.output_tokens for a in u.attempts),
            cost=u.cost,
        )
        out.append(make_record(case, u.repeat_index, j, loaded, lineage, lane, lineage.ragas_version, judge))
    return out, lost


def runner_failure(runner: Runner, plan: Plan, writer: RecordWriter) -> Finding:
    """The blocker for a run stopped by its own failure; each judgment it left undone gets a
    `skipped` record saying why (in memory when records.jsonl cannot be written)."""
    done = {(r.case_id, r.repeat_index) for r in runner.emitted} | set(runner.reuse)
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
        f"the run stopped on its own failure, not a verdict: {runner.failure}; {len(undone)} case(s) were not "
        "judged; fix: "
        + ("free space in (or repair) the output directory" if kind == "output_failed" else "report this bug")
        + ", then run again with --resume",
        case_ids=tuple(undone),
        extra={"detail": runner.failure},
    )


def with_shard(decision: Decision, shard: Shard | None) -> Decision:
    """A shard's result names its share (`shard: {index, count}`) so `gate merge` can check the set."""
    if shard is not None:
        decision.result["shard"] = shard.to_dict()
    return decision


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
            from gate.errors import UsageError
            from gate.escape import visible

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
    attach_checks(decision.result, check_results, plan.eligible)
    certify.attach(decision.result, certification, clock().isoformat(), __version__)
    if loaded.policy.trend is not None:
        # The trend's judgments sit beside each records.jsonl (trend.jsonl); the report shows them again.
        beside = [p.parent / TREND_RECORDS for p in record_paths]
        trend_records = [r for t in beside if t.is_file() for r in read_records(t)]
        attach_trend(decision.result, summarize(loaded.policy.trend, _trend_cases(plan), trend_records))
    return decision
