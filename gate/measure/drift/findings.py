"""What a drift run found: pass rates per slice (Wilson 95%), the change against the previous
drift result, and the cases to propose to people. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.measure.calibrate.stats import wilson
from gate.model.cases import Case
from gate.model.loading import sha256_hex
from gate.model.records import Record
from gate.model.traces import Trace
from gate.validate.minhash import jaccard, shingle_set

# A failing trace whose question shares less than this (Jaccard over 3-word shingles) with every
# gold case is a failure shape the dataset does not cover yet.
NEW_SHAPE_SIMILARITY = 0.5
SHINGLE_WORDS = 3


@dataclass(frozen=True)
class Verdict:
    trace_id: str
    slice: str
    label: str | None  # None: no verdict (error or unrun)
    reason: str | None
    input_sha256: str
    status: str
    error_kind: str | None


def verdicts(sample: Sequence[Case], records: Sequence[Record]) -> list[Verdict]:
    by_id = {r.case_id: r for r in records}
    out: list[Verdict] = []
    for case in sample:
        r = by_id.get(case.case_id)
        if r is None:
            out.append(Verdict(case.case_id, case.slice, None, None, "", "unrun", None))
            continue
        label = r.judge_label if r.status == "ok" else None
        out.append(Verdict(case.case_id, case.slice, label, r.judge_reason, r.input_sha256, r.status, r.error_kind))
    return out


def _rates(vs: Sequence[Verdict]) -> dict[str, Any]:
    passed = sum(1 for v in vs if v.label == "pass")
    failed = sum(1 for v in vs if v.label == "fail")
    return {
        "judged": sum(1 for v in vs if v.label is not None),
        "pass": passed,
        "fail": failed,
        "review": sum(1 for v in vs if v.label not in (None, "pass", "fail")),
        "errors": sum(1 for v in vs if v.status == "error"),
        "unrun": sum(1 for v in vs if v.status not in ("ok", "error")),
        # of the traces with a pass or fail verdict, the share that passed
        "pass_rate": wilson(passed, passed + failed).to_dict(),
    }


def pass_rates(vs: Sequence[Verdict]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Overall and per slice."""
    slices: dict[str, list[Verdict]] = {}
    for v in vs:
        slices.setdefault(v.slice, []).append(v)
    return _rates(vs), {name: _rates(group) for name, group in sorted(slices.items())}


def _value(rates: object) -> float | None:
    if not isinstance(rates, Mapping):
        return None
    rate = rates.get("pass_rate")
    value = rate.get("value") if isinstance(rate, Mapping) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def against_previous(
    overall: Mapping[str, Any],
    slices: Mapping[str, Mapping[str, Any]],
    previous: Mapping[str, Any] | None,
    problem: str | None = None,
) -> dict[str, Any]:
    """Per slice and overall: the previous pass rate and the change (None where either is unknown)."""
    if previous is None:
        return {"compared": False, **({"note": problem} if problem else {})}
    prev_slices = previous.get("slices")
    prev_slices = prev_slices if isinstance(prev_slices, Mapping) else {}

    def change(now: object, before: object) -> dict[str, Any]:
        a, b = _value(now), _value(before)
        return {
            "pass_rate": before.get("pass_rate") if isinstance(before, Mapping) else None,
            "change": None if a is None or b is None else a - b,
        }

    return {
        "compared": True,
        "generated_from": previous.get("traces_sha256"),
        "overall": change(overall, previous.get("overall")),
        "slices": {name: change(slices.get(name), prev_slices.get(name)) for name in sorted({*slices, *prev_slices})},
    }


def _previous_verdicts(previous: Mapping[str, Any] | None) -> dict[str, tuple[str, str]]:
    """trace id -> (input sha256, label) of the previous run's completed verdicts."""
    out: dict[str, tuple[str, str]] = {}
    rows = previous.get("judgments") if previous is not None else None
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, Mapping):
            continue
        tid, sha, label = row.get("trace_id"), row.get("input_sha256"), row.get("verdict")
        if isinstance(tid, str) and isinstance(sha, str) and isinstance(label, str):
            out[tid] = (sha, label)
    return out


def proposals(
    vs: Sequence[Verdict],
    traces: Mapping[str, Trace],
    gold: Sequence[Case],
    previous: Mapping[str, Any] | None,
    clear_text: bool = True,
) -> list[dict[str, Any]]:
    """Traces people should label for a future dataset version, with why.

    - `disagreement`: the same trace, the same rendered input, another verdict than the last run
      (the judge moved, or sits on a boundary);
    - `new_failure_shape`: a failing trace whose question resembles no gold case.

    Without `clear_text` (the policy's `records.clear_text: false`) a proposal names its trace by id
    and hashes, never copying its text into an artifact: people read it in the traces file.
    """
    before = _previous_verdicts(previous)
    gold_shingles = [shingle_set(c.user_input, SHINGLE_WORDS) for c in gold]
    out: list[dict[str, Any]] = []
    for v in vs:
        if v.label is None:
            continue
        whys: list[str] = []
        prior = before.get(v.trace_id)
        if prior is not None and prior[0] == v.input_sha256 and prior[1] != v.label:
            whys.append("disagreement")
        if v.label == "fail":
            mine = shingle_set(traces[v.trace_id].user_input, SHINGLE_WORDS)
            closest = max((jaccard(mine, g) for g in gold_shingles), default=0.0)
            if closest < NEW_SHAPE_SIMILARITY:
                whys.append("new_failure_shape")
        if whys:
            out.append(_proposal(v, traces[v.trace_id], whys, prior[1] if prior else None, clear_text))
    return out


def _proposal(
    v: Verdict, trace: Trace, whys: list[str], previous_label: str | None, clear_text: bool
) -> dict[str, Any]:
    text: dict[str, Any] = {
        "user_input": trace.user_input,
        "response": trace.response,
        "retrieved_contexts": trace.retrieved_contexts,
    }
    if not clear_text:  # `records: {clear_text: false}`: the text stays in the traces file, by trace_id
        contexts = trace.retrieved_contexts
        text = {
            "user_input_sha256": sha256_hex(trace.user_input),
            "retrieved_contexts_sha256": None if contexts is None else sha256_hex("\n\n".join(contexts)),
        }
    return {
        "trace_id": v.trace_id,
        "why": whys,
        "slice": v.slice,
        "judge_label": v.label,
        "judge_reason": v.reason,
        "previous_label": previous_label,
        **text,
        "response_sha256": sha256_hex(trace.response),
        # What people add before it can join a future dataset version (never this one).
        "needs": ["independent human_adjudication", "reference", "partition", "rubric_version", "privacy review"],
    }
