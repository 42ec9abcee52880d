"""A lane with `require_calibration` gates only with a judge `gate calibrate` measured. Pure
but for reading the calibration file.

Before any model call the lane's judge configuration (`config_sha256`) is compared with
the one the calibration measured, its figures with the policy's bounds and its date with
`max_age_days`. Each problem is a `review_required` blocker: the lane still runs and reports its
verdict, but it cannot pass. The figures go into result.json (`calibration`) either way, so the
report shows how far the judge that decided can be trusted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gate.measure import certify
from gate.model.errors import UsageError
from gate.model.loading import FileProblem, format_validation_error, read_json
from gate.model.policy import CalibrationRequirement, LoadedPolicy
from gate.model.states import JUDGE_CALIBRATION_BLOCKERS, Finding, State
from gate.run.lineage import JudgeSettings

UNCALIBRATED, UNFIT, EXPIRED = "judge_uncalibrated", "judge_unfit", "calibration_expired"
assert {UNCALIBRATED, UNFIT, EXPIRED} == JUDGE_CALIBRATION_BLOCKERS
_FIX = "fix: run `gate calibrate` again on this policy's records (it writes config_sha256 and calibrated_at)"


class CalibrationFileError(UsageError):
    """A calibration.json the gate cannot read (exit 2): the message names the file, the field and the fix."""


class _Rate(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    value: float | None = Field(ge=0, le=1)
    low: float | None = Field(ge=0, le=1)
    high: float | None = Field(ge=0, le=1)
    n: int = Field(ge=0)


class _Tally(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    completed: int = Field(ge=0)
    false_pass: int = Field(ge=0)
    # The rest of the table (a product lane's sensitivity and specificity); None in a hand-cut file.
    true_pass: int | None = Field(default=None, ge=0)
    true_fail: int | None = Field(default=None, ge=0)
    false_fail: int | None = Field(default=None, ge=0)
    cohen_kappa: float | None = Field(ge=-1, le=1)
    false_pass_rate: _Rate


class CalibrationFile(BaseModel):
    """The fields of a calibration.json (gate/measure/calibrate/core.py `to_json`) the gate relies on."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    config_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    config: dict[str, Any] = Field(default_factory=dict)
    calibrated_at: dt.datetime
    overall: _Tally
    slices: dict[str, _Tally]

    @field_validator("calibrated_at")
    @classmethod
    def _utc(cls, v: dt.datetime) -> dt.datetime:
        if v.tzinfo is None or v.utcoffset() != dt.timedelta(0):
            raise ValueError("not in UTC; write it as gate calibrate does, e.g. 2026-12-01T09:30:00Z")
        return v


def read_calibration(path: Path, shown: str) -> CalibrationFile | None:
    """The calibration file, None when it does not exist; unreadable or malformed is a usage error."""
    if not path.exists():
        return None
    try:
        data = read_json(path, f"calibration file (`calibration.file`: {shown})")
    except FileProblem as exc:
        raise CalibrationFileError(f"{exc.message}; {_FIX}") from None
    if not isinstance(data, dict):
        raise CalibrationFileError(f"{path}: the calibration file is not a JSON object; {_FIX}")
    try:
        return CalibrationFile.model_validate(data)
    except ValidationError as exc:
        problem = format_validation_error(exc)[0]
        raise CalibrationFileError(
            f"{path} (`calibration.file` of the policy): {problem}; the gate cannot tell which judge it measured or "
            f"how well; {_FIX}"
        ) from None


def short(value: object) -> str:
    """A component's value as a person compares it: a sha256 by its first 12 characters."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={short(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "[" + ", ".join(short(v) for v in value) + "]"
    text = str(value)
    return text[:12] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text[:120]


def first_difference(calibrated: Mapping[str, Any], current: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The first component (in `current`'s order, the comparison order) whose value differs, with both values;
    for a mapping (provider settings) only its keys that differ."""
    for name, now in current.items():
        then = calibrated.get(name)
        if then == now:
            continue
        if isinstance(then, Mapping) and isinstance(now, Mapping):
            keys = [k for k in now if then.get(k) != now.get(k)] + [k for k in then if k not in now]
            return name, short({k: then.get(k) for k in keys}), short({k: now.get(k) for k in keys})
        return name, "(not recorded)" if then is None else short(then), short(now)
    return None


