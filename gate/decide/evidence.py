"""The evidence a decision rests on: vetted, current records reduced to one frozen outcome per case.

Pure: `prepare_evidence` turns the untrusted records of a run into an `Evidence` value that the
rule functions (gate/decide/rules.py) read and never change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.judge.render import RenderError, render_case
from gate.judge.vetting import conflicting_verdicts, vet_records
from gate.model.cases import Case
from gate.model.fingerprint import UNKNOWN, policy_components, record_components, shown_value, stale_component
from gate.model.policy import LoadedPolicy, Policy
from gate.model.records import Record, majority
from gate.model.states import Finding, blocking_findings
from gate.model.wording import listed, plural
from gate.plan.selection import Plan

# Errors that mean "not judged" rather than "the evaluator failed on this case".
UNRUN_ERROR_KINDS = frozenset({"budget", "cancelled"})

OUTCOMES = (
    "true_pass",
    "true_fail",
    "false_pass",
    "false_fail",
    "error",
    "review",
    "unrun",
    "withheld",
    # A product lane's answer (no human label): what the judge said, nothing to agree with.
    "judged_pass",
    "judged_fail",
)


@dataclass(frozen=True)
class CaseOutcome:
    case: Case
    bucket: str  # completed | errored | withheld | unrun
    verdict: str | None = None
    outcome: str = "unrun"  # one of OUTCOMES
    reason: str | None = None
    error_kind: str | None = None
    error_message: str | None = None
    labels: tuple[str | None, ...] = ()
    unstable: bool = False
    needs_review: bool = False
    called_model: bool = False
    # A product lane's answer: the sha256 of the response its records judged (people's audit labels name it).
    response_sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {
            "case_id": c.case_id,
            "slice": c.slice,
            "partition": c.partition,
            "control_role": c.expected_control_role,
            "human_label": c.human_label,
            "verdict": self.verdict,
            "labels": list(self.labels),
            "bucket": self.bucket,
            "outcome": self.outcome,
            "reason": self.reason,
            "error_kind": self.error_kind,
            "error_message": self.error_message,
            "unstable": self.unstable,
            "review": self.needs_review,
        }


@dataclass(frozen=True)
class Evidence:
    """What every rule reads: the policy, the plan, the inputs' findings and the case outcomes."""

    policy: Policy
    plan: Plan
    findings: tuple[Finding, ...]  # what the checks before judging found (validators, checks, shards)
    records: tuple[Record, ...]  # every vetted record of an eligible case: cost counts each line
    fresh: tuple[Record, ...]  # those judged under this policy's configuration
    best: Mapping[tuple[str, int], Record]  # the record that counts per (case, repeat)
    outcomes: tuple[CaseOutcome, ...]  # one per eligible case, in plan order
    stale: Mapping[str, str]  # case id -> why its records are not evidence for this policy
    blocked: bool  # deterministic findings stopped the run before any model call
    boundary: float  # the cost boundary the run was held to
    notes: tuple[str, ...]


def prepare_evidence(
    loaded: LoadedPolicy,
    plan: Plan,
    findings: Sequence[Finding],
    records: Sequence[Record],
    *,
    fingerprint: str,
    boundary: float,
    notes: Sequence[str],
) -> Evidence:
    """Vet the records, set stale ones aside, pick the record that counts and classify each case.

    Records are untrusted: an `ok` line outside the contract is an evaluator error, and the case
    file (not the record) is the answer key. Cost still counts every line.
    """
    eligible_ids = set(plan.eligible_ids)
    vetted = vet_records(
        [r for r in records if r.case_id in eligible_ids],
        loaded.policy.metric,
        {c.case_id: c for c in plan.eligible},
        plan.repeats,
    )
    fresh, stale = split_stale(vetted.records, loaded, plan, fingerprint)
    best = best_records(fresh)
    blocked = bool(blocking_findings(findings))
    withheld_ids = {c.case_id for c in plan.withheld}
    by_shard = control_records_by_shard(fresh)
    outcomes = tuple(
        control_outcome(c, plan, by_shard[c.case_id], blocked, withheld_ids)
        if c.case_id in by_shard
        else classify(c, plan, best, blocked, withheld_ids)
        for c in plan.eligible
    )
    conflicted = conflicting_verdicts(fresh)
    conflict_notes = [conflict_note(conflicted)] if conflicted else []
    return Evidence(
        policy=loaded.policy,
        plan=plan,
        findings=tuple(findings),
        records=tuple(vetted.records),
        fresh=tuple(fresh),
        best=best,
        outcomes=without_verdict(outcomes, set(conflicted)),
        stale=stale,
        blocked=blocked,
        boundary=boundary,
        notes=(*notes, *vetted.notes, *conflict_notes),
    )


