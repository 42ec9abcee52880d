"""Evidence cited by a human adjudication must resolve, at the cited version."""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context, contract


def parse_reference(ref: str) -> tuple[str, str | None]:
    """ "refund-window@3" -> ("refund-window", "3"); "refund-window" -> ("refund-window", None)."""
    if "@" in ref:
        doc_id, version = ref.rsplit("@", 1)
        return doc_id, version
    return ref, None


def unresolved_evidence(ctx: Context) -> list[Finding]:
    docs = ctx.dataset.evidence
    source = ctx.policy.evidence
    missing: dict[str, list[int]] = {}
    stale: dict[str, list[int]] = {}
    for i, case in enumerate(ctx.cases):
        for ref in case.evidence_ids:
            doc_id, version = parse_reference(ref)
            doc = docs.get(doc_id)
            if doc is None or not doc_id.strip():
                missing.setdefault(ref, []).append(i)
            elif version is not None and version != doc.version:
                stale.setdefault(ref, []).append(i)
    findings: list[Finding] = []
    for ref, idx in missing.items():
        if source is None:
            what = f"cite evidence {ref!r}, but {ctx.policy_file} names no `evidence` file"
            fix = "add `evidence: <file>` to the policy with this document, or remove the citation"
        else:
            what = f"cite evidence {ref!r}, which is not in the evidence file {source}"
            fix = f"add it to {source} or correct the id"
        findings.append(contract(ctx, idx, what, fix))
    for ref, idx in stale.items():
        doc_id, version = parse_reference(ref)
        current = docs[doc_id].version
        findings.append(
            contract(
                ctx,
                idx,
                f"cite evidence {ref!r}, but {source} has {doc_id!r} at version {current!r}",
                f"re-check the labels against version {current!r} and cite {doc_id}@{current}, "
                f"or restore version {version!r}",
            )
        )
    return findings
