"""The decision as a pure function: recorded judgments in, state and blockers out."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from suite import case, controls, write_suite

from gate.decide.core import Decision, decide
from gate.model.cases import load_dataset
from gate.model.lineage import Lineage
from gate.model.policy import load_policy
from gate.model.records import Attempt, Record
from gate.model.states import Finding, State
from gate.plan.selection import make_plan

TODAY = dt.date(2026, 11, 30)
LINEAGE = Lineage("a" * 64, "b" * 64, "c" * 64, "1", "gpt-4o-mini", "0.4.3", "0.1.0")


def ok(case_id: str, label: str, *, human: str = "pass", slice: str = "critical", repeat: int = 0, **kw: Any) -> Record:
    return Record(
        case_id=case_id,
        slice=slice,
        partition="sentinel",
        human_label=human,
        judge_label=label,
        judge_reason="because",
        status="ok",
        repeat_index=repeat,
        attempts=[Attempt(status_code=200, latency_ms=5, input_tokens=100, output_tokens=10)],
        input_tokens=100,
        output_tokens=10,
        cost=0.00012,
        cache="miss",
        **kw,
    )


def err(case_id: str, kind: str = "parse_error", *, status: str = "error", attempts: int = 1) -> Record:
    return Record(
        case_id=case_id,
        slice="critical",
        partition="sentinel",
        human_label="pass",
        status=status,  # type: ignore[arg-type]
        error_kind=kind,  # type: ignore[arg-type]
        error_message=f"{kind} happened",
        attempts=[Attempt(status_code=500, error_kind="server_error")] * attempts,
    )


def controls_ok() -> list[Record]:
    return [
        ok(c["case_id"], c["human_adjudication"]["label"], human=c["human_adjudication"]["label"])
        for c in controls()
        if c["expected_control_role"] != "missing_evidence"
    ]


def run_decide(
    tmp_path: Path,
    records: list[Record],
    cases: list[dict[str, Any]] | None = None,
    findings: list[Finding] | None = None,
    lane: str = "pr",
    **policy: Any,
) -> Decision:
    path = write_suite(tmp_path, cases, **policy)
    loaded = load_policy(path)
    dataset = load_dataset(loaded)
    plan = make_plan(loaded, dataset, lane)
    return decide(loaded, plan, findings or [], records, LINEAGE, TODAY)


def kinds(d: Decision) -> dict[str, list[str]]:
    return {b.kind: list(b.case_ids) for b in d.blockers}


def base_records() -> list[Record]:
    return [*controls_ok(), ok("c-1", "pass"), ok("c-2", "fail", human="fail"), ok("g-1", "pass", slice="general")]


def test_all_verdicts_agree_passes(tmp_path: Path) -> None:
    d = run_decide(tmp_path, base_records())
    assert d.state is State.PASSED, d.blockers
    assert d.result.written()["exit_code"] == 0
    c = d.result.written()["counts"]
    assert c == {"eligible": 9, "completed": 8, "errored": 0, "withheld": 1, "unrun": 0, "cached": 0, "review": 0}
    # Controls are evaluator checks: they are not in the slice tallies.
    assert d.result.written()["slices"]["critical"]["true_pass"] == 1
    assert d.result.written()["slices"]["critical"]["true_fail"] == 1
    assert d.result.written()["controls"] == {"ok": True, "failures": []}


def test_false_pass_in_critical_slice_fails_quality_and_names_the_case(tmp_path: Path) -> None:
    records = [*controls_ok(), ok("c-1", "pass"), ok("c-2", "pass", human="fail"), ok("g-1", "pass", slice="general")]
    d = run_decide(tmp_path, records)
    assert d.state is State.QUALITY_FAILED
    assert kinds(d)["false_pass_limit"] == ["c-2"]
    assert d.result.written()["slices"]["critical"]["false_pass"] == 1


def test_limit_allows_n_and_blocks_n_plus_one(tmp_path: Path) -> None:
    cases = [*controls(), case("g-1", slice="general", label="fail"), case("g-2", slice="general", label="fail")]
    one = [
        *controls_ok(),
        ok("g-1", "pass", human="fail", slice="general"),
        ok("g-2", "fail", human="fail", slice="general"),
    ]
    assert run_decide(tmp_path / "a", one, cases).state is State.PASSED
    two = [
        *controls_ok(),
        ok("g-1", "pass", human="fail", slice="general"),
        ok("g-2", "pass", human="fail", slice="general"),
    ]
    d = run_decide(tmp_path / "b", two, cases)
    assert d.state is State.QUALITY_FAILED
    assert sorted(kinds(d)["false_pass_limit"]) == ["g-1", "g-2"]


def test_false_fail_limit(tmp_path: Path) -> None:
    cases = [*controls(), case("c-1"), case("c-2")]
    records = [*controls_ok(), ok("c-1", "fail"), ok("c-2", "fail")]
    d = run_decide(tmp_path, records, cases)
    assert kinds(d)["false_fail_limit"] == ["c-1", "c-2"]
    assert d.state is State.QUALITY_FAILED


@pytest.mark.parametrize("kind", ["parse_error", "invalid_label", "server_error", "timeout", "auth"])
def test_evaluator_error_is_never_pass_or_fail_and_never_dropped(tmp_path: Path, kind: str) -> None:
    records = [*controls_ok(), err("c-1", kind), ok("c-2", "fail", human="fail"), ok("g-1", "pass", slice="general")]
    d = run_decide(tmp_path, records)
    assert d.state is State.EVALUATION_INCOMPLETE
    assert kinds(d)["evaluator_errors"] == ["c-1"]
    t = d.result.written()["slices"]["critical"]
    assert (t["true_pass"], t["false_fail"], t["false_pass"], t["errors"]) == (0, 0, 0, 1)
    c = d.result.written()["counts"]
    assert c["errored"] == 1
    assert c["eligible"] == c["completed"] + c["errored"] + c["withheld"] + c["unrun"]


def test_errors_within_the_limit_do_not_block_but_are_counted(tmp_path: Path) -> None:
    records = [*controls_ok(), err("c-1"), ok("c-2", "fail", human="fail"), ok("g-1", "pass", slice="general")]
    d = run_decide(tmp_path, records, limits={"max_evaluator_errors": 1, "max_total_cost": 1.0})
    assert d.state is State.PASSED
    assert d.result.written()["counts"]["errored"] == 1


def test_failed_control_blocks_and_other_cases_are_not_needed(tmp_path: Path) -> None:
    records = [r for r in controls_ok() if r.case_id != "ctl-injection"]
    records.append(ok("ctl-injection", "pass", human="fail"))
    d = run_decide(tmp_path, records)
    assert d.state is State.QUALITY_FAILED
    assert kinds(d)["control_failed"] == ["ctl-injection"]
    assert d.result.written()["controls"]["failures"][0] == {
        "case_id": "ctl-injection",
        "role": "injection",
        "expected": "fail",
        "got": "pass",
    }
    # Never sent once a control failed (no other verdict could count): not_needed, not unrun.
    assert "unrun_cases" not in kinds(d) and d.result.written()["unrun_case_ids"] == []
    assert sorted(o.case.case_id for o in d.outcomes if o.bucket == "not_needed") == ["c-1", "c-2", "g-1"]


def test_missing_evidence_control_fails_when_the_model_was_called(tmp_path: Path) -> None:
    records = [*base_records(), ok("ctl-missing", "fail", human="fail")]
    d = run_decide(tmp_path, records)
    assert kinds(d)["control_failed"] == ["ctl-missing"]


def test_unstable_repeats_need_review_and_majority_counts(tmp_path: Path) -> None:
    evaluator = {"repeats": 3}
    recs = []
    for r in base_records():
        for i in range(3):
            recs.append(r.model_copy(update={"repeat_index": i}))
    recs = [r for r in recs if r.case_id != "c-1"]
    recs += [ok("c-1", "pass", repeat=0), ok("c-1", "fail", repeat=1), ok("c-1", "pass", repeat=2)]
    d = run_decide(tmp_path, recs, evaluator=evaluator)
    assert d.state is State.REVIEW_REQUIRED
    assert kinds(d)["unstable_verdict"] == ["c-1"]
    assert d.result.written()["slices"]["critical"]["true_pass"] == 1  # the majority verdict
    assert d.result.written()["counts"]["review"] == 1


def test_budget_stop_is_incomplete_and_lists_unrun_cases(tmp_path: Path) -> None:
    records = [*controls_ok(), ok("c-1", "pass"), err("c-2", "budget", status="skipped", attempts=0)]
    d = run_decide(tmp_path, records)
    assert d.state is State.EVALUATION_INCOMPLETE
    assert sorted(kinds(d)["budget_exhausted"]) == ["c-2", "g-1"]
    assert d.result.written()["unrun_case_ids"] == ["c-2", "g-1"]


def test_missing_credentials(tmp_path: Path) -> None:
    path = write_suite(tmp_path)
    loaded = load_policy(path)
    plan = make_plan(loaded, load_dataset(loaded), "pr")
    records = [err(c.case_id, "auth", status="skipped", attempts=0) for c in plan.scheduled]
    d = decide(loaded, plan, [], records, LINEAGE, TODAY)
    assert d.state is State.EVALUATION_INCOMPLETE
    assert len(kinds(d)["missing_credentials"]) == len(plan.scheduled)
    assert "unrun_cases" not in kinds(d)


def test_precedence_lists_every_blocker(tmp_path: Path) -> None:
    records = [*controls_ok(), err("c-1"), ok("c-2", "pass", human="fail"), ok("g-1", "pass", slice="general")]
    d = run_decide(tmp_path, records)
    assert d.state is State.QUALITY_FAILED
    states = {b.kind: b.state for b in d.blockers}
    assert states["false_pass_limit"] is State.QUALITY_FAILED
    assert states["evaluator_errors"] is State.EVALUATION_INCOMPLETE


def test_deterministic_block_means_every_case_unrun(tmp_path: Path) -> None:
    f = Finding(State.QUALITY_FAILED, "unknown_slice", "slice x has no limits", ("c-1",))
    d = run_decide(tmp_path, [], findings=[f])
    assert d.state is State.QUALITY_FAILED
    assert d.result.written()["counts"]["unrun"] == d.result.written()["counts"]["eligible"] == 9
    assert "unknown_slice" in kinds(d)


def test_active_override_waives_only_the_named_case(tmp_path: Path) -> None:
    override = {
        "id": "OVR-1",
        "case_ids": ["c-2"],
        "blocker": "false_pass",
        "approver": "@owner",
        "reason": "known wording issue",
        "evidence": "https://example.invalid/1",
        "expires": "2026-12-31",
        "follow_up": "TICKET-9",
    }
    records = [*controls_ok(), ok("c-1", "pass"), ok("c-2", "pass", human="fail"), ok("g-1", "pass", slice="general")]
    d = run_decide(tmp_path / "a", records, overrides=[override])
    assert d.state is State.PASSED, d.blockers
    assert d.result.written()["waived"][0]["override"] == "OVR-1"
    assert d.result.written()["waived"][0]["approver"] == "@owner"
    # The same override for another case does not waive c-2.
    other = {**override, "case_ids": ["c-1"]}
    assert run_decide(tmp_path / "b", records, overrides=[other]).state is State.QUALITY_FAILED


def test_expired_override_waives_nothing_and_blocks(tmp_path: Path) -> None:
    override = {
        "id": "OVR-1",
        "case_ids": ["c-2"],
        "blocker": "false_pass",
        "approver": "@owner",
        "reason": "r",
        "evidence": "e",
        "expires": "2026-11-01",
        "follow_up": "T-1",
    }
    records = [*controls_ok(), ok("c-1", "pass"), ok("c-2", "pass", human="fail"), ok("g-1", "pass", slice="general")]
    d = run_decide(tmp_path, records, overrides=[override])
    k = kinds(d)
    assert "expired_override" in k and "false_pass_limit" in k
    assert d.state is State.QUALITY_FAILED


def test_abstention_and_label_conflict_route_to_review(tmp_path: Path) -> None:
    cases = [*controls(), case("c-1"), case("c-2", label="review_required")]
    metric = {
        "name": "m",
        "version": "1",
        "allowed_values": ["pass", "fail", "review_required"],
        "prompt_file": "prompt.txt",
    }
    records = [*controls_ok(), ok("c-1", "review_required"), ok("c-2", "pass", human="review_required")]
    d = run_decide(tmp_path, records, cases, metric=metric)
    assert d.state is State.REVIEW_REQUIRED
    assert kinds(d)["abstention"] == ["c-1"]
    assert kinds(d)["label_conflict"] == ["c-2"]


def test_pair_violations(tmp_path: Path) -> None:
    cases = [
        *controls(),
        case("f-1", pair={"id": "p1", "kind": "flip"}),
        case("f-2", label="fail", pair={"id": "p1", "kind": "flip"}),
    ]
    records = [*controls_ok(), ok("f-1", "pass"), ok("f-2", "pass", human="fail")]
    d = run_decide(tmp_path, records, cases)
    assert sorted(kinds(d)["pair_violated"]) == ["f-1", "f-2"]


def test_missing_evidence_routed_to_review_withholds_the_case(tmp_path: Path) -> None:
    cases = [*controls(), case("c-1"), case("c-nr", reference="")]
    f = Finding(State.REVIEW_REQUIRED, "missing_evidence", "no reference", ("c-nr",))
    d = run_decide(tmp_path, [*controls_ok(), ok("c-1", "pass")], cases, findings=[f], missing_evidence="review")
    assert d.state is State.REVIEW_REQUIRED
    assert d.result.written()["counts"]["withheld"] == 2  # c-nr and the missing-evidence control
    assert d.result.written()["counts"]["review"] == 1


def test_resumed_records_prefer_completed_and_count_all_paid_attempts(tmp_path: Path) -> None:
    cancelled = err("c-1", "cancelled", status="skipped", attempts=1).model_copy(update={"cost": 0.001})
    records = [
        *controls_ok(),
        cancelled,
        ok("c-1", "pass"),
        ok("c-2", "fail", human="fail"),
        ok("g-1", "pass", slice="general"),
    ]
    d = run_decide(tmp_path, records)
    assert d.state is State.PASSED
    assert d.result.written()["cost"]["http_attempts"] == len(records)
    assert d.result.written()["cost"]["total"] == pytest.approx(0.001 + 0.00012 * (len(records) - 1))


def test_records_from_another_model_are_not_evidence(tmp_path: Path) -> None:
    foreign = [r.model_copy(update={"evaluator_model": "gpt-4.1"}) for r in base_records()]
    d = run_decide(tmp_path, foreign)
    assert d.state is State.EVALUATION_INCOMPLETE
    stale = kinds(d)["stale_records"]
    assert sorted(stale) == sorted(r.case_id for r in foreign)
    assert "gpt-4.1" in next(b.message for b in d.blockers if b.kind == "stale_records")
    assert d.result.written()["counts"]["completed"] == 0


def test_records_whose_rendered_prompt_changed_are_not_evidence(tmp_path: Path) -> None:
    from gate.judge.render import render_case

    path = write_suite(tmp_path)
    loaded = load_policy(path)
    plan = make_plan(loaded, load_dataset(loaded), "pr")
    current = {c.case_id: render_case(loaded.prompt_text, loaded.placeholders, c).prompt_sha256 for c in plan.scheduled}
    records = [r.model_copy(update={"prompt_sha256": current[r.case_id]}) for r in base_records()]
    assert decide(loaded, plan, [], records, LINEAGE, TODAY).state is State.PASSED
    records[-1] = records[-1].model_copy(update={"prompt_sha256": "0" * 64})
    d = decide(loaded, plan, [], records, LINEAGE, TODAY)
    assert kinds(d)["stale_records"] == [records[-1].case_id]
    stale = next(b for b in d.blockers if b.kind == "stale_records")
    assert f"inputs: rendered prompt 000000000000... vs {current[records[-1].case_id][:12]}..." in stale.message


def test_a_lane_with_nothing_but_controls_cannot_pass(tmp_path: Path) -> None:
    d = run_decide(tmp_path, controls_ok(), [*controls()])
    assert d.state is State.EVALUATION_INCOMPLETE
    assert "no_cases" in kinds(d)
