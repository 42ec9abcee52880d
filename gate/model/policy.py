"""The reviewed, versioned policy: strict models and the loader.

Unknown keys are errors everywhere: a typo in a limit must never silently fall back to a default.
An invalid policy file is a usage error (exit 2) that lists every problem found.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from gate.model.dataset_card import DatasetCard, read_card
from gate.model.errors import PolicyError, UsageError
from gate.model.escape import NAME_RULE, is_name, visible
from gate.model.loading import (
    FileProblem,
    canonical_json,
    format_validation_error,
    read_text,
    read_yaml_mapping,
    resolve_inside,
)
from gate.model.loading import sha256_hex as _sha256
from gate.model.overrides import Override, case_problems, kind_problems, slice_problems
from gate.model.paths import from_working_directory, shown_path
from gate.model.strict import Strict
from gate.model.wording import agree
from gate.model.yaml12 import as_written

ErrorKind = Literal["rate_limit", "server_error", "timeout", "connection"]
ControlRole = Literal["positive", "negative", "boundary", "persuasion", "injection", "missing_evidence"]
CONTROL_ROLES: tuple[str, ...] = ("positive", "negative", "boundary", "persuasion", "injection", "missing_evidence")
STANDARD_PARTITIONS: tuple[str, ...] = ("dev", "calibration", "held_out", "sentinel")
# Partitions a lane must judge whole: `stop_when_decided` is refused on a lane that runs one.
MEASURED_WHOLE: tuple[str, ...] = ("held_out", "calibration")
# Case fields a prompt may show the judge. The human label, its reason and the control role are
# the answer key: a prompt that could see them would grade itself.
PLACEHOLDER_FIELDS: frozenset[str] = frozenset({"user_input", "reference", "response"})
LEAKING_FIELDS: frozenset[str] = frozenset(
    {"human_adjudication", "human_label", "label", "expected_control_role", "pair", "adjudication"}
)
REQUIRED_PLACEHOLDER = "response"


class Metric(Strict):
    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    allowed_values: list[str] = Field(min_length=1)
    prompt_file: str | None = None
    prompt: str | None = None
    label_aliases: dict[str, str] = Field(default_factory=dict)

    @field_validator("version", mode="before")
    @classmethod
    def _version_as_text(cls, v: object) -> object:
        return as_written(v)

    @model_validator(mode="after")
    def _check(self) -> Metric:
        if (self.prompt_file is None) == (self.prompt is None):
            raise ValueError("give exactly one of `prompt_file` or `prompt`")
        allowed = set(self.allowed_values)
        if len(allowed) != len(self.allowed_values):
            raise ValueError("`allowed_values` has duplicates")
        if not {"pass", "fail"} <= allowed:
            raise ValueError("`allowed_values` must contain pass and fail")
        extra = allowed - {"pass", "fail", "review_required"}
        if extra:
            raise ValueError(f"`allowed_values` may only add review_required, not {sorted(extra)}")
        for alias, target in self.label_aliases.items():
            if target not in allowed:
                raise ValueError(f"`label_aliases.{alias}` maps to {target!r}, which is not an allowed value")
        return self


_ALL_RETRYABLE: tuple[ErrorKind, ...] = ("rate_limit", "server_error", "timeout", "connection")


class Retries(Strict):
    max_attempts: int = Field(default=3, ge=1, le=10)
    retry_on: list[ErrorKind] = Field(default_factory=lambda: list(_ALL_RETRYABLE))


class BatchPrice(Strict):
    """The provider's Batch API prices (`gate run --batch`), in the currency of `price`."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


class Price(Strict):
    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)
    # Printed in logs, reports and the Action's `cost` output: a code, never free text.
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")
    batch: BatchPrice | None = None  # required by `gate run --batch` only


class RateLimit(Strict):
    """The provider's windows for one that sends no `x-ratelimit-*` headers."""

    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _something(self) -> RateLimit:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError(
                "`rate_limit` sets neither `requests_per_minute` nor `tokens_per_minute`; fix: give the provider's "
                "limits (for example `{requests_per_minute: 500, tokens_per_minute: 200000}`) or remove `rate_limit`"
            )
        return self


