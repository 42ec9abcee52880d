"""What `gate validate` finds beyond the dataset's contract: what a run would meet later.

Each is deterministic and known before any model call, but a run reports it in its own way (an
empty lane as `no_cases`, a missing calibration as `judge_uncalibrated`, an oversized case as a
budget stop), so these run in `gate validate` only, never among the run's validators:

- a lane whose partitions hold no case outside the controls (a finding for the lane validated with
  `--lane`; for every lane, a note);
- a `calibration.file` that does not exist, for a lane that requires calibration;
- a case whose rendered prompt would exceed the model's context (`evaluator.context_tokens`), or
  whose one attempt would cost more than its share of the cost boundary (the boundary divided by
  the lane's judgments) while costing ten times the lane's median case (or more than the whole
  boundary): the outlier that stops a run on the budget.

The estimates use bytes, never the judge: a byte bounds a token from above, and about 4 bytes make
a token (the figure the dry run's typical estimate uses).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gate.model.cases import Case
from gate.model.paths import shown_path
from gate.model.policy import Lane
from gate.model.states import Finding, State
from gate.model.supersede import superseded_ids
from gate.model.wording import agree, plural
from gate.validate.card import drafted_card_lanes
from gate.validate.context import Context, describe_locations
from gate.validate.templates import TEMPLATE_MARK

BYTES_PER_TOKEN = 4
# A case this many times dearer than the lane's median case is an outlier (a pasted log, a whole
# document): when it also takes more than its share of the boundary, it is named.
OUTLIER = 10
# What a request holds beyond the rendered prompt: the envelope and the schema message.
REQUEST_OVERHEAD_BYTES = 2_048


@dataclass(frozen=True)
class Lint:
    findings: list[Finding]
    notes: list[str]


def lint(ctx: Context) -> Lint:
    lanes = [ctx.lane] if ctx.lane is not None else list(ctx.policy.lanes)
    findings: list[Finding] = []
    notes: list[str] = []
    for name in lanes:
        empty = _empty_lane(ctx, name)
        if empty is not None and ctx.lane is not None:
            findings.append(empty)
        elif empty is not None:
            notes.append(empty.message)
    notes += _drafts(ctx)
    findings += _missing_calibration(ctx, lanes)
    findings += _oversized(ctx, lanes)
    return Lint(findings, notes)


def lane_cases(ctx: Context, lane: Lane) -> list[int]:
    """The indices of the cases a lane judges (controls included when it runs them)."""
    superseded = superseded_ids(ctx.cases)
    return [
        i
        for i, c in enumerate(ctx.cases)
        if c.case_id not in superseded and ((c.is_control and lane.controls) or c.partition in lane.partitions)
    ]


def _empty_lane(ctx: Context, name: str) -> Finding | None:
    lane = ctx.policy.lanes[name]
    if any(not ctx.cases[i].is_control for i in lane_cases(ctx, lane)):
        return None
    key = f"lanes.{name}.partitions"
    message = (
        f"{ctx.policy_key(key)}: lane {name} runs {', '.join(lane.partitions)}, which hold no case outside the "
        f"controls, so `gate run --lane {name}` would end no_cases; fix: add cases to those partitions (the "
        "`partition` of each case), or point the lane at the partitions your cases use"
    )
    return Finding(State.EVALUATION_INCOMPLETE, "no_cases", message, location=f"{ctx.policy_file}:{key}")


def _missing_calibration(ctx: Context, lanes: list[str]) -> list[Finding]:
    req = ctx.policy.calibration
    requiring = [n for n in lanes if ctx.policy.lanes[n].calibrated]
    if req is None or not requiring or ctx.loaded.resolve(req.file).is_file():
        return []
    message = (
        f"{ctx.policy_key('calibration.file')}: {req.file} does not exist, so {agree(len(requiring), 'lane', 'lanes')} {', '.join(requiring)} cannot "
        "pass (judge_uncalibrated); fix: run a lane over the `calibration` partition and `gate calibrate` on its "
        "records (it writes the file), or correct the path, relative to the policy file"
    )
    return [
        Finding(State.REVIEW_REQUIRED, "judge_uncalibrated", message, location=f"{ctx.policy_file}:calibration.file")
    ]


def prompt_bytes(ctx: Context, case: Case) -> int:
    fields = sum(len((case.field_text(n) or "").encode("utf-8")) for n in ctx.loaded.placeholders)
    return len(ctx.loaded.prompt_text.encode("utf-8")) + fields


def _oversized(ctx: Context, lanes: list[str]) -> list[Finding]:
    ev = ctx.policy.evaluator
    price = ev.price
    limit = ctx.policy.limits.max_total_cost
    too_long: dict[int, None] = {}  # ordered, and a set: the lanes share most of their cases
    too_dear: dict[int, tuple[float, float, str]] = {}
    measured: dict[int, int] = {}  # each case's prompt size, once whatever the number of lanes
    for name in lanes:
        idx = [i for i in lane_cases(ctx, ctx.policy.lanes[name]) if (ctx.cases[i].reference or "").strip()]
        share = limit / max(1, len(idx) * ev.repeats)
        for i in idx:
            if i not in measured:
                measured[i] = prompt_bytes(ctx, ctx.cases[i])
        sizes = {i: measured[i] for i in idx}
        too_long.update((i, None) for i in idx if sizes[i] // BYTES_PER_TOKEN > ev.context_tokens)
        if price is None or not idx:
            continue
        per_input, per_reply = price.input_per_mtok / 1e6, ev.max_output_tokens * price.output_per_mtok / 1e6
        upper = {i: (s + REQUEST_OVERHEAD_BYTES) * per_input + per_reply for i, s in sizes.items()}
        typical = statistics.median(upper.values())
        for i, cost in upper.items():
            # an outlier that alone takes more than its share, or one that can never fit at all
            if (cost > limit or (cost > share and cost > OUTLIER * typical)) and i not in too_dear:
                too_dear[i] = (cost, share, name)
    findings = [_too_long(ctx, i) for i in too_long]
    findings += [_too_dear(ctx, i, *too_dear[i]) for i in too_dear]
    return findings


def _too_long(ctx: Context, i: int) -> Finding:
    case = ctx.cases[i]
    tokens = prompt_bytes(ctx, case) // BYTES_PER_TOKEN
    where = describe_locations([ctx.where(i)])
    message = (
        f"{where}: case {case.case_id}'s rendered prompt is about {tokens:,} tokens, more than the model's context "
        f"(`evaluator.context_tokens` {ctx.policy.evaluator.context_tokens:,}): the judge could not read it; fix: "
        "shorten its response or reference (judge the part the criterion is about), or drop the case"
    )
    return Finding(State.QUALITY_FAILED, "input_contract", message, case_ids=(case.case_id,), location=ctx.where(i))


def _too_dear(ctx: Context, i: int, upper: float, share: float, lane: str) -> Finding:
    case = ctx.cases[i]
    cur = ctx.policy.evaluator.price.currency if ctx.policy.evaluator.price else "USD"
    message = (
        f"{ctx.where(i)}: case {case.case_id}'s one attempt may cost {upper:.4f} {cur}, more than its share of the "
        f"cost boundary in lane {lane} ({share:.4f} {cur}: `limits.max_total_cost` over the lane's judgments), so "
        "the run would stop on the budget; fix: shorten the case's response or reference, drop the case, or raise "
        "`limits.max_total_cost`"
    )
    return Finding(State.QUALITY_FAILED, "input_contract", message, case_ids=(case.case_id,), location=ctx.where(i))


def _drafts(ctx: Context) -> list[str]:
    """The prompt and the dataset card `gate init` drafted, while they still say `TO FILL`."""
    out: list[str] = []
    if TEMPLATE_MARK in ctx.loaded.prompt_text:
        prompt_file = ctx.policy.metric.prompt_file
        where = shown_path(ctx.loaded.resolve(prompt_file)) if prompt_file else "`metric.prompt`"
        out.append(
            f"{where}: the judge prompt still says `{TEMPLATE_MARK}`; write the criterion there before you trust a verdict"
        )
    card = ctx.loaded.card
    if card is not None and not drafted_card_lanes(ctx):  # else a finding says it (gate/validate/card.py)
        marked = [key for key, text in card.sections.items() if TEMPLATE_MARK in text]
        if marked:
            out.append(
                f"{shown_path(card.path)}: the dataset card still says `{TEMPLATE_MARK}` in {plural(len(marked), 'section')}; say what is true of the cases"
            )
    return out
