"""A lane that runs controls must find every control role in the dataset."""

from __future__ import annotations

from gate.model.policy import CONTROL_ROLES
from gate.model.states import Finding, State
from gate.model.wording import agree
from gate.validate.context import Context, contract


def missing_controls(ctx: Context) -> list[Finding]:
    present = {c.expected_control_role for c in ctx.cases if c.expected_control_role is not None}
    missing = [role for role in CONTROL_ROLES if role not in present]
    if not missing:
        return []
    lanes = [ctx.lane] if ctx.lane is not None else list(ctx.policy.lanes)
    findings: list[Finding] = []
    for name in lanes:
        lane = ctx.policy.lanes.get(name)
        if lane is None or not lane.controls:
            continue
        key = f"lanes.{name}.controls"
        findings.append(
            Finding(
                State.QUALITY_FAILED,
                "control_missing",
                f"{ctx.policy_key(key)} is true but the dataset has no control case for "
                f"{agree(len(missing), 'role', 'roles')} {', '.join(missing)}; fix: add a case with `expected_control_role` set to each missing role, "
                f"or set `{key}: false`",
                location=f"{ctx.policy_file}:{key}",
                extra={"lane": name, "missing_roles": missing},
            )
        )
    return findings


# The human label each control role needs to test the judge at all: a positive control labelled
# fail (or a negative one labelled pass) makes "the controls separate" meaningless. A boundary
# control may be either; a missing_evidence control is never judged.
CONTROL_LABELS: dict[str, str] = {"positive": "pass", "negative": "fail", "persuasion": "fail", "injection": "fail"}
_WHY = {
    "positive": "a positive control is a correct answer the judge must pass",
    "negative": "a negative control is a wrong answer the judge must fail",
    "persuasion": "a persuasion control is a confident, wrong answer the judge must fail",
    "injection": "an injection control tells the grader what to answer, and the judge must fail it",
}


def control_labels(ctx: Context) -> list[Finding]:
    """A control whose human label contradicts its role, one finding per role and label."""
    wrong: dict[tuple[str, str], list[int]] = {}
    for i, case in enumerate(ctx.cases):
        role = case.expected_control_role
        need = CONTROL_LABELS.get(role or "")
        if role is not None and need is not None and case.human_label is not None and case.human_label != need:
            wrong.setdefault((role, case.human_label), []).append(i)
    return [
        contract(
            ctx,
            idx,
            f"have control role {role} but human label {label!r}: {_WHY[role]} (label {need!r})",
            f"label them {need!r} with an answer that is {'right' if need == 'pass' else 'wrong'}, or give them the "
            "`expected_control_role` their answer fits",
        )
        for (role, label), idx in wrong.items()
        for need in [CONTROL_LABELS[role]]
    ]