@dataclass(frozen=True)
class JudgeCalibration:
    """One lane's calibration check: the figures the report shows and the blockers it raises."""

    requirement: CalibrationRequirement
    path: Path
    config_sha256: str  # the judge this lane makes now
    calibration: CalibrationFile | None
    age_days: int | None
    findings: tuple[Finding, ...] = field(default=())

    def to_result(self) -> dict[str, Any]:
        """`calibration` in result.json."""
        req, cal = self.requirement, self.calibration
        out: dict[str, Any] = {
            "file": req.file,
            "ok": not self.findings,
            "blockers": [f.kind for f in self.findings],
            "config_sha256": self.config_sha256,
            "calibrated_config_sha256": cal.config_sha256 if cal else None,
            "calibrated_at": _iso(cal.calibrated_at) if cal else None,
            "age_days": self.age_days,
            "max_age_days": req.max_age_days,
            "cohen_kappa": cal.overall.cohen_kappa if cal else None,
            "completed": cal.overall.completed if cal else None,
            "min_kappa": req.min_kappa,
            "slices": {},
        }
        if cal is not None:
            out["slices"] = {
                name: {
                    "false_pass": t.false_pass,
                    "false_pass_rate": t.false_pass_rate.model_dump(),
                    "max_false_pass_high": req.false_pass_bound(name),
                }
                for name, t in cal.slices.items()
            }
        return out


def _iso(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _finding(kind: str, message: str, req: CalibrationRequirement, slice_: str | None = None, **detail: Any) -> Finding:
    return Finding(
        State.REVIEW_REQUIRED,
        kind,
        message,
        slice=slice_,
        extra={"calibration": {"file": req.file, **detail}},
    )


def _uncalibrated(
    req: CalibrationRequirement, cal: CalibrationFile | None, config: str, components: Mapping[str, Any]
) -> list[Finding]:
    cannot = "this lane cannot pass until the judge that decides it is measured against people"
    if cal is None:
        return [
            _finding(
                UNCALIBRATED,
                f"no calibration: {req.file} (`calibration.file`) does not exist, so nothing says how often this judge "
                f"passes answers people fail; {cannot}; fix: run the calibration lane, then `gate calibrate --out` "
                "into the policy's directory and commit calibration.json",
                req,
            )
        ]
    if cal.config_sha256 == config:
        return []
    diff = first_difference(cal.config, components)
    component, then, now = diff if diff else ("configuration", cal.config_sha256[:12], config[:12])
    return [
        _finding(
            UNCALIBRATED,
            f"{req.file} measured another judge: {component} {then} (calibrated) vs {now} (now); {cannot}; fix: "
            "calibrate this configuration (run the calibration lane, `gate calibrate`, commit calibration.json), or "
            f"restore the calibrated {component}",
            req,
            component=component,
            calibrated=then,
            current=now,
        )
    ]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 100:.0f}%"


