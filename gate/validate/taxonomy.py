"""Slices and partitions must be ones the policy declares."""

from __future__ import annotations

from gate.model.loading import did_you_mean
from gate.model.states import Finding, State
from gate.validate.context import Context, contract, grouped, undeclared


def unknown_slices(ctx: Context) -> list[Finding]:
    declared = list(ctx.policy.slices)
    bad = undeclared(ctx, lambda case: case.slice, ctx.policy.slices)
    return [
        grouped(
            ctx,
            idx,
            state=State.QUALITY_FAILED,
            kind="unknown_slice",
            what=f"are in slice {name!r}{did_you_mean(name, declared)}, which {ctx.policy_file} does not define, so "
            "no limit covers them",
            fix=f"add `slices.{name}` with reviewed limits to the policy, or move them to one of {declared}",
            slice_name=name,
        )
        for name, idx in bad.items()
    ]


def unknown_partitions(ctx: Context) -> list[Finding]:
    known = ctx.policy.all_partitions
    bad = undeclared(ctx, lambda case: case.partition, known)
    return [
        contract(
            ctx,
            idx,
            f"are in partition {name!r}{did_you_mean(name, known)}, which is not one of {list(known)}",
            f"use one of those, or declare {name!r} under `partitions:` in {ctx.policy_file}",
        )
        for name, idx in bad.items()
    ]
