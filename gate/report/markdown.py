"""The PR comment body (report.md) and the job summary (summary.md), from a `gate.model.result.Result`.

Pure. Everything that comes from case text, judge reasons or messages passes through `escape`
(`gate.model.escape.markdown`; identifiers through `code_id`, `gate.model.escape.code`),
so a response that says `<img src=x>` or `[click](http://evil)` cannot break or hijack the comment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from gate.model.escape import code as code_id
from gate.model.escape import id_list
from gate.model.escape import markdown as escape
from gate.model.money import money
from gate.model.owners import owner_text
from gate.model.textfit import head_bytes
from gate.model.wording import agree, plural
from gate.report import product, sections
from gate.report.next_steps import measures, next_steps

if TYPE_CHECKING:
    from gate.model.result import Blocker, CaseRow, Result

__all__ = ["code_id", "escape", "id_list", "render_report", "render_summary"]

STATE_ICON = {
    "passed": "✅",
    "quality_failed": "❌",
    "evaluation_incomplete": "⚠️",
    "review_required": "👀",
}
STATE_MEANING = {
    "passed": "nothing blocks.",
    "quality_failed": "blocked: each blocker below names whose fix it is; fix them before merging.",
    "evaluation_incomplete": "the evidence is not complete: fix the run (key, provider, budget), not the product.",
    "review_required": "a person must look at the cases below before this can go ahead.",
}
# A lane that measures the judge (gate.report.next_steps.measures) and recorded disagreements.
MEASURED_MEANING = (
    "measured, not gated: this lane measures the judge against people and gates no merge; the "
    "disagreements below are in its records, and gate calibrate comes next."
)
# A lane that measures the judge and passed (no disagreement over its slices' limits: maybe some within).
MEASURED_AGREED = (
    "measured, not gated: this lane measures the judge against people and gates no merge; its records "
    "hold where the judge and people agree and differ, and gate calibrate comes next."
)
STATE_ORDER = ("quality_failed", "evaluation_incomplete", "review_required")


def state_meaning(result: Result) -> str:
    """What the result's state means for this lane: a measuring lane's blockers are measurements."""
    if result.state == "quality_failed" and measures(result):
        return MEASURED_MEANING
    if result.state == "passed" and measures(result):
        return MEASURED_AGREED
    return STATE_MEANING[result.state]


# A measuring lane's findings where the judge and people differ past a slice's limit.
_DISAGREEMENTS = frozenset({"false_pass_limit", "false_fail_limit"})


def blockers_heading(result: Result) -> str:
    """The blocker list's title: on a lane that measures the judge, disagreements with people are what
    it measured, not what blocks a merge."""
    if measures(result) and result.blockers and all(b.kind in _DISAGREEMENTS for b in result.blockers):
        return "Disagreements with people"
    return "Blockers"


MAX_REASON_CHARS = 280
# A blocker's message whole: the longest the gate writes (a route to decide a slice, with its command)
# is about 900 characters; untrusted text inside it is already cut where it enters.
MAX_BLOCKER_CHARS = 1500
# GitHub caps comments near 64 KiB; keep a margin for the marker and the trim note.
MAX_REPORT_BYTES = 60_000


def marker(policy_id: str, lane: str) -> str:
    """The sticky comment's marker: its whole first line (`gate.github.client` finds the comment by it).

    Keyed on the policy and the lane, so two lanes of one policy keep a comment each. The lane is
    percent-encoded (a policy id never holds `:` or `%`), so no lane name can end the HTML comment
    or read as another policy's marker.
    """
    return f"<!-- ragas-gate:{policy_id}:{quote(lane, safe='')} -->"


def policy_marker(policy_id: str) -> str:
    """The marker of a comment written before markers named the lane: one comment per policy."""
    return f"<!-- ragas-gate:{policy_id} -->"


def lane_line(policy_id: str, lane: str) -> str:
    """What the report's first paragraph says of the lane and the policy (`Lane `pr`, policy ...`)."""
    return f"Lane {code_id(lane)}, policy {code_id(policy_id)} version "


def reports_lane(report_md: str, policy_id: str, lane: str) -> bool:
    """Whether a report (a sticky comment's body) is `lane`'s: its first bold paragraph, the header
    written before any case text, names the lane and the policy."""
    for line in report_md.split("\n"):
        if line.startswith("**"):
            return any(
                line.startswith(f"**{code_id(state)}** — {meaning} {lane_line(policy_id, lane)}")
                for state, meaning in [
                    *STATE_MEANING.items(),
                    ("quality_failed", MEASURED_MEANING),
                    ("passed", MEASURED_AGREED),
                ]
            )
    return False


def shard_text(result: Result) -> str | None:
    """A shard's result says it is one, so half a lane never reads as the whole of it."""
    shard = result.shard
    if shard is None:
        return None
    share = f" {shard.cases} of {shard.lane_cases} cases" if shard.cases is not None else ""
    return (
        f"shard {shard.index}/{shard.count}:{share} (the controls run in every shard); "
        "gate merge decides the whole lane"
    )