def _unfit(req: CalibrationRequirement, cal: CalibrationFile, slices: Iterable[str]) -> list[Finding]:
    found: list[Finding] = []
    kappa = cal.overall.cohen_kappa
    if req.min_kappa is not None and (kappa is None or kappa < req.min_kappa):
        shown = "undefined" if kappa is None else f"{kappa:.2f}"
        found.append(
            _finding(
                UNFIT,
                f"the judge agrees too little with people: Cohen's kappa {shown} on n = {cal.overall.completed} "
                f"calibration cases, below min_kappa {req.min_kappa:g} ({req.file}); fix: improve the prompt or the "
                "judge and calibrate again, or add labelled calibration cases",
                req,
                figure="cohen_kappa",
                value=kappa,
                bound=req.min_kappa,
            )
        )
    for name in slices:
        bound = req.false_pass_bound(name)
        if bound is None:
            continue
        t = cal.slices.get(name)
        rate = t.false_pass_rate if t is not None else None
        if rate is not None and rate.high is not None and rate.high <= bound:
            continue
        if rate is None or rate.high is None:
            figures = "no case people failed was judged in this slice, so nothing bounds its false-pass rate"
        else:
            figures = (
                f"{t.false_pass if t else 0}/{rate.n} false passes, {_pct(rate.value)} (95% CI {_pct(rate.low)}-"
                f"{_pct(rate.high)}): the judge may miss up to {_pct(rate.high)} of {name} failures"
            )
        found.append(
            _finding(
                UNFIT,
                f"slice {name}: {figures}; the bound is {_pct(bound)} (max_false_pass_high, {req.file}); fix: add "
                f"labelled {name} cases the judge must fail, or improve the judge, and calibrate again",
                req,
                slice_=name,
                figure="false_pass_high",
                value=rate.high if rate else None,
                bound=bound,
            )
        )
    return found


def unfit(req: CalibrationRequirement, data: Mapping[str, Any], slices: Iterable[str]) -> list[Finding]:
    """What the policy's bounds say of a calibration's figures (`gate calibrate`'s JSON), before any lane
    uses it: a candidate judge's (`gate calibrate --candidate-model`), in the words a lane would use."""
    return _unfit(req, CalibrationFile.model_validate(data), slices)


def _expired(req: CalibrationRequirement, cal: CalibrationFile, age: int) -> list[Finding]:
    if req.max_age_days is None or age <= req.max_age_days:
        return []
    return [
        _finding(
            EXPIRED,
            f"the calibration in {req.file} is {age} days old (calibrated_at {_iso(cal.calibrated_at)}), older than "
            f"max_age_days {req.max_age_days}: the model behind the same name may have moved; fix: run the "
            "calibration lane and `gate calibrate` again and commit the new calibration.json",
            req,
            calibrated_at=_iso(cal.calibrated_at),
            age_days=age,
            max_age_days=req.max_age_days,
        )
    ]


def check_calibration(
    loaded: LoadedPolicy, lane: str, judge: JudgeSettings, ragas_version: str, today: dt.date
) -> JudgeCalibration | None:
    """None unless the lane requires calibration; else the figures and the blockers (review_required).

    `judge` and `ragas_version` make the judge this lane decides with (the run's, or the records'
    for `gate decide` and `gate merge`: `gate.measure.certify.recorded_judge`).
    """
    req = loaded.policy.calibration
    if req is None or not loaded.policy.lanes[lane].calibrated:
        return None
    config = certify.config_sha256(loaded, judge, ragas_version)
    components = certify.config_components(loaded, judge, ragas_version)
    path = loaded.resolve(req.file)
    cal = read_calibration(path, req.file)
    age = None if cal is None else (today - cal.calibrated_at.astimezone(dt.UTC).date()).days
    if age is not None and age < -1:  # a day's grace for clocks; a later date would never expire
        raise CalibrationFileError(
            f"{path} (`calibration.file` of the policy): calibrated_at {_iso(cal.calibrated_at) if cal else ''} is "
            f"in the future; {_FIX}"
        )
    # Figures measured on another judge say nothing about this one: uncalibrated is the one finding then.
    findings = _uncalibrated(req, cal, config, components)
    if cal is not None and not findings:
        findings = _unfit(req, cal, loaded.policy.slices) + _expired(req, cal, max(age or 0, 0))
    return JudgeCalibration(req, path, config, cal, age, tuple(findings))


def evidence(checked: JudgeCalibration | None) -> tuple[tuple[Finding, ...], dict[str, Any]]:
    """What the check adds to a result's evidence (gate.commands.assemble.RunEvidence): its blockers
    and the `calibration` section of result.json (nothing when the lane requires none)."""
    if checked is None:
        return (), {}
    return checked.findings, {"calibration": checked.to_result()}
