"""`gate run --batch submit|collect|wait`: the lane's judgments through the provider's Batch API.

- submit: the controls are judged live, as in any run (a failed control stops here). Every other
  judgment becomes one JSONL line whose `body` is the request the live judge builds for it
  (gate.judge.batch_wire captures it from the real ragas/instructor/openai stack); the lines that
  fit under the cost boundary at batch prices are uploaded and one batch is created. `batch.json`
  in --out records it, written before the lines are uploaded, so a submit that dies or fails half-way
  is picked up by the same command (the controls' records kept, never judged again), never
  submitted twice. The result is `evaluation_incomplete`, blocker `batch_pending`.
- collect: asks the batch's status; once it is completed, expired or cancelled, downloads its
  output and error files and replays every line through the live judge (parser, label contract,
  metering at batch prices), recording each judgment with its `batch_id`; decides as usual. A
  judgment already recorded from the batch is never read again: collecting twice changes nothing.
- wait: submit (or pick up), poll until the batch ends or `--batch-timeout`, then collect.

The run's pieces are gate.commands.run's: the same preparation, records, decision and outputs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from gate.commands.assemble import assemble
from gate.commands.batch_file import (
    BATCH_FILE,
    ERRORS_FILE,
    INPUT_FILE,
    OUTPUT_FILE,
    BatchFile,
    BatchJudgment,
    BatchPrices,
    pending_judgments,
    read_batch_file,
    recorded,
    write_batch_file,
)
from gate.commands.run import (
    BatchOptions,
    RunOptions,
    _begin,
    _Earlier,
    _evidence,
    _gather,
    _Gathered,
    _Lane,
    _prepare,
    _take_stock,
    _write,
    begin_run,
    default_factory,
)
from gate.decide.core import Decision
from gate.decide.product.seal import Sealed
from gate.judge import Judgment
from gate.judge.budget import Budget, Prices
from gate.judge.checks import evaluate_checks
from gate.judge.cost import boundary
from gate.judge.vetting import vet_record
from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.model.loading import sha256_hex
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy, today
from gate.model.records import RECORDS_FILE, Record, RecordWriter
from gate.model.result import BatchCounts, BatchRef
from gate.model.states import Finding, State, blocking_findings
from gate.model.textfit import say
from gate.model.traces import DRIFT_LANE
from gate.model.wording import agree, plural
from gate.run.lineage import make_lineage, run_retirement
from gate.run.order_seed import OrderSeed
from gate.run.outdir import check_out_dir
from gate.run.progress import Progress
from gate.run.recording import make_record
from gate.run.runner import JudgingTools, RecordContext, Runner, judge_all
from gate.run.worker_records import WORKER_RECORDS_GLOB
from gate.validate.case_checks import CheckResults

if TYPE_CHECKING:
    from gate.judge.batch_api import BatchProvider, BatchStatus
    from gate.judge.batch_wire import LineReply, ReplayEvaluator
    from gate.model.cases import Case

# -- entry ---------------------------------------------------------------------------------------


def run_batch(
    policy_path: str | Path,
    opts: RunOptions,
    *,
    env: dict[str, str] | None = None,
    clock: Callable[[], dt.date] = today,
    provider_factory: Callable[[str, str], BatchProvider] | None = None,
) -> Decision:
    """`gate run --batch MODE`; writes into `opts.out_dir` like `gate run`."""
    batch = opts.batch
    assert batch is not None
    env = dict(os.environ) if env is None else env
    _refuse_flags(opts)
    existing = read_batch_file(opts.out_dir)
    # A collect continues the submitted run: its order and audit plan are the submit's.
    continued = (
        OrderSeed(existing.order_seed, "batch") if existing is not None and existing.order_seed is not None else None
    )
    # ... and what sized its audit plans (none in a batch.json older than it): a collect keeps the submit's.
    sealed = (
        Sealed(existing.audit_sizing or {}, unsealed=existing.audit_sizing is None)
        if existing is not None and existing.order_seed is not None
        else None
    )
    lane = _prepare(policy_path, opts, env, default_factory, clock, continued, sealed)
    batch_prices(lane.loaded)
    check_out_dir(opts.out_dir)
    if lane.plan.lane == DRIFT_LANE and lane.loaded.policy.drift is not None:
        raise UsageError("--batch judges a lane's cases; the drift lane (`scheduled` with `drift:`) runs live only")
    if existing is None and batch.mode == "collect":
        raise UsageError(
            f"{shown_path(opts.out_dir / BATCH_FILE)} does not exist: nothing was submitted from this --out; "
            "fix: run `gate run --batch submit` (or `--batch wait`) with the same --out first"
        )
    if existing is not None:
        _check_picked_up(lane, existing)
        if lane.retirement is not None:  # the submit's records carry the date it read
            lane = dataclasses.replace(lane, retirement=run_retirement(lane.retirement, lane.loaded, _prior(lane)))
        # The batch's evidence stays; the earlier outputs go once nothing can refuse this step.
        begin_run(opts.out_dir, keep_evidence=True)
    make_provider = provider_factory or _provider
    stream = opts.progress if opts.progress is not None else sys.stderr
    if existing is None:
        submitted = _submit(lane, opts, make_provider)
        if isinstance(submitted, Decision):
            return submitted
        existing, status = submitted
        if batch.mode == "submit":
            return _pending(lane, existing, status)
    if existing.collected_at is not None:
        return _collect(lane, existing, None, None)  # nothing is asked, downloaded or paid again
    provider = make_provider(lane.api_key, lane.base_url)
    try:
        existing = _ensure_created(lane, existing, provider)
        status = provider.status(existing.batch_id or "")
        if batch.mode == "wait":
            status = _poll(provider, status, batch, stream)
        else:
            print(_progress_line(status), file=stream)
        return _collect(lane, existing, status, provider)
    except _provider_errors() as exc:
        return _provider_failed(lane, existing, str(exc))
    finally:
        provider.close()


def _check_picked_up(lane: _Lane, existing: BatchFile) -> None:
    """Every refusal of a batch already submitted from this --out, before anything there changes."""
    out = lane.opts.out_dir
    _check_same_run(lane, existing, out)
    if existing.collected_at is not None:
        _check_still_collected(lane, existing)
        return
    if not lane.api_key:
        raise UsageError(
            f"collecting batch {existing.batch_id} needs the API key in ${lane.loaded.policy.evaluator.api_key_env}; "
            "fix: set that secret for this step"
        )
    if existing.input_file_id is None:
        _kept_lines(out, existing)  # the lines a submit whose upload failed kept, intact


def _provider(api_key: str, base_url: str) -> BatchProvider:
    from gate.judge.batch_api import BatchProvider

    return BatchProvider(api_key, base_url)


def _provider_errors() -> type[Exception]:
    from gate.judge.batch_api import BatchProviderError

    return BatchProviderError


def _refuse_flags(opts: RunOptions) -> None:
    for flag, on in (("--resume", opts.resume), ("--shard", opts.shard is not None), ("--dry-run", opts.dry_run)):
        if on:
            raise UsageError(
                f"--batch cannot be combined with {flag}: a batch is resumed by running the same --batch command "
                "with the same --out; fix: drop " + flag
            )


def batch_prices(loaded: LoadedPolicy) -> Prices:
    """The policy's batch prices, or a usage error saying how to add them."""
    price = loaded.policy.evaluator.price
    if price is None or price.batch is None:
        raise UsageError(
            f"{shown_path(loaded.path)}: `evaluator.price.batch` is missing; --batch bills every judgment after the "
            "controls at the provider's Batch API prices, which the policy must state; fix: add "
            "`batch: {input_per_mtok: X, output_per_mtok: Y}` under `evaluator.price` (about half the live prices "
            "on OpenAI and Azure OpenAI)"
        )
    return Prices(price.batch.input_per_mtok, price.batch.output_per_mtok, price.currency)


