"""The decision as frozen typed data: what result.json holds and what every renderer reads.

`Result` is built once (by `gate.decide.core`, then the lanes that add `checks`, `trend`,
`certification`, `shard` ...) and serialized by `to_json`; a result.json read back from disk
(`gate publish`, the Action, `--base-result`, `gate compare`, `gate merge`) is untrusted and goes
through `load_result`, which validates it into the same model or raises one paragraph naming the
file, the field and the fix.

Schema (docs/SCHEMA.md): version 1 throughout. A field added after the first version is optional
(`X | None = None`, or an empty default) so that older files load; `to_json` writes exactly the
fields that were set, in declaration order, so a file read and written again is byte-identical
(tests/fixtures/schema/). Field order here IS the order in result.json: append new fields last.

Imported lazily (by the run, decide and report paths): `gate validate` never builds these models.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

StateName = Literal["passed", "quality_failed", "evaluation_incomplete", "review_required"]
# Sums of prices are floats, but an empty sum is the int 0: kept as written, so re-serializing
# never turns `0` into `0.0`.
Number = int | float


class Part(BaseModel):
    """A frozen piece of a result; unknown keys are refused (a typo is not silently dropped)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True, populate_by_name=True)

    def written(self) -> dict[str, Any]:
        """The fields this part was built or loaded with, in result.json's order and form."""
        return self.model_dump(mode="python", exclude_unset=True, by_alias=True)


class Blocker(Part):
    """One blocker (gate.model.states.Finding.to_dict, then routed to its owner by gate.model.owners)."""

    state: StateName
    kind: str
    slice: str | None
    case_ids: list[str]
    message: str
    location: str | None = None
    # Per-kind details (Finding.extra), each present only on the kinds that carry it.
    limit: int | None = None  # false_pass_limit / false_fail_limit
    detail: str | None = None  # a runner failure
    earlier_config_sha256: str | None = None  # held_out_spent
    partitions: list[str] | None = None  # partition_leak
    jaccard: float | None = None  # partition_leak
    lane: str | None = None  # control_missing
    missing_roles: list[str] | None = None  # control_missing
    card_section: str | None = None  # dataset card findings
    files: list[str] | None = None  # output_write_failed: the outputs that could not be written
    calibration: dict[str, Any] | None = None  # judge_uncalibrated / judge_unfit / calibration_expired
    owner_group: str | None = None
    owner: str | None = None

    @property
    def routed(self) -> bool:
        """True when the policy names owners: the blocker then says its owner group (maybe None)."""
        return "owner_group" in self.model_fields_set


class Counts(Part):
    eligible: int
    completed: int
    errored: int
    withheld: int
    unrun: int
    cached: int
    review: int
    not_needed: int = 0  # with `stopped_early` only


class SliceTally(Part):
    true_pass: int
    true_fail: int
    false_pass: int
    false_fail: int
    errors: int
    review: int
    unrun: int
    # The policy's limits for the slice, as applied (absent in results written before issue 19, and for a slice the
    # policy does not name); max_false_fails None: no limit.
    max_false_passes: int | None = None
    max_false_fails: int | None = None


class ControlFailure(Part):
    case_id: str
    role: str
    expected: str | None
    got: str | None


class Controls(Part):
    ok: bool
    failures: list[ControlFailure]


class Cost(Part):
    total: Number
    currency: str
    input_tokens: int
    output_tokens: int
    http_attempts: int
    retries: int
    cached_calls: int
    unanswered_attempts: int = 0  # absent before 2026-12-01
    usage_missing: int = 0  # absent before 2026-12-01
    budget_spent: Number | None = None  # absent before 2026-12-01: read `spent`
    over_reservation: int = 0
    rate_limited: int = 0  # attempts answered 429; absent before 2026-12-01
    by_slice: dict[str, Number] = Field(default_factory=dict)
    trend_total: Number | None = None  # the trend's share of `total`, with a trend
    # Cases billed here (records or journalled attempts of --out) that the lane no longer holds.
    outside_lane: list[str] | None = None
    # `gate run --batch`: the judgments after the controls were billed at `evaluator.price.batch`;
    # `batch_reserved` is the upper bound the cost boundary held at submission.
    batch: bool | None = None
    batch_reserved: Number | None = None

    @property
    def spent(self) -> float:
        """What the cost boundary counted (older files: the total)."""
        return self.total if self.budget_spent is None else self.budget_spent


