"""`gate run --resume`: which judgments of an interrupted run are kept, and what it paid unrecorded."""

from __future__ import annotations

from collections.abc import Sequence

from gate.judge import Judgment
from gate.judge.journal import Unrecorded
from gate.judge.render import RenderError, render_case
from gate.judge.vetting import vet_record
from gate.model.cases import Case, Dataset
from gate.model.lineage import Lineage
from gate.model.policy import LoadedPolicy
from gate.model.records import Record, RecordShard
from gate.model.wording import plural
from gate.plan.selection import Plan
from gate.run.lineage import JudgeSettings
from gate.run.recording import make_record


def current_input_sha256(loaded: LoadedPolicy, case: Case) -> str | None:
    try:
        return render_case(loaded.prompt_text, loaded.placeholders, case).input_sha256
    except RenderError:
        return None


# A reply the same judge would very likely give again: `--resume` keeps these errors (they were
# paid for) unless asked to send them again (`--rejudge-parse-errors`).
DETERMINISTIC_ERRORS = frozenset({"parse_error", "invalid_label"})


def reusable_records(
    loaded: LoadedPolicy, prior: Sequence[Record], plan: Plan, fingerprint: str, *, rejudge_parse_errors: bool = False
) -> dict[tuple[str, int], Record]:
    """Judgments of an earlier run of the same judge (`gate.model.fingerprint`) that `--resume` may
    keep: completed ones, and those that failed deterministically (parse_error, invalid_label)
    unless `rejudge_parse_errors`; records older than the fingerprint need the same policy file."""
    keep = {"ok"} | (set() if rejudge_parse_errors else {"error"})
    cases = {c.case_id: c for c in plan.scheduled}
    out: dict[tuple[str, int], Record] = {}
    for r in prior:
        case = cases.get(r.case_id)
        # Untrusted like any records file: a line outside the contract is judged again, not reused.
        vetted = vet_record(r, loaded.policy.metric, case)
        # Kept as an error only when the judge's reply itself failed; a verdict that vetting refused
        # (an edited or foreign line) was never the judge's answer, so it is judged again.
        refused = vetted.status != r.status
        r = vetted
        if (
            r.status not in keep
            or refused
            or (r.status == "error" and r.error_kind not in DETERMINISTIC_ERRORS)
            or not 0 <= r.repeat_index < plan.repeats
            or case is None
            or (r.config_fingerprint != fingerprint if r.config_fingerprint else r.policy_sha256 != loaded.sha256)
            or r.input_sha256 != current_input_sha256(loaded, case)
        ):
            continue
        out[(r.case_id, r.repeat_index)] = r
    return out


def recovered_records(
    unrecorded: Sequence[Unrecorded],
    dataset: Dataset,
    loaded: LoadedPolicy,
    lineage: Lineage,
    lane: str,
    judge: JudgeSettings,
    shard: RecordShard | None = None,
) -> tuple[list[Record], list[Unrecorded]]:
    """Records for journaled attempts no record named, and those of cases the dataset no longer has
    (billed as they are: `gate.commands.assemble` counts them in `cost` and lists them outside the lane).

    Each becomes an `error` record with `error_kind: cancelled` (like a judgment interrupted in
    flight): never a verdict, but its attempts count in cost, `http_attempts` and the budget.
    """
    cases = {c.case_id: c for c in dataset.cases}
    out: list[Record] = []
    unknown: list[Unrecorded] = []
    for u in unrecorded:
        case = cases.get(u.case_id)
        if case is None:
            unknown.append(u)
            continue
        j = Judgment(
            status="error",
            error_kind="cancelled",
            error_message=(
                f"recovered from the attempt journal: {plural(len(u.attempts), 'attempt')} sent before the run was killed "
                "and never recorded"
            ),
            attempts=list(u.attempts),
            input_tokens=sum(a.input_tokens for a in u.attempts),
            output_tokens=sum(a.output_tokens for a in u.attempts),
            cost=u.cost,
        )
        out.append(
            make_record(case, u.repeat_index, j, loaded, lineage, lane, lineage.ragas_version, judge, shard=shard)
        )
    return out, unknown