def batch_policy(loaded: LoadedPolicy) -> LoadedPolicy:
    """The policy the batch lines are judged under: batch prices, one attempt (a line is answered once).
    Neither is part of the judge's configuration fingerprint, so keys and bodies are the live ones."""
    p = loaded.policy
    prices = batch_prices(loaded)
    ev = p.evaluator
    assert ev.price is not None
    price = ev.price.model_copy(
        update={"input_per_mtok": prices.input_per_mtok, "output_per_mtok": prices.output_per_mtok}
    )
    retries = ev.retries.model_copy(update={"max_attempts": 1})
    evaluator = ev.model_copy(update={"price": price, "retries": retries})
    return dataclasses.replace(loaded, policy=p.model_copy(update={"evaluator": evaluator}))


# -- batch.json ----------------------------------------------------------------------------------


def _check_same_run(lane: _Lane, bf: BatchFile, out_dir: Path) -> None:
    lineage = make_lineage(lane.loaded, lane.dataset, [], lane.base_url)
    ours = {
        "policy_id": lane.loaded.policy.policy_id,
        "lane": lane.plan.lane,
        "policy_sha256": lane.loaded.sha256,
        "dataset_sha256": lineage.dataset_sha256,
        "config_fingerprint": lane.judge.config_fingerprint,
        "responses_sha256": lineage.responses_sha256 or None,
    }
    if bf.responses_sha256 != ours["responses_sha256"]:
        raise UsageError(
            f"{shown_path(out_dir / BATCH_FILE)} holds batch {bf.batch_id} of a product lane's answers from a "
            f"responses file with sha256 {str(bf.responses_sha256)[:12]}, not the --responses given now "
            f"({str(ours['responses_sha256'])[:12]}); fix: pass the same --responses file the batch was submitted "
            "with"
        )
    for name, value in ours.items():
        theirs = getattr(bf, name)
        if theirs != value:
            raise UsageError(
                f"{shown_path(out_dir / BATCH_FILE)} holds batch {bf.batch_id} submitted with another {name} "
                f"({str(theirs)[:16]} vs {str(value)[:16]} now); a batch is collected with the policy, cases and lane "
                "it was submitted with; fix: restore those, or submit again into a new --out"
            )