class RunLineage(Part):
    policy_sha256: str
    dataset_sha256: str
    prompt_sha256: str
    metric_version: str
    evaluator_model: str
    ragas_version: str
    gate_version: str
    metric_definition_sha256: str | None = None
    config_fingerprint: str | None = None
    dataset_card_sha256: str | None = None
    responses_sha256: str | None = None  # a product lane's --responses file
    judge_shutdown_date: str | None = None  # the judge model's shutdown date, or "none" (gate/model/retirement.py)
    judge_shutdown_source: str | None = None  # "provider" or "policy"

    def items(self) -> Iterator[tuple[str, str]]:
        """The recorded fields, in order (a field an older gate did not write is left out)."""
        yield from self.written().items()


class Waived(Part):
    """One applied waiver (gate.model.overrides)."""

    override: str
    kind: str
    case_ids: list[str]
    slice: str | None = None  # an override of a product slice's verdict (`slice: NAME`)
    approver: str
    reason: str
    evidence: str
    expires: str
    follow_up: str


class OverrideRow(Part):
    """An override of the policy as result.json lists it, with whether it had expired."""

    id: str
    case_ids: list[str]
    slice: str | None = None
    blocker: str
    approver: str
    reason: str
    evidence: str
    expires: str
    follow_up: str
    expired: bool


class Limits(Part):
    max_total_cost: Number
    max_evaluator_errors: int


class CaseRow(Part):
    """One case of the decision (`gate.decide.evidence.CaseOutcome.to_dict`)."""

    case_id: str
    slice: str
    partition: str
    control_role: str | None
    human_label: str | None  # None: a product lane's answer, which no person labelled
    verdict: str | None
    labels: list[str | None]
    bucket: Literal["completed", "errored", "withheld", "unrun", "not_needed"]
    outcome: str
    reason: str | None
    error_kind: str | None
    error_message: str | None
    unstable: bool
    review: bool

    @classmethod
    def rows(cls, rows: Iterable[Mapping[str, Any]]) -> list[CaseRow]:
        """The decision's rows, each validated as it is made; every row has every field, so they
        share one record of which were set (per row, it would be a set of 14 names: a hundred
        thousand cases' worth of memory for the same answer)."""
        made: list[CaseRow] = []
        for row in rows:
            case = cls.model_validate(row)
            if made and case.__pydantic_fields_set__ == made[0].__pydantic_fields_set__:
                object.__setattr__(case, "__pydantic_fields_set__", made[0].__pydantic_fields_set__)
            made.append(case)
        return made


# --- optional sections, each written only by the feature that produces it ----------------------


class StratumRow(Part):
    prevalence: Number
    cases: int
    sample_share: Number
    completed: int
    true_pass: int
    true_fail: int
    false_pass: int
    false_fail: int
    oversampled: bool


class Rates(Part):
    false_pass_rate: float | None
    false_fail_rate: float | None
    agreement: float | None


class Strata(Part):
    """gate.model.strata.Weighting.to_dict."""

    oversampled_factor: Number
    strata: dict[str, StratumRow]
    oversampled: list[str]
    unstratified_cases: int
    raw: Rates
    prevalence_weighted: Rates
    prevalence_covered: Number


class CheckSummary(Part):
    """gate.validate.case_checks.checks_summary: one deterministic check."""

    gate: bool
    file: str
    function: str
    file_sha256: str
    allowed_values: list[str]
    counts: dict[str, int]
    failed_case_ids: list[str]
    failed_as_labelled_case_ids: list[str]
    error_case_ids: list[str]


class BandCounts(Part):
    """How many judgments fell in each band of the trend (keys "1".."5")."""

    b1: int = Field(alias="1")
    b2: int = Field(alias="2")
    b3: int = Field(alias="3")
    b4: int = Field(alias="4")
    b5: int = Field(alias="5")

    def in_order(self) -> tuple[int, int, int, int, int]:
        return (self.b1, self.b2, self.b3, self.b4, self.b5)


class TrendStats(Part):
    n: int
    mean: float | None
    distribution: BandCounts
    errors: int
    unrun: int


