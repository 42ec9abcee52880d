"""Strata: prevalence-weighted rates beside raw counts, worked out by hand, on every surface."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite import case, controls, write_suite

from gate.cli import main
from gate.model.cases import load_dataset
from gate.model.errors import PolicyError
from gate.model.policy import load_policy
from gate.model.records import Attempt, Record, write_records
from gate.model.strata import weigh
from gate.validate import run_validators

PREVALENCE = {"common": 0.8, "rare": 0.2}


def hand_observations() -> list[tuple[str | None, str | None]]:
    # common: 10 cases: 5 human fail (1 false pass, 4 true fail), 5 human pass (5 true pass).
    common = [("common", "false_pass")] + [("common", "true_fail")] * 4 + [("common", "true_pass")] * 5
    # rare: 30 cases: 20 fail (10 false pass, 10 true fail), 10 pass (2 false fail, 8 true pass).
    rare = [("rare", "false_pass")] * 10 + [("rare", "true_fail")] * 10 + [("rare", "false_fail")] * 2
    rare += [("rare", "true_pass")] * 8
    return [*common, *rare]


def test_weighted_rates_match_the_hand_computation() -> None:
    w = weigh(PREVALENCE, [*hand_observations(), (None, "true_pass"), ("rare", None)])
    # Raw over the 40 completed stratified cases: false passes 11 of 25 human fails; false fails 2 of 15.
    assert w.raw.false_pass_rate == pytest.approx(11 / 25)
    assert w.raw.false_fail_rate == pytest.approx(2 / 15)
    assert w.raw.agreement == pytest.approx(27 / 40)
    # Weights: common 0.8/10 = 0.08, rare 0.2/30 = 1/150.
    # false pass: (0.08*1 + 10/150) / (0.08*5 + 20/150) = 0.146667 / 0.533333 = 0.275
    assert w.weighted.false_pass_rate == pytest.approx(0.275)
    # false fail: (2/150) / (0.08*5 + 10/150) = 0.013333 / 0.466667 = 1/35
    assert w.weighted.false_fail_rate == pytest.approx(1 / 35)
    # agreement: 0.8 * 9/10 + 0.2 * 18/30 = 0.84
    assert w.weighted.agreement == pytest.approx(0.84)
    rows = {r.name: r for r in w.rows}
    # rare is 31 of 41 stratified cases (the unfinished one counts in the sample): 0.756 > 1.5 x 0.2.
    assert rows["rare"].cases == 31 and rows["rare"].share == pytest.approx(31 / 41)
    assert w.oversampled == ["rare"] and not rows["common"].oversampled
    assert w.unstratified == 1 and w.prevalence_covered == pytest.approx(1.0)


def test_a_stratum_without_completed_cases_carries_no_weight_and_coverage_says_so() -> None:
    w = weigh({"a": 0.6, "b": 0.4}, [("a", "true_pass"), ("a", "false_fail"), ("b", None)])
    assert w.weighted.false_fail_rate == pytest.approx(0.5) and w.prevalence_covered == pytest.approx(0.6)


def strata_suite(tmp_path: Path, **overrides: object) -> Path:
    cases = [
        *controls(),
        *[case(f"c-{i}", partition="calibration", label="fail", stratum="common") for i in range(1, 3)],
        *[case(f"r-{i}", partition="calibration", label="fail", stratum="rare") for i in range(1, 7)],
    ]
    strata = {"common": {"prevalence": 0.8}, "rare": {"prevalence": 0.2}}
    lanes = {"calibration": {"partitions": ["calibration"], "controls": False}}
    return write_suite(tmp_path, cases, strata=strata, lanes=lanes, **overrides)


def test_prevalences_must_sum_to_one_and_unknown_strata_are_findings(tmp_path: Path) -> None:
    bad = write_suite(tmp_path / "bad", strata={"a": {"prevalence": 0.5}, "b": {"prevalence": 0.3}})
    with pytest.raises(PolicyError, match=r"sum to 0\.8"):
        load_policy(bad)
    policy = write_suite(
        tmp_path / "s", [*controls(), case("c-1", stratum="mobile")], strata={"web": {"prevalence": 1}}
    )
    loaded = load_policy(policy)
    found = [f for f in run_validators(loaded, load_dataset(loaded)) if "stratum" in f.message]
    assert len(found) == 1 and found[0].kind == "input_contract" and found[0].case_ids == ("c-1",)
    assert "'mobile'" in found[0].message and "strata" in found[0].message


def rec(case_id: str, judge: str, partition: str = "calibration") -> Record:
    return Record(
        case_id=case_id,
        slice="critical",
        partition=partition,
        human_label="fail",
        judge_label=judge,
        judge_reason=f"judge says {judge}",
        status="ok",
        lane="calibration",
        attempts=[Attempt(status_code=200, input_tokens=100, output_tokens=10)],
    )


def test_calibrate_shows_raw_and_weighted_side_by_side(tmp_path: Path) -> None:
    policy = strata_suite(tmp_path / "s")
    # common: 1 of 2 falsely passed; rare: 0 of 6. Raw 1/8; weighted 0.8*1/2 + 0.2*0 = 0.4.
    records = [rec("c-1", "pass"), rec("c-2", "fail"), *[rec(f"r-{i}", "fail") for i in range(1, 7)]]
    path = tmp_path / "records.jsonl"
    write_records(path, records)
    out = tmp_path / "cal"
    assert main(["calibrate", "--policy", str(policy), "--records", str(path), "--out", str(out)]) == 0
    strata = json.loads((out / "calibration.json").read_text())["strata"]
    assert strata["raw"]["false_pass_rate"] == pytest.approx(1 / 8)
    assert strata["prevalence_weighted"]["false_pass_rate"] == pytest.approx(0.4)
    assert strata["oversampled"] == ["rare"]  # 6/8 = 75% of the sample against 20% of production
    md = (out / "calibration.md").read_text()
    assert "| false-pass rate | 12.5% | 40.0% |" in md and "**oversampled**" in md


def test_the_run_report_shows_raw_and_weighted_side_by_side(tmp_path: Path) -> None:
    policy = strata_suite(tmp_path / "s")
    records = [rec("c-1", "pass"), rec("c-2", "fail"), *[rec(f"r-{i}", "fail") for i in range(1, 7)]]
    path = tmp_path / "records.jsonl"
    write_records(path, records)
    out = tmp_path / "out"
    code = main(["decide", "--policy", str(policy), "--records", str(path), "--out", str(out), "--lane", "calibration"])
    assert code == 1  # the false pass in slice critical (limit 0) fails the gate
    strata = json.loads((out / "result.json").read_text())["strata"]
    assert strata["strata"]["rare"]["cases"] == 6 and strata["strata"]["rare"]["oversampled"] is True
    assert strata["raw"]["false_pass_rate"] == pytest.approx(1 / 8)
    assert strata["prevalence_weighted"]["false_pass_rate"] == pytest.approx(0.4)
    report = (out / "report.md").read_text()
    assert "### Strata: raw and prevalence-weighted" in report
    assert "| false-pass rate | 12.5% | 40.0% |" in report
    assert "| `rare` | 20.0% | 6 | 75.0% | 6 | 0 | 0 | **oversampled** |" in report
