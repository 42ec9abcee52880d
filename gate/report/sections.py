"""Report sections for the optional policy features (deterministic checks, the rubric trend).

Pure, like `gate.report.markdown`, whose escaping they use; each returns no lines when the result
has nothing to show, so a result without these features renders exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate import strata as strata_math
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


def _rate(rate: object) -> tuple[str, str]:
    if not isinstance(rate, Mapping) or rate.get("value") is None:
        return "–", "–"
    return f"{rate['value']:.0%}", f"{rate['low']:.0%}–{rate['high']:.0%}"


def drift_section(result: Mapping[str, Any]) -> list[str]:
    drift: Mapping[str, Any] = result.get("drift") or {}
    if not drift:
        return []
    previous: Mapping[str, Any] = drift.get("previous") or {}
    compared = bool(previous.get("compared"))
    sample: Mapping[str, Any] = drift.get("sample") or {}
    lines = [
        "### Drift: production traces (no human labels)",
        "",
        f"{sample.get('drawn', 0)} of {sample.get('of', 0)} traces from {code_id(drift.get('traces_file', ''))} "
        f"(seed {sample.get('seed')}). Pass rate = pass / (pass + fail), with its Wilson 95% interval.",
        "",
        "| slice | judged | pass | fail | pass rate | 95% interval |" + (" previous | change |" if compared else ""),
        "|---|--:|--:|--:|--:|--:|" + ("--:|--:|" if compared else ""),
    ]
    prev_slices: Mapping[str, Any] = previous.get("slices") or {}
    rows = [("**all**", drift.get("overall") or {}, previous.get("overall") or {})]
    rows += [(code_id(n), s, prev_slices.get(n) or {}) for n, s in (drift.get("slices") or {}).items()]
    for label, stats, was in rows:
        value, interval = _rate(stats.get("pass_rate"))
        row = f"| {label} | {stats.get('judged', 0)} | {stats.get('pass', 0)} | {stats.get('fail', 0)} | {value} | {interval} |"
        if compared:
            change = was.get("change")
            shown = f"{change * 100:+.0f} pts" if isinstance(change, int | float) else "–"
            row += f" {_rate(was.get('pass_rate'))[0]} | {shown} |"
        lines.append(row)
    if previous.get("note"):
        lines += ["", f"No change shown: {escape(previous['note'], 300)}"]
    by_reason: Mapping[str, int] = drift.get("proposed_by_reason") or {}
    lines += [
        "",
        f"**{drift.get('proposed_cases', 0)} proposed case(s)** in `proposed-cases.jsonl` "
        f"({by_reason.get('disagreement', 0)} disagreement(s) with the last run, "
        f"{by_reason.get('new_failure_shape', 0)} new failure shape(s)): for privacy review and independent "
        "labels in a future dataset version. The gold cases are never changed.",
    ]
    skipped = list(drift.get("skipped_lines") or [])
    if skipped:
        lines += ["", f"{len(skipped)} trace line(s) skipped, first: {escape(skipped[0], 200)}"]
    lines.append("")
    return lines


def certification_section(result: Mapping[str, Any]) -> list[str]:
    """SPEC 10: which configuration this held-out run certifies, and what people do next."""
    cert: Mapping[str, Any] = result.get("certification") or {}
    if not cert:
        return []
    config, held = str(cert.get("config_sha256", ""))[:12], str(cert.get("held_out_sha256", ""))[:12]
    ledger = code_id(cert.get("ledger", ""))
    lines = ["### Certification", f"Configuration {code_id(config)} on held-out set {code_id(held)}, ledger {ledger}."]
    if cert.get("ledger_entry"):
        lines.append(
            f"Once people accept this result, append `certification-entry.json` to {ledger} and commit it: this "
            "held-out set then certifies this configuration only (a re-run of it stays allowed)."
        )
    else:
        lines.append("Refused: this held-out set already certified another configuration (see the blockers).")
    return [*lines, ""]


def _pct(x: object) -> str:
    return "–" if not isinstance(x, int | float) else f"{x * 100:.1f}%"


def strata_lines(strata: Mapping[str, Any] | None, heading: str) -> list[str]:
    """Markdown: per-stratum counts, then raw and prevalence-weighted rates side by side (from to_dict)."""
    if not strata:
        return []
    factor = strata.get("oversampled_factor", strata_math.OVERSAMPLED_FACTOR)
    lines = [
        heading,
        f"Each stratum counts by its production prevalence; **oversampled** = sample share > {factor:g} x prevalence.",
        "",
        "| stratum | prevalence | cases | sample share | completed | false pass | false fail | |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, r in (strata.get("strata") or {}).items():
        mark = "**oversampled**" if r.get("oversampled") else ""
        lines.append(
            f"| {code_id(name)} | {_pct(r.get('prevalence'))} | {r.get('cases', 0)} | {_pct(r.get('sample_share'))} | "
            f"{r.get('completed', 0)} | {r.get('false_pass', 0)} | {r.get('false_fail', 0)} | {mark} |"
        )
    raw, weighted = strata.get("raw") or {}, strata.get("prevalence_weighted") or {}
    lines += ["", "| rate | raw (sample) | prevalence-weighted |", "|---|---:|---:|"]
    for key, label in (
        ("false_pass_rate", "false-pass rate"),
        ("false_fail_rate", "false-fail rate"),
        ("agreement", "agreement"),
    ):
        lines.append(f"| {label} | {_pct(raw.get(key))} | {_pct(weighted.get(key))} |")
    notes = []
    covered = strata.get("prevalence_covered")
    if isinstance(covered, int | float) and covered < 0.999:
        notes.append(
            f"the weighted figures speak for {_pct(covered)} of production: some strata have no completed case"
        )
    if strata.get("unstratified_cases"):
        notes.append(f"{strata['unstratified_cases']} case(s) without a declared stratum are left out of both columns")
    lines += [""] + [f"> {n}" for n in notes] + ([""] if notes else [])
    return lines