class TrendCost(Part):
    total: Number
    input_tokens: int
    output_tokens: int
    http_attempts: int
    budget_spent: Number
    unanswered_attempts: int
    rate_limited: int = 0  # absent before 2026-12-01


class TrendChange(Part):
    mean: float | None
    change: float | None


class TrendSliceChange(Part):
    mean: float | None
    distribution: BandCounts | None
    change: float | None


class TrendBase(Part):
    """gate.measure.trend.compare_to_base: the base run's trend beside this one, or why not."""

    compared: bool
    note: str | None = None  # when not compared
    same_bands: bool | None = None  # the rest: when compared
    overall: TrendChange | None = None
    slices: dict[str, TrendSliceChange] = Field(default_factory=dict)


class Trend(Part):
    """gate.measure.trend.summarize: the graded 1-5 judgment beside the verdict, never a gate."""

    name: str
    gate: bool
    bands: dict[str, str]
    overall: TrendStats
    slices: dict[str, TrendStats]
    cost: TrendCost
    base: TrendBase | None = None


class LedgerEntry(Part):
    config_sha256: str
    held_out_sha256: str
    state: str
    date: str
    gate_version: str
    held_out_cases: list[str] | None = None  # absent before issue 19: sha256(case_id "\n" gold) each


class Certification(Part):
    """gate.measure.certify.Certification.to_result."""

    config_sha256: str
    held_out_sha256: str
    ledger: str
    ledger_entry: LedgerEntry | None
    held_out_cases: list[str] | None = None  # absent before issue 19


class CalibrationSlice(Part):
    false_pass: int
    false_pass_rate: WilsonRate
    max_false_pass_high: float | None


class JudgeCalibration(Part):
    """gate.measure.calibrate.requirement.JudgeCalibration.to_result: the judge's calibration."""

    file: str
    ok: bool
    blockers: list[str]
    config_sha256: str
    calibrated_config_sha256: str | None
    calibrated_at: str | None
    age_days: int | None
    max_age_days: int | None
    cohen_kappa: float | None
    completed: int | None
    min_kappa: float | None
    slices: dict[str, CalibrationSlice]


class WilsonRate(Part):
    """gate.measure.calibrate.stats.Rate.to_dict: a proportion of n with its Wilson 95% interval (None when n is 0)."""

    value: float | None
    low: float | None
    high: float | None
    n: int


class DriftStats(Part):
    judged: int
    passed: int = Field(alias="pass")
    failed: int = Field(alias="fail")
    review: int
    errors: int
    unrun: int
    pass_rate: WilsonRate


class DriftChange(Part):
    pass_rate: WilsonRate | None
    change: float | None


class DriftPrevious(Part):
    compared: bool
    note: str | None = None
    generated_from: str | None = None
    overall: DriftChange | None = None
    slices: dict[str, DriftChange] = Field(default_factory=dict)


class DriftSample(Part):
    requested: int
    seed: int
    drawn: int
    of: int


class ProposedByReason(Part):
    disagreement: int
    new_failure_shape: int


class Drift(Part):
    """gate.measure.drift.lane: the production-trace sample of the drift lane."""

    traces_file: str
    traces_sha256: str
    skipped_lines: list[str]
    sample: DriftSample
    overall: DriftStats
    slices: dict[str, DriftStats]
    previous: DriftPrevious
    proposed_cases: int
    proposed_by_reason: ProposedByReason


class ShardRef(Part):
    index: int
    count: int
    cases: int | None = None  # this shard's non-control cases
    lane_cases: int | None = None  # the lane's, across every shard


class MergedShards(Part):
    count: int
    indices: list[int]
    missing: list[int]


class BatchCounts(Part):
    total: int = 0
    completed: int = 0
    failed: int = 0


class BatchRef(Part):
    """`gate run --batch`: the provider batch this result is waiting for or was collected from."""

    batch_id: str | None
    status: str
    submitted_at: str
    lines: int
    request_counts: BatchCounts | None = None
    collected: bool = False


class StoppedEarly(Part):
    """A `stop_when_decided` lane stopped paying once no remaining outcome could change quality_failed."""

    judged: int  # judgments recorded (in flight at the stop included: they finished and were billed)
    scheduled: int  # judgments the lane would have made
    not_needed: list[str]  # case ids never sent: neither unrun nor incomplete


