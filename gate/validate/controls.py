"""A lane that runs controls must find every control role in the dataset."""

from __future__ import annotations

from gate.model.policy import CONTROL_ROLES
from gate.model.states import Finding, State
from gate.validate.context import Context


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
                f"{ctx.policy_key(key)} is true but the dataset has no control case for role(s) "
                f"{', '.join(missing)}; fix: add a case with `expected_control_role` set to each missing role, "
                f"or set `{key}: false`",
                location=f"{ctx.policy_file}:{key}",
                extra={"lane": name, "missing_roles": missing},
            )
        )
    return findings