class Evaluator(Strict):
    model: str = Field(min_length=1)
    base_url: str | None = None
    # The NAME of the variable holding the key, never the key: a pasted key would be echoed.
    api_key_env: str = Field(default="OPENAI_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)
    temperature: float = Field(default=0, ge=0, le=2)
    seed: int | None = None
    max_output_tokens: int = Field(default=256, ge=16)
    # Sent on every request as written (ragas would send 0.1 unasked); part of the fingerprint.
    top_p: float = Field(default=0.1, gt=0, le=1, allow_inf_nan=False)
    # json_object: JSON mode, the schema in a system message (every OpenAI-compatible server);
    # json_schema: the provider constrains decoding to the verdict's schema (small local models
    # copy a schema back in JSON mode, but cannot leave it under json_schema).
    response_format: Literal["json_object", "json_schema"] = "json_object"
    timeout_s: float = Field(default=60, gt=0)
    max_concurrency: int = Field(default=8, ge=1, le=256)
    retries: Retries = Field(default_factory=Retries)
    # Optional: the pacer also reads the provider's x-ratelimit-* headers (gate/judge/pacing.py).
    rate_limit: RateLimit | None = None
    repeats: int = Field(default=1, ge=1)
    # The model's context window: a rendered prompt longer than this is refused by `gate validate`.
    context_tokens: int = Field(default=128_000, ge=1_024)
    # No default: a model without a reviewed price would report $0 spent, so it is refused.
    price: Price | None = None
    # The model's shutdown date, for a provider that does not publish one (`GET /models/{model}`);
    # the provider's own date wins (gate/model/retirement.py). Not part of the judge's configuration.
    shutdown_date: dt.date | None = None
    # Days before the shutdown date the run starts to say how many are left.
    retirement_notice_days: int = Field(default=60, ge=0, le=3650)
    # Days before it a release lane is `judge_retiring` (review_required) until the judge moves.
    retirement_blocks_within_days: int = Field(default=14, ge=0, le=3650)

    @field_validator("repeats")
    @classmethod
    def _odd(cls, v: int) -> int:
        if v % 2 == 0:
            raise ValueError("repeats must be odd (1, 3, 5...) so a majority always exists")
        return v


class SliceLimit(Strict):
    max_false_passes: int = Field(ge=0)
    max_false_fails: int | None = Field(default=None, ge=0)
    priority: int = 100
    # A product lane: the most the slice's judge-corrected failure rate may be (0.02 is 2%).
    max_failure_rate: float | None = Field(default=None, ge=0, lt=1, allow_inf_nan=False)
    # A product lane, zero tolerance: every answer the judge fails must be audited by people, and more
    # than this many they confirm fails the slice.
    max_failures: int | None = Field(default=None, ge=0)
    # A product lane: the slice cannot pass without people's labels on this run's audit plan.
    require_audit: bool = False
    # A product lane: the failure rate the audit plan's design to pass is sized for (80% power there);
    # absent, a quarter of `max_failure_rate`. Sealed with the run, like the limit.
    audit_sized_at: float | None = Field(default=None, gt=0, lt=1, allow_inf_nan=False)

    @model_validator(mode="after")
    def _sized_under_the_limit(self) -> SliceLimit:
        if self.audit_sized_at is None:
            return self
        if self.max_failure_rate is None:
            raise ValueError(
                "`audit_sized_at` sizes the audit plan against `max_failure_rate`, which is not set; fix: add "
                "`max_failure_rate`, or drop `audit_sized_at`"
            )
        if self.audit_sized_at >= self.max_failure_rate:
            raise ValueError(
                f"`audit_sized_at` ({self.audit_sized_at:g}) must be below `max_failure_rate` "
                f"({self.max_failure_rate:g}): a product at its limit passes at most 1 - confidence of the time, so "
                "no plan can be sized to pass it; fix: give the failure rate you expect the product to have, under "
                "the limit"
            )
        return self


class Limits(Strict):
    max_evaluator_errors: int = Field(default=0, ge=0)
    max_total_cost: float = Field(gt=0)


class Lane(Strict):
    partitions: list[str] = Field(min_length=1)
    controls: bool = False
    # The lane cannot pass unless the policy's `calibration` measured this very judge.
    require_calibration: bool = False
    # Stop paying once no remaining outcome can change quality_failed (a PR lane's choice).
    stop_when_decided: bool = False
    # A product lane: the application's own answers (--responses), gated per slice by the failure rate the
    # calibrated judge implies; implies require_calibration.
    product: bool = False
    confidence: float = Field(default=0.95, gt=0.5, lt=1, allow_inf_nan=False)
    fail_on_regression: bool = False
    # A product lane: the ledger of people's labels on this run's audit queue (relative to the policy).
    audit: str | None = Field(default=None, min_length=1)
    # A product lane: no slice passes without people's labels on this run's audit plan.
    require_audit: bool = False
    # Whether the lane gates a release (a retiring judge blocks it); None: it does when it runs
    # `held_out` cases or is a product lane (`is_release`).
    release: bool | None = None

    @property
    def calibrated(self) -> bool:
        """The lane gates only with a judge `gate calibrate` measured (a product lane always does)."""
        return self.require_calibration or self.product

    @property
    def is_release(self) -> bool:
        """A lane that gates a release: `release` as written, else one that certifies the judge on
        `held_out` cases or gates the application's own answers (a product lane)."""
        return self.release if self.release is not None else (self.product or "held_out" in self.partitions)


class Leakage(Strict):
    jaccard_threshold: float = Field(default=0.8, gt=0, le=1)
    shingle_words: int = Field(default=3, ge=1, le=10)


class Check(Strict):
    """A deterministic check: a function in the team's repository (see gate/validate/case_checks.py)."""

    name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,100}$")
    file: str = Field(min_length=1)
    function: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    allowed_values: list[str] = Field(default_factory=lambda: ["pass", "fail"], min_length=1)
    gate: bool = True

    @model_validator(mode="after")
    def _check(self) -> Check:
        if len(set(self.allowed_values)) != len(self.allowed_values):
            raise ValueError("`allowed_values` has duplicates")
        if not {"pass", "fail"} <= set(self.allowed_values):
            raise ValueError("`allowed_values` must contain pass and fail")
        return self


