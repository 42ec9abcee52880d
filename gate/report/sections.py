"""Report sections for the optional policy features (deterministic checks, the rubric trend, drift,
certification, strata).

Pure, like `gate.report.markdown` (which places them), with the same escaping (`gate.model.escape`); each
returns no lines when the result has nothing to show, so a result without these features renders
exactly as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gate.model.escape import code as code_id
from gate.model.escape import id_list
from gate.model.escape import markdown as escape
from gate.model.money import money
from gate.model.retirement import MIGRATION, days_text
from gate.model.wording import agree, plural

if TYPE_CHECKING:
    from gate.model.result import (
        DriftChange,
        DriftStats,
        JudgeCalibration,
        Result,
        Strata,
        TrendChange,
        TrendSliceChange,
        TrendStats,
        WilsonRate,
    )


def checks_section(result: Result) -> list[str]:
    if not result.checks:
        return []
    lines = [
        "### Deterministic checks",
        "| check | gates | values | failed (not labelled fail) | errors |",
        "|---|---|---|---|---|",
    ]
    for name, c in result.checks.items():
        values = ", ".join(f"{escape(k)} {n}" for k, n in c.counts.items() if k != "error")
        failed, errors = c.failed_case_ids, c.error_case_ids
        lines.append(
            f"| {code_id(name)} | {'yes' if c.gate else 'no (reported)'} | {values} | "
            f"{id_list(failed, 10) if failed else '0'} | {id_list(errors, 10) if errors else '0'} |"
        )
    lines.append("")
    return lines


def _num(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _trend_row(label: str, stats: TrendStats, was: TrendChange | TrendSliceChange | None, compared: bool) -> str:
    bands = " | ".join(str(n) for n in stats.distribution.in_order())
    row = f"| {label} | {stats.n} | {_num(stats.mean)} | {bands} |"
    if compared:
        row += f" {_num(was.mean if was else None)} | {_num(was.change if was else None, signed=True)} |"
    return row


def trend_section(result: Result) -> list[str]:
    trend = result.trend
    if trend is None:
        return []
    base = trend.base
    compared = base is not None and base.compared
    head = "| slice | judged | mean | 1 | 2 | 3 | 4 | 5 |"
    rule = "|---|--:|--:|--:|--:|--:|--:|--:|"
    if compared:
        head += " base mean | change |"
        rule += "--:|--:|"
    lines = [f"### Trend: {code_id(trend.name)} (graded 1-5, reported, never a gate)", "", head, rule]
    lines.append(_trend_row("**all**", trend.overall, base.overall if base else None, compared))
    for name, stats in trend.slices.items():
        lines.append(_trend_row(code_id(name), stats, base.slices.get(name) if base else None, compared))
    overall = trend.overall
    left_out = [f"{n} {k}" for k, n in (("errors", overall.errors), ("unrun", overall.unrun)) if n]
    if left_out:
        lines += ["", f"Not in the means: {', '.join(left_out)} (the trend stops at the cost boundary first)."]
    if trend.cost.http_attempts:
        lines += ["", f"The trend's {trend.cost.http_attempts} HTTP attempts are part of the cost below."]
    if base is not None and not compared:
        lines += ["", f"No change shown: {escape(base.note or '')}."]
    elif base is not None and compared and base.same_bands is False:
        lines += ["", "The base run's band descriptions differ: the change mixes two rubrics."]
    lines.append("")
    return lines


def _rate(rate: WilsonRate | None) -> tuple[str, str]:
    if rate is None or rate.value is None or rate.low is None or rate.high is None:
        return "–", "–"
    return f"{rate.value:.0%}", f"{rate.low:.0%}–{rate.high:.0%}"


def _drift_row(label: str, stats: DriftStats, was: DriftChange | None, compared: bool) -> str:
    value, interval = _rate(stats.pass_rate)
    row = f"| {label} | {stats.judged} | {stats.passed} | {stats.failed} | {value} | {interval} |"
    if compared:
        change = was.change if was else None
        shown = f"{change * 100:+.0f} pts" if change is not None else "–"
        row += f" {_rate(was.pass_rate if was else None)[0]} | {shown} |"
    return row


def drift_section(result: Result) -> list[str]:
    drift = result.drift
    if drift is None:
        return []
    previous = drift.previous
    compared = previous.compared
    sample = drift.sample
    lines = [
        "### Drift: production traces (no human labels)",
        "",
        f"{sample.drawn} of {sample.of} traces from {code_id(drift.traces_file)} "
        f"(seed {sample.seed}). Pass rate = pass / (pass + fail), with its Wilson 95% interval.",
        "",
        "| slice | judged | pass | fail | pass rate | 95% interval |" + (" previous | change |" if compared else ""),
        "|---|--:|--:|--:|--:|--:|" + ("--:|--:|" if compared else ""),
        _drift_row("**all**", drift.overall, previous.overall, compared),
    ]
    for name, stats in drift.slices.items():
        lines.append(_drift_row(code_id(name), stats, previous.slices.get(name), compared))
    if previous.note:
        lines += ["", f"No change shown: {escape(previous.note, 300)}"]
    by_reason = drift.proposed_by_reason
    lines += [
        "",
        f"**{plural(drift.proposed_cases, 'proposed case')}** in `proposed-cases.jsonl` "
        f"({plural(by_reason.disagreement, 'disagreement')} with the last run, "
        f"{plural(by_reason.new_failure_shape, 'new failure shape')}): for privacy review and independent "
        "labels in a future dataset version. The gold cases are never changed. "
        "`gate review queue --policy POLICY --from OUT --out proposed-queue.jsonl` queues them for people to "
        "label, blind to the judge (docs/REVIEW.md).",
    ]
    if drift.skipped_lines:
        lines += [
            "",
            f"{plural(len(drift.skipped_lines), 'trace line')} skipped, first: {escape(drift.skipped_lines[0], 200)}",
        ]
    lines.append("")
    return lines


def certification_section(result: Result) -> list[str]:
    """Which configuration this held-out run certifies, and what people do next."""
    cert = result.certification
    if cert is None:
        return []
    config, held = cert.config_sha256[:12], cert.held_out_sha256[:12]
    ledger = code_id(cert.ledger)
    lines = ["### Certification", f"Configuration {code_id(config)} on held-out set {code_id(held)}, ledger {ledger}."]
    if cert.ledger_entry is not None:
        lines.append(
            f"Once people accept this result, append `certification-entry.json` to {ledger} and commit it: this "
            "held-out set then certifies this configuration only (a re-run of it stays allowed)."
        )
    else:
        lines.append("Refused: this held-out set already certified another configuration (see the blockers).")
    return [*lines, ""]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f}%"


def strata_lines(strata: Strata | None, heading: str) -> list[str]:
    """Markdown: per-stratum counts, then raw and prevalence-weighted rates side by side."""
    if strata is None:
        return []
    lines = [
        heading,
        "Each stratum counts by its production prevalence; **oversampled** = sample share > "
        f"{strata.oversampled_factor:g} x prevalence.",
        "",
        "| stratum | prevalence | cases | sample share | completed | false pass | false fail | |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, r in strata.strata.items():
        mark = "**oversampled**" if r.oversampled else ""
        lines.append(
            f"| {code_id(name)} | {_pct(r.prevalence)} | {r.cases} | {_pct(r.sample_share)} | "
            f"{r.completed} | {r.false_pass} | {r.false_fail} | {mark} |"
        )
    raw, weighted = strata.raw, strata.prevalence_weighted
    lines += ["", "| rate | raw (sample) | prevalence-weighted |", "|---|---:|---:|"]
    lines.append(f"| false-pass rate | {_pct(raw.false_pass_rate)} | {_pct(weighted.false_pass_rate)} |")
    lines.append(f"| false-fail rate | {_pct(raw.false_fail_rate)} | {_pct(weighted.false_fail_rate)} |")
    lines.append(f"| agreement | {_pct(raw.agreement)} | {_pct(weighted.agreement)} |")
    notes = []
    if strata.prevalence_covered < 0.999:
        notes.append(
            f"the weighted figures speak for {_pct(strata.prevalence_covered)} of production: some strata have no "
            "completed case"
        )
    if strata.unstratified_cases:
        notes.append(
            f"{plural(strata.unstratified_cases, 'case')} without a declared stratum {agree(strata.unstratified_cases, 'is', 'are')} left out of both columns"
        )
    lines += [""] + [f"> {n}" for n in notes] + ([""] if notes else [])
    return lines


def _whole_pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.0f}%"


def calibration_lines(result: Result) -> list[str]:
    """The judge's calibration, plain text (each renderer escapes for its format): how far the judge that decided can
    be trusted, one line for its agreement and one per slice, the slices that blocked said in words."""
    cal = result.calibration
    if cal is None:
        return []
    verdict = _requirement_met(cal) if cal.ok else "cannot gate: " + ", ".join(dict.fromkeys(cal.blockers))
    unfit = list(dict.fromkeys(b.slice or "" for b in result.blockers if b.kind == "judge_unfit"))
    if cal.ok and unfit:  # its calibration meets the policy, but the slices' own check found it cannot decide these
        verdict = f"{verdict}, but the judge is unfit to decide {', '.join(unfit)} (blockers below)"
    if cal.calibrated_config_sha256 is None:
        return [f"Judge calibration ({cal.file}): none, this judge was never measured against people; {verdict}."]
    kappa = "undefined" if cal.cohen_kappa is None else f"{cal.cohen_kappa:.2f}"
    bound = f", min {cal.min_kappa:g}" if cal.min_kappa is not None else ", no min_kappa"
    age = f", {plural(cal.age_days, 'day')} old" if cal.age_days is not None else ""
    lines = [
        f"Judge calibration ({cal.file}, {(cal.calibrated_at or '')[:10]}{age}): kappa {kappa} on n = "
        f"{cal.completed}{bound}; {verdict}."
    ]
    blocked = {b.slice: len(b.case_ids) for b in result.blockers if b.kind == "false_pass_limit" and b.slice}
    for name, s in cal.slices.items():
        r = s.false_pass_rate
        rate = f"false-pass rate {s.false_pass}/{r.n} = {_whole_pct(r.value)} (95% CI {_whole_pct(r.low)}–{_whole_pct(r.high)})"
        if r.n == 0:
            rate = "no failure people labelled was judged: false-pass rate unknown"
        limit = f", bound {_whole_pct(s.max_false_pass_high)}" if s.max_false_pass_high is not None else ""
        if name in blocked and r.high is not None:
            n = blocked[name]
            lines.append(
                f"{name}: blocked by {n} false pass{'es' if n != 1 else ''}, with a judge that misses up to "
                f"{_whole_pct(r.high)} of {name} failures ({rate}{limit})"
            )
        else:
            lines.append(f"{name}: {rate}{limit}")
    return lines


def _requirement_met(cal: JudgeCalibration) -> str:
    """What a met calibration requirement checked, in words: only what the policy bounds (a kappa it
    does not bound decides nothing, however low, and is said to)."""
    held = ["the judge measured is this one"]
    if cal.min_kappa is not None:
        held.append(f"kappa at least {cal.min_kappa:g}")
    if cal.max_age_days is not None:
        held.append(f"measured within {plural(cal.max_age_days, 'day')}")
    if any(s.max_false_pass_high is not None for s in cal.slices.values()):
        held.append("each slice's false-pass bound")
    said = "meets the policy's requirement: " + ", ".join(held)
    if cal.min_kappa is None:
        said += "; kappa gates nothing (set calibration.min_kappa to require one)"
    return said


def retirement_line(result: Result) -> str | None:
    """The judge model's shutdown, plain text (each renderer escapes for its format), once it is within
    the policy's notice: the date and who says it, the days left, what a release lane does then. The
    command that moves the judge (`MIGRATION`) follows it."""
    r = result.judge_retirement
    if r is None or r.shutdown_date is None or r.days_left is None or r.days_left > r.notice_days:
        return None
    said = "the provider's date" if r.source == "provider" else "the policy's evaluator.shutdown_date"
    if r.days_left <= 0:
        return (
            f"Judge model {r.model} shut down on {r.shutdown_date} ({said}, {days_text(r.days_left)}): nothing can be "
            "judged with it. Move the judge with evidence:"
        )
    blocking = r.days_left <= r.blocks_within_days
    if r.release_lane:
        then = (
            "this release lane is judge_retiring until the judge moves"
            if blocking
            else f"this release lane blocks from {plural(r.blocks_within_days, 'day')} before"
        )
    elif r.blocks_within_days:
        then = f"release lanes block from {plural(r.blocks_within_days, 'day')} before"
    else:
        then = "no lane blocks on it"
    return (
        f"Judge model {r.model} shuts down on {r.shutdown_date} ({said}): {days_text(r.days_left)}; {then}. "
        "Move the judge with evidence:"
    )


def retirement_section(result: Result) -> list[str]:
    """Markdown: the retirement line under the verdict, the command as code."""
    line = retirement_line(result)
    if line is None:
        return []
    return [f"**{escape(line)}** {code_id(MIGRATION)} (docs/PROVIDERS.md).", ""]


def calibration_section(result: Result) -> list[str]:
    """Markdown: the calibration lines under the verdict, slices as a short list."""
    lines = calibration_lines(result)
    if not lines:
        return []
    return [f"**{escape(lines[0])}**", *(f"- {escape(line)}" for line in lines[1:]), ""]


def batch_line(result: Result) -> str | None:
    """`gate run --batch`, plain text (each renderer escapes for its format): which batch, where it
    stands, and that the judgments after the controls are billed at the batch prices."""
    batch, cost = result.batch, result.cost
    if batch is None or not cost.batch:
        return None
    where = "collected" if batch.collected else f"{batch.status}, not collected yet"
    reserved = money(cost.batch_reserved or 0, cost.currency)
    return (
        f"Batch {batch.batch_id or '(being created)'} ({where}; {batch.lines} lines): the judgments after the "
        f"controls are billed at the batch prices; the cost boundary held {reserved} for it at submission."
    )


def not_needed_term(not_needed: int) -> str:
    """The counts line's term for a lane stopped when decided, so the sum still adds up:
    `17 eligible = 15 completed + ... + 1 not needed`. Empty when nothing was left out."""
    return f" + {not_needed} not needed" if not_needed else ""


# A case decided without being judged (not needed: a gating check or a stop decided the lane first).
NOT_JUDGED = "not judged (the verdict was decided without it)"


def human_text(label: str | None, audited: str | None = None) -> str:
    """A case's human label as said to a person: an application's answer people labelled in the audit
    says so (`fail (people's audit)`); one nobody labelled is `unlabelled`."""
    if label is None and audited is not None:
        return f"{audited} (people's audit)"
    return "unlabelled" if label is None else label


def people_labels(result: Result) -> dict[str, str]:
    """A product lane's answers people audited: case id -> their final label (pass or fail)."""
    found: dict[str, str] = {}
    if result.product is None:
        return found
    for s in result.product.slices.values():
        if s.zero_tolerance is not None:
            found.update({c: "fail" for c in (*s.zero_tolerance.confirmed, *s.zero_tolerance.missed)})
            found.update({c: "pass" for c in s.zero_tolerance.cleared})
        if s.audit is not None:
            found.update({c: "fail" for c in (*s.audit.confirmed_fail, *s.audit.missed_fail)})
            found.update({c: "pass" for c in s.audit.cleared_fail})
    return found


def shows_slice_table(result: Result) -> bool:
    """Whether the false-pass / false-fail table per slice says anything: a product lane's answers
    carry no human label, so its table is all zeros unless some answer errored, waits or was not run."""
    if not result.slices:
        return False
    if result.product is None:
        return True
    return any(any(t.written().get(k) for k in ("errors", "review", "unrun")) for t in result.slices.values())
