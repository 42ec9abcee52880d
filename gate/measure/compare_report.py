"""compare.md and the PR comment's transitions section, from a `Comparison`.

Pure. Case ids, slices and recorded values come from records files (untrusted) and pass through
`gate.model.escape` (`markdown` for text, `code` for identifiers in code spans).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text

from gate.measure.compare import Comparison, Transition
from gate.measure.rollback import bundle_rows
from gate.model import escape
from gate.model.escape import log_text
from gate.model.paths import shown_path
from gate.model.wording import plural
from gate.report.terminal import MAX_IDS, print_indented, safe_text

MAX_CRITICAL_ROWS = 15
MAX_OTHER_ROWS = 50
MAX_COMMENT_ROWS = 10
ARROW = " → "


def _kind(kind: str) -> str:
    return kind.replace("->", ARROW)


def _artifact(t: Transition) -> str:
    if t.first_divergence == "none":
        return "none: same inputs and configuration, the judge itself moved"
    if t.first_divergence == "unknown":
        known = f"; known to differ: {', '.join(t.differing_steps)}" if t.differing_steps else ""
        steps = ", ".join(t.unknown_steps[:3]) + ("…" if len(t.unknown_steps) > 3 else "")
        return f"unknown (not recorded: {steps}){known}"
    if t.base_value is None and t.head_value is None:
        return f"**{t.first_divergence}**"
    return f"**{t.first_divergence}**: {escape.markdown(t.base_value, 60)}{ARROW}{escape.markdown(t.head_value, 60)}"


def _rows(transitions: Sequence[Transition], limit: int) -> list[str]:
    lines = ["| case | slice | human | base → head | first diverging artifact |", "|---|---|---|---|---|"]
    for t in transitions[:limit]:
        lines.append(
            f"| {escape.code(t.case_id)} | {escape.markdown(t.slice, 60)} | {escape.markdown(t.human_label, 20)} | "
            f"{_kind(t.kind)} | {_artifact(t)} |"
        )
    if len(transitions) > limit:
        lines.append(f"\n… and {len(transitions) - limit} more in compare.json")
    return lines


def _split(c: Comparison) -> tuple[list[Transition], list[Transition]]:
    critical = [t for t in c.transitions if t.critical]
    return critical, [t for t in c.transitions if not t.critical]


def _counts_line(c: Comparison, *, kinds: bool = False) -> str:
    if not c.transitions:
        return f"No verdict changed: {plural(c.unchanged, 'case')} judged the same on both sides."
    line = f"{plural(len(c.transitions), 'transition')} over {plural(c.unchanged + len(c.transitions), 'case')}"
    if kinds:
        line += ": " + ", ".join(f"{_kind(k)} **{n}**" for k, n in c.counts.items())
    return line + "."


def render_compare(c: Comparison) -> str:
    """compare.md: counts, then critical transitions with the diverging artifact, the rest folded."""
    lines = [
        "## ragas-gate compare",
        "",
        *([f"**Warning:** {escape.markdown(c.across_policies)}", ""] if c.across_policies else []),
        f"Base {escape.code(c.base.label)}{ARROW}head {escape.code(c.head.label)}",
        "",
        _counts_line(c),
    ]
    if c.transitions:
        lines += ["", "| transition | cases |", "|---|---|"]
        lines += [f"| {_kind(k)} | {n} |" for k, n in c.counts.items()]
    critical, rest = _split(c)
    if c.critical_slices is not None:
        lines += ["", f"### Critical transitions ({len(critical)})", ""]
        lines += _rows(critical, MAX_CRITICAL_ROWS) if critical else ["None."]
    if rest:
        title = "Other transitions" if c.critical_slices is not None else "Transitions"
        lines += ["", f"<details><summary>{title} ({len(rest)})</summary>", "", *_rows(rest, MAX_OTHER_ROWS)]
        lines += ["", "</details>"]
    changes = c.lineage_changes()
    if changes:
        lines += ["", "<details><summary>What differs between the runs</summary>", ""]
        lines += [f"- {escape.code(k)}: {_value(a)}{ARROW}{_value(b)}" for k, (a, b) in changes.items()]
        lines += ["", "</details>"]
    lines += _bundles(c)
    lines += [f"\n> {escape.markdown(n)}" for n in c.notes]
    return "\n".join(lines) + "\n"


def _bundles(c: Comparison) -> list[str]:
    """Both sides' rollback bundles when they differ: the differing entries, then the equal ones."""
    rows = bundle_rows(c.base.rollback, c.head.rollback)
    if not rows:
        return []
    lines = ["", "<details><summary>Rollback bundles differ (rollback.json)</summary>", ""]
    lines += ["| entry | base | head |", "|---|---|---|"]
    lines += [f"| {escape.code(k)} | {_value(a)} | {_value(b)} |" for k, a, b in rows if a != b]
    same = [f"{escape.code(k)} {_value(a)}" for k, a, b in rows if a == b]
    if same:
        lines += ["", "Equal on both sides: " + ", ".join(same) + "."]
    return [*lines, "", "</details>"]


def _value(v: object) -> str:
    if v is None or v == "":
        return "(not recorded)"
    text = " ".join(str(v).split())
    return escape.code(text[:12] if len(text) == 64 else text[:80])


def render_comment_section(c: Comparison) -> str:
    """The PR comment's short section: counts, then a short table, critical transitions first."""
    lines = ["### Against the base run", "", _counts_line(c, kinds=True)]
    if c.transitions:
        lines += ["", *_rows(list(c.transitions), MAX_COMMENT_ROWS)]
    return "\n".join(lines) + "\n"


def print_compare(comparison: Comparison, files: Sequence[Path], console: Console) -> None:
    """`gate compare`: the counts first, then the critical transitions; compare.md has the rest."""
    c = comparison
    if c.across_policies is not None:
        console.print(Text(f"warning: {log_text(c.across_policies)}", style="bold"))
    console.print(
        Text.assemble(
            ("gate compare", "bold"), ": base ", safe_text(c.base.label), " -> head ", safe_text(c.head.label)
        )
    )
    if not c.transitions:
        console.print(f"No verdict changed: {plural(c.unchanged, 'case')} judged the same on both sides.")
    else:
        kinds = ", ".join(f"{log_text(k)} {n}" for k, n in c.counts.items())
        console.print(
            f"{plural(len(c.transitions), 'transition')} over {plural(c.unchanged + len(c.transitions), 'case')}: {kinds}"
        )
    shown = [t for t in c.transitions if t.critical] if c.critical_slices is not None else list(c.transitions)
    for t in shown[:MAX_IDS]:
        where = {"none": "same inputs: the judge itself moved", "unknown": "first difference not recorded"}.get(
            t.first_divergence, f"first differs at {t.first_divergence}"
        )
        if t.base_value is not None or t.head_value is not None:
            where = f"{where}: {t.base_value} -> {t.head_value}"
        print_indented(
            console,
            2,
            Text.assemble(
                safe_text(t.case_id, style="cyan"),
                " (",
                safe_text(t.slice),
                "): ",
                safe_text(t.kind),
                "; ",
                safe_text(where, 160),
            ),
        )
    if len(shown) > MAX_IDS:
        console.print(f"  and {len(shown) - MAX_IDS} more in compare.md")
    for note in c.notes:
        console.print(Text.assemble("Note: ", safe_text(note)))
    console.print(Text.assemble("Wrote ", ", ".join(shown_path(f) for f in files)))