TREND_BANDS: tuple[int, ...] = (1, 2, 3, 4, 5)
# Keys that would turn the trend into a gate. Refused with the reason, not as "unknown key".
_TREND_LIMIT_WORDS = ("min", "max", "limit", "threshold", "gate", "block", "fail", "below", "above")
TREND_LIMIT_REASON = (
    "a mean of an ordinal 1-5 scale is not a gate: the step from 3 to 4 is not the step from 4 to 5, and a "
    "change of judge moves the mean without any change in the product, so a threshold on it cannot be "
    "defended when it fires; fix: remove it and gate on the pass/fail criterion instead "
    "(`slices.<slice>.max_false_passes`); the trend stays in the report"
)


class Trend(Strict):
    """A graded rubric judged beside the verdict: reported per slice, never a gate (gate/measure/trend.py)."""

    name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,100}$")
    prompt_file: str | None = None
    prompt: str | None = None
    bands: dict[int, str]

    @model_validator(mode="after")
    def _check(self) -> Trend:
        if (self.prompt_file is None) == (self.prompt is None):
            raise ValueError("give exactly one of `prompt_file` or `prompt`")
        if sorted(self.bands) != list(TREND_BANDS):
            raise ValueError("`bands` must describe exactly the bands 1, 2, 3, 4 and 5")
        empty = [k for k, v in self.bands.items() if not v.strip()]
        if empty:
            n = len(empty)
            raise ValueError(
                f"{agree(n, 'band', 'bands')} {', '.join(map(str, empty))} {agree(n, 'has', 'have')} an empty description; "
                "fix: say what a response in that band is"
            )
        return self


class Drift(Strict):
    """The `scheduled` lane's unlabelled production traces (gate/measure/drift.py)."""

    traces: str = Field(min_length=1)
    sample: int = Field(default=200, ge=1)
    seed: int = 0
    prompt_file: str | None = None  # reference-free; default: the metric's prompt (if it needs no reference)
    prompt: str | None = None
    default_slice: str = Field(default="production", pattern=r"^[A-Za-z0-9._:/-]{1,200}$")

    @model_validator(mode="after")
    def _check(self) -> Drift:
        if self.prompt_file is not None and self.prompt is not None:
            raise ValueError("give at most one of `prompt_file` or `prompt`")
        return self


def _trend_limits(raw: object) -> list[str]:
    """Keys of a raw policy that put a limit on the trend."""
    if not isinstance(raw, dict):
        return []
    found: list[str] = []
    trend = raw.get("trend")
    if isinstance(trend, dict):
        known = set(Trend.model_fields)
        found += [
            f"trend.{k}" for k in trend if k not in known and any(w in str(k).lower() for w in _TREND_LIMIT_WORDS)
        ]
    for section in ("limits", "slices"):
        value = raw.get(section)
        if not isinstance(value, dict):
            continue
        items = [(f"{section}.{k}", v) for k, v in value.items()]
        if section == "slices":
            items = [(f"{key}.{k}", None) for key, v in items if isinstance(v, dict) for k in v]
        found += [key for key, _ in items if "trend" in key.split(".")[-1].lower()]
    return found


