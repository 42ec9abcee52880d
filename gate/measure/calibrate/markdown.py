"""calibration.md: the measurement in one screen, worst slice first. Pure, from calibration.json.

Untrusted text (case ids, reasons, slice names) goes through the report's own `escape`/`code_id`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gate.measure.calibrate.core import MIN_CASES_TO_SUGGEST
from gate.model.result import Strata
from gate.model.wording import plural
from gate.report.markdown import code_id, escape
from gate.report.sections import strata_lines

STRATA_HEADING = "## Strata: raw and prevalence-weighted"

# An interval wider than this (in rate points) says little: the md warns and says how wide.
WIDE_INTERVAL = 0.30
MAX_DISAGREEMENTS_SHOWN = 12
MAX_REASON = 120


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.0f}%"


def rate_text(rate: Mapping[str, Any], k: int) -> str:
    """ "1/4 = 25% (4–70%)" or "no case" when n = 0."""
    if not rate.get("n"):
        return "n/a (no case)"
    return f"{k}/{rate['n']} = {pct(rate['value'])} ({pct(rate['low'])}–{pct(rate['high'])})"


def num(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _row(name: str, t: Mapping[str, Any]) -> str:
    beside = f"{t['errors']} / {t['review']} / {t['unrun']}"
    return (
        f"| {name} | {t['completed']} | {rate_text(t['false_pass_rate'], t['false_pass'])} | "
        f"{rate_text(t['false_fail_rate'], t['false_fail'])} | {pct(t['agreement'])} | {num(t['cohen_kappa'])} | "
        f"{beside} |"
    )


TABLE_HEAD = [
    "| {what} | completed | false-pass rate (95% CI) | false-fail rate (95% CI) | agreement | kappa | "
    "errors / review / unrun |",
    "|---|---:|---|---|---:|---:|---:|",
]


def wide_warnings(slices: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One short phrase per slice whose widest rate interval is too wide to act on, saying how wide."""
    out: list[str] = []
    for name, t in slices.items():
        rates = [t["false_pass_rate"], t["false_fail_rate"]]
        measured = [r for r in rates if r["n"]]
        if not measured:
            out.append(f"{escape(name)} has no completed case")
            continue
        widest = max(measured, key=lambda r: r["high"] - r["low"])
        width = widest["high"] - widest["low"]
        if width > WIDE_INTERVAL or len(measured) < len(rates):
            which = "false-pass" if widest is rates[0] else "false-fail"
            gap = " (and one rate has no case)" if len(measured) < len(rates) else ""
            out.append(
                f"{escape(name)}: {which} {pct(widest['low'])}–{pct(widest['high'])}, "
                f"{100 * width:.0f} points wide on n = {widest['n']}{gap}"
            )
    return out


