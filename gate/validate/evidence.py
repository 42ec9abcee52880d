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


def _plain(text: str) -> str:
    return " ".join(text.split())


def reference_mismatch(ctx: Context) -> list[Finding]:
    """A case's `reference` is the text of the evidence it cites (several: their texts in the order
    first cited), line wrapping aside. A reference edited on its own (so it contradicts its evidence) is
    found here. Citations that do not resolve, or evidence kept only as a hash, are not compared."""
    docs = ctx.dataset.evidence
    wrong: dict[str, list[int]] = {}
    for i, case in enumerate(ctx.cases):
        if not case.evidence_ids or case.reference is None or not case.reference.strip():
            continue
        if case.expected_control_role == "missing_evidence":  # its own rule: it has no reference
            continue
        cited = [docs.get(doc_id) for doc_id in dict.fromkeys(parse_reference(r)[0] for r in case.evidence_ids)]
        texts = [d.text for d in cited if d is not None and d.text is not None]
        if len(texts) != len(cited):
            continue
        if _plain(case.reference) != _plain(" ".join(texts)):
            wrong.setdefault(", ".join(case.evidence_ids), []).append(i)
    source = ctx.policy.evidence
    return [
        contract(
            ctx,
            idx,
            f"have a `reference` that is not the text of the evidence cited ({ids} in {source})",
            f"copy the evidence text into `reference`; if the evidence is what changed, bump its `version` in "
            f"{source} and re-label the cases that cite it",
        )
        for ids, idx in wrong.items()
    ]