class Stratum(Strict):
    """A stratum's share of production traffic (gate/model/strata.py weighs rates by it)."""

    prevalence: float = Field(ge=0, le=1)


# A GitHub user or team (`@org/team`) or a plain name: printed in comments, so nothing else.
OWNER_HANDLE = r"^@?[A-Za-z0-9][A-Za-z0-9._/-]{0,99}$"


class Owners(Strict):
    """Who fixes each group of blocker kinds (gate/model/owners.py has the kind -> group mapping)."""

    product: str | None = Field(default=None, pattern=OWNER_HANDLE)
    gold_set: str | None = Field(default=None, pattern=OWNER_HANDLE)
    rubric: str | None = Field(default=None, pattern=OWNER_HANDLE)
    evaluator: str | None = Field(default=None, pattern=OWNER_HANDLE)
    provider: str | None = Field(default=None, pattern=OWNER_HANDLE)
    gate_policy: str | None = Field(default=None, pattern=OWNER_HANDLE)


class RecordsPolicy(Strict):
    """What records.jsonl keeps. `clear_text: false`: the judge's reason only as `sha256:<hex>`."""

    clear_text: bool = True


class ReviewPolicy(Strict):
    """How people's labels are made and read back (`gate review`)."""

    min_alpha: float = Field(default=0.667, ge=0, le=1)
    reviewers_per_item: int = Field(default=2, ge=1, le=20)


class GatedCases(Strict):
    """What a non-control case in a partition a lane gates on must carry (gate/validate/completeness.py)."""

    evidence_ids: bool = True
    reason: bool = True
    response_sha256: bool = True


class Certification(Strict):
    """The ledger of held-out sets already used to certify a configuration."""

    ledger: str = Field(min_length=1)  # JSON Lines, relative to the policy file


class CalibrationRequirement(Strict):
    """The calibration a lane with `require_calibration` needs (gate/measure/calibrate/requirement.py)."""

    file: str = Field(min_length=1)  # a calibration.json `gate calibrate` wrote, relative to the policy file
    min_kappa: float | None = Field(default=None, ge=-1, le=1)
    # The most a slice's false-pass Wilson high may be: one bound for every slice, or one per slice.
    max_false_pass_high: float | dict[str, float] | None = None
    max_age_days: int | None = Field(default=None, ge=0)

    @field_validator("max_false_pass_high", mode="before")
    @classmethod
    def _bounds(cls, v: object) -> object:
        values = list(v.values()) if isinstance(v, dict) else [] if v is None else [v]
        for bound in values:
            rate = isinstance(bound, int | float) and not isinstance(bound, bool) and 0 <= bound <= 1
            if not rate:  # NaN fails both comparisons
                raise ValueError(
                    f"{visible(str(bound), 40)} is not a rate; fix: write a number from 0 to 1 (0.25 is 25%), or one "
                    "per slice"
                )
        return v

    def false_pass_bound(self, slice_name: str) -> float | None:
        bound = self.max_false_pass_high
        return bound.get(slice_name) if isinstance(bound, dict) else bound


