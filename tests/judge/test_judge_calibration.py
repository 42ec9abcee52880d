"""SPEC 17: a lane with `require_calibration` gates only with a judge `gate calibrate` measured.

Through the real CLI, the real ragas judge and real HTTP to the fake provider: calibrate, then the
release lane passes; change what makes the judge, lose the file, fall below a bound or let it age,
and the lane still runs and reports its verdict but ends `review_required`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_openai import FakeOpenAI, reply
from suite import PROMPT, case, controls, result, write_suite

from gate.cli import main

KEY_ENV = "GATE_TEST_KEY"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, "sk-test-calibration")
    with FakeOpenAI() as server:
        yield server


def calibration_cases(false_pass: bool = False) -> list[dict[str, Any]]:
    """Calibration cases in both slices; with `false_pass` the judge passes c-3, which people failed."""
    c3 = {"response": "Answer for c-3: refunds any time. [[judge:pass]]"} if false_pass else {}
    return [
        case("c-1", partition="calibration"),
        case("c-2", partition="calibration"),
        case("c-3", label="fail", partition="calibration", **c3),
        case("c-4", label="fail", partition="calibration"),
        case("c-5", label="fail", partition="calibration"),
        case("g-1", slice="general", partition="calibration"),
        case("g-2", slice="general", label="fail", partition="calibration"),
        case("g-3", slice="general", label="fail", partition="calibration"),
    ]


def calibrated_suite(
    root: Path,
    fake: FakeOpenAI,
    *,
    prompt: str = PROMPT,
    false_pass: bool = False,
    requirement: dict[str, Any] | None = None,
    release_false_pass: bool = False,
) -> Path:
    h2 = {"response": "Answer for h-2: refunds any time. [[judge:pass]]"} if release_false_pass else {}
    cases = [
        *controls(),
        *calibration_cases(false_pass),
        case("h-1", partition="held_out"),
        case("h-2", partition="held_out", label="fail", **h2),
    ]
    return write_suite(
        root,
        cases,
        prompt=prompt,
        evaluator={"base_url": fake.base_url},
        lanes={
            "calibration": {"partitions": ["calibration"], "controls": True},
            "release": {"partitions": ["held_out"], "controls": True, "require_calibration": True},
        },
        calibration={
            "file": "calibration.json",
            "min_kappa": 0.6,
            "max_false_pass_high": 0.8,
            "max_age_days": 90,
            **(requirement or {}),
        },
    )


def run(policy: Path, out: Path, lane: str = "release") -> int:
    return main(["run", "--policy", str(policy), "--lane", lane, "--out", str(out), "--no-cache"])


def calibrate(policy: Path, tmp_path: Path) -> dict[str, Any]:
    """Judge the calibration lane, then `gate calibrate` into the policy's directory (as a team commits it)."""
    run(policy, tmp_path / "cal-run", lane="calibration")
    records = tmp_path / "cal-run" / "records.jsonl"
    assert main(["calibrate", "--policy", str(policy), "--records", str(records), "--out", str(policy.parent)]) == 0
    data: dict[str, Any] = json.loads((policy.parent / "calibration.json").read_text())
    return data


def blockers(out: Path, kind: str) -> list[dict[str, Any]]:
    return [b for b in result(out)["blockers"] if b["kind"] == kind]


