"""The policy's deterministic checks: every parameter must be fillable from the cases (no ragas import)."""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context


def check_inputs(ctx: Context) -> list[Finding]:
    if not ctx.loaded.policy.checks:
        return []  # gate.validate.case_checks (asyncio, the judge package) is imported only when checks exist
    from gate.validate.case_checks import input_findings, load_checks

    return input_findings(load_checks(ctx.loaded), ctx.cases)