class Policy(Strict):
    version: Literal[1]
    policy_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    policy_version: str = Field(min_length=1)
    metric: Metric
    evaluator: Evaluator
    cases: list[str] = Field(min_length=1)
    evidence: str | None = None
    rubrics: list[str] = Field(min_length=1)
    slices: dict[str, SliceLimit] = Field(min_length=1)
    limits: Limits
    missing_evidence: Literal["block", "review"] = "block"
    lanes: dict[str, Lane] = Field(min_length=1)
    overrides: list[Override] = Field(default_factory=list)
    partitions: list[str] = Field(default_factory=list)
    leakage: Leakage = Field(default_factory=Leakage)
    cache_dir: str | None = None
    checks: list[Check] = Field(default_factory=list)
    trend: Trend | None = None
    drift: Drift | None = None
    certification: Certification | None = None
    calibration: CalibrationRequirement | None = None
    # Markdown or YAML, relative to the policy (gate/model/dataset_card.py); without it the validator blocks.
    dataset_card: str | None = None
    strata: dict[str, Stratum] = Field(default_factory=dict)
    owners: Owners | None = None
    records: RecordsPolicy = Field(default_factory=RecordsPolicy)
    review: ReviewPolicy = Field(default_factory=ReviewPolicy)
    gated_cases: GatedCases = Field(default_factory=GatedCases)

    @model_validator(mode="before")
    @classmethod
    def _no_limit_on_the_trend(cls, data: object) -> object:
        found = _trend_limits(data)
        if found:
            keys = ", ".join(f"`{k}`" for k in found)
            raise ValueError(f"{keys}: a limit on the trend is refused: {TREND_LIMIT_REASON}")
        return data

    @field_validator("policy_version", mode="before")
    @classmethod
    def _pv_as_text(cls, v: object) -> object:
        return as_written(v)

    @field_validator("slices")
    @classmethod
    def _slice_names(cls, v: dict[str, SliceLimit]) -> dict[str, SliceLimit]:
        bad = [name for name in v if not is_name(name)]
        if bad:
            raise ValueError(f"slice name '{visible(bad[0], 80)}' is not allowed: use {NAME_RULE}")
        return v

    @property
    def all_partitions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*STANDARD_PARTITIONS, *self.partitions]))

    @model_validator(mode="after")
    def _lanes_use_known_partitions(self) -> Policy:
        known = set(self.all_partitions)
        for name, lane in self.lanes.items():
            measured = [p for p in lane.partitions if p in MEASURED_WHOLE]
            if lane.stop_when_decided and measured:
                raise ValueError(
                    f"`lanes.{name}.stop_when_decided` is refused: the lane runs {measured}, which must be measured "
                    "whole (a certification or a calibration from part of its cases would be wrong); fix: remove "
                    f"`stop_when_decided` from `lanes.{name}` (use it on a pull-request lane)"
                )
            if lane.stop_when_decided and lane.fail_on_regression:
                raise ValueError(
                    f"`lanes.{name}` sets both `stop_when_decided` and `fail_on_regression`, which is refused: the "
                    "stop decides each slice on its failure rate alone, so the lane could stop and pass before it "
                    "judged enough answers to see a regression against the base run; fix: remove "
                    f"`stop_when_decided` from `lanes.{name}` (every answer is then judged and compared with the "
                    "base), or remove `fail_on_regression`"
                )
            bad = [p for p in lane.partitions if p not in known]
            if bad:
                raise ValueError(
                    f"`lanes.{name}.partitions` names unknown {agree(len(bad), 'partition', 'partitions')} "
                    f"{', '.join(bad)}; "
                    f"fix: declare them under `partitions:` or use one of {sorted(known)}"
                )
        ids = [o.id for o in self.overrides]
        if len(ids) != len(set(ids)):
            raise ValueError("`overrides` has duplicate ids; fix: give each override its own id")
        if self.strata:
            bad_strata = [name for name in self.strata if not is_name(name)]
            if bad_strata:
                raise ValueError(f"stratum name '{visible(bad_strata[0], 80)}' is not allowed: use {NAME_RULE}")
            total = sum(s.prevalence for s in self.strata.values())
            if abs(total - 1) > 0.01:
                raise ValueError(
                    f"`strata` prevalences sum to {total:g}, not 1; fix: give each stratum its share of production "
                    "traffic so that together they make 1 (within 0.01)"
                )
        names = [c.name for c in self.checks]
        if len(names) != len(set(names)):
            raise ValueError("`checks` has duplicate names; fix: give each check its own name")
        self._check_calibration()
        if self.drift is not None and "scheduled" in self.lanes:
            raise ValueError(
                "`lanes.scheduled` and `drift` both define the scheduled lane; with `drift:` the scheduled lane "
                "judges production traces; fix: rename `lanes.scheduled` (e.g. `nightly`) or remove `drift`"
            )
        return self

    def _check_product_lanes(self) -> None:
        for name, lane in self.lanes.items():
            product_only = {
                "fail_on_regression": lane.fail_on_regression,
                "audit": lane.audit is not None,
                "require_audit": lane.require_audit,
                "confidence": "confidence" in lane.model_fields_set,
            }
            key = next((k for k, on in product_only.items() if on), None)
            if not lane.product and key is not None:
                raise ValueError(
                    f"`lanes.{name}.{key}` applies to a product lane only; fix: add `product: true` to "
                    f"`lanes.{name}`, or remove `{key}`"
                )
        product = {p for lane in self.lanes.values() if lane.product for p in lane.partitions}
        for name, lane in self.lanes.items():
            shared = sorted(product & set(lane.partitions)) if not lane.product else []
            if shared:
                raise ValueError(
                    f"`lanes.{name}.partitions` runs {shared}, which a product lane runs too: a product lane's cases "
                    "carry no human label, so a lane that measures the judge against people cannot use them; fix: "
                    "give the product lane's cases a partition of their own (e.g. `product`)"
                )
            measured = [p for p in lane.partitions if p in MEASURED_WHOLE]
            if lane.product and measured:
                raise ValueError(
                    f"`lanes.{name}` is a product lane but runs {measured}, whose cases measure the judge against "
                    "people; fix: give the application's cases a partition of their own (e.g. `product`, declared "
                    "under `partitions:`)"
                )

    @property
    def product_partitions(self) -> frozenset[str]:
        """The partitions product lanes run: their cases need no human label and no response."""
        return frozenset(p for lane in self.lanes.values() if lane.product for p in lane.partitions)

    def _check_calibration(self) -> None:
        self._check_product_lanes()
        requiring = [name for name, lane in self.lanes.items() if lane.calibrated]
        if requiring and self.calibration is None:
            key = "product" if self.lanes[requiring[0]].product else "require_calibration"
            raise ValueError(
                f"`lanes.{requiring[0]}.{key}` is true but the policy has no `calibration`"
                + (" (a product lane corrects for the judge's measured miss rates)" if key == "product" else "")
                + "; fix: add "
                "`calibration: {file: calibration.json, min_kappa: 0.6, max_false_pass_high: 0.25, max_age_days: 90}` "
                f"(the file `gate calibrate` writes), or remove `{key}`"
            )
        bounds = self.calibration.max_false_pass_high if self.calibration is not None else None
        if isinstance(bounds, dict):
            unknown = [name for name in bounds if name not in self.slices]
            missing = [name for name in self.slices if name not in bounds]
            if unknown:
                raise ValueError(
                    f"`calibration.max_false_pass_high` names slice '{visible(unknown[0], 80)}', which `slices` does "
                    f"not declare; fix: use one of {sorted(self.slices)}"
                )
            if missing:
                raise ValueError(
                    f"`calibration.max_false_pass_high` gives no bound for {agree(len(missing), 'slice', 'slices')} "
                    f"{', '.join(missing)}; fix: name every slice "
                    "of `slices`, or write one number for all"
                )