def _disagreements(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return ["No disagreement: the judge matched every completed human label."]
    lines = [
        "| case | slice | kind | human (reason) | judge (reason) | cause |",
        "|---|---|---|---|---|---|",
    ]
    for d in rows[:MAX_DISAGREEMENTS_SHOWN]:
        lines.append(
            f"| {code_id(d['case_id'])} | {escape(d['slice'])} | **{d['kind'].replace('_', ' ')}** | "
            f"{escape(d['human_label'])}: {escape(d.get('human_reason') or '(none)', MAX_REASON)} | "
            f"{escape(d['judge_label'])}: {escape(d.get('judge_reason') or '(none)', MAX_REASON)} | "
            f"{escape(d.get('cause') or '—')} |"
        )
    more = len(rows) - MAX_DISAGREEMENTS_SHOWN
    if more > 0:
        lines.append(f"\n… and {more} more in calibration.json.")
    return lines


def shown_limit(value: int | None, cases: int, rate: Mapping[str, Any] | None) -> str:
    """A suggested limit as "k of n", or why there is none: no case, or too few behind the rate."""
    if value is not None:
        return f"{value} of {cases}"
    n = rate.get("n") if isinstance(rate, Mapping) else None
    if isinstance(n, int) and 0 < n < MIN_CASES_TO_SUGGEST:
        return f"– (too few cases to suggest a limit: {n}, at least {MIN_CASES_TO_SUGGEST})"
    return "– (no evidence)"


def stricter(s: Mapping[str, Any]) -> str:
    """The warning for a policy limit below the suggested one (calibration.md and the terminal)."""
    cur = s["current"]
    for key in ("max_false_passes", "max_false_fails"):
        now, suggested = cur[key], s[key]
        if now is not None and suggested is not None and now < suggested:
            return " (stricter than this judge supports: it may block on judge error alone)"
    return ""


def _limits(cal: Mapping[str, Any]) -> list[str]:
    sugg = cal.get("suggested_limits")
    if sugg is None:
        return ["None: the `calibration` partition has no completed case, and limits are chosen there only."]
    first = next(iter(sugg.values()), None)
    lane = first["scaled_to"]["lane"] if first else "?"
    lines = [
        f"From the `calibration` partition only, scaled to lane `{escape(lane)}`: a limit is the upper 95% bound "
        "of the slice's rate times the lane's cases of that label, rounded down: the most errors a judge as good "
        "as this one plausibly makes there. A lower limit trips on judge error alone.",
        "",
        "| slice | max_false_passes | max_false_fails | policy now (passes / fails) |",
        "|---|---:|---:|---|",
    ]
    for name, s in sugg.items():
        cur, rates = s["current"], cal.get("slices", {}).get(name, {})
        lines.append(
            f"| {escape(name)} | {shown_limit(s['max_false_passes'], s['scaled_to']['fail_cases'], rates.get('false_pass_rate'))} | "
            f"{shown_limit(s['max_false_fails'], s['scaled_to']['pass_cases'], rates.get('false_fail_rate'))} | "
            f"{cur['max_false_passes'] if cur['max_false_passes'] is not None else '–'} / "
            f"{cur['max_false_fails'] if cur['max_false_fails'] is not None else '–'}{stricter(s)} |"
        )
    return lines


def render_calibration(cal: Mapping[str, Any], *, picture: str | None = "calibration.svg") -> str:
    lin = cal.get("lineage", {})
    o = cal["overall"]
    lines = [
        f"# Calibration: {escape(cal['policy_id'])} ({escape(cal.get('policy_version', ''))})",
        "",
        f"Judge `{escape(lin.get('evaluator_model', ''))}`, metric v{escape(lin.get('metric_version', ''))}, "
        f"prompt sha256 `{str(lin.get('prompt_sha256', ''))[:12]}`. {plural(o['cases'], 'case')} from the records, "
        f"{plural(cal.get('controls_left_out', 0), 'control')} left out; repeats count by majority.",
        "",
        f"**Overall**: {o['completed']} completed; agreement {pct(o['agreement'])}, kappa {num(o['cohen_kappa'])}; "
        f"false-pass rate {rate_text(o['false_pass_rate'], o['false_pass'])}; "
        f"false-fail rate {rate_text(o['false_fail_rate'], o['false_fail'])}. "
        f"Not in any rate: {plural(o['errors'], 'error')}, {o['review']} review, {o['unrun']} unrun.",
        "",
        "## Slices, worst first",
        "",
        *[h.format(what="slice") for h in TABLE_HEAD],
        *[_row(escape(name), t) for name, t in cal["slices"].items()],
    ]
    warnings = wide_warnings(cal["slices"])
    if warnings:
        lines += [
            "",
            "> **Too few cases to mean much.** The 95% interval is too wide to act on for "
            + "; ".join(warnings)
            + ". Read these rates as rough and add labelled cases before trusting a limit.",
        ]
    lines += [
        "",
        "## Partitions",
        "",
        *[h.format(what="partition") for h in TABLE_HEAD],
        *[_row(escape(name), t) for name, t in cal["partitions"].items()],
        "",
        *strata_lines(Strata.model_validate(cal["strata"]) if "strata" in cal else None, STRATA_HEADING),
        "## Disagreements, false passes first",
        "",
        *_disagreements(cal["disagreements"]),
    ]
    classified = sum(cal["causes"].values())
    if cal["disagreements"]:
        if classified:
            by = ", ".join(f"{k} {v}" for k, v in cal["causes"].items() if v)
            lines += ["", f"Causes: {by}; {len(cal['disagreements']) - classified} not classified."]
        else:
            lines += ["", "Classify each one (`gate calibrate ... --causes FILE`) before changing the prompt."]
    lines += ["", "## Suggested limits", "", *_limits(cal)]
    for note in cal.get("notes", []):
        lines += ["", f"> {escape(note, 400)}"]
    if picture:
        lines += ["", f"![Per-slice confusion: judge against people]({picture})"]
    return "\n".join(lines) + "\n"
