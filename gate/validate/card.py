"""The policy's dataset card must exist and fill every section (gate/model/dataset_card.py).

Its defects are `input_contract` findings (quality_failed, before any model call): a card is part
of the inputs a reviewer signs off, like the rubric version on every case. A missing section is not
an evaluator fault and waiting will not fix it, so it can be neither evaluation_incomplete nor
review_required; the gate blocks until the suite's owners write it.
"""

from __future__ import annotations

from gate.model.dataset_card import CARD_SECTIONS
from gate.model.paths import shown_path
from gate.model.states import Finding, State
from gate.model.wording import agree
from gate.validate.completeness import NEVER_GATED
from gate.validate.context import Context
from gate.validate.templates import TEMPLATE_MARK


def drafted_card_lanes(ctx: Context) -> list[str]:
    """The lanes that gate on cases (every lane but those of `dev` and `calibration` only; the lane
    validated, with one) while every section of the dataset card still says `TO FILL`: nothing in it
    is a description yet, so a verdict on these cases cannot be weighed. A lane that only measures
    (the calibration lane) may run on a drafted card."""
    card = ctx.loaded.card
    if card is None or not all(TEMPLATE_MARK in card.sections.get(key, TEMPLATE_MARK) for key, _ in CARD_SECTIONS):
        return []
    return [
        name
        for name, lane in ctx.policy.lanes.items()
        if (ctx.lane is None or ctx.lane == name) and (lane.product or set(lane.partitions) - NEVER_GATED)
    ]


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
    lanes = drafted_card_lanes(ctx)
    drafted = (
        []
        if not lanes
        else [
            Finding(
                State.QUALITY_FAILED,
                "input_contract",
                f"{shown_path(card.path)}: every section of the dataset card still says `{TEMPLATE_MARK}`, and "
                f"{agree(len(lanes), 'lane', 'lanes')} {', '.join(lanes)} {agree(len(lanes), 'gates', 'gate')} on these cases; fix: say in each section what is true of the cases (what "
                "they are fit to judge, where they come from, who labelled them), or write `none` and why",
                location=shown_path(card.path),
            )
        ]
    )
    return drafted + [
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