@dataclass(frozen=True)
class LoadedPolicy:
    """A validated policy with its resolved files and its canonical hash."""

    path: Path
    policy: Policy
    prompt_text: str
    placeholders: tuple[str, ...]
    sha256: str
    prompt_sha256: str
    card: DatasetCard | None = None  # the `dataset_card` as read; None when the policy names none

    @property
    def base_dir(self) -> Path:
        return self.path.parent

    def resolve(self, relative: str) -> Path:
        """A path the policy names; `load_policy` has checked that it stays inside (see `resolve_inside`)."""
        return (self.base_dir / relative).resolve()

    @property
    def case_paths(self) -> list[Path]:
        return [self.resolve(p) for p in self.policy.cases]

    @property
    def evidence_path(self) -> Path | None:
        return self.resolve(self.policy.evidence) if self.policy.evidence else None


def with_judge_model(loaded: LoadedPolicy, model: str, price: Price | None = None) -> LoadedPolicy:
    """The policy as read, judging with another model (and its prices, when given): a candidate
    judge (`gate calibrate --candidate-model`). The file is untouched; a pinned shutdown date is the
    old model's, so it goes."""
    evaluator = loaded.policy.evaluator.model_copy(
        update={"model": model, "shutdown_date": None, **({"price": price} if price is not None else {})}
    )
    return dataclasses.replace(loaded, policy=loaded.policy.model_copy(update={"evaluator": evaluator}))


