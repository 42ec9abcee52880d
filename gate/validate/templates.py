"""A case still marked `TO FILL` (a `gate init` template) is not a case yet: refused until filled.

The prompt and the dataset card that `gate init` drafts carry the mark too; they are said as notes
by `gate validate` (gate/validate/lint.py), since a draft of them still checks something.
"""

from __future__ import annotations

from gate.model.states import Finding
from gate.validate.context import Context, contract

TEMPLATE_MARK = "TO FILL"


def _marked(text: str | None) -> bool:
    return text is not None and TEMPLATE_MARK in text


def unfilled_templates(ctx: Context) -> list[Finding]:
    """A case whose question, answer or reference (or a control's reason) still says `TO FILL`. An
    answer's reason that says it (`gate init --from` without a reason column) is a missing reason:
    refused on a case a lane gates on (gate/validate/completeness.py), a draft elsewhere."""
    idx = []
    for i, case in enumerate(ctx.cases):
        adj = case.human_adjudication
        reason = adj.reason if adj is not None and case.is_control else None
        fields = (case.user_input, case.response, case.reference, reason)
        if any(_marked(f) for f in fields):
            idx.append(i)
    if not idx:
        return []
    return [
        contract(
            ctx,
            idx,
            f"are templates still marked `{TEMPLATE_MARK}` (written by `gate init`)",
            "replace each `TO FILL` with a real question, answer, reference and reason that fit the case's "
            "`expected_control_role` and label (docs/CASES.md, control roles), and cite the evidence in "
            "`human_adjudication.evidence`",
        )
    ]
