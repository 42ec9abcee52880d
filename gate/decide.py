"""The decision: a pure function from policy, plan, findings and records to a result.

No I/O, no clock (today is an argument), no model. `gate run` and `gate decide` both end here,
so re-applying a policy to recorded runs gives the same result the run gave.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.cases import Case
from gate.judge.render import RenderError, render_case
from gate.overrides import apply_overrides
from gate.owners import route
from gate.plan import Plan
from gate.policy import LoadedPolicy, Owners
from gate.record_vetting import conflicting_verdicts, vet_records
from gate.records import Record
from gate.states import Finding, State, overall_state
from gate.strata import weigh

RESULT_SCHEMA_VERSION = 1

# Validator findings of these kinds stop the run before any model call (SPEC section 8).
DETERMINISTIC_BLOCKERS = frozenset(
    {"input_contract", "unknown_slice", "partition_leak", "control_missing", "held_out_spent"}
)
# Errors that mean "not judged" rather than "the evaluator failed on this case".
UNRUN_ERROR_KINDS = frozenset({"budget", "cancelled"})

OUTCOMES = ("true_pass", "true_fail", "false_pass", "false_fail", "error", "review", "unrun", "withheld")


@dataclass(frozen=True)
class Lineage:
    policy_sha256: str
    dataset_sha256: str
    prompt_sha256: str
    metric_version: str
    evaluator_model: str
    ragas_version: str
    gate_version: str
    metric_definition_sha256: str = ""  # gate.rollback.metric_definition_sha256
    config_fingerprint: str = ""  # gate.fingerprint of the judge this policy makes now
    dataset_card_sha256: str = ""  # gate.dataset_card; "" when the policy names no card

    def to_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass
class CaseOutcome:
    case: Case
    bucket: str  # completed | errored | withheld | unrun
    verdict: str | None = None
    outcome: str = "unrun"  # one of OUTCOMES
    reason: str | None = None
    error_kind: str | None = None
    error_message: str | None = None
    labels: list[str | None] = field(default_factory=list)
    unstable: bool = False
    needs_review: bool = False
    called_model: bool = False

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {
            "case_id": c.case_id,
            "slice": c.slice,
            "partition": c.partition,
            "control_role": c.expected_control_role,
            "human_label": c.human_label,
            "verdict": self.verdict,
            "labels": self.labels,
            "bucket": self.bucket,
            "outcome": self.outcome,
            "reason": self.reason,
            "error_kind": self.error_kind,
            "error_message": self.error_message,
            "unstable": self.unstable,
            "review": self.needs_review,
        }


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
            # Controls run in every shard of a merge: a control that failed anywhere stays failed.
            best[k] = r
    return best


def _failed_control(r: Record) -> bool:
    return r.status == "ok" and r.control_role is not None and r.judge_label != r.human_label


def majority(labels: Sequence[str]) -> str | None:
    counts = Counter(labels).most_common()
    if not counts:
        return None
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None
    return counts[0][0]


def classify(case: Case, plan: Plan, recs: dict[tuple[str, int], Record], blocked: bool) -> CaseOutcome:
    withheld_ids = {c.case_id for c in plan.withheld}
    judged = [recs[(case.case_id, i)] for i in range(plan.repeats) if (case.case_id, i) in recs]
    called = any(r.attempts for r in judged)
    if blocked:
        return CaseOutcome(case, "unrun", called_model=called)
    if case.case_id in withheld_ids and not judged:
        return CaseOutcome(case, "withheld", outcome="withheld")
    errored = [r for r in judged if r.status == "error" and r.error_kind not in UNRUN_ERROR_KINDS]
    oks = [r for r in judged if r.status == "ok"]
    if errored:
        first = errored[0]
        return CaseOutcome(
            case,
            "errored",
            outcome="error",
            error_kind=first.error_kind,
            error_message=first.error_message,
            labels=[r.judge_label for r in judged],
            called_model=called,
        )
    if len(oks) < plan.repeats:
        unrun_kinds = [r.error_kind for r in judged if r.status != "ok"]
        return CaseOutcome(
            case,
            "unrun",
            error_kind=unrun_kinds[0] if unrun_kinds else None,
            error_message=next((r.error_message for r in judged if r.status != "ok"), None),
            called_model=called,
        )
    labels = [r.judge_label or "" for r in sorted(oks, key=lambda r: r.repeat_index)]
    verdict = majority(labels)
    unstable = len(set(labels)) > 1
    reason = next((r.judge_reason for r in oks if r.judge_label == verdict), oks[0].judge_reason)
    out = CaseOutcome(
        case,
        "completed",
        verdict=verdict,
        reason=reason,
        labels=list(labels),
        unstable=unstable,
        called_model=called,
    )
    human = case.human_label
    if verdict is None or verdict == "review_required" or human == "review_required":
        out.outcome = "review"
        out.needs_review = True
    elif human == "pass":
        out.outcome = "true_pass" if verdict == "pass" else "false_fail"
    else:
        out.outcome = "true_fail" if verdict == "fail" else "false_pass"
    if unstable:
        out.needs_review = True
    return out


def cost_summary(records: Sequence[Record], currency: str) -> dict[str, Any]:
    by_slice: dict[str, float] = defaultdict(float)
    total = 0.0
    for r in records:
        total += r.cost
        by_slice[r.slice] += r.cost
    return {
        "total": total,
        "currency": currency,
        "input_tokens": sum(r.input_tokens for r in records),
        "output_tokens": sum(r.output_tokens for r in records),
        "http_attempts": sum(len(r.attempts) for r in records),
        "retries": sum(r.retries for r in records),
        "cached_calls": sum(1 for r in records if r.cache == "hit"),
        # Sent but never answered (timeout, dropped, interrupted): no usage was reported, so they
        # add nothing to `total`, but a provider may still bill them.
        "unanswered_attempts": sum(1 for r in records for a in r.attempts if a.status_code is None),
        # Answered without `usage` (SPEC 8): each keeps its whole reservation as spent.
        "usage_missing": sum(1 for r in records for a in r.attempts if a.usage_missing),
        # What the cost boundary counted: `total` plus the reservations kept for the two kinds above.
        "budget_spent": total + sum(a.held for r in records for a in r.attempts),
        "over_reservation": sum(1 for r in records for a in r.attempts if a.over_reservation),
        "by_slice": dict(sorted(by_slice.items())),
    }


def _current_prompts(loaded: LoadedPolicy, plan: Plan) -> dict[str, str]:
    """sha256 of the prompt each eligible case renders to now (cases that cannot render: none)."""
    out: dict[str, str] = {}
    for c in plan.eligible:
        try:
            out[c.case_id] = render_case(loaded.prompt_text, loaded.placeholders, c).prompt_sha256
        except RenderError:
            continue
    return out


def _staleness(r: Record, loaded: LoadedPolicy, prompt_sha256: str | None, fingerprint: str = "") -> str | None:
    """Why a record cannot be evidence for this policy, or None when it can."""
    policy = loaded.policy
    if r.policy_id and r.policy_id != policy.policy_id:
        return f"policy {r.policy_id}, not {policy.policy_id}"
    if r.evaluator_model and r.evaluator_model != policy.evaluator.model:
        return f"evaluator model {r.evaluator_model}, not {policy.evaluator.model}"
    if r.metric_version and r.metric_version != policy.metric.version:
        return f"metric version {r.metric_version}, not {policy.metric.version}"
    if r.prompt_sha256 and prompt_sha256 and r.prompt_sha256 != prompt_sha256:
        return "the rendered prompt differs: the prompt template or the case changed"
    if r.config_fingerprint and fingerprint and r.config_fingerprint != fingerprint:
        return (
            f"judge configuration {r.config_fingerprint[:12]}, not {fingerprint[:12]} (the prompt, labels, aliases, "
            "model, base URL, sampling or ragas version changed)"
        )
    return None


@dataclass
class Decision:
    state: State
    blockers: list[Finding]
    waived: list[dict[str, Any]]
    outcomes: list[CaseOutcome]
    result: dict[str, Any]


def decide(
    loaded: LoadedPolicy,
    plan: Plan,
    findings: Sequence[Finding],
    records: Sequence[Record],
    lineage: Lineage,
    today: dt.date,
    *,
    max_cost: float | None = None,
    notes: Sequence[str] = (),
) -> Decision:
    policy = loaded.policy
    blockers: list[Finding] = []
    eligible_ids = set(plan.eligible_ids)
    blocking_validators = [
        f
        for f in findings
        if f.kind in DETERMINISTIC_BLOCKERS or (f.kind == "missing_evidence" and f.state is State.QUALITY_FAILED)
    ]
    blocked = bool(blocking_validators)
    blockers += list(findings)

    # Records are untrusted: an `ok` line outside the contract is an evaluator error, and the case
    # file (not the record) is the answer key. Cost still counts every line.
    vetted = vet_records(
        [r for r in records if r.case_id in eligible_ids],
        policy.metric,
        {c.case_id: c for c in plan.eligible},
        plan.repeats,
    )
    relevant = vetted.records
    notes = [*notes, *vetted.notes]
    # Evidence counts only for the configuration that produced it: a record judged under another
    # model, metric version or rendered prompt says nothing about this policy (its cost still counts).
    current = _current_prompts(loaded, plan)
    stale: dict[str, str] = {}
    fresh: list[Record] = []
    for r in relevant:
        why = _staleness(r, loaded, current.get(r.case_id), lineage.config_fingerprint)
        if why:
            stale.setdefault(r.case_id, why)
        else:
            fresh.append(r)
    recs = best_records(fresh)
    outcomes = [classify(c, plan, recs, blocked) for c in plan.eligible]
    conflicted = conflicting_verdicts(fresh)
    if conflicted:
        notes.append(
            f"records of the same judgment disagree for {len(conflicted)} case(s) ({', '.join(conflicted[:5])}"
            f"{' ...' if len(conflicted) > 5 else ''}): runs were mixed or a file was edited; a person decides"
        )
        for o in outcomes:
            if o.case.case_id in conflicted and o.bucket == "completed":
                # No verdict: neither record may count as a pass or a fail in the slice tallies.
                o.verdict, o.outcome = None, "review"
                o.unstable = o.needs_review = True

    def add(state: State, kind: str, message: str, ids: Iterable[str], slice_: str | None = None, **extra: Any) -> None:
        blockers.append(Finding(state, kind, message, case_ids=tuple(ids), slice=slice_, extra=extra))

    # Controls: evaluator checks, not slice tallies.
    control_failures: list[dict[str, Any]] = []
    for o in outcomes:
        role = o.case.expected_control_role
        if role is None:
            continue
        if role == "missing_evidence":
            if o.called_model:
                control_failures.append(
                    {"case_id": o.case.case_id, "role": role, "expected": "withheld", "got": o.verdict or "model call"}
                )
            continue
        if o.bucket == "completed" and o.verdict != o.case.human_label:
            control_failures.append(
                {"case_id": o.case.case_id, "role": role, "expected": o.case.human_label, "got": o.verdict}
            )
    if control_failures:
        detail = "; ".join(
            f"{f['case_id']} ({f['role']}): expected {f['expected']}, got {f['got']}" for f in control_failures
        )
        add(
            State.QUALITY_FAILED,
            "control_failed",
            f"controls did not separate, so no other verdict counts: {detail}",
            [f["case_id"] for f in control_failures],
        )

    # Pairs: invariant verdicts must match, flip verdicts must differ.
    pairs: dict[str, list[CaseOutcome]] = defaultdict(list)
    for o in outcomes:
        if o.case.pair is not None:
            pairs[o.case.pair.id].append(o)
    for pair_id, members in sorted(pairs.items()):
        if len(members) != 2 or any(m.bucket != "completed" or m.verdict is None for m in members):
            continue
        a, b = members
        kind = a.case.pair.kind if a.case.pair else "invariant"
        same = a.verdict == b.verdict
        if (kind == "invariant" and not same) or (kind == "flip" and same):
            want = "the same verdict" if kind == "invariant" else "different verdicts"
            add(
                State.QUALITY_FAILED,
                "pair_violated",
                f"{kind} pair {pair_id}: {a.case.case_id} got {a.verdict} and {b.case.case_id} got {b.verdict}; "
                f"the pair must get {want}",
                [a.case.case_id, b.case.case_id],
            )

    # Slice tallies: non-control cases only.
    slices: dict[str, dict[str, int]] = {}
    for name in sorted({*policy.slices, *(o.case.slice for o in outcomes if not o.case.is_control)}):
        slices[name] = {
            k: 0 for k in ("true_pass", "true_fail", "false_pass", "false_fail", "errors", "review", "unrun")
        }
    for o in outcomes:
        if o.case.is_control:
            continue
        tally = slices[o.case.slice]
        if o.outcome in ("true_pass", "true_fail", "false_pass", "false_fail"):
            tally[o.outcome] += 1
        elif o.bucket == "errored":
            tally["errors"] += 1
        elif o.bucket == "unrun":
            tally["unrun"] += 1
        if o.needs_review or (o.bucket == "withheld" and policy.missing_evidence == "review"):
            tally["review"] += 1
    limit_checks = (
        ("false_pass", "false_pass_limit", "max_false_passes", "the judge passed answers people failed"),
        ("false_fail", "false_fail_limit", "max_false_fails", "the judge failed answers people passed"),
    )
    for name in slices:
        limit = policy.slices.get(name)
        if limit is None:
            continue  # unknown_slice is a validator finding
        for outcome, limit_kind, field_name, meaning in limit_checks:
            allowed: int | None = getattr(limit, field_name)
            if allowed is None:
                continue
            ids = [
                o.case.case_id
                for o in outcomes
                if not o.case.is_control and o.case.slice == name and o.outcome == outcome
            ]
            if len(ids) > allowed:
                label = outcome.replace("_", " ")
                msg = f"slice {name}: {len(ids)} {label}(es), limit {allowed}: {meaning}"
                # `limit`: an override waiving some of these cases blocks nothing once the rest fit.
                add(State.QUALITY_FAILED, limit_kind, msg.replace("fail(es)", "fail(s)"), ids, name, limit=allowed)

    # Review routes.
    unstable = [o.case.case_id for o in outcomes if o.unstable]
    if unstable:
        add(
            State.REVIEW_REQUIRED,
            "unstable_verdict",
            f"the judge disagreed with itself (across {plan.repeats} repeat(s), or between records of one judgment) "
            f"on {len(unstable)} case(s); a person decides",
            unstable,
        )
    abstained = [o.case.case_id for o in outcomes if o.verdict == "review_required" and not o.unstable]
    if abstained:
        add(State.REVIEW_REQUIRED, "abstention", "the judge abstained (review_required) on these cases", abstained)
    conflicts = [o.case.case_id for o in outcomes if o.case.human_label == "review_required"]
    if conflicts:
        add(
            State.REVIEW_REQUIRED,
            "label_conflict",
            "reviewers did not settle the human label (review_required); adjudicate before they can gate",
            conflicts,
        )

    # Evaluation completeness.
    errored = [o for o in outcomes if o.bucket == "errored"]
    if len(errored) > policy.limits.max_evaluator_errors:
        kinds = Counter(o.error_kind or "unknown" for o in errored)
        add(
            State.EVALUATION_INCOMPLETE,
            "evaluator_errors",
            f"{len(errored)} evaluator error(s), limit {policy.limits.max_evaluator_errors} "
            f"({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items()))}); errors are neither pass nor fail",
            [o.case.case_id for o in errored],
        )
    unrun = [o for o in outcomes if o.bucket == "unrun"]
    # Cases a finding already names as not judged (a shard missing from a merge) are not listed twice.
    explained = {i for f in findings if f.kind == "missing_shard" for i in f.case_ids}
    no_key = [o.case.case_id for o in unrun if o.error_kind == "auth" and not o.called_model]
    budget = [o.case.case_id for o in unrun if o.error_kind == "budget"]
    budget_hit = budget or any(r.error_kind == "budget" for r in fresh)
    stale_unrun = [
        o.case.case_id
        for o in unrun
        if o.case.case_id in stale and not o.error_kind and o.case.case_id not in explained
    ]
    if stale_unrun:
        first = stale[stale_unrun[0]]
        add(
            State.EVALUATION_INCOMPLETE,
            "stale_records",
            f"{len(stale_unrun)} case(s) have records only from another configuration ({first}); they are not "
            "evidence for this policy; fix: run `gate run` again (the cache serves whatever still matches)",
            stale_unrun,
        )
    if not any(not o.case.is_control for o in outcomes):
        lane = policy.lanes[plan.lane]
        add(
            State.EVALUATION_INCOMPLETE,
            "no_cases",
            f"lane {plan.lane} selects no case outside the controls (partitions {', '.join(lane.partitions)}): a gate "
            "with nothing to judge cannot pass; fix: add cases to those partitions or correct the lane",
            [],
        )
    if no_key:
        add(
            State.EVALUATION_INCOMPLETE,
            "missing_credentials",
            f"no API key in ${policy.evaluator.api_key_env}, so no case was judged; fix: set that secret",
            no_key,
        )
    if budget_hit:
        boundary = _boundary(policy.limits.max_total_cost, max_cost)
        not_run = [
            o.case.case_id
            for o in unrun
            if o.case.case_id not in no_key and o.case.case_id not in stale_unrun and o.case.case_id not in explained
        ]
        budget_detail = next((r.error_message for r in fresh if r.error_kind == "budget" and r.error_message), None)
        add(
            State.EVALUATION_INCOMPLETE,
            "budget_exhausted",
            f"the cost boundary ({boundary:g}) stopped scheduling; {len(not_run)} case(s) were not judged"
            + (f" ({budget_detail})" if budget_detail else ""),
            not_run,
        )
    else:
        rest = [
            o
            for o in unrun
            if o.case.case_id not in no_key and o.case.case_id not in stale_unrun and o.case.case_id not in explained
        ]
        if rest:
            why = "deterministic checks blocked, so no model call was made" if blocked else None
            if why is None and (control_failures or any(b.kind == "pair_violated" for b in blockers)):
                why = "not scheduled after a control or pair failed"
            if why is None and any(o.error_kind == "cancelled" for o in rest):
                why = "the run was interrupted before they were judged"
            add(
                State.EVALUATION_INCOMPLETE,
                "unrun_cases",
                f"{len(rest)} eligible case(s) have no complete judgment" + (f": {why}" if why else ""),
                [o.case.case_id for o in rest],
            )
    # Overrides apply once, to the finished blockers (gate.overrides is the one place that waives).
    applied = apply_overrides(blockers, policy.overrides, today)
    blockers, waived = applied.blockers, applied.waived

    blockers = [b for b in blockers if b.state is not State.PASSED]
    state = overall_state([b.state for b in blockers])
    counts = {
        "eligible": len(outcomes),
        "completed": sum(1 for o in outcomes if o.bucket == "completed"),
        "errored": len(errored),
        "withheld": sum(1 for o in outcomes if o.bucket == "withheld"),
        "unrun": len(unrun),
        "cached": sum(1 for r in recs.values() if r.cache == "hit"),
        "review": sum(
            1
            for o in outcomes
            if o.needs_review
            or (o.bucket == "withheld" and policy.missing_evidence == "review" and not o.case.is_control)
        ),
    }
    price = policy.evaluator.price
    cost = cost_summary(relevant, price.currency if price else "USD")
    result: dict[str, Any] = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "policy_id": policy.policy_id,
        "policy_version": policy.policy_version,
        "lane": plan.lane,
        "state": state.value,
        "exit_code": state.exit_code,
        "blockers": [_routed(b.to_dict(), policy.owners) for b in blockers],
        "counts": counts,
        "unrun_case_ids": [o.case.case_id for o in unrun],
        "slices": slices,
        "controls": {"ok": not control_failures, "failures": control_failures},
        "cost": cost,
        "lineage": lineage.to_dict(),
        "waived": waived,
        "overrides": [{**o.model_dump(mode="json"), "expired": o.expires < today} for o in policy.overrides],
        "limits": {
            "max_total_cost": _boundary(policy.limits.max_total_cost, max_cost),
            "max_evaluator_errors": policy.limits.max_evaluator_errors,
        },
        "notes": list(notes),
        "cases": [o.to_dict() for o in outcomes],
    }
    if policy.strata:
        result["strata"] = weigh(
            {name: s.prevalence for name, s in policy.strata.items()},
            (
                (o.case.stratum, o.outcome if o.bucket == "completed" else None)
                for o in outcomes
                if not o.case.is_control
            ),
        ).to_dict()
    return Decision(state=state, blockers=blockers, waived=waived, outcomes=outcomes, result=result)


def _routed(blocker: dict[str, Any], owners: Owners | None) -> dict[str, Any]:
    """With `owners` in the policy, the blocker names its owner group and owner (gate/owners.py)."""
    return blocker if owners is None else route(blocker, owners.model_dump())


def _boundary(policy_limit: float, flag: float | None) -> float:
    return policy_limit if flag is None else min(policy_limit, flag)
