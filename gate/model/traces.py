"""Production traces: the file, the fixed-seed sample, and the reference-free prompt."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gate.model.cases import Adjudication, Case
from gate.model.errors import PolicyError, UsageError
from gate.model.loading import FileProblem, open_binary, read_run_json, resolve_inside, sha256_hex
from gate.model.policy import LEAKING_FIELDS, Drift, LoadedPolicy, prompt_placeholders, read_policy_file

DRIFT_LANE = "scheduled"
DRIFT_PARTITION = "drift"
# What a production trace carries: no human label and no reference.
TRACE_FIELDS: frozenset[str] = frozenset({"user_input", "response", "retrieved_contexts"})
MAX_BAD_LINES_SHOWN = 5


class Trace(BaseModel):
    """One production trace. Unknown keys (timestamps, ids of the serving stack) are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    trace_id: str = Field(pattern=r"^[A-Za-z0-9._:/-]{1,200}$")
    user_input: str = Field(min_length=1)
    response: str = Field(min_length=1)
    retrieved_contexts: list[str] | None = None
    slice: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._:/-]{1,200}$")


class TraceCase(Case):
    """A trace in the shape the judge renders: `retrieved_contexts` joined into one text."""

    retrieved_contexts: str | None = None


@dataclass(frozen=True)
class TraceFile:
    traces: tuple[Trace, ...]
    sha256: str
    bad_lines: tuple[str, ...]  # "file:line: why", for the report


def drift_config(loaded: LoadedPolicy) -> Drift:
    drift = loaded.policy.drift
    if drift is None:
        raise UsageError(f"{loaded.path}: the policy has no `drift:` section; fix: add one to run the drift lane")
    return drift


def load_traces(loaded: LoadedPolicy) -> TraceFile:
    """Read the trace file; a malformed line is skipped and listed, a file with none usable is refused."""
    drift = drift_config(loaded)
    try:
        path = resolve_inside(loaded.base_dir, drift.traces, "drift.traces")
        handle = open_binary(path, "trace file (`drift.traces`)")
    except FileProblem as exc:
        raise UsageError(f"{loaded.path}: {exc.message}") from None
    traces: list[Trace] = []
    bad: list[str] = []
    seen: set[str] = set()
    raw = b""
    with handle:
        for lineno, line in enumerate(handle, start=1):
            raw += line
            if not line.strip():
                continue
            where = f"{drift.traces}:{lineno}"
            try:
                trace = Trace.model_validate_json(line)
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(p) for p in first["loc"]) or "(line)"
                bad.append(f"{where}: `{loc}` {first['msg']}")
                continue
            if trace.trace_id in seen:
                bad.append(f"{where}: trace_id {trace.trace_id} appears again; the first is kept")
                continue
            seen.add(trace.trace_id)
            traces.append(trace)
    if not traces:
        shown = "; ".join(bad[:MAX_BAD_LINES_SHOWN]) or "the file is empty"
        raise UsageError(
            f"{path}: no usable trace ({shown}); fix: one JSON object per line with trace_id, user_input, response"
        )
    return TraceFile(traces=tuple(traces), sha256=sha256_hex(raw), bad_lines=tuple(bad))


def draw_sample(traces: tuple[Trace, ...], size: int, seed: int) -> list[Trace]:
    """The same file and seed always draw the same traces, listed by trace id."""
    ordered = sorted(traces, key=lambda t: t.trace_id)
    if size >= len(ordered):
        return ordered
    return sorted(random.Random(seed).sample(ordered, size), key=lambda t: t.trace_id)


def as_case(trace: Trace, default_slice: str) -> TraceCase:
    contexts = "\n\n".join(trace.retrieved_contexts) if trace.retrieved_contexts else None
    return TraceCase(
        case_id=trace.trace_id,
        partition=DRIFT_PARTITION,
        slice=trace.slice or default_slice,
        rubric_version="",
        user_input=trace.user_input,
        response=trace.response,
        retrieved_contexts=contexts,
        human_adjudication=Adjudication(label=""),  # production traces carry no human label
    )


def drift_policy(loaded: LoadedPolicy) -> LoadedPolicy:
    """The policy the drift lane judges with: its own reference-free prompt, or the metric's.

    A prompt that needs `{reference}` is refused (exit 2), naming the placeholder: a trace has none.
    """
    drift = drift_config(loaded)
    if drift.prompt_file is not None:
        what = "drift prompt file (`drift.prompt_file`)"
        template = read_policy_file(str(loaded.path), loaded.base_dir, drift.prompt_file, "drift.prompt_file", what)
        where = f"`drift.prompt_file` ({drift.prompt_file})"
    elif drift.prompt is not None:
        template, where = drift.prompt, "`drift.prompt`"
    else:
        template = loaded.prompt_text
        where = f"the metric's prompt (`metric.{'prompt_file' if loaded.policy.metric.prompt_file else 'prompt'}`)"
    names, problems = prompt_placeholders(template)
    if "reference" in names:
        raise PolicyError(
            str(loaded.path),
            [
                f"{where} uses the placeholder `{{reference}}`, but the drift lane judges production traces, which "
                "carry no reference; fix: give `drift.prompt_file` a reference-free prompt that judges the response "
                "against `{retrieved_contexts}` and `{user_input}`"
            ],
        )
    # `retrieved_contexts` is a trace field the gold-case prompt rules do not know; everything else
    # (no label leak, no format spec, `{response}` required) holds as for the metric.
    problems = [p for p in problems if "`{retrieved_contexts}`" not in p]
    unknown = [n for n in names if n not in TRACE_FIELDS and n not in LEAKING_FIELDS]
    problems += [f"placeholder `{{{n}}}` is not a trace field; fix: use only {sorted(TRACE_FIELDS)}" for n in unknown]
    if problems:
        raise PolicyError(str(loaded.path), [f"{where}: {p}" for p in problems])
    return dataclasses.replace(
        loaded, prompt_text=template, placeholders=tuple(names), prompt_sha256=sha256_hex(template)
    )


def previous_drift(base: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The drift.json of a previous drift run (its --out dir or the file), or why there is none.

    Never an error: the previous run only adds the change and the disagreements.
    """
    try:
        return read_run_json(base, "drift.json", "previous drift result"), None
    except FileProblem as exc:
        return None, exc.message
