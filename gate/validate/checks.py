"""The policy's deterministic checks: every parameter must be fillable from the cases (no ragas import)."""

from __future__ import annotations

from gate.checks import input_findings, load_checks
from gate.states import Finding
from gate.validate.context import Context


def check_inputs(ctx: Context) -> list[Finding]:
    return input_findings(load_checks(ctx.loaded), ctx.cases)
