"""Required and placeholder fields must be present and non-empty."""

from __future__ import annotations

from gate.model.cases import Case
from gate.model.states import Finding
from gate.validate.context import Context, contract

# Text fields every case needs whatever the prompt (the loader already refuses absent ones).
REQUIRED_TEXT: tuple[str, ...] = ("partition", "slice", "rubric_version", "user_input", "response")
SPECIAL = "reference"  # an empty reference is missing evidence (see references.py), not a contract break


def _blank(value: str | None) -> bool:
    return value is None or not value.strip()


def _text(case: Case, name: str) -> str | None:
    value = getattr(case, name, None)
    return value if isinstance(value, str) else None


def empty_fields(ctx: Context) -> list[Finding]:
    placeholders = [p for p in ctx.loaded.placeholders if p != SPECIAL]
    names = list(dict.fromkeys([*REQUIRED_TEXT, *placeholders]))
    findings: list[Finding] = []
    for name in names:
        values = [_text(c, name) for c in ctx.cases]
        idx = [i for i, v in enumerate(values) if v is None or not v.strip()]
        if not idx:
            continue
        if name in placeholders:
            what = f"have an empty `{name}`, which the prompt shows the judge as {{{name}}}"
        else:
            what = f"have an empty required field `{name}`"
        findings.append(contract(ctx, idx, what, f"write the case's `{name}`"))
    allowed = ctx.policy.metric.allowed_values
    idx = [i for i, c in enumerate(ctx.cases) if _blank(c.human_label)]
    if idx:
        findings.append(
            contract(
                ctx,
                idx,
                "have an empty `human_adjudication.label`",
                f"write the reviewed human label, one of {allowed}",
            )
        )
    return findings
