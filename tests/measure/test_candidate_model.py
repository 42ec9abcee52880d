"""`gate calibrate --candidate-model NEW`: the candidate judges the calibration lane's labelled cases
through the real judge path (the fake provider answers per model, each with its own errors), the
current judge's records are reused as they are, both are written side by side with an exact paired
test, and the printed change, once applied, passes the calibration requirement. The policy file is
never edited."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Behaviour, FakeOpenAI, RecordedRequest, bad_request, model_of, oracle, reply
from suite import case, controls, gate, result, write_suite

from gate.estimate.failure_rate import mcnemar_exact
from gate.measure.calibrate.candidate import PairedErrors, SliceComparison

KEY_ENV = "GATE_TEST_KEY"
CURRENT, CANDIDATE = "gpt-4o-mini", "cand-1"
# The cases each model gets wrong (flipped from the people's label): different error patterns.
WRONG = {
    CURRENT: {"cal-a2", "cal-b1"},
    CANDIDATE: {"cal-a3"},
    "cand-persuaded": {"ctl-persuasion"},
    "cand-erring": {"cal-a3"},
    "cand-poor": {"cal-a0", "cal-a2", "cal-b1", "cal-b3"},  # half the labelled cases: kappa 0
}
ERRS = {"cand-erring": "cal-b0"}  # the case a model's provider refuses (400: not retried)


def judge(req: RecordedRequest) -> Behaviour:
    answer = oracle()(req)
    wrong = WRONG.get(model_of(req) or "", set())
    found = re.search(r"Answer for ((?:cal|ctl)-[a-z]+\d?)\b", req.prompt)
    if found and ERRS.get(model_of(req) or "") == found.group(1):
        return bad_request()
    if found and found.group(1) in wrong and answer.label in ("pass", "fail"):
        return reply("fail" if answer.label == "pass" else "pass", "scripted disagreement")
    return answer


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-candidate")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def provider() -> Iterator[FakeOpenAI]:
    models: dict[str, dict[str, Any]] = {CURRENT: {"shutdown_date": "2027-01-14"}, CANDIDATE: {"shutdown_date": None}}
    with FakeOpenAI(default=judge, models=models) as fake:
        yield fake


def suite(root: Path, fake: FakeOpenAI) -> Path:
    labelled = [
        case(f"cal-{s}{i}", slice=name, partition="calibration", label=label)
        for s, name in (("a", "critical"), ("b", "general"))
        for i, label in enumerate(("pass", "pass", "fail", "fail"))
    ]
    return write_suite(
        root,
        [*controls(), *labelled, case("h-1", partition="held_out"), case("h-2", partition="held_out", label="fail")],
        evaluator={"base_url": fake.base_url},
        lanes={
            "calibration": {"partitions": ["calibration"], "controls": True},
            "release": {"partitions": ["held_out"], "controls": True, "require_calibration": True},
        },
        calibration={"file": "calibration/calibration.json", "min_kappa": 0.2},
        certification={"ledger": "certification.jsonl"},
        slices={"general": {"max_false_passes": 1, "priority": 1}},
    )


def migrated(
    tmp_path: Path, provider: FakeOpenAI, capsys: pytest.CaptureFixture[str], model: str, *extra: str
) -> tuple[int, Path, str]:
    """The current judge's run of the calibration lane, then `gate calibrate --candidate-model MODEL`:
    its exit, its --out and what it printed (on one line)."""
    policy = suite(tmp_path / "s", provider)
    cal = tmp_path / "cal"
    assert gate("run", "--policy", policy, "--lane", "calibration", "--out", cal, "--no-cache") == 1
    mig = tmp_path / "mig"
    capsys.readouterr()
    code = gate("calibrate", "--policy", policy, "--records", cal, "--candidate-model", model, "--out", mig, *extra)
    return code, mig, " ".join(capsys.readouterr().out.split())


def test_the_candidate_judges_the_lane_beside_the_current_records_and_its_change_passes(
    tmp_path: Path, provider: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = suite(tmp_path / "s", provider)
    cal = tmp_path / "cal"
    assert gate("run", "--policy", policy, "--lane", "calibration", "--out", cal, "--no-cache") == 1  # its false pass
    before = policy.read_bytes()
    current_requests = provider.count()
    mig = tmp_path / "mig"
    args = ("calibrate", "--policy", policy, "--records", cal, "--candidate-model", CANDIDATE, "--out", mig)
    assert gate(*args, "--no-cache") == 0
    assert policy.read_bytes() == before  # never edited
    # The current judge's records were reused: every new request asked the candidate.
    new = provider.requests[current_requests:]
    assert new and {model_of(r) for r in new} == {CANDIDATE}
    data = json.loads((mig / "migration.json").read_text())
    assert (data["current"]["model"], data["candidate"]["model"]) == (CURRENT, CANDIDATE)
    critical = data["slices"]["critical"]
    # cal-a2 (a fail people labelled) the current judge passed; cal-a3 (a fail) the candidate passed.
    assert critical["current"]["se"]["k"] == 1 and critical["candidate"]["se"]["k"] == 1
    assert critical["paired"] == {
        "n": 4,
        "both_right": 2,
        "current_only_wrong": 1,
        "candidate_only_wrong": 1,
        "both_wrong": 0,
        "p_value": 1.0,
        "test": "exact McNemar (two-sided binomial on the discordant cases)",
    }
    assert data["slices"]["all slices"]["paired"]["current_only_wrong"] == 2
    assert data["current"]["shutdown_date"] == "2027-01-14" and data["candidate"]["shutdown_source"] == "provider"
    assert data["requirement"]["meets"] is True
    assert data["certification"][0]["lane"] == "release" and data["certification"][0]["spent"] is False
    shown = capsys.readouterr().out
    assert f"evaluator.model: {CURRENT} -> {CANDIDATE}" in shown and "McNemar p = 1.00" in shown
    assert "# Moving the judge" in (mig / "migration.md").read_text()
    # Adopt the printed change: the model line, calibration.json where calibration.file points.
    policy.write_text(before.decode().replace(f"model: {CURRENT}", f"model: {CANDIDATE}"))
    (policy.parent / "calibration").mkdir()
    (policy.parent / "calibration" / "calibration.json").write_bytes((mig / "calibration.json").read_bytes())
    assert gate("run", "--policy", policy, "--lane", "release", "--out", tmp_path / "rel", "--no-cache") == 0
    res = result(tmp_path / "rel")
    assert res["calibration"]["ok"] is True and res["lineage"]["evaluator_model"] == CANDIDATE


def test_the_candidate_is_paid_under_the_cost_boundary_and_what_it_left_unjudged_decides_nothing(
    tmp_path: Path, provider: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stopped by the boundary, the candidate has no figures to meet the requirement with: the migration
    says it cannot tell, names the cases, and prints no change to adopt (it printed 'does NOT meet it:
    Cohen's kappa undefined on n = 0 ... fix: improve the prompt', then the steps to adopt it)."""
    code, mig, shown = migrated(tmp_path, provider, capsys, CANDIDATE, "--no-cache", "--max-cost", "0.0001")
    assert code == 3  # its figures rest on part of the cases
    run = result(mig / "candidate-run")
    assert "budget_exhausted" in {b["kind"] for b in run["blockers"]}
    assert run["cost"]["budget_spent"] <= 0.0001
    data = json.loads((mig / "migration.json").read_text())
    assert data["candidate"]["state"] == "evaluation_incomplete"
    assert data["requirement"]["meets"] is None and data["adopt"] == []
    assert data["requirement"]["without_verdict"] == [f"cal-{s}{i}" for s in "ab" for i in range(4)]
    assert "calibration requirement: cannot tell: 8 of 8 labelled cases have no verdict from cand-1" in shown
    assert "--max-cost" in shown and "To adopt it" not in shown and "evaluator.model:" not in shown
    assert (
        "cannot tell" in (mig / "migration.md").read_text() and "To adopt it" not in (mig / "migration.md").read_text()
    )


