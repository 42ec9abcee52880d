"""The rubric trend: its prompt must load and its bands must be qualitatively distinct."""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context


def trend_bands(ctx: Context) -> list[Finding]:
    if ctx.loaded.policy.trend is None:
        return []  # gate.measure.trend (asyncio, the judge package) is imported only when a trend exists
    from gate.measure.trend import band_findings, load_trend

    load_trend(ctx.loaded)  # a broken trend prompt is a policy error (exit 2), raised here
    return band_findings(ctx.loaded)