# -- submit --------------------------------------------------------------------------------------


@dataclass
class _Lines:
    judgments: list[BatchJudgment] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    reserved: float = 0.0
    settled: list[Record] = field(default_factory=list)  # judged without a line (unrenderable, over the boundary)


def _submit(
    lane: _Lane, opts: RunOptions, make_provider: Callable[[str, str], BatchProvider]
) -> Decision | tuple[BatchFile, BatchStatus]:
    """Controls live, then the batch; a Decision when the run ends before anything is submitted.
    The control judgments a submit killed before it wrote batch.json recorded here are kept and
    reused, as `--resume` keeps a run's (`_killed_submit`): nothing is paid twice."""
    picked_up = _killed_submit(lane)
    if picked_up:
        lane = dataclasses.replace(lane, opts=dataclasses.replace(lane.opts, resume=True))
    earlier = dataclasses.replace(_take_stock(lane), trend_loaded=None)
    if earlier.records and lane.retirement is not None:
        lane = dataclasses.replace(lane, retirement=run_retirement(lane.retirement, lane.loaded, earlier.records))
    lineage = make_lineage(lane.loaded, lane.dataset, [], lane.base_url, lane.retirement)
    checks = evaluate_checks(lane.loaded, lane.plan.eligible)  # their blockers come with them
    got = _Gathered(prior=list(earlier.records), prior_trend=[], findings=list(lane.findings), notes=[])
    if picked_up:
        got.notes.append(
            f"--batch submit: {plural(len(earlier.records), 'control judgment')} an earlier submit into this --out "
            "recorded before it was stopped (before batch.json) kept, and its journal's unrecorded attempts billed: "
            "nothing is paid twice"
        )
    if blocking_findings(got.findings) or not lane.api_key:
        got.notes += _begin(lane, earlier)  # else `_gather` begins, once the controls' judge has loaded
        return _finish(lane, earlier, got, checks)  # exactly `gate run`: nothing is judged or submitted
    controls_only = dataclasses.replace(lane.plan, eligible=tuple(c for c in lane.plan.eligible if c.is_control))
    _gather(dataclasses.replace(lane, plan=controls_only), earlier, got, lineage, checks)
    if got.failure is not None:
        return _finish(lane, earlier, got, checks)
    so_far = assemble(_evidence(lane, earlier, got, checks))  # not written: the controls' verdict so far
    assert so_far.result is not None
    if not so_far.result.controls.ok:
        got.notes.append("--batch: the controls did not all pass live, so nothing was submitted")
        return _finish(lane, earlier, got, checks)
    lines = asyncio.run(_build_lines(lane, opts, list(got.records()), checks))
    with RecordWriter(opts.out_dir / RECORDS_FILE) as writer:
        for rec in lines.settled:
            writer.write(rec)
    if not lines.bodies:
        got.notes.append("--batch: no judgment was left to submit")
        return _finish(lane, earlier, got, checks)
    (opts.out_dir / INPUT_FILE).write_bytes(b"".join(lines.bodies))
    bf = BatchFile(
        batch_id=None,
        input_file_id=None,
        submitted_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        endpoint=_line_url(lane.base_url),
        model=lane.loaded.policy.evaluator.model,
        policy_id=lane.loaded.policy.policy_id,
        lane=lane.plan.lane,
        policy_sha256=lane.loaded.sha256,
        dataset_sha256=lineage.dataset_sha256,
        config_fingerprint=lane.judge.config_fingerprint,
        responses_sha256=lineage.responses_sha256 or None,
        order_seed=lane.plan.order_seed,
        audit_sizing=dict(lane.plan.audit_sizing) or None,
        prices=BatchPrices(**_price_dict(lane.loaded)),
        reserved_cost=lines.reserved,
        judgments=lines.judgments,
    )
    # Before anything is uploaded: the same command run again picks this submit up (uploads these
    # lines, creates the batch once) and keeps the controls' records and journal.
    write_batch_file(opts.out_dir, bf)
    provider = make_provider(lane.api_key, lane.base_url)
    try:
        bf = _ensure_created(lane, bf, provider)
        status = provider.status(bf.batch_id or "")
    except _provider_errors() as exc:
        got.findings.append(_not_submitted(lane, lines, str(exc)))
        return _finish(lane, earlier, got, checks)
    finally:
        provider.close()
    return bf, status


