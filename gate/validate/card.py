"""The policy's dataset card must exist and fill every section (gate/model/dataset_card.py).

Its defects are `input_contract` findings (quality_failed, before any model call): a card is part
of the inputs a reviewer signs off, like the rubric version on every case. A missing section is not
an evaluator fault and waiting will not fix it, so it can be neither evaluation_incomplete nor
review_required; the gate blocks until the suite's owners write it.
"""

from __future__ import annotations

from gate.model.dataset_card import CARD_SECTIONS
from gate.model.states import Finding, State
from gate.validate.context import Context


def card_defects(ctx: Context) -> list[Finding]:
    card = ctx.loaded.card
    if card is None:
        headings = ", ".join(h for _k, h in CARD_SECTIONS)
        return [
            Finding(
                State.QUALITY_FAILED,
                "input_contract",
                f"{ctx.policy_key('dataset_card')} is not set: the cases have no dataset card saying what they are "
                f"fit to judge; fix: write a Markdown card with the sections {headings} (or a YAML card with the "
                "same keys in snake_case) and name it as `dataset_card: README.md`, relative to the policy",
                location=ctx.policy_file,
            )
        ]
    return [
        Finding(
            State.QUALITY_FAILED,
            "input_contract",
            f"{card.path}: the dataset card's section {heading!r} is {state}; fix: "
            + (f"add a `## {heading}` heading (YAML: `{key}:`) and " if state == "missing" else "")
            + "say what it covers (write `none` and why, if nothing applies)",
            location=str(card.path),
            extra={"card_section": key},
        )
        for key, heading, state in card.missing()
    ]
