"""Calibration: measure the judge against adjudicated human labels from recorded judgments. Pure.

No I/O and no model: the records are reduced to one verdict per case (majority over repeats),
each verdict is compared with the human label by a deterministic comparator (the edge passes the
ragas `@discrete_metric` one, see `gate.measure.calibrate.alignment`), and the confusion is tallied per
slice, per partition and overall. Errors, review and unrun cases are counted beside the rates,
never inside them, so missing output can never improve a rate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from gate.decide.evidence import UNRUN_ERROR_KINDS, best_records
from gate.judge.vetting import vet_records
from gate.measure.calibrate.stats import Rate, cohen_kappa, wilson
from gate.model.cases import Case
from gate.model.errors import UsageError
from gate.model.policy import Policy
from gate.model.records import Record, majority
from gate.model.strata import Confusion, Weighting, weigh
from gate.model.supersede import superseded_ids
from gate.model.wording import plural

SCHEMA_VERSION = 1
CAUSES: tuple[str, ...] = (
    "gold_defect",
    "rubric_ambiguity",
    "missing_evidence",
    "prompt_gap",
    "evaluator_reasoning",
    "parser_defect",
    "provider_failure",
    "out_of_scope",
)
CALIBRATION_PARTITION = "calibration"
# Partitions that tune the judge; a lane running them does not gate a release.
TUNING_PARTITIONS = frozenset({"dev", CALIBRATION_PARTITION})

Alignment = Literal["aligned", "misaligned"]
# (human_label, judge_label) -> "aligned" | "misaligned"; anything else is an error.
Comparator = Callable[[str, str], str]
Bucket = Literal["completed", "errors", "review", "unrun"]


class CalibrationInputError(UsageError):
    """Records that cannot be calibrated as given (exit 2): the message names the case and the fix."""


@dataclass(frozen=True)
class CaseVerdict:
    """One case reduced from its records: which bucket it lands in and, if completed, its cell."""

    case_id: str
    slice: str
    partition: str
    human_label: str
    bucket: Bucket
    judge_label: str | None = None
    judge_reason: str | None = None
    outcome: str | None = None  # one of gate.model.strata.CONFUSION when completed
    unstable: bool = False
    why: str | None = None  # why it is not completed


@dataclass(frozen=True)
class Tally(Confusion):
    errors: int = 0
    review: int = 0
    unrun: int = 0
    unstable: int = 0

    @property
    def cases(self) -> int:
        return self.completed + self.errors + self.review + self.unrun

    @property
    def agreement(self) -> float | None:
        return (self.true_pass + self.true_fail) / self.completed if self.completed else None

    @property
    def cohen_kappa(self) -> float | None:
        return cohen_kappa(self.true_pass, self.true_fail, self.false_pass, self.false_fail)

    @property
    def false_pass_rate(self) -> Rate:
        """Of the cases people failed, the share the judge passed."""
        return wilson(self.false_pass, self.false_pass + self.true_fail)

    @property
    def false_fail_rate(self) -> Rate:
        """Of the cases people passed, the share the judge failed."""
        return wilson(self.false_fail, self.false_fail + self.true_pass)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "completed": self.completed,
            "true_pass": self.true_pass,
            "true_fail": self.true_fail,
            "false_pass": self.false_pass,
            "false_fail": self.false_fail,
            "errors": self.errors,
            "review": self.review,
            "unrun": self.unrun,
            "unstable": self.unstable,
            "agreement": self.agreement,
            "cohen_kappa": self.cohen_kappa,
            "false_pass_rate": self.false_pass_rate.to_dict(),
            "false_fail_rate": self.false_fail_rate.to_dict(),
        }


def tally(verdicts: Iterable[CaseVerdict]) -> Tally:
    counts: dict[str, int] = defaultdict(int)
    for v in verdicts:
        if v.bucket == "completed" and v.outcome is not None:
            counts[v.outcome] += 1
        else:
            counts[v.bucket] += 1
        if v.unstable:
            counts["unstable"] += 1
    return Tally(**counts)


@dataclass(frozen=True)
class Disagreement:
    case_id: str
    slice: str
    partition: str
    kind: str  # false_pass | false_fail
    human_label: str
    human_reason: str | None
    judge_label: str
    judge_reason: str | None
    cause: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# The fewest labelled cases behind a rate (human-fail cases for the false-pass rate, human-pass for
# the false-fail rate) from which `gate calibrate` suggests a limit.
MIN_CASES_TO_SUGGEST = 3


@dataclass(frozen=True)
class SuggestedLimit:
    """Per-slice limits suggested from the calibration partition (see `suggest_limits`)."""

    slice: str
    max_false_passes: int | None
    max_false_fails: int | None
    scaled_to: str  # the lane (or "calibration") whose case counts the rates are scaled to
    fail_cases: int  # human-fail cases of the slice there (where a false pass can happen)
    pass_cases: int  # human-pass cases of the slice there (where a false fail can happen)
    current_max_false_passes: int | None
    current_max_false_fails: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_false_passes": self.max_false_passes,
            "max_false_fails": self.max_false_fails,
            "basis": CALIBRATION_PARTITION,
            "scaled_to": {"lane": self.scaled_to, "fail_cases": self.fail_cases, "pass_cases": self.pass_cases},
            "current": {
                "max_false_passes": self.current_max_false_passes,
                "max_false_fails": self.current_max_false_fails,
            },
        }


@dataclass(frozen=True)
class Calibration:
    overall: Tally
    slices: dict[str, Tally]
    partitions: dict[str, Tally]
    slice_partitions: dict[str, dict[str, Tally]]
    verdicts: tuple[CaseVerdict, ...]
    disagreements: tuple[Disagreement, ...]
    suggested_limits: dict[str, SuggestedLimit] | None
    controls_left_out: int
    causes_given: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    strata: Weighting | None = None  # with policy `strata`: raw and prevalence-weighted rates

    @property
    def causes(self) -> dict[str, int]:
        counts = dict.fromkeys(CAUSES, 0)
        for d in self.disagreements:
            if d.cause is not None:
                counts[d.cause] += 1
        return counts

    @property
    def not_counted(self) -> list[CaseVerdict]:
        return [v for v in self.verdicts if v.bucket != "completed"]


def _case_records(records: Sequence[Record]) -> dict[str, list[Record]]:
    by_case: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        by_case[r.case_id].append(r)
    return by_case


def _consistent(case_id: str, recs: Sequence[Record]) -> Record:
    """The records of one case must agree on what the case is; calibrating against two gold
    labels (records of two dataset versions mixed) would be meaningless."""
    first = recs[0]
    for r in recs[1:]:
        for name in ("slice", "partition", "human_label"):
            a, b = getattr(first, name), getattr(r, name)
            if a != b:
                raise CalibrationInputError(
                    f"the records of case {case_id} disagree on its {name} ({a!r} vs {b!r}): they come from "
                    "different versions of the dataset; fix: pass the records of runs on one dataset version "
                    "(supersede a corrected case with a new case id instead of editing it)"
                )
    return first


def reduce_case(
    case_id: str,
    recs: Sequence[Record],
    *,
    repeats: int,
    allowed: Sequence[str],
    compare: Comparator,
) -> CaseVerdict:
    """One case's verdict from its records: the majority over `repeats` completed judgments."""
    first = _consistent(case_id, recs)
    base = CaseVerdict(
        case_id=case_id,
        slice=first.slice,
        partition=first.partition,
        human_label=first.human_label or "",
        bucket="unrun",
    )
    if first.human_label is None:
        return replace(base, bucket="errors", why="no human label (a product lane's answer): nothing to agree with")
    if first.human_label not in allowed:
        why = f"human label {first.human_label!r} is not in allowed_values {list(allowed)}"
        return replace(base, bucket="errors", why=why)
    best = best_records(recs)
    judged = [best[(case_id, i)] for i in range(repeats) if (case_id, i) in best]
    errored = [r for r in judged if r.status == "error" and r.error_kind not in UNRUN_ERROR_KINDS]
    if errored:
        return replace(base, bucket="errors", why=f"evaluator error: {errored[0].error_kind or 'unknown'}")
    # Records were vetted first (`gate.judge.vetting`): a label outside the contract is already an
    # evaluator error here, never a verdict.
    oks = sorted((r for r in judged if r.status == "ok"), key=lambda r: r.repeat_index)
    if len(oks) < repeats:
        kinds = sorted({r.error_kind or r.status for r in judged if r.status != "ok"})
        why = f"{len(oks)} of {plural(repeats, 'judgment')} completed" + (f" ({', '.join(kinds)})" if kinds else "")
        return replace(base, bucket="unrun", why=why)
    labels = [r.judge_label or "" for r in oks]
    verdict = majority(labels)
    reason = next((r.judge_reason for r in oks if r.judge_label == verdict), oks[0].judge_reason)
    judged_case = replace(base, judge_label=verdict, judge_reason=reason, unstable=len(set(labels)) > 1)
    if verdict is None:
        return replace(judged_case, bucket="review", why=f"no majority among repeats {labels}")
    if verdict == "review_required" or first.human_label == "review_required":
        who = "the judge abstained" if verdict == "review_required" else "people routed it to review"
        return replace(judged_case, bucket="review", why=who)
    alignment = compare(first.human_label, verdict)
    if alignment not in ("aligned", "misaligned"):
        raise RuntimeError(f"the alignment comparison gave {alignment!r} for case {case_id}")
    if first.human_label == "pass":
        outcome = "true_pass" if alignment == "aligned" else "false_fail"
    else:
        outcome = "true_fail" if alignment == "aligned" else "false_pass"
    return replace(judged_case, bucket="completed", outcome=outcome)