def _killed_submit(lane: _Lane) -> bool:
    """Whether --out (without batch.json) holds what a `--batch submit` stopped before it wrote
    batch.json left: records of this lane's controls and nothing else (a live run's would hold other
    cases; a run with workers leaves their files). Records that cannot be read: a fresh submit."""
    out = lane.opts.out_dir
    if any(out.glob(WORKER_RECORDS_GLOB)):
        return False
    try:
        prior = recorded(out)
    except (UsageError, OSError):
        return False
    return bool(prior) and all(r.control_role is not None and r.lane == lane.plan.lane for r in prior)


def _price_dict(loaded: LoadedPolicy) -> dict[str, object]:
    p = batch_prices(loaded)
    return {"input_per_mtok": p.input_per_mtok, "output_per_mtok": p.output_per_mtok, "currency": p.currency}


def _ensure_created(lane: _Lane, bf: BatchFile, provider: BatchProvider) -> BatchFile:
    """The batch of this input file: the one recorded, one created by a submit that died before
    recording it, or a new one (the only place a batch is created)."""
    if bf.batch_id is not None:
        return bf
    if bf.input_file_id is None:  # a submit whose upload failed: the lines it kept, uploaded now
        bf = bf.model_copy(update={"input_file_id": provider.upload(INPUT_FILE, _kept_lines(lane.opts.out_dir, bf))})
        write_batch_file(lane.opts.out_dir, bf)
    assert bf.input_file_id is not None
    found = provider.find(bf.input_file_id)
    if found is None:
        meta = {"policy_id": lane.loaded.policy.policy_id[:64], "lane": lane.plan.lane[:64]}
        found = provider.create(bf.input_file_id, meta)
    bf = bf.model_copy(update={"batch_id": found.batch_id, "status": found.status})
    write_batch_file(lane.opts.out_dir, bf)
    return bf


