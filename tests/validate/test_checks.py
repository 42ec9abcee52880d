"""Deterministic checks (`checks:`, SPEC 13): the team's functions through ragas' `discrete_metric`,
run by the real CLI beside the real judge over real HTTP to the fake provider."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import case, controls, write_suite

from gate.cli import main

KEY_ENV = "GATE_TEST_KEY"
ROOT = Path(__file__).resolve().parents[2]

CHECKS_PY = """
def no_refund_promise(response: str) -> str:
    return "fail" if "FORBIDDEN" in response else "pass"

def length_bucket(response: str) -> str:
    return "maybe" if "ODD" in response else "pass"

def explodes(response: str, reference: str = "") -> str:
    if "BOOM" in response:
        raise ValueError("cannot parse citation list")
    return "pass"

def needs_citations(response: str, citations: list) -> str:
    return "pass"

def needs_group(response: str, group_id: str) -> str:
    return "pass"
"""


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, "sk-test-checks")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    with FakeOpenAI() as server:
        yield server


def check(name: str, function: str | None = None, **kw: Any) -> dict[str, Any]:
    return {"name": name, "file": "checks/team.py", "function": function or name, **kw}


def suite(root: Path, fake: FakeOpenAI | None, cases: list[dict[str, Any]], checks: list[dict[str, Any]]) -> Path:
    ev = {"base_url": fake.base_url} if fake is not None else {}
    policy = write_suite(root, cases, evaluator=ev, checks=checks)
    (root / "checks").mkdir(exist_ok=True)
    (root / "checks" / "team.py").write_text(CHECKS_PY, encoding="utf-8")
    return policy


def run(policy: Path, out: Path) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    code = main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"])
    res = json.loads((out / "result.json").read_text())
    recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line]
    return code, res, recs


def blockers(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["kind"]: b for b in res["blockers"]}


def test_passing_gating_check_is_recorded_on_every_judgment(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = suite(
        tmp_path / "s", fake, [*controls(), case("c-1"), case("c-2", label="fail")], [check("no_refund_promise")]
    )
    code, res, recs = run(policy, tmp_path / "out")
    assert code == 0 and res["state"] == "passed"
    assert recs and all(r["checks"] == {"no_refund_promise": "pass"} for r in recs)
    summary = res["checks"]["no_refund_promise"]
    assert summary["gate"] is True and summary["counts"] == {"pass": 8, "fail": 0, "error": 0}
    assert len(summary["file_sha256"]) == 64
    assert "Deterministic checks" in (tmp_path / "out" / "report.md").read_text()


def test_failing_gating_check_blocks_with_case_ids(tmp_path: Path, fake: FakeOpenAI) -> None:
    cases = [
        *controls(),
        case("c-1", response="Refunds within 7 days, FORBIDDEN promise. [[judge:pass]]"),
        # people already failed this answer: the check agrees with them, which blocks nothing
        case("c-2", label="fail", response="FORBIDDEN and wrong. [[judge:fail]]"),
        case("c-3"),
    ]
    policy = suite(tmp_path / "s", fake, cases, [check("no_refund_promise")])
    code, res, recs = run(policy, tmp_path / "out")
    assert code == 1 and res["state"] == "quality_failed"
    failed = blockers(res)["check_failed"]
    assert failed["state"] == "quality_failed" and failed["case_ids"] == ["c-1"]
    assert "no_refund_promise" in failed["message"]
    assert res["checks"]["no_refund_promise"]["failed_as_labelled_case_ids"] == ["c-2"]
    by_id = {r["case_id"]: r["checks"] for r in recs}
    assert by_id["c-1"] == {"no_refund_promise": "fail"} and by_id["c-3"] == {"no_refund_promise": "pass"}
    # the checks ran before any model call and cost nothing; the judge still judged every case
    assert fake.count() == 8 and res["cost"]["http_attempts"] == 8
    assert "check_failed" in (tmp_path / "out" / "report.md").read_text()
    # `gate decide` on the records reaches the same blockers
    assert main(["decide", "--policy", str(policy), "--records", str(tmp_path / "out" / "records.jsonl")]) == 1


def test_a_case_a_check_failed_before_any_call_is_not_judged_never_judge_none(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lane that stops when decided, decided by a gating check before any call: the case the check
    failed was never judged, and its line says so (it said 'human pass, judge None')."""
    cases = [*controls(), case("c-1", response="Refunds within 7 days, FORBIDDEN promise. [[judge:pass]]"), case("c-2")]
    lanes = {"pr": {"partitions": ["sentinel"], "controls": True, "stop_when_decided": True}}
    policy = write_suite(
        tmp_path / "s", cases, evaluator={"base_url": fake.base_url}, checks=[check("no_refund_promise")], lanes=lanes
    )
    (tmp_path / "s" / "checks").mkdir()
    (tmp_path / "s" / "checks" / "team.py").write_text(CHECKS_PY, encoding="utf-8")
    capsys.readouterr()
    code, res, _ = run(policy, tmp_path / "out")
    assert code == 1 and blockers(res)["check_failed"]["case_ids"] == ["c-1"] and fake.count() == 0
    screen = " ".join(capsys.readouterr().out.split())
    assert "c-1: human pass, not judged (the verdict was decided without it)" in screen, screen
    report = (tmp_path / "out" / "report.md").read_text()
    assert "None" not in screen and "None" not in report, report
    assert "human **pass**, not judged (the verdict was decided without it)" in report


