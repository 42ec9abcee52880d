"""Duplicate case ids: every id must name exactly one case."""

from __future__ import annotations

from gate.model.states import Finding, State
from gate.validate.context import MAX_FINDINGS_PER_KIND, Context, capped, describe_locations


def duplicate_case_ids(ctx: Context) -> list[Finding]:
    seen: dict[str, list[int]] = {}
    for i, case in enumerate(ctx.cases):
        seen.setdefault(case.case_id, []).append(i)
    duplicated = {cid: idx for cid, idx in seen.items() if len(idx) > 1}
    findings: list[Finding] = []
    for cid, idx in duplicated.items():
        locations = [ctx.where(i) for i in idx]
        findings.append(
            Finding(
                State.QUALITY_FAILED,
                "input_contract",
                f"{describe_locations(locations)}: case id {cid!r} is used by {len(idx)} cases; "
                "fix: give each case its own case_id",
                case_ids=(cid,),
                location=locations[0],
            )
        )
    summary = Finding(
        State.QUALITY_FAILED,
        "input_contract",
        f"{len(duplicated) - MAX_FINDINGS_PER_KIND} more case ids are used more than once (all listed in case_ids); "
        "fix: give each case its own case_id",
        case_ids=tuple(list(duplicated)[MAX_FINDINGS_PER_KIND:]),
    )
    return capped(findings, summary)