def _kept_lines(out_dir: Path, bf: BatchFile) -> bytes:
    """batch-input.jsonl as the submit wrote it: one line per judgment batch.json lists."""
    path = out_dir / INPUT_FILE
    try:
        text = path.read_bytes()
    except OSError:
        text = b""
    ids = []
    for raw in text.splitlines():
        try:
            row = json.loads(raw)
        except ValueError:
            row = None
        ids.append(row.get("custom_id") if isinstance(row, dict) else None)
    if ids != [j.custom_id for j in bf.judgments]:
        raise UsageError(
            f"{shown_path(path)} does not hold the {len(bf.judgments)} lines {shown_path(out_dir / BATCH_FILE)} lists "
            "(missing or edited), so they cannot be uploaded; nothing was uploaded or paid; fix: restore it from the "
            "submit step's output, or submit again into a new --out"
        )
    return text


async def _build_lines(lane: _Lane, opts: RunOptions, controls: list[Record], checks: CheckResults) -> _Lines:
    """One line per judgment after the controls, its body captured from the live judge, while the
    reservation fits under the boundary with what the controls spent."""
    from gate.judge.batch_wire import BatchTransport, capture_body
    from gate.judge.ragas_judge import make_evaluator

    loaded = batch_policy(lane.loaded)
    evaluator = make_evaluator(
        loaded, api_key=lane.api_key, cache_dir=None, base_url_env=lane.base_url, transport=BatchTransport()
    )
    prices = batch_prices(lane.loaded)
    max_out = loaded.policy.evaluator.max_output_tokens
    limit = boundary(lane.loaded, opts.max_cost)
    spent = sum(r.budget_charge for r in controls)
    lineage = make_lineage(lane.loaded, lane.dataset, controls, lane.base_url)
    url = _line_url(lane.base_url)
    lines = _Lines()
    used: set[str] = set()
    try:
        for case in lane.plan.scheduled:
            if case.is_control:
                continue
            for i in range(lane.plan.repeats):
                custom_id = _custom_id(evaluator.cache_key, case, i, used)
                body, judgment = await capture_body(evaluator, case, i, custom_id)
                if body is not None:
                    bound = prices.cost(len(body), max_out)  # the live request hook's bound, at batch prices
                    if spent + lines.reserved + bound <= limit:
                        lines.reserved += bound
                        lines.judgments.append(BatchJudgment(custom_id=custom_id, case_id=case.case_id, repeat_index=i))
                        line = {"custom_id": custom_id, "method": "POST", "url": url, "body": json.loads(body)}
                        lines.bodies.append(json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n")
                        continue
                    judgment = Judgment(
                        status="skipped",
                        error_kind="budget",
                        error_message=(
                            f"budget boundary reached: not submitted, its batch line may cost up to {bound:.6f} and "
                            f"{spent + lines.reserved:.6f} is spent or reserved under a boundary of {limit:.6f}"
                        ),
                    )
                rec = make_record(
                    case,
                    i,
                    judgment,
                    lane.loaded,
                    lineage,
                    lane.plan.lane,
                    lineage.ragas_version,
                    lane.judge,
                    checks.for_record(case.case_id),
                    lane.plan.order_seed,
                    audit_sizing=lane.plan.audit_sizing.get(case.slice),
                )
                lines.settled.append(vet_record(rec, lane.loaded.policy.metric, case))
    finally:
        await evaluator.aclose()
    return lines


def _line_url(base_url: str) -> str:
    from gate.judge.batch_api import line_url

    return line_url(base_url)


def _custom_id(key_of: Callable[[Case, int], str], case: Case, repeat: int, used: set[str]) -> str:
    """The judgment's key (its cache key); two cases with the same rendered inputs get one each."""
    try:
        key = key_of(case, repeat)
    except Exception:  # an unrenderable case: it never reaches a line, any unique id will do
        key = sha256_hex(f"{case.case_id}\n{repeat}")
    if key in used:
        key = sha256_hex(f"{key}\n{case.case_id}")
    used.add(key)
    return key


# -- status and collect --------------------------------------------------------------------------


def _poll(provider: BatchProvider, status: BatchStatus, opts: BatchOptions, stream: IO[str]) -> BatchStatus:
    """Ask the status every `poll_s` until the batch ends or `timeout_s` has passed."""
    start = opts.clock()
    print(_progress_line(status), file=stream)
    while not status.terminal:
        if opts.timeout_s is not None and opts.clock() - start >= opts.timeout_s:
            say(stream, f"gate: --batch-timeout {opts.timeout_s:g}s reached; batch {status.batch_id} is still running")
            break
        opts.sleep(opts.poll_s)
        status = provider.status(status.batch_id)
        print(_progress_line(status), file=stream)
    return status


def _progress_line(status: BatchStatus) -> str:
    return (
        f"gate: batch {status.batch_id} {status.status}: {status.completed}/{status.total} lines answered, "
        f"{status.failed} failed"
    )


def _pending_ids(lane: _Lane, bf: BatchFile, recorded: list[Record]) -> list[str]:
    return list(dict.fromkeys(j.case_id for j in pending_judgments(bf, recorded)))


def _prior(lane: _Lane) -> list[Record]:
    return recorded(lane.opts.out_dir)


def _check_still_collected(lane: _Lane, bf: BatchFile) -> None:
    """A collected batch is decided from the records it left; never read again into another run's."""
    missing = _pending_ids(lane, bf, _prior(lane))
    if missing:
        out = lane.opts.out_dir
        raise UsageError(
            f"{shown_path(out / BATCH_FILE)}: batch {bf.batch_id} was collected at {bf.collected_at}, but "
            f"{shown_path(out / RECORDS_FILE)} no longer holds its judgments of {plural(len(missing), 'case')} (a later "
            "run or an edit replaced them); reading the batch again would mix it into those records; fix: submit "
            "again into a new --out, or decide the records as they are with `gate decide`"
        )


def _pending(lane: _Lane, bf: BatchFile, status: BatchStatus) -> Decision:
    bf = _with_status(lane, bf, status)
    prior = _prior(lane)
    ids = _pending_ids(lane, bf, prior)
    when = "now: it has ended" if status.terminal else "later (the provider answers within 24h)"
    message = (
        f"batch {bf.batch_id} is {status.status} ({status.completed}/{status.total} lines answered, {status.failed} "
        f"failed); {plural(len(ids), 'case')} {agree(len(ids), 'waits', 'wait')} for it; fix: run `gate run --batch collect` with the same --out {when}"
    )
    finding = Finding(State.EVALUATION_INCOMPLETE, "batch_pending", message, case_ids=tuple(ids))
    return _decided(lane, prior, [finding], bf)


def _with_status(lane: _Lane, bf: BatchFile, status: BatchStatus) -> BatchFile:
    counts = BatchCounts(total=status.total, completed=status.completed, failed=status.failed)
    bf = bf.model_copy(update={"status": status.status, "request_counts": counts})
    write_batch_file(lane.opts.out_dir, bf)
    return bf


def _provider_failed(lane: _Lane, bf: BatchFile, message: str) -> Decision:
    prior = _prior(lane)
    ids = _pending_ids(lane, bf, prior)
    finding = Finding(
        State.EVALUATION_INCOMPLETE,
        "batch_pending",
        f"batch {bf.batch_id or '(not created yet)'}: {message}; {plural(len(ids), 'case')} {agree(len(ids), 'waits', 'wait')} for it; fix: run the same "
        "--batch command again (nothing is submitted twice)",
        case_ids=tuple(ids),
    )
    return _decided(lane, prior, [finding], bf)


def _not_submitted(lane: _Lane, lines: _Lines, message: str) -> Finding:
    ids = list(dict.fromkeys(j.case_id for j in lines.judgments))
    return Finding(
        State.EVALUATION_INCOMPLETE,
        "batch_failed",
        f"--batch submit: {message}; {plural(len(ids), 'case')} {agree(len(ids), 'was', 'were')} not submitted and nothing was paid for them; "
        f"fix: run the same `--batch submit` with the same --out again: it sends the lines kept in {INPUT_FILE} and "
        "keeps the controls' records (they are not judged or paid again)",
        case_ids=tuple(ids),
    )


def _collect(lane: _Lane, bf: BatchFile, status: BatchStatus | None, provider: BatchProvider | None) -> Decision:
    prior = _prior(lane)
    if status is None or provider is None:
        return _decided(lane, prior, [], bf)
    if not status.terminal:
        return _pending(lane, bf, status)
    bf = _with_status(lane, bf, status)
    if status.status == "failed":
        ids = _pending_ids(lane, bf, prior)
        errors = "; ".join(status.errors[:5]) or "no reason given"
        finding = Finding(
            State.EVALUATION_INCOMPLETE,
            "batch_failed",
            f"batch {bf.batch_id} failed validation at the provider ({errors}): nothing in it was run or billed; "
            f"{plural(len(ids), 'case')} {agree(len(ids), 'was', 'were')} not judged; fix: correct the cause, then submit again into a new --out",
            case_ids=tuple(ids),
        )
        return _decided(lane, prior, [finding], bf)
    replies = _download(lane, status, provider, bf)
    checks = evaluate_checks(lane.loaded, lane.plan.eligible)  # outside the loop: the team's checks run their own
    emitted = asyncio.run(_replay(lane, bf, prior, replies, checks))
    bf = bf.model_copy(update={"collected_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")})
    write_batch_file(lane.opts.out_dir, bf)
    return _decided(lane, [*prior, *emitted], [], bf, _foreign_note(bf, replies.foreign))


