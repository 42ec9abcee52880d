"""A product lane's slices in every format: the judge-corrected failure rate with its interval
against the limit, k of n, the judge's Se and Sp with their counts, the verdict, what would decide
it, and the base comparison; plus the SVG picture of each slice's interval against its limit.

Pure. `slice_views` turns the result's `product` section into plain text (each renderer escapes it
for its format: `gate.model.escape.markdown`/`code` here for Markdown, `log_text` in the terminal,
XML escaping in the SVG); a result without a product section renders nothing from here.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gate.decide.product.audit_plan import plan_words
from gate.estimate.failure_rate import percent, span
from gate.model.escape import code as code_id
from gate.model.escape import id_list, visible, xml_text
from gate.model.escape import markdown as escape
from gate.model.wording import listed

if TYPE_CHECKING:
    from gate.model.result import Product, ProductRate, ProductSlice, Result, Waived, ZeroTolerance

VERDICT_TEXT = {
    "passed": "passed",
    "exceeded": "exceeded",
    "inconclusive": "inconclusive",
    "judge_unfit": "judge unfit",
    "incomplete": "incomplete",
}
VERDICT_ICON = {"passed": "✅", "exceeded": "❌", "inconclusive": "👀", "judge_unfit": "👀", "incomplete": "⚠️"}
MAX_TURNED_FAIL = 10


@dataclass(frozen=True)
class SliceView:
    """One product slice as plain text, the same words in every renderer."""

    name: str
    verdict: str  # the verdict key a reader sees (colour, icon): the failure rate's, or zero tolerance's
    verdict_text: str  # its words
    rate: str  # the estimate, or "–" without calibration figures
    interval: str  # low-high, ends rounded outwards
    limit: str
    judged_fail: str  # "k of n"
    se: str  # "90% (90/100)": share of labelled failing answers the judge caught
    sp: str  # "99.5% (995/1,000)": share of labelled passing answers it passed
    hint: str | None  # what would decide an inconclusive slice
    base: str | None  # the comparison with the base run
    turned_fail: tuple[str, ...]
    audit: str | None = None  # the audit estimate, when people's labels decided the slice
    zero: str | None = None  # the zero-tolerance count (`max_failures`)
    decided_by_person: str | None = None  # an override of the slice's open verdict: who approved it
    look: str | None = None  # a lane that stops once decided: the look that decided the slice
    plan: str | None = None  # the run's audit plan of the slice: what people label, or why nobody does


def _judge_rate(rate: ProductRate | None) -> str:
    if rate is None or rate.n == 0:
        return "– (no labelled answers)"
    return f"{percent(rate.value)} ({rate.x:,}/{rate.n:,})"


def _base_text(s: ProductSlice) -> str | None:
    b = s.base
    if b is None:
        return None
    worse = " (a significant regression)" if b.regressed else ""
    return (
        f"{b.pass_to_fail} pass → fail, {b.fail_to_pass} fail → pass, {b.both_pass} both pass, "
        f"{b.both_fail} both fail; exact McNemar p = {b.p_value:.3g}{worse}"
    )


def _audit_text(s: ProductSlice) -> str | None:
    a = s.audit
    if a is None:
        return None
    est = percent(a.estimate) if a.estimate is not None else f"at least {percent(a.low)}"
    f, p = a.judged_fail, a.judged_pass
    open_ = f.open + p.open
    passed = (
        f"{p.people_fail} of {p.audited} it passed ({p.population:,} in all)"
        if p.audited or not p.population
        else f"none of the {p.population:,} it passed are in the plan"
    )
    pending = f"; {open_} drawn without a final label, counted against the verdict" if open_ else ""
    transport = ""
    if a.transport is not None and not a.transport.carries_over:
        transport = "; the judge's calibration does not describe it on these answers"
    figures = (
        f"{VERDICT_TEXT.get(a.verdict, a.verdict)}, failure rate {est} (interval "
        f"{span(a.low, a.high)}); people failed {f.people_fail} of {f.audited} audited answers the judge failed "
        f"({f.population:,} in all) and {passed}{pending}{transport}"
    )
    if s.decided_by == "audit":
        return f"decided by people's audit: {figures}; the calibration estimate beside it: {_cal(s)}"
    if a.labels_disagree and a.alpha is not None:
        return (
            f"people's audit: {figures}; it does not decide here: people's labels disagree (Krippendorff's alpha "
            f"{a.alpha:.3f}, below review.min_alpha)"
        )
    return (
        f"people's audit: {figures}; it does not decide here: on a lane that stops once decided the audit "
        "may hold a slice back but never pass one its interval did not (for people's labels to pass it, "
        "judge it on a lane without stop_when_decided)"
    )


def _cal(s: ProductSlice) -> str:
    if s.estimate is None or s.low is None or s.high is None:
        return "none"
    alone = s.calibration_verdict if s.decided_by == "audit" else None
    said = f", {VERDICT_TEXT.get(alone, alone)}" if alone else ""
    return f"{percent(s.estimate)} ({span(s.low, s.high)}){said}"


def _deciding(s: ProductSlice) -> tuple[float | None, float | None, float | None]:
    """The estimate and interval behind the slice's verdict: the audit's when people's labels decided
    it (the calibration estimate's are then shown beside it), else the calibration estimate's."""
    if s.decided_by == "audit" and s.audit is not None:
        return s.audit.estimate, s.audit.low, s.audit.high
    return s.estimate, s.low, s.high


ZERO_WORDS = {"passed": "passed", "failure_confirmed": "failure confirmed", "audit_required": "audit required"}


def shown_verdict(s: ProductSlice) -> tuple[str, str]:
    """The slice's verdict as a reader sees it, its key (colour, icon) and words: the failure rate's,
    joined by zero tolerance's when that blocks the slice, so a slice people confirmed failing never
    reads as a green "passed"."""
    words = VERDICT_TEXT.get(s.verdict, s.verdict)
    if s.audit_required and s.verdict == "passed":
        return "inconclusive", "audit required (the calibration estimate alone passed it)"
    z = s.zero_tolerance
    if z is None or z.verdict == "passed":
        return s.verdict, words
    zero = f"zero tolerance: {_zero_words(z)}"
    if z.verdict == "failure_confirmed":
        return "exceeded", zero if s.verdict == "passed" else f"{words}; {zero}"
    return (s.verdict, f"{words}; {zero}") if s.verdict != "passed" else ("inconclusive", zero)


def _zero_words(z: ZeroTolerance, incomplete: bool = False) -> str:
    """Zero tolerance's verdict in words: answers the judge has not judged leave it open, not passed
    (and no person's label can settle them: they need judging first)."""
    if z.verdict == "failure_confirmed":
        return ZERO_WORDS[z.verdict]
    if (z.unjudged and not z.unaudited) or (incomplete and z.verdict == "passed"):
        return "open until every answer is judged"
    return ZERO_WORDS[z.verdict]


def _zero_text(s: ProductSlice) -> str | None:
    z = s.zero_tolerance
    if z is None:
        return None
    unjudged = f"; {len(z.unjudged)} without a verdict from the judge ({listed(z.unjudged)})" if z.unjudged else ""
    return (
        f"zero tolerance (at most {z.max_failures} confirmed): {_zero_words(z, s.verdict == 'incomplete')}; of the "
        f"answers the judge failed, people confirmed {len(z.confirmed)}, cleared {len(z.cleared)}, and "
        f"{len(z.unaudited)} await people's label"
        + (f" ({listed(z.confirmed)} confirmed)" if z.confirmed else "")
        + (f"; people failed {len(z.missed)} the judge passed ({listed(z.missed)})" if z.missed else "")
        + unjudged
    )


def _plan_text(s: ProductSlice) -> str | None:
    """The run's audit plan of the slice, fixed before anyone labels: its items and labels, or why no
    plan of this run can decide the limit (then nobody is asked to label)."""
    plan = s.audit_plan
    if plan is None:
        return None
    if plan.undecidable is not None:
        return f"audit plan: nothing to label: {plan.undecidable}"
    f, p = plan.judged_fail, plan.judged_pass
    return f"audit plan: {plan_words(f.population, f.sample, p.population, p.sample, plan.reviewers_per_item)}"


def _look_text(s: ProductSlice) -> str | None:
    """When answers were judged after the look that decided the slice: which look it was."""
    look = s.decided_at
    if look is None or look.n >= s.n:
        return None
    later = s.n - look.n
    return (
        f"decided after its first {look.n:,} answers ({look.judged_fail:,} judged fail): the interval is that "
        f"look's; the {later:,} judged after it (in flight when the lane stopped, or judged while another slice "
        "was open) are counted and billed, and never change the verdict"
    )


def _rate_shown(estimate: float | None, low: float | None) -> str:
    """The rate a slice's line gives: the estimate; without one (an audit plan sized to show the slice
    exceeded labels none of the answers the judge passed), the lower bound its labels prove."""
    if estimate is not None:
        return percent(estimate)
    return f"at least {percent(low)}" if low is not None and low > 0 else "–"


def slice_view(name: str, s: ProductSlice) -> SliceView:
    estimate, low, high = _deciding(s)
    verdict, verdict_text = shown_verdict(s)
    return SliceView(
        name=name,
        verdict=verdict,
        verdict_text=verdict_text,
        rate=_rate_shown(estimate, low),
        interval=span(low, high) if low is not None and high is not None and _rate_shown(estimate, low) != "–" else "–",
        limit=percent(s.max_failure_rate),
        judged_fail=f"{s.judged_fail:,} of {s.n:,}",
        se=_judge_rate(s.judge.se if s.judge else None),
        sp=_judge_rate(s.judge.sp if s.judge else None),
        hint=s.audit.decide_hint if s.decided_by == "audit" and s.audit is not None else s.decide_hint,
        base=_base_text(s),
        turned_fail=tuple(s.base.turned_fail) if s.base else (),
        audit=_audit_text(s),
        zero=_zero_text(s),
        look=_look_text(s),
        plan=_plan_text(s),
    )


def slice_views(product: Product, waived: Sequence[Waived] = ()) -> list[SliceView]:
    views = [slice_view(name, s) for name, s in product.slices.items()]
    by_slice: dict[str, list[Waived]] = {}
    for w in waived:
        if w.slice is not None:
            by_slice.setdefault(w.slice, []).append(w)
    return [
        dataclasses.replace(v, decided_by_person=_person(by_slice[v.name])) if v.name in by_slice else v for v in views
    ]


def _person(waivers: Sequence[Waived]) -> str:
    return "; ".join(
        f"{w.kind} waived by override {w.override}, approved by {w.approver} until {w.expires} ({w.reason})"
        for w in waivers
    )


def heading(product: Product) -> str:
    """The section's title, plain: what the numbers are (people's audit's, for a slice it decided)."""
    interval = f"{percent(product.confidence)} interval"
    if any(s.decided_by == "audit" for s in product.slices.values()):
        return f"Product: failure rate per slice ({interval}): people's audit where it decided, else judge-corrected"
    return f"Product: failure rate per slice, corrected for the judge's misses ({interval})"


def method_line(product: Product) -> str:
    looks = (
        "; the answers' bound holds at every look, as the lane stops once every slice is decided"
        if product.sequential
        else ""
    )
    audited = sorted({s.audit.method for s in product.slices.values() if s.audit is not None})
    audit = (
        f" People's audit: {', '.join(audited)} (passed and exceeded: one exact test each over exactly the run's"
        " audit plan, a planned answer without a final label counted against each)."
        if audited
        else ""
    )
    seed = (
        f" The order and the audit plans are drawn with seed {visible(product.order_seed, 200)}, fixed when the run "
        "started."
        if product.order_seed
        else ""
    )
    return (
        f"Method {product.method}{looks}. Se: the share of labelled failing answers the judge caught; "
        f"Sp: the share of labelled passing answers it passed (from calibration).{audit}{seed}"
    )


COLUMNS = ("slice", "verdict", "failure rate", "interval", "limit", "judged fail", "judge Se", "judge Sp")


def product_section(result: Result) -> list[str]:
    """Markdown (report.md, summary.md, the PR comment, the check run): a table of the slices, then
    the hints and the base comparisons."""
    product = result.product
    if product is None:
        return []
    lines = [
        f"### {escape(heading(product))}",
        "",
        escape(method_line(product)) + " The picture: `product.svg` beside this report.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|---|---|--:|---|--:|--:|--:|--:|",
    ]
    views = slice_views(product, result.waived)
    for v in views:
        icon = VERDICT_ICON.get(v.verdict, "")
        lines.append(
            f"| {code_id(v.name)} | {icon} {escape(v.verdict_text)} | {v.rate} | "
            f"{v.interval} | {v.limit} | {v.judged_fail} | {escape(v.se)} | {escape(v.sp)} |"
        )
    notes = []
    for v in views:
        if v.decided_by_person:
            notes.append(f"- {code_id(v.name)} decided by a person: {escape(v.decided_by_person, 600)}")
        if v.audit:
            notes.append(f"- {code_id(v.name)} {escape(v.audit, 800)}")
        if v.zero:
            notes.append(f"- {code_id(v.name)}: {escape(v.zero, 800)}")
        if v.look:
            notes.append(f"- {code_id(v.name)} {escape(v.look, 600)}")
        if v.plan:
            notes.append(f"- {code_id(v.name)} {escape(v.plan, 800)}")
        if v.hint:
            notes.append(f"- {code_id(v.name)}: {escape(v.hint, 600)}")
        if v.base:
            turned = f"; turned fail: {id_list(list(v.turned_fail), MAX_TURNED_FAIL)}" if v.turned_fail else ""
            notes.append(f"- {code_id(v.name)} against the base: {escape(v.base)}{turned}")
    return [*lines, *(["", *notes] if notes else []), ""]


# --- the picture ---

ROW = 64
WIDTH = 860  # room for "audit (dotted) 12.1%-43.8% (decides)" after the axis
LEFT = 250  # the slice names' column ends here
AXIS_END = 590  # the numbers' column starts after it
TOP = 44
COLOURS = {
    "passed": "#1a7f37",
    "exceeded": "#cf222e",
    "inconclusive": "#9a6700",
    "judge_unfit": "#6e7781",
    "incomplete": "#6e7781",
}


def _nice_ceiling(x: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above x (an axis's round end)."""
    step = 10.0 ** math.floor(math.log10(x))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * step >= x * (1 - 1e-9):
            return min(1.0, m * step)
    return min(1.0, 10 * step)


def _x(text: object, limit: int = 60) -> str:
    """Untrusted text for SVG: one visible line, characters XML can hold, then XML-escaped."""
    shown = visible(text, limit)
    return html.escape(xml_text(shown), quote=True)


def _row(i: int, s: ProductSlice, name: str) -> list[str]:
    y = TOP + i * ROW
    axis_y = y + 34
    estimate, low, high = _deciding(s)
    highs = [s.high or 0.0, s.audit.high if s.audit is not None else 0.0]
    top = max(2 * s.max_failure_rate, *highs, (estimate or 0.0) * 1.2, 0.01)
    scale_max = _nice_ceiling(top)

    def px(rate: float) -> float:
        return round(LEFT + (AXIS_END - LEFT) * min(max(rate, 0.0), scale_max) / scale_max, 1)

    shown, verdict = shown_verdict(s)
    colour = COLOURS.get(shown, "#6e7781")
    lx = px(s.max_failure_rate)
    out = [
        f'<text x="12" y="{y + 22}" class="name">{_x(name, 30)}</text>',
        f'<text x="12" y="{y + 40}" class="small" style="fill:{colour}">{_x(verdict)}</text>',
        f'<text x="12" y="{y + 55}" class="small" style="fill:#57606a">{s.judged_fail:,} of {s.n:,} judged fail</text>',
        f'<line x1="{LEFT}" y1="{axis_y}" x2="{AXIS_END}" y2="{axis_y}" stroke="#d0d7de"/>',
        f'<text x="{LEFT}" y="{axis_y + 16}" class="tick">0%</text>',
        f'<text x="{AXIS_END}" y="{axis_y + 16}" text-anchor="end" class="tick">{percent(scale_max)}</text>',
        f'<line x1="{lx}" y1="{y + 10}" x2="{lx}" y2="{axis_y + 4}" stroke="#cf222e" stroke-dasharray="4 3"/>',
        f'<text x="{lx}" y="{y + 7}" text-anchor="middle" class="tick">limit {percent(s.max_failure_rate)}</text>',
    ]
    if low is None or high is None:
        out.append(f'<text x="{AXIS_END + 14}" y="{axis_y - 6}" class="small">no interval</text>')
        return out
    # The interval behind the verdict is the bar, its estimate the dot and the big figure; the other
    # estimate, when there are two (people's audit beside the calibration's), the dotted line below.
    label = "interval"
    other = _other_interval(s)
    if other is not None:
        which, other_low, other_high = other
        label = f"{'calibration' if which == 'audit' else 'audit'} (bar)"
        out += [
            f'<line x1="{px(other_low)}" y1="{axis_y - 2}" x2="{px(other_high)}" y2="{axis_y - 2}" stroke="{colour}" '
            'stroke-width="3" stroke-dasharray="2 2"/>',
            f'<text x="{AXIS_END + 14}" y="{axis_y + 16}" class="small">{which} (dotted) '
            f"{span(other_low, other_high)}</text>",
        ]
    decides = " (decides)" if other is not None else ""
    out.append(
        f'<line x1="{px(low)}" y1="{axis_y - 10}" x2="{px(high)}" y2="{axis_y - 10}" stroke="{colour}" '
        'stroke-width="6" stroke-linecap="round"/>'
    )
    if estimate is not None:
        out += [
            f'<circle cx="{px(estimate)}" cy="{axis_y - 10}" r="5" fill="#ffffff" stroke="{colour}" stroke-width="2"/>',
            f'<text x="{AXIS_END + 14}" y="{axis_y - 14}" class="name">{percent(estimate)}</text>',
        ]
    return [*out, f'<text x="{AXIS_END + 14}" y="{axis_y + 2}" class="small">{label} {span(low, high)}{decides}</text>']


def _other_interval(s: ProductSlice) -> tuple[str, float, float] | None:
    """The estimate that did not decide the slice, drawn beside the one that did: which it is
    ("audit", "calibration") and its interval; None when the slice has only one."""
    if s.audit is None:
        return None
    if s.decided_by == "audit":
        return None if s.low is None or s.high is None else ("calibration", s.low, s.high)
    return "audit", s.audit.low, s.audit.high


def product_svg(product: Product) -> str:
    """Each slice's interval (bar) and estimate (dot) against its limit (dashed), one row each, on
    its own scale from 0% to about twice the limit; coloured by the verdict. The bar, the dot and the
    figure are the estimate that decided the slice (people's audit, when it did); the other, when
    there is one, is a dotted line below it."""
    height = TOP + ROW * max(1, len(product.slices)) + 8
    title = _x(heading(product), 200)
    body = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{title}">',
        "<style>text{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;fill:#1f2328}"
        ".name{font-size:14px;font-weight:600}.small{font-size:12px}.tick{font-size:11px;fill:#57606a}"
        ".title{font-size:15px;font-weight:600}</style>",
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="12" y="24" class="title">{title}</text>',
    ]
    for i, (name, s) in enumerate(product.slices.items()):
        body += _row(i, s, name)
    return "\n".join([*body, "</svg>"]) + "\n"
