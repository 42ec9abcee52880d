"""Overrides (SPEC section 8): they waive quality blockers only, for the case ids they name.

Anything else is a policy error (exit 2) naming the override, the field and the fix. `gate run`
and `gate decide` agree on what an override does, and the waiver is applied once, at the end.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from suite import case, controls, write_suite
from test_decide import TODAY, base_records, controls_ok, err, kinds, ok, run_decide

from gate.cli import main
from gate.model.states import Finding, State

KEY_ENV = "GATE_TEST_KEY"


def override(blocker: str, case_ids: list[str], *, oid: str = "OVR-7", expires: str = "2026-12-31") -> dict[str, Any]:
    return {
        "id": oid,
        "case_ids": case_ids,
        "blocker": blocker,
        "approver": "@owner",
        "reason": "reviewed",
        "evidence": "https://example.invalid/7",
        "expires": expires,
        "follow_up": "TICKET-7",
    }


# ---- what an override may not do: policy errors, exit 2 ------------------------------------------
@pytest.mark.parametrize(
    "blocker",
    [
        "evaluator_errors",
        "unrun_cases",
        "budget_exhausted",
        "missing_credentials",
        "control_failed",
        "input_contract",
        "unknown_slice",
        "partition_leak",
        "expired_override",
    ],
)
def test_an_override_of_a_non_quality_blocker_is_a_policy_error(
    tmp_path: Path, blocker: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path, overrides=[override(blocker, ["c-2"])])
    assert main(["validate", "--policy", str(policy)]) == 2
    err_text = capsys.readouterr().err
    assert "OVR-7" in err_text and "overrides.0.blocker" in err_text and blocker in err_text
    assert "false_pass_limit" in err_text and "fix" in err_text  # the fix lists what may be waived


def test_a_misspelled_kind_is_a_policy_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path, overrides=[override("false_passes", ["c-2"])])
    assert main(["validate", "--policy", str(policy)]) == 2
    err_text = capsys.readouterr().err
    assert "OVR-7" in err_text and "false_passes" in err_text and "unknown" in err_text


def test_an_unknown_case_id_is_a_policy_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path, overrides=[override("false_pass_limit", ["c-2", "c-99"])])
    for argv in (["validate", "--policy", str(policy)], ["run", "--policy", str(policy), "--dry-run"]):
        assert main(argv) == 2
        err_text = capsys.readouterr().err
        assert "OVR-7" in err_text and "overrides.0.case_ids" in err_text and "c-99" in err_text
        assert "c-2" not in err_text.split("c-99")[0].split("OVR-7")[-1]  # only the unknown one is named


def test_missing_evidence_may_be_waived_only_when_routed_to_review(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [*controls(), case("c-1"), case("c-2", reference="")]
    blocked = write_suite(tmp_path / "block", cases, overrides=[override("missing_evidence", ["c-2"])])
    assert main(["validate", "--policy", str(blocked)]) == 2
    assert "missing_evidence: block" in capsys.readouterr().err
    routed = {"missing_evidence": "review", "overrides": [override("missing_evidence", ["c-2"])]}
    review = write_suite(tmp_path / "review", cases, **routed)
    assert main(["validate", "--policy", str(review)]) != 2  # a finding to route, not a policy error
    finding = Finding(State.REVIEW_REQUIRED, "missing_evidence", "no reference", case_ids=("c-2",))
    records = [*controls_ok(), ok("c-1", "pass")]
    d = run_decide(tmp_path / "decide", records, cases, findings=[finding], **routed)
    assert d.state is State.PASSED and d.result.written()["waived"][0]["kind"] == "missing_evidence"


def test_the_reported_defect_an_errored_case_cannot_be_waived_into_a_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`blocker: evaluator_errors` on an errored case gave `passed`, exit 0."""
    suite = tmp_path / "suite"
    write_suite(suite)
    records = [*controls_ok(), ok("c-1", "pass"), err("c-2"), ok("g-1", "pass", slice="general")]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({**r.model_dump(mode="json"), "lane": "pr"}) + "\n" for r in records))
    policy = write_suite(suite, overrides=[override("evaluator_errors", ["c-2"])])
    assert main(["decide", "--policy", str(policy), "--records", str(path)]) == 2
    assert "OVR-7" in capsys.readouterr().err


# ---- what an override does: waive the named cases of a quality blocker -----------------------------
def test_a_limit_override_makes_the_named_case_not_count(tmp_path: Path) -> None:
    cases = [*controls(), *(case(f"g-{i}", slice="general", label="fail") for i in range(3))]
    two_false = [*controls_ok(), *(ok(f"g-{i}", "pass", human="fail", slice="general") for i in range(2))]
    two_false.append(ok("g-2", "fail", human="fail", slice="general"))
    assert run_decide(tmp_path / "a", two_false, cases).state is State.QUALITY_FAILED  # limit 1, 2 false passes
    d = run_decide(tmp_path / "b", two_false, cases, overrides=[override("false_pass", ["g-0"])])
    assert d.state is State.PASSED, d.blockers
    (w,) = d.result.written()["waived"]
    assert (w["override"], w["kind"], w["case_ids"]) == ("OVR-7", "false_pass_limit", ["g-0"])
    # Still over the limit with the waiver: the blocker stays and names only the cases that count.
    three = [*two_false[:-1], ok("g-2", "pass", human="fail", slice="general")]
    d3 = run_decide(tmp_path / "c", three, cases, overrides=[override("false_pass", ["g-0"])])
    assert d3.state is State.QUALITY_FAILED and kinds(d3)["false_pass_limit"] == ["g-1", "g-2"]


