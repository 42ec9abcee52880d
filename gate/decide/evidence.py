"""The evidence a decision rests on: vetted, current records reduced to one frozen outcome per case.

Pure: `prepare_evidence` turns the untrusted records of a run into an `Evidence` value that the
rule functions (gate/decide/rules.py) read and never change.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from gate.decide.bill import Bill
from gate.judge.render import RenderError, render_case
from gate.judge.vetting import Vetting
from gate.model.cases import Case
from gate.model.fingerprint import UNKNOWN, policy_components, record_components, shown_value, stale_component
from gate.model.loading import sha256_hex
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


@dataclass(frozen=True, slots=True)
class Judged:
    """What the decision keeps of one vetted record of an eligible case, under this policy's
    configuration (the record itself leaves memory): its judgment and verdict, what it cost left in
    the bill. The fields the rules read, under a record's names: a rule that reads another field of
    a record adds it here."""

    case_id: str
    repeat_index: int
    status: str
    error_kind: str | None
    error_message: str | None
    judge_label: str | None
    judge_reason: str | None
    control_role: str | None
    human_label: str | None
    cache: str
    called_model: bool  # an attempt was sent
    response_sha256: str | None
    judge_shutdown_date: str | None
    judge_shutdown_source: str | None
    shard: tuple[int, int] | None  # (index, count) of the `--shard I/N` that judged it, when it says

    @classmethod
    def of(cls, r: Record, case: Case) -> Judged:
        """`r` (vetted against `case`: its answer key is the case's), its repeated words shared."""
        intern = sys.intern
        return cls(
            case.case_id,
            r.repeat_index,
            intern(r.status),
            intern(r.error_kind) if r.error_kind is not None else None,
            r.error_message,
            intern(r.judge_label) if r.judge_label is not None else None,
            r.judge_reason,
            case.expected_control_role,
            case.human_label,
            intern(r.cache),
            bool(r.attempts),
            r.response_sha256,
            r.judge_shutdown_date,
            intern(r.judge_shutdown_source) if r.judge_shutdown_source is not None else None,
            (r.shard.index, r.shard.count) if r.shard is not None else None,
        )


@dataclass(frozen=True)
class Evidence:
    """What every rule reads: the policy, the plan, the inputs' findings and the case outcomes."""

    policy: Policy
    plan: Plan
    findings: tuple[Finding, ...]  # what the checks before judging found (validators, checks, shards)
    bill: Bill  # every vetted record of an eligible case: cost counts each line
    fresh: tuple[Judged, ...]  # those judged under this policy's configuration
    best: Mapping[tuple[str, int], Judged]  # the one that counts per (case, repeat)
    outcomes: tuple[CaseOutcome, ...]  # one per eligible case, in plan order
    stale: Mapping[str, str]  # case id -> why its records are not evidence for this policy
    blocked: bool  # deterministic findings stopped the run before any model call
    boundary: float  # the cost boundary the run was held to
    notes: tuple[str, ...]


def prepare_evidence(
    loaded: LoadedPolicy,
    plan: Plan,
    findings: Sequence[Finding],
    records: Iterable[Record],
    *,
    fingerprint: str,
    boundary: float,
    notes: Sequence[str],
) -> Evidence:
    """Vet the records, set stale ones aside, pick the record that counts and classify each case.

    Records are untrusted: an `ok` line outside the contract is an evaluator error, and the case
    file (not the record) is the answer key. Cost still counts every line. They are read once, one
    at a time, and only what the decision needs of each is kept (`Judged`): a run's records file is
    never held whole.
    """
    gathering = Gathering(loaded, plan, fingerprint)
    for r in records:
        gathering.add(r)
    return gathering.evidence(findings, boundary=boundary, notes=notes)


class Gathering:
    """`prepare_evidence` one record at a time: each record is vetted, billed and checked for
    staleness as it comes, and only what the decision keeps of it (`Judged`) stays. `evidence`
    classifies the cases over what has come so far and may be asked again after more records:
    `stop_when_decided` asks it mid-run (gate/decide/settled.py) without holding the records."""

    def __init__(self, loaded: LoadedPolicy, plan: Plan, fingerprint: str) -> None:
        self.loaded, self.plan = loaded, plan
        self.cases = {c.case_id: c for c in plan.eligible}
        self.vetting = Vetting(loaded.policy.metric, plan.repeats)
        self.staleness = Staleness(loaded, fingerprint, plan.unanswered)
        self.bill = Bill()
        self.fresh: list[Judged] = []
        self.best: dict[tuple[str, int], Judged] = {}
        self.conflicted: set[str] = set()

    def add(self, r: Record) -> None:
        case = self.cases.get(r.case_id)
        if case is None:
            return
        v = self.vetting.add(r, case)
        self.bill.add(v)
        if not self.staleness.fresh(v, case):
            return
        j = Judged.of(v, case)
        self.fresh.append(j)
        key = (j.case_id, j.repeat_index)
        current = self.best.get(key)
        if current is not None and _disagree(current, j):
            self.conflicted.add(j.case_id)
        if current is None or _replaces(j, current):
            self.best[key] = j

    def evidence(self, findings: Sequence[Finding], *, boundary: float, notes: Sequence[str]) -> Evidence:
        """The evidence of the records added so far (its bill and `best` are this gathering's own,
        read as they are now: records added later change them)."""
        plan = self.plan
        blocked = bool(blocking_findings(findings))
        withheld_ids = {c.case_id for c in plan.withheld}
        by_shard = control_records_by_shard(self.fresh)
        outcomes = tuple(
            control_outcome(c, plan, by_shard[c.case_id], blocked, withheld_ids)
            if c.case_id in by_shard
            else classify(c, plan, self.best, blocked, withheld_ids)
            for c in plan.eligible
        )
        ordered = sorted(self.conflicted)
        conflict_notes = [conflict_note(ordered)] if ordered else []
        return Evidence(
            policy=self.loaded.policy,
            plan=plan,
            findings=tuple(findings),
            bill=self.bill,
            fresh=tuple(self.fresh),
            best=self.best,
            outcomes=without_verdict(outcomes, self.conflicted),
            stale=self.staleness.reasons(),
            blocked=blocked,
            boundary=boundary,
            notes=(*notes, *self.vetting.notes(), *conflict_notes),
        )


def _disagree(current: Judged, new: Judged) -> bool:
    """Two `ok` records of one judgment (case, repeat) of a case that is not a control, with
    different verdicts. A run never judges one judgment twice, so this is two runs mixed (`gate
    decide --records a b`) or an edited file: no file order may pick the verdict, a person does
    (`unstable_verdict`). Controls are left to `best_records`, where a control that failed anywhere
    stays failed. One record at a time: once an `ok` record of a judgment has come, the one that
    counts is the latest `ok` one, so a verdict unlike any before it is unlike that one."""
    return (
        new.status == "ok"
        and new.control_role is None
        and current.status == "ok"
        and current.judge_label != new.judge_label
    )


class Staleness:
    """Which records are evidence for this policy (`fresh`), one at a time, and why each other
    case's are not (`reasons`).

    Evidence counts only for the configuration that produced it: a record judged under another
    model, metric version or rendered prompt says nothing about this policy (its cost still counts).
    `fingerprint` is the configuration the records must share: the live judge's on a run, the one
    most records carry on `gate decide` and `gate merge` (gate.model.fingerprint; no environment).
    A record of another fingerprint is never evidence; why is said against the configuration of the
    last record of this one, known once all are read.
    """

    def __init__(self, loaded: LoadedPolicy, fingerprint: str, unanswered: frozenset[str] = frozenset()) -> None:
        self.loaded, self.fingerprint = loaded, fingerprint
        # A product lane's cases the answers given leave out (`missing_response`): what their records
        # judged is no answer of this run (a case without an answer renders no prompt to compare).
        self.unanswered = unanswered
        self.policy = policy_components(loaded)
        self.reference: Record | None = None  # the last record under `fingerprint`
        # case id -> why its first stale record is stale (or its components and fingerprint, to say
        # against the reference)
        self._first: dict[str, str | tuple[dict[str, object], str]] = {}
        self._prompts: dict[str, str | None] = {}  # the prompt sha256 of cases met lately

    def fresh(self, r: Record, case: Case) -> bool:
        if self.fingerprint and r.config_fingerprint == self.fingerprint:
            self.reference = r
        recorded = record_components(r)
        if r.case_id in self.unanswered:
            self._first.setdefault(r.case_id, "response: the answers given hold no line for the case")
            return False
        why = _staleness(r, self.policy, lambda: self._prompt(case), recorded) or self._field_changed(r, case)
        if why is None and r.config_fingerprint and self.fingerprint and r.config_fingerprint != self.fingerprint:
            self._first.setdefault(r.case_id, (recorded, r.config_fingerprint))  # said once the reference is known
            return False
        if why is not None:
            self._first.setdefault(r.case_id, why)
            return False
        return True

    def reasons(self) -> dict[str, str]:
        shared = record_components(self.reference) if self.reference is not None else None
        return {
            case_id: why if isinstance(why, str) else _other_fingerprint(*why, self.fingerprint, shared)
            for case_id, why in self._first.items()
        }

    def _field_changed(self, r: Record, case: Case) -> str | None:
        """Where the case renders no prompt to compare (a product case decided without its answers), the
        first field the record judged that reads otherwise now: a reworded question or evidence makes the
        record no evidence for the case, as it does where the prompt renders."""
        if not r.field_sha256 or not r.prompt_sha256 or self._prompt(case) is not None:
            return None
        # Only the prompt's own fields: the record's keys are read, not trusted.
        for name in self.loaded.placeholders:
            judged = r.field_sha256.get(name)
            text = case.field_text(name) if judged is not None else None
            if text is not None and sha256_hex(text) != judged:
                return (
                    f"inputs: field {name} {shown_value(judged)} vs {shown_value(sha256_hex(text))} (the case's "
                    f"{name} changed since it was judged)"
                )
        return None

    def _prompt(self, case: Case) -> str | None:
        """sha256 of the prompt the case renders to now (None: it cannot render), for the last few
        thousand cases met (the repeats of a case come close together)."""
        if case.case_id not in self._prompts:
            if len(self._prompts) >= 4096:
                self._prompts.clear()
            try:
                self._prompts[case.case_id] = render_case(
                    self.loaded.prompt_text, self.loaded.placeholders, case
                ).prompt_sha256
            except RenderError:
                self._prompts[case.case_id] = None
        return self._prompts[case.case_id]


def _staleness(
    r: Record, policy: dict[str, object], prompt_sha256: Callable[[], str | None], recorded: dict[str, object]
) -> str | None:
    """Why a record cannot be evidence for this policy as the policy itself says it (the first
    differing component, both values), or None (its fingerprint is compared by `Staleness`)."""
    for name in ("policy_id", "metric_version"):
        if recorded[name] is not UNKNOWN and recorded[name] != policy[name]:
            return f"{name}: {shown_value(recorded[name])} vs {shown_value(policy[name])} (recorded vs the policy's)"
    same_template = recorded["prompt"] is UNKNOWN or recorded["prompt"] == policy["prompt"]
    if same_template and r.prompt_sha256:
        current = prompt_sha256()
        if current and r.prompt_sha256 != current:
            return (
                f"inputs: rendered prompt {shown_value(r.prompt_sha256)} vs {shown_value(current)} "
                "(the case's rendered fields changed)"
            )
    against_policy = stale_component(recorded, policy)
    if against_policy:
        return f"{against_policy} (recorded vs the policy's)"
    return None


def _other_fingerprint(
    recorded: dict[str, object], recorded_fingerprint: str, fingerprint: str, shared: dict[str, object] | None
) -> str:
    """Why a record of another fingerprint is stale: the first component that differs from the
    configuration the other records were judged under, else the fingerprint itself."""
    among = stale_component(recorded, shared) if shared is not None else None
    if among:
        return f"{among} (vs the configuration the other records were judged under)"
    return (
        f"config_fingerprint: {shown_value(recorded_fingerprint)} vs {shown_value(fingerprint)} (same "
        "prompt, model, host and settings: the base URL's scheme, port or path, or the metric's name, differs)"
    )


class _Ranked(Protocol):
    """What `best_records` compares: a record, or what the decision keeps of one (`Judged`)."""

    @property
    def case_id(self) -> str: ...
    @property
    def repeat_index(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def control_role(self) -> str | None: ...
    @property
    def judge_label(self) -> str | None: ...
    @property
    def human_label(self) -> str | None: ...


Ranked = TypeVar("Ranked", bound=_Ranked)
_RANK = {"ok": 2, "error": 1, "skipped": 0}


def best_records(records: Iterable[Ranked]) -> dict[tuple[str, int], Ranked]:
    """One record per (case, repeat): an ok judgment beats an error beats a skip; later beats earlier.

    A resumed run appends new records after old ones; the evidence that completed is what counts,
    while every paid attempt still counts in cost (see `cost_summary`).
    """
    best: dict[tuple[str, int], Ranked] = {}
    for r in records:
        k = (r.case_id, r.repeat_index)
        cur = best.get(k)
        if cur is None or _replaces(r, cur):
            best[k] = r
    return best


ShardKey = tuple[int, int]


def control_records_by_shard(records: Iterable[Judged]) -> dict[str, dict[ShardKey | None, list[Judged]]]:
    """The records of each control judged in more than one shard (a merge's), by the shard that
    made them (`None`: a record that does not say)."""
    found: dict[str, dict[ShardKey | None, list[Judged]]] = {}
    for r in records:
        if r.control_role is not None:
            found.setdefault(r.case_id, {}).setdefault(r.shard, []).append(r)
    return {case_id: groups for case_id, groups in found.items() if len(groups) > 1}


def control_outcome(
    case: Case,
    plan: Plan,
    groups: Mapping[ShardKey | None, Sequence[Judged]],
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


def _replaces(new: _Ranked, current: _Ranked) -> bool:
    """Whether `new` is the record that counts for its judgment instead of `current`, which came first."""
    if _RANK[new.status] != _RANK[current.status]:
        return _RANK[new.status] > _RANK[current.status]
    # Records that do not say their shard (a merged records.jsonl from before they did): a control
    # repeat that failed in any shard stays failed (shards: `control_outcome`).
    return not _failed_control(current)


def _failed_control(r: _Ranked) -> bool:
    return r.status == "ok" and r.control_role is not None and r.judge_label != r.human_label


def classify(
    case: Case, plan: Plan, recs: Mapping[tuple[str, int], Judged], blocked: bool, withheld_ids: set[str]
) -> CaseOutcome:
    """The outcome of one case from the records that count for its repeats."""
    judged = [recs[(case.case_id, i)] for i in range(plan.repeats) if (case.case_id, i) in recs]
    called = any(r.called_model for r in judged)
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


def _completed(case: Case, oks: Sequence[Judged], called: bool) -> CaseOutcome:
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
