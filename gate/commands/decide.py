"""`gate decide`: the decision from records.jsonl files someone wrote, as `gate run` would decide it.

Beside each records.jsonl it reads what the run left there too (trend.jsonl, the attempt journal),
and `evidence_of_records` is the evidence `gate merge` and the crash path decide from as well.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.commands.assemble import OutDirEvidence, RunEvidence, TrendEvidence, assemble, read_out_dirs
from gate.commands.outputs import write_assembled
from gate.decide.core import Decision
from gate.decide.product import seal
from gate.decide.product.verdict import ProductEvidence
from gate.judge.checks import evaluate_checks
from gate.judge.cost import max_cost_notes
from gate.measure import certify
from gate.measure.calibrate import requirement
from gate.measure.product_evidence import audit_of, product_evidence, read_base_verdicts
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy, today
from gate.model.records import Record
from gate.model.states import Finding
from gate.plan.inputs import load_product_inputs
from gate.plan.selection import Plan, recorded_order_seeds
from gate.plan.shard import Shard, lane_cases, select
from gate.review.audit_labels import AuditEvidence
from gate.run.lineage import make_lineage, recorded_judge


def decide_from_records(
    policy_path: str | Path,
    record_paths: Sequence[Path],
    lane: str | None,
    max_cost: float | None = None,
    clock: Callable[[], dt.date] = today,
    out_dir: Path | None = None,
    responses: Path | None = None,
    base_result: Path | None = None,
    audit: Path | None = None,
    audit_queue: Path | None = None,
) -> Decision:
    """The decision over the records (and what their runs left beside them); written into `out_dir` if given."""
    dirs = read_out_dirs(record_paths)
    # One directory each, unless the same run was named twice (then the records are read once).
    runs = [(p, d.records) for p, d in zip(record_paths, dirs, strict=True)] if len(dirs) == len(record_paths) else []
    refuse_other_policy(policy_path, runs or [(record_paths[0], tuple(r for d in dirs for r in d.records))])
    records = [r for d in dirs for r in d.records]
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
    evidence = evidence_of_records(
        policy_path,
        lane,
        dirs,
        max_cost,
        clock(),
        responses=responses,
        base_result=base_result,
        audit=AuditInputs(audit, audit_queue, record_paths[0].parent),
        named=", ".join(shown_path(p) for p in record_paths),
    )
    return assemble(evidence) if out_dir is None else write_assembled(out_dir, evidence)


def refuse_other_policy(policy_path: str | Path, runs: Sequence[tuple[Path, Sequence[Record]]]) -> None:
    """Records judged under another policy are not evidence for this one: a usage error naming both
    policy ids (they would otherwise read as stale records, or as controls never judged)."""
    from gate.model.errors import UsageError
    from gate.model.escape import visible
    from gate.model.policy import load_policy

    policy_id: str | None = None
    for where, records in runs:
        others = sorted({r.policy_id for r in records if r.policy_id})
        if not others:
            continue
        policy_id = policy_id or load_policy(policy_path).policy.policy_id
        other = next((o for o in others if o != policy_id), None)
        if other is not None:
            raise UsageError(
                f"{shown_path(where)}: these records were judged under policy {visible(other, 80)!r}, not under "
                f"{shown_path(policy_path)}'s policy {policy_id!r}; fix: pass --policy with the policy whose "
                f"policy_id is {visible(other, 80)!r}, or the records of a run of {policy_id!r}"
            )


def evidence_of_records(
    policy_path: str | Path,
    lane: str,
    found: Sequence[OutDirEvidence],
    max_cost: float | None,
    today: dt.date,
    *,
    shard: Shard | None = None,
    findings: Sequence[Finding] = (),
    notes: Sequence[str] = (),
    sections: Mapping[str, Any] | None = None,
    responses: Path | None = None,
    base_result: Path | None = None,
    audit: AuditInputs | None = None,
    named: str = "the records given",
) -> RunEvidence:
    """The evidence of recorded judgments for `lane` (or a shard's share of it), as the run would
    gather it: the same checks and certification, the trend's records, the journal's attempts.

    A product lane's records are decided with the policy's calibration file; `responses` (optional
    here: the records say what they judged) puts the answers back into the cases, so a record of
    another answer is stale and a case with no line is `missing_response`, as on the run. `named`:
    the records as a message names them."""
    records = [r for d in found for r in d.records]
    seed = _one_order_seed(records, lane)
    loaded, dataset, plan, input_findings, answers = load_product_inputs(
        policy_path, lane, responses, order_seed=seed, order_seed_from="records" if seed is not None else None
    )
    lane_plan = plan  # the whole lane's, whose slices' cases the run sealed
    if shard is not None:
        shard = dataclasses.replace(shard, lane_cases=lane_cases(plan))  # as the run says its share
        plan = select(plan, shard)
    lineage = make_lineage(loaded, dataset, records)
    check_results = evaluate_checks(loaded, plan.eligible)  # their blockers come with them
    certification = certify.assess_records(loaded, plan, records, lineage.ragas_version)
    cert_findings = certification.findings if certification is not None else []
    # Calibration on recorded judgments: the judge most of them were made by, the one whose records
    # are the evidence (`recorded_judge`, as the lineage's fingerprint and the staleness check read it).
    judge = recorded_judge(loaded, records)
    calibration = requirement.check_calibration(loaded, lane, judge.settings, judge.ragas_version, today)
    cal_findings, cal_sections = requirement.evidence(calibration)
    base = read_base_verdicts(base_result, lane, loaded.policy.policy_id) if base_result is not None else None
    run_dir = audit.run_dir if audit is not None else None
    product = product_evidence(loaded, lane, calibration, base, _audit(loaded, lane, audit), run_dir)
    sealed = _sealed(loaded, lane, records, product, named, lane_plan) if seed is not None else ()
    return RunEvidence(
        loaded=loaded,
        dataset=dataset,
        plan=plan,
        lineage=lineage,
        today=today,
        records=tuple(records),
        findings=(*input_findings, *cert_findings, *cal_findings, *findings),
        notes=(*max_cost_notes(loaded, max_cost), *answers.notes, *sealed, *notes),
        max_cost=max_cost,
        checks=check_results,
        certification=certification,
        trend=TrendEvidence(tuple(r for d in found for r in d.trend_records)),
        unrecorded=tuple(u for d in found for u in d.unrecorded),
        shard=shard,
        sections={**cal_sections, **(sections or {})},
        product=product,
    )


def _sealed(
    loaded: LoadedPolicy,
    lane: str,
    records: Sequence[Record],
    pe: ProductEvidence | None,
    named: str,
    lane_plan: Plan,
) -> tuple[str, ...]:
    """The audit plan is the one the run sized (gate/decide/product/seal.py): refused when the policy,
    calibration and dataset given would size it otherwise; a note when the records are older than the
    sizing they carry, or than its case set."""
    if pe is None:
        return ()
    sealed = seal.sealed_sizing(records, lane, named)
    if sealed.unsealed:
        return (seal.unsealed_note(lane),)
    seal.refuse_resized(sealed, loaded, lane, pe, named, lane_plan)
    return (seal.without_cases_note(lane),) if sealed.without_cases else ()


def _one_order_seed(records: Sequence[Record], lane: str) -> str | None:
    """The order seed the lane's records were judged under: one run's answers carry one (its shards,
    resumes and batch share it). Records of several seeds are several runs, whose orders and audit
    plans differ: refused, naming the seeds."""
    seeds = recorded_order_seeds(r for r in records if r.lane == lane)
    if len(seeds) > 1:
        from gate.model.errors import UsageError
        from gate.model.escape import visible

        raise UsageError(
            f"the records given: the answers of lane {lane} were judged under {len(seeds)} order seeds "
            f"({', '.join(visible(s, 80) for s in seeds[:3])}): records of several runs, whose orders and audit "
            "plans differ, cannot be decided as one run; fix: pass the records of one run (its shards merged with "
            "`gate merge`, which checks they share one seed)"
        )
    return seeds[0] if seeds else None


@dataclass(frozen=True)
class AuditInputs:
    """`gate decide --audit LEDGER [--audit-queue QUEUE]`, and the run's directory (named in the queue command)."""

    ledger: Path | None
    queue: Path | None
    run_dir: Path


def _audit(loaded: LoadedPolicy, lane: str, given: AuditInputs | None) -> AuditEvidence | None:
    """People's audit of the recorded run (`--audit`, else the policy's `lanes.<lane>.audit`)."""
    ledger = given.ledger if given is not None else None
    queue = given.queue if given is not None else None
    return audit_of(loaded, lane, ledger, queue)