@dataclass
class _Replies:
    """A collected batch's lines by custom_id: the one each judgment is read from (an answer wins over
    an error), the further answers a duplicated custom_id carries, and ids the batch was not sent."""

    first: dict[str, LineReply] = field(default_factory=dict)
    again: dict[str, list[LineReply]] = field(default_factory=dict)
    foreign: list[str] = field(default_factory=list)


def _download(lane: _Lane, status: BatchStatus, provider: BatchProvider, bf: BatchFile) -> _Replies:
    """Every line of the output and error files (kept in --out as the evidence). A custom_id answered
    twice is evidence that may disagree: each answer is read and billed; an unknown one is noted."""
    from gate.judge.batch_wire import LineReply

    sent = {j.custom_id for j in bf.judgments}
    got = _Replies()
    for file_id, name in ((status.error_file_id, ERRORS_FILE), (status.output_file_id, OUTPUT_FILE)):
        if not file_id:
            continue
        data = provider.download(file_id)
        (lane.opts.out_dir / name).write_bytes(data)
        for raw in data.splitlines():
            try:
                row = json.loads(raw)
            except ValueError:
                continue  # a line we cannot read: its judgment stays without an answer (an error)
            if not isinstance(row, dict) or not isinstance(row.get("custom_id"), str):
                continue
            cid, response = row["custom_id"], row.get("response")
            error = row["error"] if isinstance(row.get("error"), dict) else {}
            if cid not in sent:
                got.foreign.append(cid)
            elif isinstance(response, dict) and isinstance(response.get("status_code"), int):
                reply = LineReply(response["status_code"], response.get("body"))
                held = got.first.get(cid)
                if held is not None and held.status_code is not None:
                    got.again.setdefault(cid, []).append(reply)  # answered twice: both read, both billed
                else:
                    got.first[cid] = reply  # the output file is read last: an answer wins over an error
            elif cid not in got.first:
                got.first[cid] = LineReply(
                    None, None, str(error.get("code") or "error"), str(error.get("message") or "")
                )
    return got