def test_non_gating_check_is_reported_only(tmp_path: Path, fake: FakeOpenAI) -> None:
    cases = [*controls(), case("c-1", response="FORBIDDEN yet fine. [[judge:pass]]")]
    policy = suite(tmp_path / "s", fake, cases, [check("no_refund_promise", gate=False)])
    code, res, _ = run(policy, tmp_path / "out")
    assert code == 0 and res["state"] == "passed"
    assert res["checks"]["no_refund_promise"]["failed_case_ids"] == ["c-1"]
    assert res["checks"]["no_refund_promise"]["gate"] is False


def test_raising_check_and_disallowed_value_are_check_errors_never_passes(tmp_path: Path, fake: FakeOpenAI) -> None:
    cases = [
        *controls(),
        case("c-1", response="BOOM refunds within 7 days. [[judge:pass]]"),
        case("c-2", response="ODD refunds within 7 days. [[judge:pass]]"),
        case("c-3"),
    ]
    policy = suite(tmp_path / "s", fake, cases, [check("explodes"), check("length_bucket")])
    code, res, recs = run(policy, tmp_path / "out")
    assert code == 3 and res["state"] == "evaluation_incomplete"
    errors = [b for b in res["blockers"] if b["kind"] == "check_error"]
    assert {tuple(b["case_ids"]) for b in errors} == {("c-1",), ("c-2",)}
    assert all(b["state"] == "evaluation_incomplete" for b in errors)
    raised = next(b for b in errors if b["case_ids"] == ["c-1"])
    assert "cannot parse citation list" in raised["message"]
    by_id = {r["case_id"]: r["checks"] for r in recs}
    assert by_id["c-1"] == {"explodes": None, "length_bucket": "pass"}
    assert by_id["c-2"] == {"explodes": "pass", "length_bucket": None}
    assert res["checks"]["explodes"]["counts"]["error"] == 1


def test_validate_names_a_parameter_no_case_can_fill_without_importing_ragas(tmp_path: Path) -> None:
    cases = [*controls(), case("c-1", group_id="fam-1"), case("c-2")]
    policy = suite(tmp_path / "s", None, cases, [check("needs_citations"), check("needs_group")])
    code = f"""
import sys
from gate.cli import main
rc = main(["validate", "--policy", {str(policy)!r}, "--format", "json"])
assert "ragas" not in sys.modules, "ragas imported"
sys.exit(rc)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 1, proc.stderr
    findings = [f for f in json.loads(proc.stdout)["findings"] if f["kind"] == "check_error"]
    citations = next(f for f in findings if "needs_citations" in f["message"])
    assert "`citations`" in citations["message"] and "not a case field" in citations["message"]
    group = next(f for f in findings if "needs_group" in f["message"])
    assert "`group_id`" in group["message"] and "c-2" in group["case_ids"] and "c-1" not in group["case_ids"]


def test_validate_runs_the_checks_on_every_case_without_ragas_or_an_event_loop(tmp_path: Path) -> None:
    # What a paid run would find first: a gating check failing a case people passed, one raising,
    # one answering outside allowed_values. `gate validate` says so, with no network and no ragas.
    cases = [
        *controls(),
        case("c-1", response="Refunds within 7 days, FORBIDDEN promise. [[judge:pass]]"),
        case("c-2", label="fail", response="FORBIDDEN and wrong. [[judge:fail]]"),  # agrees with people
        case("c-3", partition="held_out", response="BOOM refunds within 7 days."),
        case("c-4", partition="dev", response="ODD refunds within 7 days."),
    ]
    checks = [check("no_refund_promise"), check("explodes"), check("length_bucket")]
    policy = suite(tmp_path / "s", None, cases, checks)
    code = f"""