def test_a_pair_override_waives_only_when_it_names_every_case_concerned(tmp_path: Path) -> None:
    pair = {"id": "p-1", "kind": "invariant"}
    cases = [*controls(), case("p-a", pair=pair), case("p-b", pair=pair)]
    records = [*controls_ok(), ok("p-a", "pass"), ok("p-b", "fail")]  # one false fail: within the limit
    assert kinds(run_decide(tmp_path / "a", records, cases))["pair_violated"] == ["p-a", "p-b"]
    half = run_decide(tmp_path / "b", records, cases, overrides=[override("pair_violated", ["p-a"])])
    assert half.state is State.QUALITY_FAILED and kinds(half)["pair_violated"] == ["p-b"]
    whole = run_decide(tmp_path / "c", records, cases, overrides=[override("pair_violated", ["p-a", "p-b"])])
    assert whole.state is State.PASSED, whole.blockers


@pytest.mark.parametrize(
    ("blocker", "label", "judged"),
    [("label_conflict", "review_required", "pass"), ("abstention", "pass", "review_required")],
)
def test_review_blockers_can_be_waived(tmp_path: Path, blocker: str, label: str, judged: str) -> None:
    cases = [*controls(), case("c-1"), case("c-2", label=label)]
    records = [*controls_ok(), ok("c-1", "pass"), ok("c-2", judged, human=label)]
    metric = {"allowed_values": ["pass", "fail", "review_required"]}
    assert kinds(run_decide(tmp_path / "a", records, cases, metric=metric))[blocker] == ["c-2"]
    d = run_decide(tmp_path / "b", records, cases, metric=metric, overrides=[override(blocker, ["c-2"])])
    assert blocker not in kinds(d) and d.result.written()["waived"][0]["kind"] == blocker


def test_an_expired_override_stays_expired_and_waives_nothing(tmp_path: Path) -> None:
    records = [*base_records()[:-2], ok("c-2", "pass", human="fail"), ok("g-1", "pass", slice="general")]
    stale = override("false_pass_limit", ["c-2"], expires=(TODAY - dt.timedelta(days=1)).isoformat())
    d = run_decide(tmp_path, records, overrides=[stale])
    k = kinds(d)
    assert k["false_pass_limit"] == ["c-2"] and k["expired_override"] == ["c-2"]
    assert [b.state for b in d.blockers if b.kind == "expired_override"] == [State.REVIEW_REQUIRED]
    assert d.result.written()["waived"] == []


def test_run_and_decide_agree_on_a_waived_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A violated pair that an active override waives does not stop `gate run`; decide agrees."""
    monkeypatch.setenv(KEY_ENV, "sk-test-overrides-0123456789")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    pair = {"id": "p-1", "kind": "invariant"}
    cases = [*controls(), case("p-a", pair=pair), case("p-b", pair=pair), *(case(f"z-{i}") for i in range(3))]
    with FakeOpenAI() as fake:
        fake.script("p-b", reply("fail", "Reads as a refusal."))
        policy = write_suite(
            tmp_path / "s",
            cases,
            evaluator={"base_url": fake.base_url, "max_concurrency": 1},
            overrides=[override("pair_violated", ["p-a", "p-b"])],
        )
        out = tmp_path / "out"
        assert main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"]) == 0
        assert fake.count("for z-") == 3  # scheduling went on past the waived pair
    ran = json.loads((out / "result.json").read_text())
    assert ran["state"] == "passed" and ran["waived"][0]["kind"] == "pair_violated"
    assert (
        main(["decide", "--policy", str(policy), "--records", str(out / "records.jsonl"), "--out", str(tmp_path / "d")])
        == 0
    )
    decided = json.loads((tmp_path / "d" / "result.json").read_text())
    assert (decided["state"], decided["blockers"], decided["waived"]) == (ran["state"], ran["blockers"], ran["waived"])


def test_an_unknown_kind_and_an_unknown_case_id_are_both_said_in_one_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path, overrides=[override("false_passes", ["c-2", "c-99"])])
    for argv in (["validate", "--policy", str(policy)], ["run", "--policy", str(policy), "--dry-run"]):
        assert main(argv) == 2
        err_text = capsys.readouterr().err
        assert "overrides.0.blocker" in err_text and "unknown blocker kind 'false_passes'" in err_text
        assert "overrides.0.case_ids" in err_text and "c-99 is not a case of the dataset" in err_text
        assert "2 problems" in err_text and "Traceback" not in err_text