def blocker_message(b: Blocker) -> str:
    """The blocker's message without the slice it opens with, which the line already names."""
    return b.message.removeprefix(f"slice {b.slice}: ") if b.slice else b.message


def withheld_text(result: Result, limit: int = 10) -> str | None:
    """Name the withheld cases the counts add up (no reference evidence: never sent to the judge)."""
    rows = [c for c in result.cases if c.bucket == "withheld"]
    if not rows:
        return None
    named = [
        f"{c.case_id} (the missing-evidence control: withheld by design)"
        if c.control_role == "missing_evidence"
        else c.case_id
        for c in rows[:limit]
    ]
    more = f" and {len(rows) - limit} more" if len(rows) > limit else ""
    return f"withheld (no reference evidence, never sent to the judge): {', '.join(named)}{more}"


LIST_ONLY_KINDS = frozenset(
    {"unrun_cases", "budget_exhausted", "missing_credentials", "partition_leak", "judge_retired"}
)
MAX_DETAILED = 10


def _blockers(result: Result) -> list[str]:
    cases = {c.case_id: c for c in result.cases}
    people = sections.people_labels(result)
    blockers = result.blockers
    if not blockers:
        return ["No blockers.", ""]
    lines: list[str] = []
    for state in STATE_ORDER:
        group = [b for b in blockers if b.state == state]
        if not group:
            continue
        lines.append(f"#### {STATE_ICON[state]} {state} ({len(group)})")
        for b in group:
            where = f" · slice {code_id(b.slice)}" if b.slice else ""
            owner = owner_text(b)
            where += f" · owner {escape(owner)}" if owner else ""
            lines.append(f"- **{code_id(b.kind)}**{where}: {escape(blocker_message(b), MAX_BLOCKER_CHARS)}")
            ids = list(b.case_ids)
            if b.kind in LIST_ONLY_KINDS:
                if ids:
                    lines.append(f"  - cases: {id_list(ids)}")
                continue
            detailed = [i for i in ids if i in cases][:MAX_DETAILED]
            lines += [f"  - {code_id(i)}: {_case_detail(cases[i], people.get(i))}" for i in detailed]
            rest = [i for i in ids if i not in detailed]
            if rest:
                lines.append(f"  - {'and ' if detailed else ''}{len(rest)} more: {id_list(rest)}")
        lines.append("")
    return lines


def _case_detail(c: CaseRow, audited: str | None = None) -> str:
    if c.bucket == "errored":
        return f"evaluator error {code_id(c.error_kind)}: {escape(c.error_message or '', MAX_REASON_CHARS)}"
    if c.bucket == "withheld":
        return "withheld (no reference evidence)"
    if c.bucket == "unrun":
        return "not judged"
    if c.verdict is None:  # not needed: decided before it was judged (a gating check, a stop)
        return f"human **{escape(sections.human_text(c.human_label, audited))}**, {sections.NOT_JUDGED}"
    labels = c.labels
    votes = f" (votes: {', '.join(escape(v) for v in labels)})" if len(labels) > 1 else ""
    why = f" — judge: “{escape(c.reason, MAX_REASON_CHARS)}”" if c.reason else ""
    return f"human **{escape(sections.human_text(c.human_label, audited))}**, judge **{escape(c.verdict)}**{votes}{why}"


