"""A case a lane gates on carries what makes its label checkable: the evidence ids it rests on, the
reviewer's reason and the hash of the response that was labelled.

The gated partitions are those of every lane but `dev` and `calibration` (never gated on) and a
product lane's (its cases carry no label). Controls are checked by their own rules, and so is a case
with no reference: it is never judged, and the policy's `missing_evidence` decides what it does (block
the gate, or go to a person), so it is not also an input-contract defect. A policy may relax each
requirement with `gated_cases` (docs/POLICY.md).
"""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context, contract
from gate.validate.references import withheld
from gate.validate.templates import TEMPLATE_MARK

NEVER_GATED = frozenset({"dev", "calibration"})


def gated_partitions(ctx: Context) -> frozenset[str]:
    lanes = ctx.policy.lanes.values()
    return frozenset(p for lane in lanes if not lane.product for p in lane.partitions) - NEVER_GATED


def incomplete_gated_cases(ctx: Context) -> list[Finding]:
    rules = ctx.policy.gated_cases
    gated = gated_partitions(ctx)
    missing: dict[str, list[int]] = {"evidence": [], "reason": [], "hash": []}
    for i, case in enumerate(ctx.cases):
        adj = case.human_adjudication
        if case.is_control or case.partition not in gated or adj is None or withheld(case):
            continue
        if rules.evidence_ids and not [e for e in adj.evidence if e.strip()]:
            missing["evidence"].append(i)
        if rules.reason and (not adj.reason.strip() or TEMPLATE_MARK in adj.reason):
            missing["reason"].append(i)
        if rules.response_sha256 and case.response is not None and not (case.response_sha256 or "").strip():
            missing["hash"].append(i)
    texts = {
        "evidence": (
            "cite no evidence (`human_adjudication.evidence` is empty) in a partition a lane gates on",
            "name the evidence ids the label rests on, or set `gated_cases: {evidence_ids: false}` in the policy",
        ),
        "reason": (
            f"have no `human_adjudication.reason` (or it still says `{TEMPLATE_MARK}`) in a partition a lane gates on",
            "write why the label is right, in a sentence a reviewer can check, or set "
            "`gated_cases: {reason: false}` in the policy",
        ),
        "hash": (
            "have no `response_sha256` in a partition a lane gates on, so nothing proves the label was given to "
            "this response",
            "add the sha256 of the response's UTF-8 text (`gate init --from` computes it), or set "
            "`gated_cases: {response_sha256: false}` in the policy",
        ),
    }
    return [contract(ctx, idx, *texts[key]) for key, idx in missing.items() if idx]