def test_calibrated_release_passes_and_a_prompt_edit_makes_it_review_required(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    suite_dir = tmp_path / "suite"
    policy = calibrated_suite(suite_dir, fake)
    cal = calibrate(policy, tmp_path)
    assert len(cal["config_sha256"]) == 64 and cal["calibrated_at"].endswith("Z")
    assert list(cal["config"]) == [
        "metric",
        "prompt",
        "evaluator_model",
        "provider_settings",
        "ragas_version",
        "allowed_values",
        "parser",
    ]
    assert cal["config"]["provider_settings"]["base_url_host"] == "127.0.0.1"  # the host only: no port, no path

    assert run(policy, tmp_path / "release") == 0
    res = result(tmp_path / "release")
    assert res["state"] == "passed"
    shown = res["calibration"]
    assert shown["ok"] and shown["config_sha256"] == cal["config_sha256"] and shown["cohen_kappa"] == 1.0
    assert shown["slices"]["critical"]["false_pass_rate"]["n"] == 3
    report = (tmp_path / "release" / "report.md").read_text()
    assert "Judge calibration" in report and "kappa 1.00 on n = 8" in report

    # A tuned prompt is another judge: the lane runs and reports, but cannot pass.
    capsys.readouterr()
    before = fake.count()
    calibrated_suite(suite_dir, fake, prompt=PROMPT + "Be strict about dates.\n")
    assert run(policy, tmp_path / "tuned") == 4
    assert fake.count() > before  # still judged: people see the verdict
    res = result(tmp_path / "tuned")
    assert res["state"] == "review_required" and res["counts"]["completed"] == 7
    [b] = blockers(tmp_path / "tuned", "judge_uncalibrated")
    assert b["state"] == "review_required" and b["calibration"]["component"] == "prompt"
    assert b["calibration"]["calibrated"] == cal["config"]["prompt"][:12]
    assert b["calibration"]["calibrated"] in b["message"] and b["calibration"]["current"] in b["message"]
    assert "judge_uncalibrated" in capsys.readouterr().out

    # Every path into the decision: `gate decide` on the tuned run's records says the same.
    assert main(["decide", "--policy", str(policy), "--records", str(tmp_path / "tuned" / "records.jsonl"),
                 "--out", str(tmp_path / "decided")]) == 4  # fmt: skip
    assert [b["kind"] for b in result(tmp_path / "decided")["blockers"]] == ["judge_uncalibrated"]


def test_another_sampling_setting_names_provider_settings(tmp_path: Path, fake: FakeOpenAI) -> None:
    suite_dir = tmp_path / "suite"
    policy = calibrated_suite(suite_dir, fake)
    calibrate(policy, tmp_path)
    raw = yaml.safe_load(policy.read_text())
    raw["evaluator"]["temperature"] = 0.5
    policy.write_text(yaml.safe_dump(raw, sort_keys=False))
    assert run(policy, tmp_path / "warm") == 4
    [b] = blockers(tmp_path / "warm", "judge_uncalibrated")
    assert b["calibration"]["component"] == "provider_settings"
    assert "temperature=0.0 (calibrated) vs temperature=0.5 (now)" in b["message"]


def test_no_calibration_file_is_uncalibrated(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = calibrated_suite(tmp_path / "suite", fake)
    # Said before anything is paid: the dry run names it.
    main(["run", "--policy", str(policy), "--lane", "release", "--dry-run"])
    assert "cannot pass (judge_uncalibrated, review_required)" in capsys.readouterr().out
    assert fake.count() == 0
    assert run(policy, tmp_path / "out") == 4
    [b] = blockers(tmp_path / "out", "judge_uncalibrated")
    assert "calibration.json" in b["message"] and "does not exist" in b["message"]
    assert result(tmp_path / "out")["counts"]["completed"] == 7  # the lane still ran


def test_kappa_below_the_minimum_is_unfit(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = calibrated_suite(tmp_path / "suite", fake, false_pass=True, requirement={"min_kappa": 0.9})
    cal = calibrate(policy, tmp_path)
    # 2 TP + 1 FP + 2 TF (critical), 1 TP + 2 TF (general): po 7/8, human pass 3/8, judge pass 4/8.
    assert cal["overall"]["cohen_kappa"] == pytest.approx((7 / 8 - 0.5) / 0.5)
    assert run(policy, tmp_path / "out") == 4
    [b] = blockers(tmp_path / "out", "judge_unfit")
    assert b["calibration"]["figure"] == "cohen_kappa" and "kappa 0.75 on n = 8" in b["message"]
    assert "min_kappa 0.9" in b["message"]


def test_a_kappa_the_policy_does_not_bound_is_said_to_gate_nothing(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without `min_kappa`, a low kappa decides nothing: the report says what the policy checked and
    that kappa is not among it, never "fits the policy" beside a kappa nobody bounded."""
    policy = calibrated_suite(tmp_path / "suite", fake, false_pass=True, requirement={"min_kappa": None})
    calibrate(policy, tmp_path)
    capsys.readouterr()
    assert run(policy, tmp_path / "out") == 0
    said = " ".join(capsys.readouterr().out.split())
    report = " ".join((tmp_path / "out" / "report.md").read_text().split()).replace("\\_", "_")  # Markdown's \_
    for shown in (said, report):
        assert "fits the policy" not in shown
        assert (
            "kappa 0.75 on n = 8, no min_kappa; meets the policy's requirement: the judge measured is this one, "
            "measured within 90 days, each slice's false-pass bound; kappa gates nothing (set calibration.min_kappa "
            "to require one)"
        ) in shown


def test_a_slice_whose_false_pass_high_exceeds_its_bound_is_unfit(tmp_path: Path, fake: FakeOpenAI) -> None:
    # One bound per slice: critical may reach 60% at the high end, general 95%.
    bounds = {"max_false_pass_high": {"critical": 0.6, "general": 0.95}}
    policy = calibrated_suite(tmp_path / "suite", fake, requirement=bounds)
    calibrate(policy, tmp_path)
    # critical: 0 false passes of 3 failures judged; Wilson high 0.5615 <= 0.6 fits.
    assert run(policy, tmp_path / "fits") == 0
    policy = calibrated_suite(tmp_path / "suite", fake, false_pass=True, requirement=bounds)
    calibrate(policy, tmp_path)
    assert run(policy, tmp_path / "out") == 4
    [b] = blockers(tmp_path / "out", "judge_unfit")
    assert b["slice"] == "critical" and b["calibration"]["figure"] == "false_pass_high"
    assert "1/3 false passes, 33% (95% CI 6%-79%)" in b["message"]
    assert "may miss up to 79% of critical failures" in b["message"] and "the bound is 60%" in b["message"]


def test_an_old_calibration_is_expired(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = calibrated_suite(tmp_path / "suite", fake)
    cal = calibrate(policy, tmp_path)
    (policy.parent / "calibration.json").write_text(json.dumps({**cal, "calibrated_at": "2020-01-01T00:00:00Z"}))
    assert run(policy, tmp_path / "out") == 4
    [b] = blockers(tmp_path / "out", "calibration_expired")
    assert "older than max_age_days 90" in b["message"] and b["calibration"]["calibrated_at"] == "2020-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda c: {k: v for k, v in c.items() if k != "config_sha256"}, "config_sha256"),
        (lambda c: {**c, "calibrated_at": "last tuesday"}, "calibrated_at"),
        (lambda c: {**c, "calibrated_at": "2026-01-01T00:00:00"}, "calibrated_at"),
        (lambda c: {**c, "overall": {**c["overall"], "cohen_kappa": "high"}}, "overall.cohen_kappa"),
    ],
)
def test_a_malformed_calibration_file_is_a_usage_error_naming_file_field_and_fix(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str], edit: Any, field: str
) -> None:
    policy = calibrated_suite(tmp_path / "suite", fake)
    cal = calibrate(policy, tmp_path)
    (policy.parent / "calibration.json").write_text(json.dumps(edit(cal)))
    capsys.readouterr()
    before = fake.count()
    assert run(policy, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "calibration.json" in err and field in err and "fix: run `gate calibrate` again" in err
    assert "Traceback" not in err and fake.count() == before


def test_policy_keys_are_checked(tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]) -> None:
    for requirement, words in [
        ({"max_false_pass_high": {"critical": 0.5}}, "no bound for slice general; fix"),
        ({"max_false_pass_high": {"critical": 0.5, "general": 0.5, "nope": 0.5}}, "slice 'nope'"),
        ({"max_false_pass_high": 1.5}, "not a rate"),
        ({"min_kappa": ".nan"}, "min_kappa"),
        ({"file": "../../outside.json"}, "outside the policy's directory"),
        ({"typo": 1}, "typo"),
    ]:
        policy = calibrated_suite(tmp_path / "suite", fake, requirement=requirement)
        text = policy.read_text().replace("'.nan'", ".nan")
        policy.write_text(text)
        capsys.readouterr()
        assert main(["validate", "--policy", str(policy)]) == 2, requirement
        assert words in capsys.readouterr().err, requirement
    raw = yaml.safe_load(policy.read_text())
    del raw["calibration"]
    policy.write_text(yaml.safe_dump(raw))
    assert main(["validate", "--policy", str(policy)]) == 2
    assert "`lanes.release.require_calibration` is true but the policy has no `calibration`" in capsys.readouterr().err


def test_the_example_release_lane_passes_with_its_shipped_calibration_and_not_after_a_prompt_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make calibrate-offline` wrote policies/example/calibration/; the release lane, judged by the same
    offline judge, passes with it. If this fails after a change to the example's judge, run
    `make calibrate-offline` and commit policies/example/calibration/."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    from demo_offline import careful_judge

    example = tmp_path / "example"
    shutil.copytree(ROOT / "policies" / "example", example)
    policy = example / "policy.yaml"
    judge, key_env = careful_judge(policy)
    with FakeOpenAI(default=judge) as fake:  # type: ignore[arg-type]
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv(key_env, "sk-offline-test")
        assert run(policy, tmp_path / "shipped") == 0
        shown = result(tmp_path / "shipped")["calibration"]
        assert shown["ok"] and shown["file"] == "calibration/calibration.json" and shown["completed"] == 12
        prompt = example / "prompts" / "refund-answer.txt"
        prompt.write_text(prompt.read_text() + "\nBe strict about refund windows.\n")
        fake.default = careful_judge(policy)[0]  # type: ignore[assignment]  # it knows cases by their prompt
        assert run(policy, tmp_path / "tuned") == 4
    tuned = result(tmp_path / "tuned")
    assert [b["kind"] for b in tuned["blockers"]] == ["judge_uncalibrated"]
    assert tuned["blockers"][0]["calibration"]["component"] == "prompt"
    assert tuned["counts"]["completed"] == result(tmp_path / "shipped")["counts"]["completed"]  # still judged


def test_every_report_shows_the_calibration_beside_the_verdict(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reviewer reads which slice blocked and how much the judge that blocked it can miss there."""
    from gate.model.result import load_result
    from gate.report.checkrun import build_check_run

    policy = calibrated_suite(tmp_path / "suite", fake, release_false_pass=True)
    calibrate(policy, tmp_path)  # critical: 0 false passes of 3 failures judged, Wilson high 56%
    capsys.readouterr()
    assert run(policy, tmp_path / "out") == 1  # h-2, which people failed, passed: false_pass_limit
    terminal = capsys.readouterr().out
    sentence = "critical: blocked by 1 false pass, with a judge that misses up to 56% of critical failures"
    kappa = (
        "kappa 1.00 on n = 8, min 0.6; meets the policy's requirement: the judge measured is this one, kappa at "
        "least 0.6, measured within 90 days, each slice's false-pass bound"
    )
    payload = build_check_run(load_result(tmp_path / "out" / "result.json"), "")
    for shown in (
        terminal,
        (tmp_path / "out" / "report.md").read_text(),
        (tmp_path / "out" / "summary.md").read_text(),
        payload.summary,
    ):
        assert sentence in shown and kappa in shown
        assert "general: false-pass rate 0/2 = 0% (95% CI 0%–66%), bound 80%" in shown


def test_decide_reads_the_judge_most_records_were_made_by(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Calibrated on host A; the release run starts there, then is resumed on host B, which re-judges
    # every case: its verdicts are B's, so the run says judge_uncalibrated, and `gate decide` on the
    # same records must say so too (it once read the first record's host: A, calibrated: passed).
    monkeypatch.setenv(KEY_ENV, "sk-test-calibration")
    with FakeOpenAI() as host_a, FakeOpenAI(host="127.0.0.2") as host_b:
        policy = calibrated_suite(tmp_path / "suite", host_a)
        data = yaml.safe_load(policy.read_text())
        del data["evaluator"]["base_url"]  # OPENAI_BASE_URL names the judge, as in a workflow
        policy.write_text(yaml.safe_dump(data, sort_keys=False))
        monkeypatch.setenv("OPENAI_BASE_URL", host_a.base_url)
        calibrate(policy, tmp_path)
        host_a.script("ctl-positive", reply("fail"))  # A's run stops at a failed control: few records
        out = tmp_path / "release"
        run(policy, out)
        monkeypatch.setenv("OPENAI_BASE_URL", host_b.base_url)
        assert main(["run", "--policy", str(policy), "--lane", "release", "--out", str(out), "--resume"]) == 4
        assert host_b.count() == 5 + 2  # B judged the whole lane again: 5 controls sent, 2 held-out cases
    resumed = result(out)
    assert [b["kind"] for b in resumed["blockers"]] == ["judge_uncalibrated"]
    monkeypatch.delenv("OPENAI_BASE_URL")
    decided = tmp_path / "decided"
    records = out / "records.jsonl"
    code = main(
        ["decide", "--policy", str(policy), "--lane", "release", "--records", str(records), "--out", str(decided)]
    )
    assert code == 4
    res = result(decided)
    assert [b["kind"] for b in res["blockers"]] == ["judge_uncalibrated"]
    assert "127.0.0.2" in res["blockers"][0]["message"]
    assert res["lineage"]["config_fingerprint"] == resumed["lineage"]["config_fingerprint"]