def _tallies_by(verdicts: Sequence[CaseVerdict], key: Callable[[CaseVerdict], str]) -> dict[str, Tally]:
    groups: dict[str, list[CaseVerdict]] = defaultdict(list)
    for v in verdicts:
        groups[key(v)].append(v)
    return {name: tally(group) for name, group in sorted(groups.items())}


def disagreements_of(
    verdicts: Sequence[CaseVerdict], human_reasons: Mapping[str, str], slice_priority: Mapping[str, int]
) -> tuple[Disagreement, ...]:
    """False passes first (the costly direction), then false fails; critical slices first."""
    rows = [
        Disagreement(
            case_id=v.case_id,
            slice=v.slice,
            partition=v.partition,
            kind=v.outcome or "",
            human_label=v.human_label,
            human_reason=human_reasons.get(v.case_id),
            judge_label=v.judge_label or "",
            judge_reason=v.judge_reason,
        )
        for v in verdicts
        if v.outcome in ("false_pass", "false_fail")
    ]
    order = {"false_pass": 0, "false_fail": 1}
    rows.sort(key=lambda d: (order[d.kind], slice_priority.get(d.slice, 10**9), d.slice, d.case_id))
    return tuple(rows)


def gating_lane(policy: Policy, lane_case_counts: Mapping[str, int]) -> str | None:
    """The largest lane that gates (runs no dev or calibration partition), or None."""
    gating = [name for name, lane in policy.lanes.items() if not TUNING_PARTITIONS & set(lane.partitions)]
    if not gating:
        return None
    return max(sorted(gating), key=lambda name: lane_case_counts.get(name, 0))


