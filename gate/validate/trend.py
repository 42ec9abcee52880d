"""The rubric trend: its prompt must load and its bands must be qualitatively distinct."""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context


def trend_bands(ctx: Context) -> list[Finding]:
    if ctx.loaded.policy.trend is None:
        return []  # gate.measure.trend rubric is imported only when a trend exists
    from gate.model.trend_rubric import band_findings, load_trend

    load_trend(ctx.loaded)  # a broken trend prompt is a policy error (exit 2), raised here
    return band_findings(ctx.loaded)
