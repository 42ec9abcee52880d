"""One records.jsonl line: a judgment of a case, with the lineage that explains it."""

from __future__ import annotations

from gate import __version__
from gate.judge import Judgment
from gate.model.cases import Case
from gate.model.clear_text import kept_reason
from gate.model.lineage import Lineage
from gate.model.loading import sha256_hex
from gate.model.policy import LoadedPolicy
from gate.model.records import AuditSizing, Record, RecordShard, RecordWriter, record_line
from gate.model.retirement import source_of
from gate.run.lineage import JudgeSettings


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
    order_seed: str | None = None,
    shard: RecordShard | None = None,
    audit_sizing: AuditSizing | None = None,
) -> Record:
    """One records.jsonl line: the judgment plus the lineage that explains it (`order_seed` and
    `audit_sizing`: a product lane's, kept on its answers; `shard`: the share of a `--shard` run that made it)."""
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
        batch_id=j.batch_id,
        **product_fields(case, order_seed, audit_sizing),
        judge_shutdown_date=lineage.judge_shutdown_date or None,
        judge_shutdown_source=source_of(lineage.judge_shutdown_source),
        shard=shard,
    )


def product_fields(
    case: Case, order_seed: str | None = None, audit_sizing: AuditSizing | None = None
) -> dict[str, object]:
    """A product lane's answer (no person labelled it): the sha256 of the response judged, the
    `generation` its --responses line gave, the lane's order seed and what sizes its slice's audit
    plan (both fixed when the run started); nothing for a labelled case."""
    if case.labelled:
        return {}
    return {
        "response_sha256": sha256_hex(case.response or ""),
        "generation": case.generation or None,
        "order_seed": order_seed,
        "audit_sizing": audit_sizing if order_seed is not None else None,
    }


def write_or_keep(writer: RecordWriter, record: Record, unwritten: list[Record], line: bytes | None = None) -> None:
    """Write one record to the records file (`line`: its line as a worker wrote it) and let it go;
    when the file does not take it whole, keep it in `unwritten` (the decision still reads it) and
    raise the OSError. A line cut short by the failure is torn: the reader skips it."""
    line = line if line is not None else record_line(record)
    before = writer.size()
    try:
        writer.write_line(line)
    except OSError:
        if writer.size() != before + len(line):
            unwritten.append(record)
        raise