def test_a_candidate_whose_controls_fail_is_said_unfit_for_that_and_no_change_is_printed(
    tmp_path: Path, provider: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its persuasion control passes: the lane stops, none of its figures count. The migration says so,
    not 'kappa undefined on n = 0 ... improve the prompt or add labelled cases', and prints no change."""
    code, mig, shown = migrated(tmp_path, provider, capsys, "cand-persuaded")
    assert code == 0  # written, with a verdict (as a candidate whose kappa falls short), not 3
    data = json.loads((mig / "migration.json").read_text())
    assert data["requirement"]["meets"] is False and data["adopt"] == []
    assert (
        "calibration requirement: the candidate does NOT meet it: its controls did not separate "
        "(ctl-persuasion: expected fail, got pass)" in shown
    )
    assert "kappa undefined" not in shown and "evaluator.model:" not in shown


def test_a_candidate_measured_whole_that_falls_short_of_min_kappa_prints_no_change_to_adopt(
    tmp_path: Path, provider: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every case and control judged, its kappa below the policy's min_kappa: the migration says it does
    not meet the requirement and offers no change (it printed 'does NOT meet it', then the steps to adopt
    it, which would have made every later run fail the calibration requirement)."""
    code, mig, shown = migrated(tmp_path, provider, capsys, "cand-poor")
    assert code == 0  # measured whole: a verdict on the candidate
    data = json.loads((mig / "migration.json").read_text())
    assert data["requirement"]["meets"] is False and data["requirement"]["without_verdict"] == []
    assert data["adopt"] == []
    assert "calibration requirement: the candidate does NOT meet it:" in shown and "kappa" in shown
    assert "To adopt it" not in shown and "evaluator.model:" not in shown
    assert "No change to adopt" in shown and "To adopt it" not in (mig / "migration.md").read_text()


def test_a_case_the_provider_refused_the_candidate_leaves_the_verdict_unknown_whatever_its_run_says(
    tmp_path: Path, provider: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its run is quality_failed (a false pass outranks the evaluator error), yet one labelled case has
    no verdict from it: the migration cannot tell, names the case, offers no change and exits 3 (it
    exited 0 with the steps to adopt a candidate measured on 7 of 8 cases)."""
    code, mig, shown = migrated(tmp_path, provider, capsys, "cand-erring")
    assert code == 3
    data = json.loads((mig / "migration.json").read_text())
    assert data["candidate"]["state"] == "quality_failed"
    assert data["requirement"]["meets"] is None and data["requirement"]["without_verdict"] == ["cal-b0"]
    assert data["adopt"] == []
    assert "cannot tell: 1 of 8 labelled cases has no verdict from cand-erring (cal-b0)" in shown
    assert "evaluator.model:" not in shown


def test_the_current_model_as_candidate_is_a_usage_error(
    tmp_path: Path, provider: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    assert migrated(tmp_path, provider, capsys, CURRENT)[0] == 2


@pytest.mark.parametrize(("current_only", "candidate_only"), [(0, 6), (6, 0), (3, 3), (1, 9)])
def test_the_paired_test_says_which_judge_errs_more_only_when_the_cases_show_it(
    current_only: int, candidate_only: int
) -> None:
    pair = PairedErrors(20, 10, current_only, candidate_only, 0)
    assert pair.p_value == mcnemar_exact(current_only, candidate_only)
    words = pair.in_words()
    if pair.p_value < 0.05:
        assert ("errs more often" in words) == (candidate_only > current_only)
    else:
        assert "no difference shown" in words
    back = SliceComparison.from_dict(
        {
            "labelled": 20,
            "paired": pair.to_dict(),
            **{
                side: {
                    "se": {"k": 3, "n": 4},
                    "sp": {"k": 5, "n": 5},
                    "completed": 9,
                    "not_completed": 0,
                }
                for side in ("current", "candidate")
            },
        }
    )
    assert back.paired == pair and back.current.se.value == 0.75
