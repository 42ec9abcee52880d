"""The drift lane's prompt must be reference-free: a production trace has no reference."""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context


def drift_prompt(ctx: Context) -> list[Finding]:
    if ctx.policy.drift is not None:
        from gate.model.traces import drift_policy  # its models are built only for a drift policy

        drift_policy(ctx.loaded)  # a prompt needing {reference} is a policy error (exit 2), raised here
    return []
