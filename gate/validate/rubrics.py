"""Every case's rubric version must be one the policy accepts."""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context, contract, undeclared


def unknown_rubrics(ctx: Context) -> list[Finding]:
    accepted = ctx.policy.rubrics
    bad = undeclared(ctx, lambda case: case.rubric_version, accepted)
    return [
        contract(
            ctx,
            idx,
            f"use rubric_version {version!r}, which {ctx.policy_file} does not accept (`rubrics`: {accepted})",
            f"relabel them under one of {accepted}, or add {version!r} to `rubrics` once it is reviewed",
        )
        for version, idx in bad.items()
    ]
