"""The policy's deterministic checks: every parameter must be fillable from the cases, and each check
runs on every case, so a gating check that fails a case people did not label fail (`check_failed`)
or errors (`check_error`) is seen here, before a paid run. No ragas import: `run_checks_plain`. A run, `gate decide`, `gate merge`
and a dry run run the checks themselves on the lane's cases (`Context.run_checks` False here), so each
blocker is found once."""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context


def check_inputs(ctx: Context) -> list[Finding]:
    if not ctx.loaded.policy.checks:
        return []  # gate.validate.case_checks (asyncio, the judge package) is imported only when checks exist
    from gate.validate.case_checks import input_findings, load_checks, run_checks_plain

    checks = load_checks(ctx.loaded)
    found = input_findings(checks, ctx.cases)
    if ctx.run_checks:  # else the command runs them on its lane's cases: their blockers come with those results
        found += run_checks_plain(checks, ctx.cases).findings
    return found
