"""The calibration check's edges that hand-made mutations showed no test held (issue 28, item 11,
gate/measure/calibrate/requirement.py). One calibrated suite (the real CLI, ragas and HTTP to the
fake provider), then `gate decide` of its release records against calibration.json as a team
might leave it: a slice the policy gained after calibrating, a judge whose agreement could not be
measured, a calibration exactly `max_age_days` old and one day older."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import result
from test_judge_calibration import blockers, calibrate, calibrated_suite, run

from gate.cli import main

KEY_ENV = "GATE_TEST_KEY"


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    """(policy, the release run's records, calibration.json as `gate calibrate` wrote it)."""
    tmp = tmp_path_factory.mktemp("calibrated")
    with pytest.MonkeyPatch.context() as mp, FakeOpenAI() as fake:
        mp.setenv(KEY_ENV, "sk-test-calibration-edges")
        policy = calibrated_suite(tmp / "suite", fake)
        cal = calibrate(policy, tmp)
        assert run(policy, tmp / "release") == 0
    return policy, tmp / "release" / "records.jsonl", cal


def decide(calibrated: tuple[Path, Path, dict[str, Any]], cal: dict[str, Any], out: Path) -> int:
    """`gate decide` of the release records with this calibration.json in the policy's directory."""
    policy, records, _ = calibrated
    (policy.parent / "calibration.json").write_text(json.dumps(cal), encoding="utf-8")
    return main(["decide", "--policy", str(policy), "--lane", "release", "--records", str(records), "--out", str(out)])


def test_the_calibration_as_written_passes(calibrated: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    assert decide(calibrated, calibrated[2], tmp_path / "d") == 0
    assert result(tmp_path / "d")["calibration"]["ok"] is True


def test_a_slice_the_calibration_never_measured_is_unfit(
    calibrated: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """The policy's slices are checked, not the file's: `general`, added after calibrating (so
    calibration.json does not list it), has no measured false-pass rate under its bound."""
    cal = calibrated[2]
    older = {**cal, "slices": {k: v for k, v in cal["slices"].items() if k != "general"}}
    assert decide(calibrated, older, tmp_path / "d") == 4
    [b] = blockers(tmp_path / "d", "judge_unfit")
    assert b["slice"] == "general" and "nothing bounds its false-pass rate" in b["message"]


def test_a_judge_whose_kappa_could_not_be_measured_is_unfit(
    calibrated: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """Cohen's kappa is undefined when people (or the judge) gave one label only: an unmeasured
    agreement is not enough agreement."""
    cal = calibrated[2]
    unmeasured = {**cal, "overall": {**cal["overall"], "cohen_kappa": None}}
    assert decide(calibrated, unmeasured, tmp_path / "d") == 4
    [b] = blockers(tmp_path / "d", "judge_unfit")
    assert b["calibration"]["figure"] == "cohen_kappa" and "kappa undefined" in b["message"]


@pytest.mark.parametrize(("age", "expired"), [(1, False), (90, False), (91, True)])
def test_a_calibration_expires_the_day_after_max_age_days(
    calibrated: tuple[Path, Path, dict[str, Any]], tmp_path: Path, age: int, expired: bool
) -> None:
    for _ in range(3):  # a run that crosses midnight (UTC) between the file and the check is retried
        today = dt.datetime.now(dt.UTC).date()
        when = dt.datetime.combine(today - dt.timedelta(days=age), dt.time(12), dt.UTC)
        cal = {**calibrated[2], "calibrated_at": when.strftime("%Y-%m-%dT%H:%M:%SZ")}
        code = decide(calibrated, cal, tmp_path / "d")
        if dt.datetime.now(dt.UTC).date() == today:
            break
    res = result(tmp_path / "d")
    assert res["calibration"]["age_days"] == age and res["calibration"]["max_age_days"] == 90
    assert code == (4 if expired else 0)
    assert bool(blockers(tmp_path / "d", "calibration_expired")) is expired
    old = "1 day old" if age == 1 else f"{age} days old"  # counted in words, never "day(s)"
    assert f", {old})" in (tmp_path / "d" / "report.md").read_text()


def test_a_slice_override_never_waives_the_calibration_requirements_judge_unfit(
    calibrated: tuple[Path, Path, dict[str, Any]], tmp_path: Path
) -> None:
    """A metric lane (`require_calibration`) whose calibration never measured slice `general`: judge_unfit,
    so the lane cannot pass. An override `{slice: general, blocker: judge_unfit}` is for a product
    lane's own verdict, a person deciding what the evidence left open; it does not reach the
    calibration requirement's finding (it turned review_required into passed, exit 0)."""
    import yaml

    policy, records, cal = calibrated
    waiver = {
        "id": "ovr-unfit", "slice": "general", "blocker": "judge_unfit", "approver": "@release-lead",
        "reason": "we trust the judge here", "evidence": "https://example.com/t/1", "expires": "2099-01-01",
        "follow_up": "calibrate general",
    }  # fmt: skip
    data = yaml.safe_load(policy.read_text(encoding="utf-8"))
    overridden = policy.parent / "policy-overridden.yaml"
    overridden.write_text(yaml.safe_dump({**data, "overrides": [waiver]}), encoding="utf-8")
    older = {**cal, "slices": {k: v for k, v in cal["slices"].items() if k != "general"}}
    code = decide((overridden, records, cal), older, tmp_path / "d")
    assert [b["slice"] for b in blockers(tmp_path / "d", "judge_unfit")] == ["general"]
    assert code == 4 and result(tmp_path / "d")["waived"] == []