def suggest_limits(
    policy: Policy,
    calibration: Mapping[str, Tally],
    lane: str | None,
    lane_labels: Mapping[str, tuple[int, int]],
) -> dict[str, SuggestedLimit] | None:
    """Per-slice limits from the calibration partition only; None when it has no completed case.

    Rule: max_false_passes = floor(upper Wilson bound of the false-pass rate x the number of
    human-fail cases of the slice in `lane`): the most false passes a judge as good as the
    calibrated one plausibly makes there. A lower limit trips on judge error alone; max_false_fails
    likewise with human-pass cases. `lane_labels` maps slice -> (fail cases, pass cases) in `lane`
    (in the calibration partition when no lane gates). Fewer than MIN_CASES_TO_SUGGEST cases behind
    a rate (none included) suggest nothing (null): on one or two cases the bound is most of the
    interval, so the number would say more about the count than about the judge.
    """
    if not any(t.completed for t in calibration.values()):
        return None
    out: dict[str, SuggestedLimit] = {}
    for name, t in sorted(calibration.items()):
        if not t.completed:
            continue
        fails, passes = lane_labels.get(name, (0, 0))
        current = policy.slices.get(name)

        def scaled(rate: Rate, cases: int) -> int | None:
            if rate.high is None or rate.n < MIN_CASES_TO_SUGGEST:
                return None
            return math.floor(rate.high * cases + 1e-9)

        out[name] = SuggestedLimit(
            slice=name,
            max_false_passes=scaled(t.false_pass_rate, fails),
            max_false_fails=scaled(t.false_fail_rate, passes),
            scaled_to=lane or CALIBRATION_PARTITION,
            fail_cases=fails,
            pass_cases=passes,
            current_max_false_passes=current.max_false_passes if current else None,
            current_max_false_fails=current.max_false_fails if current else None,
        )
    return out


@dataclass(frozen=True)
class CaseFacts:
    """What the dataset says about a case that records do not carry (human reason, lanes)."""

    # The answer key: records are vetted against these cases (human label, slice, partition).
    cases: Mapping[str, Case]
    # lane -> slice -> (human-fail cases, human-pass cases) among its non-control eligible cases
    lane_labels: Mapping[str, Mapping[str, tuple[int, int]]]