def prompt_placeholders(template: str) -> tuple[list[str], list[str]]:
    """Parse `str.format` placeholders; return (field names, problems).

    Attribute/index access, conversions and format specs are refused: ragas renders with
    `str.format`, and `{response:.200}` would silently truncate what the judge sees.
    """
    names: list[str] = []
    problems: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return [], [
            f"the prompt template is not a valid format string ({exc}); fix: double literal braces as {{{{ }}}}"
        ]
    for _literal, field_name, spec, conversion in parsed:
        if field_name is None:
            continue
        if field_name == "" or field_name.isdigit():
            problems.append("the prompt has a positional placeholder `{}`; fix: name it, e.g. `{response}`")
            continue
        root = field_name.split(".")[0].split("[")[0]
        if root != field_name:
            problems.append(f"placeholder `{{{field_name}}}` uses attribute or index access; fix: use `{{{root}}}`")
        if spec or conversion:
            problems.append(
                f"placeholder `{{{field_name}}}` has a format spec or conversion, which can truncate or alter "
                f"the input; fix: write `{{{root}}}`"
            )
        if root not in names:
            names.append(root)
    for name in names:
        if name in LEAKING_FIELDS:
            problems.append(
                f"placeholder `{{{name}}}` would show the judge the human answer key (label leak); "
                "fix: remove it from the prompt"
            )
        elif name not in PLACEHOLDER_FIELDS:
            problems.append(
                f"placeholder `{{{name}}}` is not a case field the judge may see; "
                f"fix: use only {sorted(PLACEHOLDER_FIELDS)}"
            )
    if REQUIRED_PLACEHOLDER not in names:
        problems.append(
            "the prompt has no `{response}` placeholder, so the judge would never see the answer; fix: add it"
        )
    return names, problems


def read_policy_file(policy_path: str, base_dir: Path, written: str, key: str, what: str) -> str:
    """The text of a file the policy names under `key` (a prompt), relative to the policy's directory.

    Unreadable, missing or outside the repository, it is a PolicyError naming the policy file.
    """
    try:
        return read_text(resolve_inside(base_dir, written, key), what)
    except FileProblem as exc:
        raise PolicyError(policy_path, [exc.message]) from None


