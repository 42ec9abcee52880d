"""Build the GitHub check-run payload from a `gate.model.result.Result`.

Pure: no I/O, no network. `gate.github.client` sends what this returns.

GitHub limits that shape the payload:
- `output.summary` and `output.text` are at most 65,535 BYTES each: longer ones are cut on a UTF-8
  boundary and end with a note pointing to the full report artifact;
- at most 50 annotations per request: the publisher sends the first 50 with the create call and
  appends the rest with later PATCH calls (see `annotation_batches`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gate.model import escape
from gate.model.money import money
from gate.model.owners import owner_text
from gate.model.states import State
from gate.model.textfit import fit_bytes
from gate.report.markdown import blockers_heading
from gate.report.product import product_section
from gate.report.sections import calibration_lines, retirement_section

if TYPE_CHECKING:
    from gate.model.result import Blocker, Result

MAX_OUTPUT_BYTES = 65_535
MAX_ANNOTATIONS_PER_REQUEST = 50
# A ceiling on annotations per check run, so that a run with thousands of blockers does not turn
# into dozens of PATCH calls; the summary and the report still list every blocker.
MAX_ANNOTATIONS_TOTAL = 500
MAX_TITLE_CHARS = 250
MAX_ANNOTATION_MESSAGE_CHARS = 4_000
MAX_LINE = 2**31 - 1  # annotation line numbers are 32-bit signed integers
ARTIFACT_HINT = "the full report is in the workflow run's `ragas-gate` artifact (report.md, result.json)"

CONCLUSIONS: dict[str, str] = {state.value: state.conclusion for state in State}
# How loud a blocker's annotation is, by the blocker's own state.
ANNOTATION_LEVELS: dict[str, str] = {
    "passed": "notice",
    "quality_failed": "failure",
    "evaluation_incomplete": "warning",
    "review_required": "warning",
}
_STATE_ORDER = ("quality_failed", "evaluation_incomplete", "review_required")


@dataclass(frozen=True)
class CheckRunPayload:
    name: str
    conclusion: str
    title: str
    summary: str
    text: str
    annotations: list[dict[str, Any]] = field(default_factory=list)

    def output(self, annotations: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        """The `output` object of a create/update request carrying these annotations."""
        out: dict[str, Any] = {"title": self.title, "summary": self.summary, "text": self.text}
        if annotations:
            out["annotations"] = [dict(a) for a in annotations]
        return out


def check_run_name(policy_id: str, lane: str) -> str:
    """`ragas-gate / <policy_id> / <lane>`: two lanes of one policy on one commit are two check runs."""
    return f"ragas-gate / {policy_id} / {escape.visible(lane, 100)}"


def conclusion_for(state: str) -> str:
    try:
        return CONCLUSIONS[state]
    except KeyError:
        raise ValueError(f"result.json: unknown state {state!r}; expected one of {sorted(CONCLUSIONS)}") from None


def trim_to_bytes(text: str, limit: int = MAX_OUTPUT_BYTES, *, hint: str = ARTIFACT_HINT) -> str:
    """`text` if it fits in `limit` UTF-8 bytes, else its head plus a note, all within `limit`."""
    return fit_bytes(text, limit, f"\n\n---\n_Trimmed to fit GitHub's {limit:,}-byte limit: {hint}._\n")


def annotation_batches(
    annotations: Sequence[Mapping[str, Any]], size: int = MAX_ANNOTATIONS_PER_REQUEST
) -> Iterator[list[Mapping[str, Any]]]:
    for start in range(0, len(annotations), size):
        yield list(annotations[start : start + size])


def _cell(value: object) -> str:
    return "" if value is None else escape.markdown(value)


def _ids(case_ids: Sequence[Any], limit: int = 20) -> str:
    shown = ", ".join(escape.code(c) for c in case_ids[:limit])
    more = len(case_ids) - limit
    return f"{shown} (+{more} more)" if more > 0 else shown


def _title(result: Result) -> str:
    blockers, unrun = result.blockers, result.unrun_case_ids
    parts: list[str] = [result.state]
    if blockers:
        parts.append(f"{len(blockers)} blocker{'s' if len(blockers) != 1 else ''}")
    if unrun:
        parts.append(f"{len(unrun)} unrun")
    parts.append(f"cost {money(result.cost.total, result.cost.currency)}")
    title = " · ".join(parts)
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1] + "…"


def _summary(result: Result) -> str:
    lines = [
        f"## {result.state} (exit {result.exit_code})",
        "",
        f"Policy {escape.code(result.policy_id)} version {escape.code(result.policy_version)}, "
        f"lane {escape.code(result.lane)}.",
        "",
    ]
    lines += retirement_section(result)  # the judge's model shuts down soon: said on the check run too
    calibration = calibration_lines(result)
    if calibration:
        lines += [escape.markdown(calibration[0]), "", *(f"- {escape.markdown(x)}" for x in calibration[1:]), ""]
    if result.blockers:
        # The owner column (as in report.md) when the policy routes blockers (`owners:`).
        owned = any(b.routed for b in result.blockers)
        columns = ["state", "kind", "slice", *(["owner"] if owned else []), "cases", "message"]
        lines += [f"### {blockers_heading(result)}", "", "| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
        ordered = sorted(result.blockers, key=lambda b: _STATE_ORDER.index(b.state) if b.state in _STATE_ORDER else 9)
        for b in ordered:
            ids = b.case_ids
            owner = f"{_cell(owner_text(b) or '')} | " if owned else ""
            lines.append(
                f"| {escape.code(b.state)} | {escape.code(b.kind)} | "
                f"{escape.code(b.slice) if b.slice else ''} "
                f"| {owner}{_ids(ids) if ids else ''} | {_cell(b.message)} |"
            )
        lines.append("")
    else:
        lines += ["No blockers.", ""]
    lines += product_section(result)

    counts = result.counts.written()
    lines += [
        "### Cases",
        "",
        ", ".join(f"{escape.code(k)}: {_cell(n)}" for k, n in counts.items()),
        "",
    ]

    cost = result.cost
    lines += [
        "### Cost",
        "",
        f"{money(cost.total, cost.currency)}; tokens in {cost.input_tokens}, out {cost.output_tokens}; "
        f"HTTP attempts {cost.http_attempts}, retries {cost.retries}, "
        f"cached calls {cost.cached_calls}.",
        "",
    ]

    unrun = result.unrun_case_ids
    lines += [f"### Unrun cases ({len(unrun)})", ""]
    lines.append(", ".join(escape.code(c) for c in unrun) if unrun else "None.")
    lines.append("")
    return "\n".join(lines)


def _location(blocker: Blocker, default_path: str) -> tuple[str, int]:
    """(path, line) for an annotation: the blocker's `location` ("file:line") when it has one.

    result.json is untrusted: a line GitHub cannot take (not ASCII digits, `:²` or `:١٢`, or outside
    1..2^31-1) is dropped (line 1 of the file), never the publish."""
    location = blocker.location
    if location:
        path, sep, line = location.rpartition(":")
        if sep and path and line.isdigit():  # Unicode digits too: those are a line, just not one to send
            number = int(line) if line.isascii() and len(line) <= len(str(MAX_LINE)) else 0
            return path, number if 1 <= number <= MAX_LINE else 1
        return location, 1
    return default_path, 1


def _annotations(result: Result, default_path: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in result.blockers:
        if len(out) >= MAX_ANNOTATIONS_TOTAL:
            break
        path, line = _location(b, default_path)
        ids = b.case_ids
        # GitHub refuses an annotation without a message (and the check run with it): result.json
        # is untrusted, so a blank message falls back to the kind, then to the state.
        message = next((t for t in (b.message, b.kind) if t.strip()), f"a {b.state} blocker with no message")
        owner = owner_text(b)
        if owner:
            message += f"\nOwner: {owner}"
        if ids:
            message += f"\nCases: {', '.join(ids)}"
        if len(message) > MAX_ANNOTATION_MESSAGE_CHARS:
            message = message[: MAX_ANNOTATION_MESSAGE_CHARS - 1] + "…"
        title = f"{b.state}: {b.kind}" + (f" ({b.slice})" if b.slice else "")
        out.append(
            {
                "path": path,
                "start_line": line,
                "end_line": line,
                "annotation_level": ANNOTATION_LEVELS[b.state],
                "title": title[:255],
                "message": message,
            }
        )
    return out


def build_check_run(
    result: Result,
    report_md: str,
    *,
    annotation_path: str = "result.json",
    artifact_hint: str = ARTIFACT_HINT,
) -> CheckRunPayload:
    """The check run for `result`.

    `annotation_path` is the repository path blockers without a `location` are pinned to (the
    policy file, when the caller knows it). `report_md` becomes the check run's `text`.
    """
    return CheckRunPayload(
        name=check_run_name(result.policy_id, result.lane),
        conclusion=conclusion_for(result.state),
        title=_title(result),
        summary=trim_to_bytes(_summary(result), hint=artifact_hint),
        text=trim_to_bytes(report_md, hint=artifact_hint),
        annotations=_annotations(result, annotation_path),
    )