class ProductRate(Part):
    """A proportion x/n with its one-sided bounds (gate.estimate.failure_rate.Rate)."""

    value: float
    low: float
    high: float
    x: int
    n: int


class ProductJudge(Part):
    """The judge's accuracy on the slice, from calibration.json: sensitivity and specificity."""

    se: ProductRate
    sp: ProductRate


class ProductBase(Part):
    """The same slice of the base branch's product run, case by case (`--base-result`)."""

    both_pass: int
    both_fail: int
    pass_to_fail: int
    fail_to_pass: int
    p_value: float  # exact McNemar on the discordant pairs
    regressed: bool  # significant, more pass -> fail than fail -> pass (blocks with fail_on_regression)
    turned_fail: list[str]


class ProductLook(Part):
    """The look that decided a slice of a lane that stops once decided."""

    n: int
    judged_fail: int


ProductVerdict = Literal["passed", "exceeded", "inconclusive", "judge_unfit", "incomplete"]


class AuditStratum(Part):
    """One stratum of a slice's audit: the answers the judge failed (or passed), and the audited prefix
    of their draw order."""

    population: int
    audited: int  # the prefix of the draw order up to its last answer with a final label
    people_fail: int
    people_pass: int
    open: int  # in the prefix without a final pass or fail: counted against the verdict either way


class AuditTransport(Part):
    """Does calibration describe the judge on this run? What it predicts against what the audit saw."""

    carries_over: bool
    # The judge's diagnostic odds ratio, [low, high] (null: unbounded): calibration's, and this run's audit's.
    predicted_odds_ratio: list[float | None]
    seen_odds_ratio: list[float | None]
    run_se: float | None  # the judge's accuracy on this run, as the audit implies it
    run_sp: float | None


class ProductAudit(Part):
    """The audit estimate: the slice's failure rate from people's labels on this run's own answers."""

    estimate: float | None
    low: float
    high: float
    verdict: Literal["passed", "exceeded", "inconclusive"]
    method: str
    judged_fail: AuditStratum
    judged_pass: AuditStratum
    confirmed_fail: list[str]  # judged fail and people failed it
    missed_fail: list[str]  # judged pass and people failed it
    cleared_fail: list[str] = Field(default_factory=list)  # judged fail and people passed it
    transport: AuditTransport | None
    decide_hint: str | None
    # Agreement among the reviewers whose labels these are (Krippendorff's alpha over the slice's audited
    # items, with its bootstrap 95% interval); below review.min_alpha the audit does not decide the slice.
    alpha: float | None = None
    alpha_interval: list[float] | None = None
    labels_disagree: bool = False


class PlannedStratum(Part):
    """One stratum of a slice's audit plan: its answers this run judged, and the planned prefix of its
    seeded draw (`sample` of them, their case ids in draw order), the first `rate_sample` of which the
    failure rate reads (a zero-tolerance slice labels every judged-fail answer besides)."""

    population: int
    sample: int
    rate_sample: int
    case_ids: list[str]


class PlanCaps(Part):
    judged_fail: int
    judged_pass: int


class PlanDesign(Part):
    """The design of the plan's two that the run's judged-fail count chose, sized before that count was known."""

    verdict: Literal["passed", "exceeded"]  # the verdict this design was sized to reach
    sized_at: float  # the failure rate it was sized at: a quarter of the limit, or twice it
    expected_judged_fail: int  # the judged-fail count calibration expects at that rate
    power: float  # P(verdict) at sized_at
    decides: bool  # power reaches power_target (else no audit of the slice's answers would at sized_at)
    caps: PlanCaps | None  # the first so many of each stratum's draw (None: no design decides)
    labelled: bool  # the design people label at this run's K (its prediction's side, where it decides)


