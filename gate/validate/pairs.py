"""Pairs: each pair id names exactly two cases that agree on the pair's kind and labels."""

from __future__ import annotations

from gate.model.states import Finding, State
from gate.model.supersede import superseded_ids
from gate.model.wording import plural
from gate.validate.context import MAX_FINDINGS_PER_KIND, Context, capped, contract, describe_locations


def pair_defects(ctx: Context) -> list[Finding]:
    members: dict[str, list[int]] = {}
    superseded = superseded_ids(ctx.cases)  # a corrected pair member is replaced, not a third member
    for i, case in enumerate(ctx.cases):
        if case.pair is not None and case.case_id not in superseded:
            members.setdefault(case.pair.id, []).append(i)
    findings: list[Finding] = []
    for pair_id, idx in members.items():
        cases = [ctx.cases[i] for i in idx]
        # At most a few ids: a pair id copied onto 200,000 cases must not make a 7 MB line.
        names = describe_locations(list(dict.fromkeys(c.case_id for c in cases)))
        if len(idx) != 2:
            findings.append(
                contract(
                    ctx,
                    idx,
                    f"share pair id {pair_id!r}, which has {plural(len(idx), 'case')} ({names}) instead of exactly two",
                    "give the pair exactly two cases (add the missing one or use a new pair id for the others)",
                )
            )
            continue
        first, second = cases
        kinds = [c.pair.kind for c in cases if c.pair is not None]
        if kinds[0] != kinds[1]:
            findings.append(
                contract(
                    ctx,
                    idx,
                    f"form pair {pair_id!r} ({names}) but disagree on its kind ({kinds[0]} vs {kinds[1]})",
                    "give both cases the same `pair.kind`",
                )
            )
            continue
        labels = {first.human_label, second.human_label}
        if not labels <= {"pass", "fail"}:
            continue
        if kinds[0] == "flip" and len(labels) == 1:
            findings.append(
                contract(
                    ctx,
                    idx,
                    f"form flip pair {pair_id!r} ({names}) but both have human label {first.human_label!r}, "
                    "while a flip pair's verdicts must differ",
                    "re-check the labels, or make it an invariant pair",
                )
            )
        elif kinds[0] == "invariant" and len(labels) == 2:
            findings.append(
                contract(
                    ctx,
                    idx,
                    f"form invariant pair {pair_id!r} ({names}) but have different human labels, "
                    "while an invariant pair's verdicts must match",
                    "re-check the labels, or make it a flip pair",
                )
            )
    extra = findings[MAX_FINDINGS_PER_KIND:]
    summary = Finding(
        State.QUALITY_FAILED,
        "input_contract",
        f"{len(extra)} more pair defects (their cases are listed in case_ids); "
        "fix: give every pair id exactly two consistent cases",
        case_ids=tuple(cid for f in extra for cid in f.case_ids),
    )
    return capped(findings, summary)