def split_stale(
    records: Sequence[Record], loaded: LoadedPolicy, plan: Plan, fingerprint: str
) -> tuple[list[Record], dict[str, str]]:
    """The records that are evidence for this policy, and why each other case's are not.

    Evidence counts only for the configuration that produced it: a record judged under another
    model, metric version or rendered prompt says nothing about this policy (its cost still counts).
    `fingerprint` is the configuration the records must share: the live judge's on a run, the one
    most records carry on `gate decide` and `gate merge` (gate.model.fingerprint; no environment).
    """
    current = _current_prompts(loaded, plan)
    policy = policy_components(loaded)
    reference = next((r for r in reversed(records) if fingerprint and r.config_fingerprint == fingerprint), None)
    shared = record_components(reference) if reference is not None else None
    stale: dict[str, str] = {}
    fresh: list[Record] = []
    for r in records:
        why = _staleness(r, policy, current.get(r.case_id), fingerprint, shared)
        if why:
            stale.setdefault(r.case_id, why)
        else:
            fresh.append(r)
    return fresh, stale


def _current_prompts(loaded: LoadedPolicy, plan: Plan) -> dict[str, str]:
    """sha256 of the prompt each eligible case renders to now (cases that cannot render: none)."""
    out: dict[str, str] = {}
    for c in plan.eligible:
        try:
            out[c.case_id] = render_case(loaded.prompt_text, loaded.placeholders, c).prompt_sha256
        except RenderError:
            continue
    return out


def _staleness(
    r: Record,
    policy: dict[str, object],
    prompt_sha256: str | None,
    fingerprint: str,
    shared: dict[str, object] | None,
) -> str | None:
    """Why a record cannot be evidence for this policy (the first differing component, both
    values), or None when it can."""
    recorded = record_components(r)
    for name in ("policy_id", "metric_version"):
        if recorded[name] is not UNKNOWN and recorded[name] != policy[name]:
            return f"{name}: {shown_value(recorded[name])} vs {shown_value(policy[name])} (recorded vs the policy's)"
    same_template = recorded["prompt"] is UNKNOWN or recorded["prompt"] == policy["prompt"]
    if same_template and r.prompt_sha256 and prompt_sha256 and r.prompt_sha256 != prompt_sha256:
        return (
            f"inputs: rendered prompt {shown_value(r.prompt_sha256)} vs {shown_value(prompt_sha256)} "
            "(the case's rendered fields changed)"
        )
    against_policy = stale_component(recorded, policy)
    if against_policy:
        return f"{against_policy} (recorded vs the policy's)"
    if not r.config_fingerprint or not fingerprint or r.config_fingerprint == fingerprint:
        return None
    among = stale_component(recorded, shared) if shared is not None else None
    if among:
        return f"{among} (vs the configuration the other records were judged under)"
    return (
        f"config_fingerprint: {shown_value(r.config_fingerprint)} vs {shown_value(fingerprint)} (same prompt, model, "
        "host and settings: the base URL's scheme, port or path, or the metric's name, differs)"
    )


def best_records(records: Iterable[Record]) -> dict[tuple[str, int], Record]:
    """One record per (case, repeat): an ok judgment beats an error beats a skip; later beats earlier.

    A resumed run appends new records after old ones; the evidence that completed is what counts,
    while every paid attempt still counts in cost (see `cost_summary`).
    """
    rank = {"ok": 2, "error": 1, "skipped": 0}
    best: dict[tuple[str, int], Record] = {}
    for r in records:
        k = (r.case_id, r.repeat_index)
        cur = best.get(k)
        if cur is None or rank[r.status] > rank[cur.status]:
            best[k] = r
        elif rank[r.status] == rank[cur.status] and not _failed_control(cur):
            # Records that do not say their shard (a merged records.jsonl from before they did): a
            # control repeat that failed in any shard stays failed (shards: `control_outcome`).
            best[k] = r
    return best


ShardKey = tuple[int, int]