def _slice_table(result: Result) -> list[str]:
    slices = result.slices
    if not sections.shows_slice_table(result):
        return []
    lines = [
        "| slice | false pass | false fail | true pass | true fail | errors | review | unrun |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, t in slices.items():
        fp = f"**{t.false_pass}**" if t.false_pass else "0"
        ff = f"**{t.false_fail}**" if t.false_fail else "0"
        lines.append(
            f"| {code_id(name)} | {fp} | {ff} | {t.true_pass} | {t.true_fail} | {t.errors} | {t.review} | {t.unrun} |"
        )
    return lines


def _cost(result: Result) -> list[str]:
    cost = result.cost
    cur = cost.currency
    bound = f" of a {money(result.limits.max_total_cost, cur)} boundary" if result.limits is not None else ""
    lines = [
        f"**{money(cost.total, cur)}**{bound} · {cost.input_tokens} input / "
        f"{cost.output_tokens} output tokens · {plural(cost.http_attempts, 'HTTP attempt')} "
        f"({plural(cost.retries, 'retry', 'retries')}) · {plural(cost.cached_calls, 'judgment')} from cache",
    ]
    batch = sections.batch_line(result)
    if batch is not None:
        lines += ["", escape(batch)]
    unanswered = cost.unanswered_attempts
    if unanswered:
        lines.append("")
        lines.append(
            f"{plural(unanswered, 'attempt')} got no answer (timeout, dropped connection, interrupt): no usage was "
            "reported, so they are not in the total, but the provider may bill them; the cost boundary "
            "counted each at its reserved upper bound."
        )
    missing = cost.usage_missing
    if missing:
        lines.append("")
        lines.append(
            f"{plural(missing, 'attempt')} {agree(missing, 'was', 'were')} answered without `usage`: the provider billed them by an amount it did not "
            "report, so each counts at its reserved upper bound against the cost boundary."
        )
    if missing or unanswered:
        lines.append("")
        lines.append(f"Budget used (the total plus those reservations): {money(cost.spent, cur)}")
    overrun = cost.over_reservation
    if overrun:
        lines.append("")
        lines.append(
            f"{plural(overrun, 'attempt')} reported a cost above their reserved upper bound: scheduling stopped, and the "
            "boundary holds only up to that excess."
        )
    if cost.rate_limited:
        lines.append("")
        lines.append(
            f"{plural(cost.rate_limited, 'attempt')} {agree(cost.rate_limited, 'was', 'were')} answered 429 (rate limited): paid nothing, retried within "
            "`max_attempts` after the provider's window reopened."
        )
    by_slice = cost.by_slice
    if by_slice:
        lines.append("")
        lines.append("By slice: " + ", ".join(f"{code_id(k)} {money(v, cur)}" for k, v in by_slice.items()))
    return lines


def _overrides(result: Result) -> list[str]:
    """The policy's overrides and the waivers they made (a case list, or a product slice)."""
    if not (result.waived or result.overrides):
        return []
    lines = ["### Overrides"]
    for o in result.overrides:
        status = "**expired**" if o.expired else f"until {escape(o.expires)}"
        scope = f"slice {code_id(o.slice)}" if o.slice is not None else id_list(o.case_ids)
        lines.append(
            f"- {code_id(o.id)} waives {code_id(o.blocker)} for {scope} "
            f"({status}); approver {escape(o.approver)}; reason: {escape(o.reason, 300)}; "
            f"evidence: {code_id(o.evidence)}; follow-up: {escape(o.follow_up)}"
        )
    for w in result.waived:
        scope = f"slice {code_id(w.slice)}" if w.slice is not None else id_list(w.case_ids)
        lines.append(f"  - applied: {code_id(w.override)} waived {code_id(w.kind)} for {scope}")
    return [*lines, ""]


def render_report(result: Result, *, with_marker: bool = True) -> str:
    state = result.state
    policy_id = result.policy_id
    counts = result.counts
    lines: list[str] = []
    if with_marker:
        lines.append(marker(policy_id, result.lane))
    lines += [
        f"## {STATE_ICON[state]} ragas-gate / {escape(policy_id)}: {code_id(state)}",
        "",
        f"**{code_id(state)}** — {state_meaning(result)} {lane_line(policy_id, result.lane)}"
        f"{code_id(result.policy_version)}, exit code "
        f"{result.exit_code}.",
        "",
        *([f"**{escape(shard)}**", ""] if (shard := shard_text(result)) else []),
        f"Cases: {counts.eligible} eligible = {counts.completed} completed + "
        f"{counts.errored} errored + {counts.withheld} withheld + {counts.unrun} unrun"
        f"{sections.not_needed_term(counts.not_needed)} "
        f"· {counts.review} need review · {counts.cached} judgments from cache",
        "",
        *([f"_{escape(withheld)}_", ""] if (withheld := withheld_text(result)) else []),
        *sections.retirement_section(result),
        *sections.calibration_section(result),
        f"### {blockers_heading(result)}",
        *_blockers(result),
        *product.product_section(result),
    ]
    table = _slice_table(result)
    if table:
        lines += ["### Slices (controls excluded)", *table, ""]
    lines += sections.checks_section(result)
    lines += sections.trend_section(result)
    lines += sections.drift_section(result)
    lines += sections.certification_section(result)
    lines += sections.strata_lines(result.strata, "### Strata: raw and prevalence-weighted (controls excluded)")
    if result.controls.failures:
        lines.append("### Controls: did not separate")
        for f in result.controls.failures:
            lines.append(
                f"- {code_id(f.case_id)} ({escape(f.role)}): expected {escape(f.expected)}, got {escape(f.got)}"
            )
        lines.append("")
    steps = next_steps(result)  # our own text, with placeholders for the paths: no escaping needed
    if steps:
        lines += ["### Next steps", *(f"- {step}" for step in steps), ""]
    lines += ["### Cost", *_cost(result), ""]
    unrun = result.unrun_case_ids
    if unrun:
        lines += [
            f"### Unrun cases ({len(unrun)})",
            "<details><summary>case ids</summary>",
            "",
            ", ".join(code_id(i) for i in unrun),
            "",
            "</details>",
            "",
        ]
    lines += _overrides(result)
    for note in result.notes:
        lines.append(f"> {escape(note)}")
    if result.lineage is not None:
        lines += [
            "<details><summary>Lineage</summary>",
            "",
            *(f"- {k}: {code_id(v)}" for k, v in result.lineage.items()),
            "",
            "</details>",
        ]
    return _cap("\n".join(lines) + "\n")


def _cap(text: str) -> str:
    if len(text.encode("utf-8")) <= MAX_REPORT_BYTES:
        return text
    cut = head_bytes(text, MAX_REPORT_BYTES)
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return cut + "\n\n_Report trimmed to fit a PR comment; the full result is in result.json and junit.xml._\n"


def render_summary(result: Result) -> str:
    """The job summary: the same report, without the sticky-comment marker."""
    return render_report(result, with_marker=False)
