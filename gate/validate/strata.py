"""With `strata` in the policy, a case's `stratum` must be one of them (gate/model/strata.py)."""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context, contract, undeclared


def unknown_strata(ctx: Context) -> list[Finding]:
    declared = ctx.policy.strata
    if not declared:
        return []
    bad = undeclared(ctx, lambda case: case.stratum, declared)  # a stratum is a name: never blank
    return [
        contract(
            ctx,
            idx,
            f"name stratum {name!r}, which {ctx.policy_file} does not declare (`strata`: {sorted(declared)})",
            f"correct the stratum, or add {name!r} with its production prevalence under `strata`",
        )
        for name, idx in bad.items()
    ]
