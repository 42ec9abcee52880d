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


def _unlabelled(case: Case, name: str) -> bool:
    return name == "response" and not case.labelled


def _text(case: Case, name: str) -> str | None:
    value = getattr(case, name, None)
    return value if isinstance(value, str) else None


def empty_fields(ctx: Context) -> list[Finding]:
    placeholders = [p for p in ctx.loaded.placeholders if p != SPECIAL]
    names = list(dict.fromkeys([*REQUIRED_TEXT, *placeholders]))
    findings: list[Finding] = []
    for name in names:
        values = [_text(c, name) for c in ctx.cases]
        # A product lane's case (no person labels it) takes its response from --responses: none in
        # the case file is expected, and a case the responses leave out is `missing_response`.
        idx = [i for i, v in enumerate(values) if _blank(v) and not (v is None and _unlabelled(ctx.cases[i], name))]
        if not idx:
            continue
        if name in placeholders:
            what = f"have an empty `{name}`, which the prompt shows the judge as {{{name}}}"
        else:
            what = f"have an empty required field `{name}`"
        findings.append(contract(ctx, idx, what, f"write the case's `{name}`"))
    allowed = ctx.policy.metric.allowed_values
    idx = [i for i, c in enumerate(ctx.cases) if c.labelled and _blank(c.human_label)]
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
