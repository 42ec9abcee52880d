"""Missing evidence: a case without a reference is never sent to the judge."""

from __future__ import annotations

from gate.model.cases import Case
from gate.model.states import Finding, State
from gate.model.wording import agree
from gate.validate.context import Context, contract, grouped

MISSING_EVIDENCE_ROLE = "missing_evidence"


def _blank(value: str | None) -> bool:
    return value is None or not value.strip()


def withheld(case: Case) -> bool:
    """A non-control case with no reference: never judged, handled by the policy's `missing_evidence`."""
    return case.expected_control_role is None and _blank(case.reference)


def missing_references(ctx: Context) -> list[Finding]:
    mode = ctx.policy.missing_evidence
    state = State.QUALITY_FAILED if mode == "block" else State.REVIEW_REQUIRED
    by_slice: dict[str, list[int]] = {}
    by_role: dict[str, list[int]] = {}
    referenced_withheld: list[int] = []
    for i, case in enumerate(ctx.cases):
        role = case.expected_control_role
        blank = _blank(case.reference)
        if withheld(case):
            by_slice.setdefault(case.slice, []).append(i)
        elif role == MISSING_EVIDENCE_ROLE and not blank:
            referenced_withheld.append(i)
        elif role is not None and role != MISSING_EVIDENCE_ROLE and blank:
            by_role.setdefault(role, []).append(i)
    findings: list[Finding] = []
    for slice_name, idx in by_slice.items():
        n = len({ctx.cases[i].case_id for i in idx})  # grouped() says "case X has" or "N cases have"
        withheld_from = f"{agree(n, 'it is', 'they are')} withheld from the judge and"
        if mode == "block":
            outcome = f"{withheld_from} {agree(n, 'blocks', 'block')} the gate (`missing_evidence: block`)"
        else:
            outcome = f"{withheld_from} {agree(n, 'needs', 'need')} a person (`missing_evidence: review`)"
        findings.append(
            grouped(
                ctx,
                idx,
                state=state,
                kind="missing_evidence",
                what=f"have no `reference`, so {outcome}",
                fix="add the reference the answer must agree with",
                slice_name=slice_name,
            )
        )
    for role_name, idx in by_role.items():
        findings.append(
            contract(
                ctx,
                idx,
                f"have no `reference` (control role {role_name}; only missing_evidence controls may omit it)",
                "add the reference the control's answer is judged against",
            )
        )
    if referenced_withheld:
        findings.append(
            contract(
                ctx,
                referenced_withheld,
                "have a `reference` under control role missing_evidence, so the gate would send the case to "
                "the judge and the control would fail",
                "empty the reference, or give the case another expected_control_role",
            )
        )
    return findings