def control_records_by_shard(records: Iterable[Record]) -> dict[str, dict[ShardKey | None, list[Record]]]:
    """The records of each control judged in more than one shard (a merge's), by the shard that
    made them (`None`: a record that does not say)."""
    found: dict[str, dict[ShardKey | None, list[Record]]] = {}
    for r in records:
        if r.control_role is not None:
            key = (r.shard.index, r.shard.count) if r.shard is not None else None
            found.setdefault(r.case_id, {}).setdefault(key, []).append(r)
    return {case_id: groups for case_id, groups in found.items() if len(groups) > 1}


def control_outcome(
    case: Case,
    plan: Plan,
    groups: Mapping[ShardKey | None, Sequence[Record]],
    blocked: bool,
    withheld_ids: set[str],
) -> CaseOutcome:
    """A control judged in several shards: each shard's verdict is its majority over its own repeats,
    as that shard's run decided; it fails the merge when it failed (or erred) in any shard, and a
    shard that completed it stands for one that did not get to it (a cancelled job)."""
    per_shard = [
        classify(case, plan, best_records(records), blocked, withheld_ids)
        for _, records in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or (0, 0)))
    ]
    completed = [o for o in per_shard if o.bucket == "completed"]
    failed = [o for o in completed if o.verdict != case.human_label]
    errored = [o for o in per_shard if o.bucket == "errored"]
    return (failed or errored or completed or per_shard)[0]


def _failed_control(r: Record) -> bool:
    return r.status == "ok" and r.control_role is not None and r.judge_label != r.human_label


def classify(
    case: Case, plan: Plan, recs: Mapping[tuple[str, int], Record], blocked: bool, withheld_ids: set[str]
) -> CaseOutcome:
    """The outcome of one case from the records that count for its repeats."""
    judged = [recs[(case.case_id, i)] for i in range(plan.repeats) if (case.case_id, i) in recs]
    called = any(r.attempts for r in judged)
    if blocked:
        return CaseOutcome(case, "unrun", called_model=called)
    if case.case_id in withheld_ids and not judged:
        return CaseOutcome(case, "withheld", outcome="withheld")
    errored = [r for r in judged if r.status == "error" and r.error_kind not in UNRUN_ERROR_KINDS]
    if errored:
        first = errored[0]
        return CaseOutcome(
            case,
            "errored",
            outcome="error",
            error_kind=first.error_kind,
            error_message=first.error_message,
            labels=tuple(r.judge_label for r in judged),
            called_model=called,
        )
    oks = [r for r in judged if r.status == "ok"]
    if len(oks) < plan.repeats:
        return CaseOutcome(
            case,
            "unrun",
            error_kind=next((r.error_kind for r in judged if r.status != "ok"), None),
            error_message=next((r.error_message for r in judged if r.status != "ok"), None),
            called_model=called,
        )
    return _completed(case, sorted(oks, key=lambda r: r.repeat_index), called)


def _completed(case: Case, oks: Sequence[Record], called: bool) -> CaseOutcome:
    """A case every repeat judged: the majority verdict against the human label."""
    labels = [r.judge_label or "" for r in oks]
    verdict = majority(labels)
    unstable = len(set(labels)) > 1
    reason = next((r.judge_reason for r in oks if r.judge_label == verdict), oks[0].judge_reason)
    human = case.human_label
    review = verdict is None or verdict == "review_required" or human == "review_required"
    if review:
        outcome = "review"
    elif human is None:
        outcome = "judged_pass" if verdict == "pass" else "judged_fail"
    elif human == "pass":
        outcome = "true_pass" if verdict == "pass" else "false_fail"
    else:
        outcome = "true_fail" if verdict == "fail" else "false_pass"
    return CaseOutcome(
        case,
        "completed",
        verdict=verdict,
        outcome=outcome,
        reason=reason,
        labels=tuple(labels),
        unstable=unstable,
        needs_review=review or unstable,
        called_model=called,
        response_sha256=oks[0].response_sha256,
    )


def conflict_note(conflicted: Sequence[str]) -> str:
    shown = listed(conflicted, 5)
    return (
        f"records of the same judgment disagree for {plural(len(conflicted), 'case')} ({shown}): runs were mixed or a file "
        "was edited; a person decides"
    )


def without_verdict(outcomes: Iterable[CaseOutcome], conflicted: set[str]) -> tuple[CaseOutcome, ...]:
    """Completed cases whose records disagree lose their verdict: neither may count as a pass or a
    fail in the slice tallies, and a person decides."""
    return tuple(
        dataclasses.replace(o, verdict=None, outcome="review", unstable=True, needs_review=True)
        if o.case.case_id in conflicted and o.bucket == "completed"
        else o
        for o in outcomes
    )