def calibrate(
    policy: Policy,
    records: Sequence[Record],
    compare: Comparator,
    facts: CaseFacts,
) -> Calibration:
    """The whole measurement (causes are filled afterwards by `with_causes`)."""
    # Records are untrusted: vetted exactly as `gate decide` vets them (one rule on every path).
    vetted = vet_records(records, policy.metric, facts.cases, policy.evaluator.repeats)
    by_case = _case_records(vetted.records)
    controls = {cid for cid, recs in by_case.items() if any(r.control_role for r in recs)}
    # A superseded case's gold was corrected by another case: its old label measures nothing now.
    superseded = sorted(superseded_ids(facts.cases.values()) & set(by_case) - controls)
    allowed = policy.metric.allowed_values
    verdicts = tuple(
        reduce_case(cid, by_case[cid], repeats=policy.evaluator.repeats, allowed=allowed, compare=compare)
        for cid in sorted(by_case)
        if cid not in controls and cid not in superseded
    )
    notes = list(vetted.notes)
    if superseded:
        shown = ", ".join(superseded[:5]) + (f" and {len(superseded) - 5} more" if len(superseded) > 5 else "")
        notes.append(f"{plural(len(superseded), 'superseded case')} left out (a corrected case replaces each): {shown}")
    priority = {name: s.priority for name, s in policy.slices.items()}
    reasons = {
        cid: c.human_adjudication.reason
        for cid, c in facts.cases.items()
        if c.human_adjudication and c.human_adjudication.reason
    }
    disagreements = disagreements_of(verdicts, reasons, priority)
    in_calibration = [v for v in verdicts if v.partition == CALIBRATION_PARTITION]
    lane_sizes = {name: sum(f + p for f, p in counts.values()) for name, counts in facts.lane_labels.items()}
    lane = gating_lane(policy, lane_sizes)
    if lane is not None:
        lane_labels = facts.lane_labels.get(lane, {})
    else:
        cal_counts: dict[str, tuple[int, int]] = {}
        for v in in_calibration:
            f, p = cal_counts.get(v.slice, (0, 0))
            cal_counts[v.slice] = (f + (v.human_label == "fail"), p + (v.human_label == "pass"))
        lane_labels = cal_counts
    slice_partitions = {
        name: _tallies_by([v for v in verdicts if v.slice == name], lambda v: v.partition)
        for name in sorted({v.slice for v in verdicts})
    }
    return Calibration(
        overall=tally(verdicts),
        slices=_tallies_by(verdicts, lambda v: v.slice),
        partitions=_tallies_by(verdicts, lambda v: v.partition),
        slice_partitions=slice_partitions,
        verdicts=verdicts,
        disagreements=disagreements,
        suggested_limits=suggest_limits(policy, _tallies_by(in_calibration, lambda v: v.slice), lane, lane_labels),
        controls_left_out=len(controls),
        notes=tuple(notes),
        strata=_strata(policy, verdicts, facts.cases),
    )


def _strata(policy: Policy, verdicts: Sequence[CaseVerdict], cases: Mapping[str, Case]) -> Weighting | None:
    if not policy.strata:
        return None
    prevalence = {name: s.prevalence for name, s in policy.strata.items()}
    return weigh(prevalence, ((c.stratum if (c := cases.get(v.case_id)) else None, v.outcome) for v in verdicts))


def worst_first(slices: Mapping[str, Tally]) -> list[str]:
    """Slices ordered worst first: highest false-pass rate, then false-fail rate, then name."""

    def key(name: str) -> tuple[float, float, str]:
        t = slices[name]
        fp, ff = t.false_pass_rate.value, t.false_fail_rate.value
        return (-(fp if fp is not None else -1.0), -(ff if ff is not None else -1.0), name)

    return sorted(slices, key=key)


def to_json(
    cal: Calibration, policy: Policy, lineage: Mapping[str, str], measured: Mapping[str, Any]
) -> dict[str, Any]:
    """calibration.json; `measured` names the judge the records measured and when (
    `config_sha256`, its `config` components, `calibrated_at`)."""
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "policy_id": policy.policy_id,
        "policy_version": policy.policy_version,
        **measured,
        "lineage": dict(lineage),
        "controls_left_out": cal.controls_left_out,
        "overall": cal.overall.to_dict(),
        "slices": {name: cal.slices[name].to_dict() for name in worst_first(cal.slices)},
        "partitions": {name: t.to_dict() for name, t in cal.partitions.items()},
        "slice_partitions": {
            name: {part: t.to_dict() for part, t in parts.items()} for name, parts in cal.slice_partitions.items()
        },
        "disagreements": [d.to_dict() for d in cal.disagreements],
        "causes": cal.causes,
        "notes": list(cal.notes),
        "not_counted": [
            {"case_id": v.case_id, "slice": v.slice, "partition": v.partition, "bucket": v.bucket, "why": v.why}
            for v in cal.not_counted
        ],
    }
    if cal.strata is not None:
        out["strata"] = cal.strata.to_dict()
    if cal.suggested_limits is not None:
        out["suggested_limits"] = {name: s.to_dict() for name, s in cal.suggested_limits.items()}
    return out


def with_causes(cal: Calibration, causes: Mapping[str, str]) -> Calibration:
    """The same calibration with each disagreement's cause filled from `causes` (case id -> cause)."""
    rows = tuple(replace(d, cause=causes.get(d.case_id)) for d in cal.disagreements)
    return replace(cal, disagreements=rows, causes_given=True)