def key_lines(path: Path) -> dict[str, int]:
    """Each key path of a policy file (`lanes.pr.partitions`, `cases[1]`) -> the 1-based line it is
    written on, for messages; empty when the file cannot be read again."""
    try:
        root = yaml.compose(path.read_text(encoding="utf-8-sig"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return {}
    lines: dict[str, int] = {}
    seen: set[int] = set()  # an alias points at a node already walked: walk it once
    todo: list[tuple[yaml.Node, str]] = [(root, "")] if root is not None else []
    while todo:
        node, at = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = f"{at}.{key.value}" if at else str(key.value)
                lines.setdefault(name, key.start_mark.line + 1)
                todo.append((value, name))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines.setdefault(f"{at}[{i}]", item.start_mark.line + 1)
                todo.append((item, f"{at}[{i}]"))
    return lines


_PROBLEM_KEY = re.compile(r"`([^`\s]+)`")


def with_lines(problems: list[str], lines: dict[str, int]) -> list[str]:
    """Each problem that opens with a key (`` `lanes.pr.bogus` ``) with the line that key is on (or
    the nearest key above it that is written: a missing key's mapping), first."""
    out: list[str] = []
    for problem in problems:
        found = _PROBLEM_KEY.match(problem)
        path, line = (found.group(1) if found else ""), None
        while path and line is None:
            line = lines.get(path)
            path = re.sub(r"(\.[^.\[]*|\[\d+\])$", "", path) if re.search(r"[.\[]", path) else ""
        out.append(f"line {line}: {problem}" if line is not None else problem)
    return out


def _read_policy(p: Path) -> tuple[dict[str, object], Policy]:
    """The policy file's parsed YAML and its validated model."""
    try:
        raw = read_yaml_mapping(p, "policy file")
    except FileProblem as exc:
        raise PolicyError(str(p), [exc.message]) from None
    try:
        return raw, Policy.model_validate(raw)
    except ValidationError as exc:
        raise PolicyError(str(p), with_lines(format_validation_error(exc, model=Policy), key_lines(p))) from None


def _prompt_text(p: Path, base_dir: Path, policy: Policy) -> tuple[str, list[str]]:
    """The judge prompt (from `metric.prompt_file` or inline) and the problem of an empty inline one."""
    metric = policy.metric
    if metric.prompt_file is not None:
        what = "prompt file (`metric.prompt_file`)"
        return read_policy_file(str(p), base_dir, metric.prompt_file, "metric.prompt_file", what), []
    prompt_text = metric.prompt or ""
    return prompt_text, [] if prompt_text.strip() else ["`metric.prompt` is empty; fix: write the judge prompt"]


def _named_file_problems(base_dir: Path, policy: Policy) -> list[str]:
    """Files the policy names must exist: a wrong path is a broken policy (exit 2), not a product
    failure. What is inside them is checked later, case by case. Other paths it names (the cache,
    the ledger) must stay inside the repository."""
    problems: list[str] = []
    named = [(f"cases[{i}]", rel) for i, rel in enumerate(policy.cases)]
    if policy.evidence is not None:
        named.append(("evidence", policy.evidence))
    for key, rel in named:
        try:
            target = resolve_inside(base_dir, rel, key)
        except FileProblem as exc:
            problems.append(exc.message)
            continue
        if not target.is_file():
            what = "does not exist"
            if target.is_dir():
                what = "is a directory"
            elif target.exists():
                what = "is not a regular file (a device, pipe or socket)"
            problems.append(
                f"`{key}`: {rel} ({shown_path(target)}) {what}; fix: correct the path, relative to the policy file"
            )
    inside = [("cache_dir", policy.cache_dir)]
    if policy.certification is not None:
        inside.append(("certification.ledger", policy.certification.ledger))
    if policy.calibration is not None:  # a missing file is `judge_uncalibrated`, not a broken policy
        inside.append(("calibration.file", policy.calibration.file))
    inside += [(f"lanes.{name}.audit", lane.audit) for name, lane in policy.lanes.items() if lane.audit is not None]
    for key, written in inside:
        if written is not None:
            try:
                resolve_inside(base_dir, written, key)
            except FileProblem as exc:
                problems.append(exc.message)
    return problems


def _dataset_card(base_dir: Path, policy: Policy) -> tuple[DatasetCard | None, list[str]]:
    if policy.dataset_card is None:
        return None, []
    try:
        return read_card(resolve_inside(base_dir, policy.dataset_card, "dataset_card")), []
    except FileProblem as exc:
        return None, [exc.message]


def _prompt_problems(policy: Policy, prompt_text: str) -> tuple[list[str], list[str]]:
    """The prompt's placeholder names and the problems with them, named by where the prompt is."""
    names, problems = prompt_placeholders(prompt_text)
    prompt_file = policy.metric.prompt_file
    where = f"`metric.prompt_file` ({prompt_file})" if prompt_file else "`metric.prompt`"
    return names, [f"{where}: {m}" for m in problems]


def _price_problems(policy: Policy) -> list[str]:
    if policy.evaluator.price is not None:
        return []
    return [
        f"`evaluator.price` is missing for model {policy.evaluator.model!r}: without reviewed prices the "
        "gate would report $0 spent; fix: add `price: {input_per_mtok: X, output_per_mtok: Y, currency: USD}`"
    ]


def load_policy(path: str | Path) -> LoadedPolicy:
    """Load and validate a policy file; raise PolicyError listing every problem."""
    if not str(path).strip():
        raise UsageError("--policy is empty; fix: pass the path of the policy YAML file, e.g. policies/x/policy.yaml")
    p = Path(path)
    source = from_working_directory(p)  # messages name `p` as written
    raw, policy = _read_policy(p)
    prompt_text, problems = _prompt_text(p, source.parent, policy)
    problems += _named_file_problems(source.parent, policy)
    card, card_problems = _dataset_card(source.parent, policy)
    names, prompt_problems = _prompt_problems(policy, prompt_text)
    override_kinds = kind_problems(policy.overrides, policy.missing_evidence)
    problems += card_problems + prompt_problems + _price_problems(policy) + override_kinds
    problems += slice_problems(policy.overrides, set(policy.slices))
    loaded = LoadedPolicy(
        path=source.resolve(),
        policy=policy,
        prompt_text=prompt_text,
        placeholders=tuple(names),
        # Canonical hash: parsed content (so comments and key order do not matter) + the prompt text.
        sha256=_sha256(canonical_json(raw) + "\n" + prompt_text),
        prompt_sha256=_sha256(prompt_text),
        card=card,
    )
    if override_kinds:
        # The overrides' case ids are checked against the dataset later; say those problems now
        # too, so one edit fixes the override (a wrong kind and a wrong case id, one pass).
        known = _case_ids_leniently(loaded)
        problems += case_problems(policy.overrides, known) if known is not None else []
    if problems:
        raise PolicyError(str(p), with_lines(problems, key_lines(p)))
    return loaded


def _case_ids_leniently(loaded: LoadedPolicy) -> set[str] | None:
    """The case ids of the policy's case files, read leniently (None when a file cannot be read):
    the dataset's own check reports whatever else is wrong with them."""
    known: set[str] = set()
    for path in loaded.case_paths:
        try:
            text = read_text(path, "case file")
        except (FileProblem, OSError):
            return None
        for line in text.splitlines():
            with contextlib.suppress(ValueError, RecursionError):
                row = json.loads(line)
                if isinstance(row, dict) and isinstance(row.get("case_id"), str):
                    known.add(row["case_id"])
    return known


def today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()
