"""Human labels must be one of the metric's allowed values."""

from __future__ import annotations

from gate.model.loading import did_you_mean
from gate.model.states import Finding
from gate.validate.context import Context, contract, undeclared


def disallowed_labels(ctx: Context) -> list[Finding]:
    metric = ctx.policy.metric
    allowed = metric.allowed_values
    bad = undeclared(ctx, lambda case: case.human_label, allowed)
    findings: list[Finding] = []
    for label, idx in bad.items():
        if label in metric.label_aliases:
            fix = f"write the canonical label {metric.label_aliases[label]!r} (aliases apply to judge output only)"
        elif label == "review_required":
            fix = (
                "adjudicate them to pass or fail, or add review_required to `metric.allowed_values` "
                f"in {ctx.policy_file} if abstention is reviewed as allowed"
            )
        else:
            fix = f"relabel them with one of {allowed}"
        findings.append(
            contract(
                ctx,
                idx,
                f"have human label {label!r}{did_you_mean(label, allowed)}, which is not in `metric.allowed_values` "
                f"{allowed}",
                fix,
            )
        )
    return findings