class AuditPlan(Part):
    """Which of the slice's answers people label, fixed from the run's order seed before anyone labels
    (gate/decide/product/audit_plan.py, sized by gate/estimate/audit_sizing.py): the audit's verdict reads
    exactly this sample."""

    seed: str
    judged_fail: PlannedStratum
    judged_pass: PlannedStratum
    items: int
    labels: int  # items x reviewers_per_item
    reviewers_per_item: int
    aim: Literal["passed", "exceeded"]  # the verdict this run's prediction points to: which design is labelled
    sized_at: float  # the rate the aim's design was sized at (a quarter of the limit, or twice it)
    power: float  # P(aim) at sized_at
    power_target: float
    predicted: float  # calibration's prediction for the run (without calibration, the judge's share)
    designs: list[PlanDesign]  # the chosen design, fixed before K; its tests read it at every K
    calibrated: bool
    answers_needed: int | None = None  # no plan decides: the answers a run would need at the same rate
    limit_it_decides: float | None = None  # ... or the nearest limit this run could decide
    method: str
    # Why no plan of this run can decide the slice's limit, and what would (then the plan is empty).
    undecidable: str | None = None


class ZeroTolerance(Part):
    """`max_failures`: every answer the judge failed audited, at most this many confirmed failing."""

    max_failures: int
    verdict: Literal["passed", "failure_confirmed", "audit_required"]
    confirmed: list[str]  # judged fail, and people failed it
    cleared: list[str]
    unaudited: list[str]
    missed: list[str] = []  # judged pass, and people failed it: confirmed failures too
    unjudged: list[str] = []  # sent, no verdict from the judge (an error, a tie): nobody checked them


class AuditLedgerFile(Part):
    """One file of the audit's ledger, as the decision read it."""

    file: str
    lines: int
    last_line_sha256: str


class ProductSlice(Part):
    """One slice of a product lane: the judge-corrected failure rate against its limit."""

    n: int  # answers judged (errors never counted)
    judged_fail: int
    estimate: float | None  # None without calibration figures for the slice
    low: float | None
    high: float | None
    max_failure_rate: float
    verdict: ProductVerdict
    failing_cases: list[str]  # case ids judged fail
    decide_hint: str | None  # inconclusive: what would decide it
    judge: ProductJudge | None  # None without calibration figures for the slice
    base: ProductBase | None
    # With people's audit (--audit): which estimate decided the verdict (the audit's whenever it has usable
    # labels), the audit estimate, and the zero-tolerance count.
    decided_by: Literal["calibration", "audit"] = "calibration"
    # Decided by the audit: what the calibration estimate (estimate, low, high above) said on its own.
    calibration_verdict: ProductVerdict | None = None
    audit: ProductAudit | None = None
    zero_tolerance: ZeroTolerance | None = None
    # A lane that stops once decided: the look that decided the slice (the first `n` answers judged,
    # `judged_fail` of them failed), whose interval and verdict these are. None while it is open.
    decided_at: ProductLook | None = None
    # The run's audit plan of the slice (None in results written before it, or without an order seed).
    audit_plan: AuditPlan | None = None
    # `require_audit`, and no label of the plan decides the slice: it cannot pass (blocker audit_required).
    audit_required: bool = False


class Product(Part):
    """A product lane (`lanes.<name>.product: true`): the application's answers, gated per slice."""

    confidence: float
    method: str
    sequential: bool
    # The seed of the random order the lane's answers were judged in, and of the audit plan drawn from
    # it (gate/run/order_seed.py). It says where it came from: `github:<repository>:<run id>:<attempt>`
    # (the GitHub Actions workflow run's) or `drawn:<hex>` (a fresh random draw); anything else was given
    # by hand. None in a result written before it existed.
    order_seed: str | None = None
    slices: dict[str, ProductSlice]
    audit: str | None = None  # the ledger of people's labels the audit read (--audit)
    # Each file of that ledger as read: its lines and its last line's sha256 (the chain of lines anchors
    # every line but the last; compare this with the file git holds).
    audit_ledger: list[AuditLedgerFile] | None = None


class JudgeRetirement(Part):
    """The judge model's shutdown date (gate/model/retirement.py), as seen on the day decided."""

    model: str
    shutdown_date: str | None  # None: the provider announces none
    source: Literal["provider", "policy"]
    days_left: int | None  # to the shutdown date (0 on the day, negative after)
    notice_days: int  # evaluator.retirement_notice_days: from then on the reports say the days left
    blocks_within_days: int  # evaluator.retirement_blocks_within_days: from then on a release lane blocks
    release_lane: bool  # the lane gates a release (lanes.<lane>.release, or held_out or product)