def _foreign_note(bf: BatchFile, foreign: list[str]) -> list[str]:
    if not foreign:
        return []
    shown = ", ".join(visible(cid, 40) for cid in foreign[:3]) + (" ..." if len(foreign) > 3 else "")
    return [
        f"batch {bf.batch_id}: {plural(len(foreign), 'line')} of its output {agree(len(foreign), 'carries', 'carry')} a custom_id it was not sent with ({shown}): "
        "not read as any judgment; the provider may have billed them (see batch-output.jsonl / batch-errors.jsonl)"
    ]


async def _replay(
    lane: _Lane, bf: BatchFile, prior: list[Record], replies: _Replies, checks: CheckResults
) -> list[Record]:
    from gate.judge.batch_wire import BatchTransport, ReplayEvaluator
    from gate.judge.ragas_judge import make_evaluator

    loaded = batch_policy(lane.loaded)
    inner = make_evaluator(
        loaded, api_key=lane.api_key, cache_dir=None, base_url_env=lane.base_url, transport=BatchTransport()
    )
    submitted: dict[str, bytes] = {}
    input_path = lane.opts.out_dir / INPUT_FILE
    if input_path.exists():
        for raw in input_path.read_bytes().splitlines():
            row = json.loads(raw)
            submitted[row["custom_id"]] = json.dumps(row["body"]).encode("utf-8")
    keys = {(j.case_id, j.repeat_index): j.custom_id for j in bf.judgments}
    evaluator = ReplayEvaluator(inner, bf.batch_id or "", bf.status, keys, submitted, replies.first)
    batched = set(keys)
    reuse = {(r.case_id, r.repeat_index): r for r in prior if (r.case_id, r.repeat_index) not in batched or r.batch_id}
    stream = lane.opts.progress if lane.opts.progress is not None else sys.stderr
    total = len(lane.plan.scheduled) * lane.plan.repeats
    writer = RecordWriter(lane.opts.out_dir / RECORDS_FILE)
    tools = JudgingTools(
        evaluator=evaluator,
        budget=Budget(None),  # the boundary held the reservation at submit; these lines are paid already
        writer=writer,
        progress=Progress(total, stream, batch_prices(lane.loaded).currency, reused=len(reuse)),
    )
    context = RecordContext(
        loaded, lane.dataset, make_lineage(lane.loaded, lane.dataset, prior, lane.base_url), lane.judge, checks
    )
    runner = Runner(lane.plan, tools, context, reuse=reuse)
    # Every line of a collected batch is recorded: a violated pair stops no scheduling (it was all
    # paid already); the decision still reports it.
    runner.pair_members = {}
    try:
        await judge_all(runner)  # closes `inner` when done
        if replies.again:
            again = make_evaluator(
                loaded, api_key=lane.api_key, cache_dir=None, base_url_env=lane.base_url, transport=BatchTransport()
            )
            try:
                await _replay_again(
                    runner, ReplayEvaluator(again, bf.batch_id or "", bf.status, keys, submitted, {}), replies
                )
            finally:
                await again.aclose()
    finally:
        writer.close()
    runner.progress.close(runner.stop_reason, runner.budget.spent, signal_name=runner.stopped_by)
    return list(runner.records())