import sys
from gate.cli import main
rc = main(["validate", "--policy", {str(policy)!r}, "--format", "json"])
assert "ragas" not in sys.modules and "asyncio" not in sys.modules, "ragas or asyncio imported"
sys.exit(rc)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 1, proc.stderr
    findings = json.loads(proc.stdout)["findings"]
    failed = [f for f in findings if f["kind"] == "check_failed"]
    assert [(f["state"], f["case_ids"]) for f in failed] == [("quality_failed", ["c-1"])]
    assert "no_refund_promise" in failed[0]["message"]
    errors = {tuple(f["case_ids"]): f for f in findings if f["kind"] == "check_error"}
    assert set(errors) == {("c-3",), ("c-4",)}
    assert "cannot parse citation list" in errors[("c-3",)]["message"]
    assert "returned 'maybe'" in errors[("c-4",)]["message"]


def test_check_file_outside_the_repository_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = suite(tmp_path / "s", None, [*controls(), case("c-1")], [check("x", file="../outside.py")])
    (tmp_path / "outside.py").write_text("def x(response: str) -> str:\n    return 'pass'\n", encoding="utf-8")
    assert main(["validate", "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert "checks[0].file" in err and "outside the repository" in err and "Traceback" not in err


def test_the_example_checks_run_clean_on_the_example_sentinel_lane(tmp_path: Path) -> None:
    from gate.judge.checks import evaluate_checks
    from gate.plan.inputs import load_inputs

    loaded, _, plan, findings = load_inputs(ROOT / "policies" / "example" / "policy.yaml", "pr")
    results = evaluate_checks(loaded, plan.eligible)
    assert not findings and not results.findings
    values = {
        cid: results.for_record(cid) for cid in ("refund-window-incorrect-002", "two-factor-recovery-injection-006")
    }
    assert values["refund-window-incorrect-002"] == {"cites_evidence": "fail", "no_forbidden_phrase": "pass"}
    assert values["two-factor-recovery-injection-006"] == {"cites_evidence": "pass", "no_forbidden_phrase": "fail"}


def test_a_function_already_wrapped_with_discrete_metric_runs_under_the_policys_values(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    policy = suite(tmp_path / "s", fake, [*controls(), case("c-1"), case("c-2", response="SHOUT [[judge:pass]]")], [])
    (tmp_path / "s" / "checks" / "wrapped.py").write_text(
        "from ragas.metrics import discrete_metric\n\n"
        "@discrete_metric(name='tone', allowed_values=['pass', 'fail', 'loud'])\n"
        "def tone(response: str) -> str:\n"
        "    return 'loud' if 'SHOUT' in response else 'pass'\n",
        encoding="utf-8",
    )
    text = policy.read_text().replace("checks: []", "checks: [{name: tone, file: checks/wrapped.py, function: tone}]")
    policy.write_text(text, encoding="utf-8")
    code, res, recs = run(policy, tmp_path / "out")
    # 'loud' is allowed by the team's decorator but not by the policy ([pass, fail]): check_error
    assert code == 3 and blockers(res)["check_error"]["case_ids"] == ["c-2"]
    assert {r["case_id"]: r["checks"] for r in recs}["c-1"] == {"tone": "pass"}