class Result(Part):
    """result.json, schema_version 1."""

    schema_version: int
    policy_id: str
    policy_version: str
    lane: str
    state: StateName
    exit_code: int
    blockers: list[Blocker]
    counts: Counts
    unrun_case_ids: list[str]
    slices: dict[str, SliceTally]
    controls: Controls
    cost: Cost
    # The rest is absent only from the hand-built result of a crashed decision (gate.commands.crash).
    lineage: RunLineage | None = None
    waived: list[Waived] = Field(default_factory=list)
    overrides: list[OverrideRow] = Field(default_factory=list)
    limits: Limits | None = None
    notes: list[str] = Field(default_factory=list)
    cases: list[CaseRow] = Field(default_factory=list)
    # Sections added by optional features (in the order a run adds them).
    strata: Strata | None = None
    checks: dict[str, CheckSummary] | None = None
    trend: Trend | None = None
    certification: Certification | None = None
    drift: Drift | None = None
    shard: ShardRef | None = None
    merged_shards: MergedShards | None = None
    calibration: JudgeCalibration | None = None
    batch: BatchRef | None = None
    stopped_early: StoppedEarly | None = None
    product: Product | None = None
    judge_retirement: JudgeRetirement | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Result:
        return cls.model_validate(data)

    def with_(self, **fields: Any) -> Result:
        """A copy with `fields` set (validated, and written by `to_json`). Only the new fields are
        validated: the rest already were, and a result may hold thousands of case rows."""
        return self.model_copy(update={k: _adapter(k).validate_python(v) for k, v in fields.items()})

    def to_json(self) -> str:
        """result.json's text."""
        return "".join(self.json_chunks())

    def json_chunks(self) -> Iterator[str]:
        """result.json's text in pieces, for a file: the case rows are dumped one at a time as they
        are written, so a hundred thousand of them never exist as text (or as dicts) at once."""
        written = self.written() if "cases" not in self.model_fields_set else self._written_but_cases()
        yield from json.JSONEncoder(indent=2, ensure_ascii=False).iterencode(written)
        yield "\n"

    def _written_but_cases(self) -> dict[str, Any]:
        """`written()`, its `cases` dumped only when the encoder reaches each row."""
        written = self.model_copy(update={"cases": []}).written()  # `cases` keeps its place in the order
        written["cases"] = _Rows(self.cases)
        return written


class _Rows(list):  # type: ignore[type-arg]
    """Case rows that `json` encodes as a list, each dumped only when it is reached. (The encoder
    with an indent is pure Python: it asks a list for its length and iterates it.)"""

    def __init__(self, rows: list[CaseRow]) -> None:
        super().__init__()
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __bool__(self) -> bool:
        return bool(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (row.written() for row in self.rows)


@functools.cache
def _adapter(field: str) -> TypeAdapter[Any]:
    """The validator of one field of `Result` (unknown field names are a KeyError: a bug)."""
    annotation: Any = Result.model_fields[field].annotation
    return TypeAdapter(annotation)


# --- reading result.json back --------------------------------------------------------------------


class ResultProblem(Exception):
    """A result.json that cannot be used; `message` is one paragraph naming the file, field and fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def load_result(path: Path, what: str = "result file", fix: str = "pass the result.json a gate run wrote") -> Result:
    """A result.json from disk (untrusted), validated into a `Result`; else ResultProblem."""
    from gate.model.loading import FileProblem, format_validation_error, read_json

    try:
        data = read_json(path, what)
    except FileProblem as exc:
        raise ResultProblem(exc.message) from None
    if not isinstance(data, dict):
        raise ResultProblem(f"{path}: the {what} is not a JSON object; fix: {fix}")
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > 1:
        raise ResultProblem(
            f"{path}: the {what} has schema_version {version}, newer than this gate reads (1); fix: upgrade ragas-gate"
        )
    try:
        return Result.model_validate(data)
    except ValidationError as exc:
        lines = format_validation_error(exc, model=Result)
        first = f"{len(lines)} problems, the first: " if len(lines) > 1 else ""
        raise ResultProblem(
            f"{path}: the {what} is not a gate result ({first}{lines[0]}); if the file was edited or cut short, {fix}"
        ) from None
