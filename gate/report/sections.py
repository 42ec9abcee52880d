"""Report sections for the optional policy features (deterministic checks, the rubric trend).

Pure, like `gate.report.markdown`, whose escaping they use; each returns no lines when the result
has nothing to show, so a result without these features renders exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.report.markdown import code_id, escape, id_list


def checks_section(result: Mapping[str, Any]) -> list[str]:
    checks: Mapping[str, Mapping[str, Any]] = result.get("checks") or {}
    if not checks:
        return []
    lines = [
        "### Deterministic checks",
        "| check | gates | values | failed (not labelled fail) | errors |",
        "|---|---|---|---|---|",
    ]
    for name, c in checks.items():
        counts: Mapping[str, int] = c.get("counts") or {}
        values = ", ".join(f"{escape(k)} {n}" for k, n in counts.items() if k != "error")
        failed = list(c.get("failed_case_ids") or [])
        errors = list(c.get("error_case_ids") or [])
        lines.append(
            f"| {code_id(name)} | {'yes' if c.get('gate') else 'no (reported)'} | {values} | "
            f"{id_list(failed, 10) if failed else '0'} | {id_list(errors, 10) if errors else '0'} |"
        )
    lines.append("")
    return lines


def _num(value: object, signed: bool = False) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "–"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def trend_section(result: Mapping[str, Any]) -> list[str]:
    trend: Mapping[str, Any] = result.get("trend") or {}
    if not trend:
        return []
    base: Mapping[str, Any] = trend.get("base") or {}
    compared = bool(base.get("compared"))
    head = "| slice | judged | mean | 1 | 2 | 3 | 4 | 5 |"
    rule = "|---|--:|--:|--:|--:|--:|--:|--:|"
    if compared:
        head += " base mean | change |"
        rule += "--:|--:|"
    lines = [
        f"### Trend: {code_id(trend.get('name', ''))} (graded 1-5, reported, never a gate)",
        "",
        head,
        rule,
    ]
    overall: Mapping[str, Any] = trend.get("overall") or {}
    base_slices: Mapping[str, Any] = base.get("slices") or {}
    rows = [("**all**", overall, base.get("overall") or {})]
    rows += [(code_id(name), s, base_slices.get(name) or {}) for name, s in (trend.get("slices") or {}).items()]
    for label, stats, was in rows:
        dist: Mapping[str, int] = stats.get("distribution") or {}
        bands = " | ".join(str(dist.get(b, 0)) for b in ("1", "2", "3", "4", "5"))
        row = f"| {label} | {stats.get('n', 0)} | {_num(stats.get('mean'))} | {bands} |"
        if compared:
            row += f" {_num(was.get('mean'))} | {_num(was.get('change'), signed=True)} |"
        lines.append(row)
    left_out = [f"{overall.get(k)} {k}" for k in ("errors", "unrun") if overall.get(k)]
    if left_out:
        lines += ["", f"Not in the means: {', '.join(left_out)} (the trend stops at the cost boundary first)."]
    cost: Mapping[str, Any] = trend.get("cost") or {}
    if cost.get("http_attempts"):
        lines += ["", f"The trend's {cost['http_attempts']} HTTP attempts are part of the cost below."]
    if base and not compared:
        lines += ["", f"No change shown: {escape(base.get('note', ''))}."]
    elif compared and not base.get("same_bands", True):
        lines += ["", "The base run's band descriptions differ: the change mixes two rubrics."]
    lines.append("")
    return lines