async def _replay_again(runner: Runner, again: ReplayEvaluator, replies: _Replies) -> None:
    """Each further answer of a duplicated custom_id, as one more record of its judgment: billed, and
    when it disagrees with the first the decision's conflict rule sends the case to a person."""
    cases = {c.case_id: c for c in runner.plan.scheduled}
    for (case_id, repeat), custom_id in again.keys.items():
        case = cases.get(case_id)
        if case is None or (case_id, repeat) in runner.reuse:
            continue  # not in the lane, or collected before: its lines were read then
        for reply in replies.again.get(custom_id, []):
            again.replies = {custom_id: reply}
            judgment = await again.judge(case, repeat, runner.budget)
            runner.emit(runner.to_record(case, repeat, judgment))


# -- the decision --------------------------------------------------------------------------------


def _decided(
    lane: _Lane, records: list[Record], extra: list[Finding], bf: BatchFile, notes: list[str] | None = None
) -> Decision:
    """The run's decision from its records, with the batch's blocker, reservation and section, through
    the one assembly; written."""
    checks = evaluate_checks(lane.loaded, lane.plan.eligible)  # their blockers come with them
    earlier = _Earlier([], [], None, [], [], None, None)
    got = _Gathered(prior=records, prior_trend=[], findings=[*lane.findings, *extra], notes=notes or [])
    section = BatchRef(
        batch_id=bf.batch_id,
        status=bf.status,
        submitted_at=bf.submitted_at,
        lines=len(bf.judgments),
        request_counts=bf.request_counts,
        collected=bf.collected_at is not None,
    )
    ev = _evidence(lane, earlier, got, checks)
    # Beside the run's own sections (the judge's calibration), never instead of them.
    ev = dataclasses.replace(
        ev, batch_reserved=bf.reserved_cost, sections={**ev.sections, "batch": section.model_dump(exclude_unset=True)}
    )
    return _write(ev, lane.opts, None)


def _finish(lane: _Lane, earlier: _Earlier, got: _Gathered, checks: CheckResults) -> Decision:
    """A batch run that ends before submitting: decided and written exactly as `gate run` would."""
    return _write(_evidence(lane, earlier, got, checks), lane.opts, got.failure)
