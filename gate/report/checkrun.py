"""Build the GitHub check-run payload from a result.json dict (SPEC section 5).

Pure: no I/O, no network. `gate.github` sends what this returns.

GitHub limits that shape the payload:
- `output.summary` and `output.text` are at most 65,535 BYTES each: longer ones are cut on a UTF-8
  boundary and end with a note pointing to the full report artifact;
- at most 50 annotations per request: the publisher sends the first 50 with the create call and
  appends the rest with later PATCH calls (see `annotation_batches`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate import escape
from gate.states import State
from gate.textfit import fit_bytes

MAX_OUTPUT_BYTES = 65_535
MAX_ANNOTATIONS_PER_REQUEST = 50
# A ceiling on annotations per check run, so that a run with thousands of blockers does not turn
# into dozens of PATCH calls; the summary and the report still list every blocker.
MAX_ANNOTATIONS_TOTAL = 500
MAX_TITLE_CHARS = 250
MAX_ANNOTATION_MESSAGE_CHARS = 4_000
ARTIFACT_HINT = "the full report is in the workflow run's `ragas-gate` artifact (report.md, result.json)"

CONCLUSIONS: dict[str, str] = {state.value: state.conclusion for state in State}
# How loud a blocker's annotation is, by the blocker's own state.
ANNOTATION_LEVELS: dict[str, str] = {
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


def check_run_name(policy_id: str) -> str:
    return f"ragas-gate / {policy_id}"


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


def format_cost(cost: Mapping[str, Any]) -> str:
    """Display-only rounding of `cost.total` (result.json keeps it unrounded)."""
    total = float(cost.get("total") or 0.0)
    currency = str(cost.get("currency") or "USD")
    return f"{total:.4f} {currency}"


def _cell(value: object) -> str:
    return "" if value is None else escape.markdown(value)


def _ids(case_ids: Sequence[Any], limit: int = 20) -> str:
    shown = ", ".join(escape.code(c) for c in case_ids[:limit])
    more = len(case_ids) - limit
    return f"{shown} (+{more} more)" if more > 0 else shown


def _title(result: Mapping[str, Any]) -> str:
    state = str(result["state"])
    blockers = result.get("blockers") or []
    unrun = result.get("unrun_case_ids") or []
    parts = [state]
    if blockers:
        parts.append(f"{len(blockers)} blocker{'s' if len(blockers) != 1 else ''}")
    if unrun:
        parts.append(f"{len(unrun)} unrun")
    parts.append(f"cost {format_cost(result.get('cost') or {})}")
    title = " · ".join(parts)
    return title if len(title) <= MAX_TITLE_CHARS else title[: MAX_TITLE_CHARS - 1] + "…"


def _summary(result: Mapping[str, Any]) -> str:
    state = str(result["state"])
    lines = [
        f"## {state} (exit {result.get('exit_code')})",
        "",
        f"Policy {escape.code(result.get('policy_id'))} version {escape.code(result.get('policy_version'))}, "
        f"lane {escape.code(result.get('lane'))}.",
        "",
    ]
    blockers: list[Mapping[str, Any]] = list(result.get("blockers") or [])
    if blockers:
        lines += ["### Blockers", "", "| state | kind | slice | cases | message |", "|---|---|---|---|---|"]
        ordered = sorted(
            blockers,
            key=lambda b: _STATE_ORDER.index(b["state"]) if b.get("state") in _STATE_ORDER else 9,
        )
        for b in ordered:
            ids = list(b.get("case_ids") or [])
            lines.append(
                f"| {escape.code(b.get('state'))} | {escape.code(b.get('kind'))} | "
                f"{escape.code(b['slice']) if b.get('slice') else ''} "
                f"| {_ids(ids) if ids else ''} | {_cell(b.get('message'))} |"
            )
        lines.append("")
    else:
        lines += ["No blockers.", ""]

    counts: Mapping[str, Any] = result.get("counts") or {}
    if counts:
        lines += [
            "### Cases",
            "",
            ", ".join(f"{escape.code(k)}: {_cell(counts[k])}" for k in counts),
            "",
        ]

    cost: Mapping[str, Any] = result.get("cost") or {}
    lines += [
        "### Cost",
        "",
        f"{format_cost(cost)}; tokens in {cost.get('input_tokens', 0)}, out {cost.get('output_tokens', 0)}; "
        f"HTTP attempts {cost.get('http_attempts', 0)}, retries {cost.get('retries', 0)}, "
        f"cached calls {cost.get('cached_calls', 0)}.",
        "",
    ]

    unrun = list(result.get("unrun_case_ids") or [])
    lines += [f"### Unrun cases ({len(unrun)})", ""]
    lines.append(", ".join(escape.code(c) for c in unrun) if unrun else "None.")
    lines.append("")
    return "\n".join(lines)


def _location(blocker: Mapping[str, Any], default_path: str) -> tuple[str, int]:
    """(path, line) for an annotation: the blocker's `location` ("file:line") when it has one."""
    location = blocker.get("location")
    if isinstance(location, str) and location:
        path, sep, line = location.rpartition(":")
        if sep and path and line.isdigit() and int(line) > 0:
            return path, int(line)
        return location, 1
    return default_path, 1


def _annotations(result: Mapping[str, Any], default_path: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for b in result.get("blockers") or []:
        if len(out) >= MAX_ANNOTATIONS_TOTAL:
            break
        path, line = _location(b, default_path)
        ids = [str(c) for c in b.get("case_ids") or []]
        message = str(b.get("message") or b.get("kind"))
        if ids:
            message += f"\nCases: {', '.join(ids)}"
        if len(message) > MAX_ANNOTATION_MESSAGE_CHARS:
            message = message[: MAX_ANNOTATION_MESSAGE_CHARS - 1] + "…"
        slice_name = b.get("slice")
        title = f"{b.get('state')}: {b.get('kind')}" + (f" ({slice_name})" if slice_name else "")
        out.append(
            {
                "path": path,
                "start_line": line,
                "end_line": line,
                "annotation_level": ANNOTATION_LEVELS.get(str(b.get("state")), "notice"),
                "title": title[:255],
                "message": message,
            }
        )
    return out


def build_check_run(
    result: Mapping[str, Any],
    report_md: str,
    *,
    annotation_path: str = "result.json",
    artifact_hint: str = ARTIFACT_HINT,
) -> CheckRunPayload:
    """The check run for `result` (a parsed result.json).

    `annotation_path` is the repository path blockers without a `location` are pinned to (the
    policy file, when the caller knows it). `report_md` becomes the check run's `text`.
    """
    state = str(result["state"])
    policy_id = str(result["policy_id"])
    return CheckRunPayload(
        name=check_run_name(policy_id),
        conclusion=conclusion_for(state),
        title=_title(result),
        summary=trim_to_bytes(_summary(result), hint=artifact_hint),
        text=trim_to_bytes(report_md, hint=artifact_hint),
        annotations=_annotations(result, annotation_path),
    )
