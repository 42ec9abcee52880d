"""The product lane, the application's own answers judged by the calibrated judge.

Policies and cases are generated in temporary directories; every verdict is driven through the real
CLI, the real ragas judge and real HTTP to the fake provider, whose oracle reads the `[[judge:...]]`
marker a response carries (so an application answer steers the judge as a real one would).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_batches import FakeBatches
from fake_openai import FakeOpenAI
from suite import case, controls, result, write_suite

from gate.cli import main
from gate.judge import installed_version
from gate.measure import certify
from gate.model.policy import load_policy
from gate.run.lineage import JudgeSettings

KEY_ENV = "GATE_TEST_KEY"
# A judge people measured well: it catches 95 of 100 failing answers and passes 995 of 1000 good ones.
GOOD_JUDGE = {"true_fail": 95, "false_pass": 5, "true_pass": 995, "false_fail": 5}

PRODUCT_SLICES = {
    "critical": {"max_false_passes": 0, "max_false_fails": 1, "priority": 0, "max_failure_rate": 0.1},
    "general": {"max_false_passes": 1, "priority": 1, "max_failure_rate": 0.2},
}
CALIBRATION = {"file": "calibration.json", "min_kappa": 0.0}


def product_case(case_id: str, *, slice: str = "critical", **extra: Any) -> dict[str, Any]:
    """An application case: the question and its evidence, no response and no human label."""
    out = case(case_id, slice=slice, partition="product", **extra)
    for key in ("response", "response_sha256", "human_adjudication"):
        out.pop(key)
    return out


def product_suite(root: Path, cases: list[dict[str, Any]], **policy: Any) -> Path:
    lanes = {
        "calibration": {"partitions": ["calibration"], "controls": True},
        "app": {"partitions": ["product"], "controls": True, "product": True},
    }
    options: dict[str, Any] = {
        "partitions": ["product"],
        "slices": PRODUCT_SLICES,
        "lanes": lanes,
        "calibration": CALIBRATION,
        **policy,
    }
    return write_suite(root, [*controls(), *cases], **options)


def validate(policy: Path) -> int:
    return main(["validate", "--policy", str(policy)])


def test_a_product_lane_needs_a_calibration_file_in_the_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = product_suite(tmp_path, [product_case("p-1")], calibration=None)
    assert validate(policy) == 2
    err = capsys.readouterr().err
    assert "policy.yaml" in err and "`lanes.app.product` is true but the policy has no `calibration`" in err
    assert "fix: add `calibration:" in err


def test_a_product_lane_cannot_share_its_partition_with_a_lane_that_measures_the_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lanes = {
        "pr": {"partitions": ["product"], "controls": True},
        "app": {"partitions": ["product"], "controls": True, "product": True},
    }
    policy = product_suite(tmp_path, [product_case("p-1")], lanes=lanes)
    assert validate(policy) == 2
    err = capsys.readouterr().err
    assert "`lanes.pr.partitions` runs ['product'], which a product lane runs too" in err and "fix:" in err


@pytest.mark.parametrize("key", ["confidence", "fail_on_regression"])
def test_product_settings_on_a_lane_that_is_not_a_product_lane_are_refused(
    tmp_path: Path, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    value: Any = 0.9 if key == "confidence" else True
    lanes = {"pr": {"partitions": ["sentinel"], "controls": True, key: value}}
    policy = write_suite(tmp_path, lanes=lanes)
    assert validate(policy) == 2
    err = capsys.readouterr().err
    assert f"`lanes.pr.{key}` applies to a product lane only; fix: add `product: true`" in err


def test_product_cases_need_no_response_and_no_label_but_every_other_case_still_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sentinel = product_case("s-1")
    sentinel["partition"] = "sentinel"
    policy = product_suite(tmp_path, [product_case("p-1"), sentinel])
    assert validate(policy) == 1
    out = capsys.readouterr().out
    assert "s-1" in out and "`response`: required key is missing; fix: add `response`" in out
    assert "`human_adjudication`: required key is missing" in out
    assert "p-1" not in out

    policy = product_suite(tmp_path, [product_case("p-1")])
    assert validate(policy) == 1  # only the calibration file the product lane needs is missing (gate/validate/lint.py)
    out = capsys.readouterr().out
    assert "`calibration.file`: calibration.json does not exist" in out and "input_contract" not in out


def read_json(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, "sk-test-product")
    with FakeOpenAI() as server:
        yield server


def write_calibration(policy: Path, slices: dict[str, dict[str, int]], **change: Any) -> None:
    """calibration.json as `gate calibrate` writes it, for the judge this policy makes against the fake
    provider (its config_sha256 computed as the gate computes it), with the given counts per slice."""
    loaded = load_policy(policy)
    judge = JudgeSettings.of(loaded, loaded.policy.evaluator.base_url or "")
    ragas = installed_version("ragas") or ""

    def tally(t: dict[str, int]) -> dict[str, Any]:
        fails = t["true_fail"] + t["false_pass"]
        rate = {"value": t["false_pass"] / fails if fails else None, "low": None, "high": None, "n": fails}
        return {**t, "completed": sum(t.values()), "cohen_kappa": 0.9, "false_pass_rate": rate}

    total = {k: sum(t[k] for t in slices.values()) for k in GOOD_JUDGE}
    data = {
        "schema_version": 1,
        "config_sha256": certify.config_sha256(loaded, judge, ragas),
        "config": certify.config_components(loaded, judge, ragas),
        "calibrated_at": "2026-11-30T09:00:00Z",
        "overall": tally(total),
        "slices": {name: tally(t) for name, t in slices.items()},
        **change,
    }
    (policy.parent / "calibration.json").write_text(json.dumps(data), encoding="utf-8")


def answer(case_id: str, verdict: str, **generation: Any) -> dict[str, Any]:
    """One line of --responses: the application's answer, carrying the fake judge's marker."""
    line: dict[str, Any] = {"case_id": case_id, "response": f"App answer for {case_id}. [[judge:{verdict}]]"}
    if generation:
        line["generation"] = generation
    return line


def write_responses(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def app_suite(root: Path, fake: FakeOpenAI, n: int = 40, limit: float = 0.15, **policy: Any) -> Path:
    """A product lane over `n` critical answers (limit 15%), calibrated with GOOD_JUDGE."""
    slices = {"critical": {"max_false_passes": 0, "priority": 0, "max_failure_rate": limit}}
    cases = [product_case(f"p-{i:03d}") for i in range(n)]
    evaluator = {"base_url": fake.base_url, **policy.pop("evaluator", {})}
    path = product_suite(root, cases, slices=slices, evaluator=evaluator, **policy)
    write_calibration(path, {"critical": GOOD_JUDGE})
    return path


def run_app(policy: Path, out: Path, responses: Path | None, *extra: str) -> int:
    args = ["run", "--policy", str(policy), "--lane", "app", "--out", str(out), "--no-cache", *extra]
    return main([*args, *(["--responses", str(responses)] if responses is not None else [])])


def verdicts(n: int, failing: int) -> list[dict[str, Any]]:
    return [answer(f"p-{i:03d}", "fail" if i < failing else "pass", app_version="2.1") for i in range(n)]


def kinds(out: Path) -> list[str]:
    return [b["kind"] for b in result(out)["blockers"]]


def test_good_answers_pass_with_the_judge_corrected_rate_below_the_limit(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    responses = write_responses(tmp_path / "responses.jsonl", verdicts(40, 0))
    out = tmp_path / "out"
    assert run_app(policy, out, responses) == 0
    res = result(out)
    assert res["state"] == "passed" and res["blockers"] == []
    row = res["product"]["slices"]["critical"]
    assert row["verdict"] == "passed" and row["n"] == 40 and row["judged_fail"] == 0
    assert row["high"] <= 0.15 and row["judge"]["se"]["x"] == 95 and row["judge"]["sp"]["n"] == 1000
    assert res["product"]["confidence"] == 0.95 and res["product"]["sequential"] is False
    assert res["lineage"]["responses_sha256"] == hashlib.sha256(responses.read_bytes()).hexdigest()
    # The answer judged is the line's: the prompt the provider saw holds it, and each record says which.
    assert any("App answer for p-007." in r.prompt for r in fake.requests)
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    p7 = next(r for r in records if r["case_id"] == "p-007")
    assert p7["human_label"] is None and p7["generation"] == {"app_version": "2.1"}
    assert p7["response_sha256"] == hashlib.sha256(b"App answer for p-007. [[judge:pass]]").hexdigest()
    control = next(r for r in records if r["case_id"] == "ctl-positive")
    assert control["human_label"] == "pass" and "response_sha256" not in control


def test_a_product_run_keeps_the_answers_it_judged_unless_clear_text_is_off(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    responses = write_responses(tmp_path / "responses.jsonl", verdicts(40, 0))
    out = tmp_path / "out"
    assert run_app(policy, out, responses) == 0
    kept = (out / "responses.jsonl").read_bytes()
    assert kept == responses.read_bytes()
    assert hashlib.sha256(kept).hexdigest() == result(out)["lineage"]["responses_sha256"]
    hidden = app_suite(tmp_path / "hidden", fake, records={"clear_text": False})
    assert run_app(hidden, out, responses) == 0  # the same --out: the earlier copy goes too
    assert not (out / "responses.jsonl").exists()


def test_too_many_failing_answers_fail_the_slice(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", verdicts(40, 15))) == 1
    res = result(out)
    [b] = res["blockers"]
    assert b["kind"] == "failure_rate_exceeded" and b["state"] == "quality_failed" and b["slice"] == "critical"
    assert b["case_ids"] == [f"p-{i:03d}" for i in range(15)] and "15 of 40 answers judged fail" in b["message"]
    row = res["product"]["slices"]["critical"]
    assert row["verdict"] == "exceeded" and row["low"] > 0.15 and len(row["failing_cases"]) == 15


def test_a_rate_whose_interval_holds_the_limit_is_inconclusive_and_says_what_would_decide(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", verdicts(40, 6))) == 4
    res = result(out)
    [b] = res["blockers"]
    assert b["kind"] == "failure_rate_inconclusive" and b["state"] == "review_required"
    row = res["product"]["slices"]["critical"]
    assert row["verdict"] == "inconclusive" and row["low"] <= 0.15 < row["high"]
    assert row["decide_hint"] and row["decide_hint"] in b["message"] and "answers" in row["decide_hint"]
    assert f"). {row['decide_hint']}" in b["message"], b["message"]  # a sentence of its own, never "; The"
    # One interval, written one way: the figures and the hint name the same ends.
    intervals = set(re.findall(r"\d[\d.]*%-\d[\d.]*%", b["message"]))
    assert len(intervals) == 1, b["message"]


def test_a_judge_that_cannot_tell_failing_answers_from_good_ones_is_unfit_for_the_slice(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    write_calibration(policy, {"critical": {"true_fail": 3, "false_pass": 3, "true_pass": 3, "false_fail": 3}})
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", verdicts(40, 0))) == 4
    res = result(out)
    assert kinds(out) == ["judge_unfit"] and res["blockers"][0]["slice"] == "critical"
    assert "may not tell a failing answer from a good one" in res["blockers"][0]["message"]
    assert res["product"]["slices"]["critical"]["verdict"] == "judge_unfit"


def test_a_judge_calibrated_under_another_configuration_decides_no_slice(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    (policy.parent / "prompt.txt").write_text(
        (policy.parent / "prompt.txt").read_text() + "Be strict.\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", verdicts(40, 0))) == 4
    res = result(out)
    assert kinds(out) == ["judge_uncalibrated"] and "prompt" in res["blockers"][0]["message"]
    row = res["product"]["slices"]["critical"]
    assert row["verdict"] == "incomplete" and row["judge"] is None and row["n"] == 40


def test_an_answer_missing_from_the_responses_is_unrun_and_a_line_for_another_case_is_noted(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    lines = [*verdicts(39, 0), answer("zz-elsewhere", "pass")]
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", lines)) == 3
    res = result(out)
    assert kinds(out) == ["missing_response"]
    [b] = res["blockers"]
    assert b["state"] == "evaluation_incomplete" and b["case_ids"] == ["p-039"] and "r.jsonl" in b["message"]
    assert res["unrun_case_ids"] == ["p-039"] and res["counts"]["unrun"] == 1
    assert not any("p-039" in r.prompt for r in fake.requests)
    assert any("zz-elsewhere" in note and "not judged" in note for note in res["notes"])
    row = res["product"]["slices"]["critical"]
    assert row["verdict"] == "incomplete" and row["n"] == 39


def test_an_evaluator_error_is_never_counted_among_the_answers(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    lines = verdicts(40, 0)
    lines[5] = {"case_id": "p-005", "response": "App answer for p-005. [[judge:http=500]]"}
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", lines)) == 3
    res = result(out)
    assert kinds(out) == ["evaluator_errors"] and res["blockers"][0]["case_ids"] == ["p-005"]
    row = res["product"]["slices"]["critical"]
    assert row["n"] == 39 and row["judged_fail"] == 0 and "p-005" not in row["failing_cases"]
    # The resume it suggests is one that works: a product lane needs its lane and its answers again.
    assert "--lane app --responses RESPONSES.jsonl --out" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("not json at all", "r.jsonl:3 (--responses): not valid JSON"),
        (
            json.dumps(answer("p-000", "pass")),
            "r.jsonl:3 (--responses): case p-000 is answered twice (first on line 1)",
        ),
        (json.dumps({"case_id": "p-002", "response": ""}), "`response` of case p-002 must be the application's answer"),
        # Blank is empty: said of the responses file's line, never of the case file the answer lands in.
        (json.dumps({"case_id": "p-002", "response": " \t "}), "r.jsonl:3 (--responses): `response` of case p-002"),
        (json.dumps({"case_id": "p-002", "response": "x", "model": "m"}), "unknown key `model`"),
        (json.dumps({"case_id": "p-002", "response": "x", "generation": "v2"}), "`generation` of case p-002"),
    ],
)
def test_a_malformed_or_duplicated_responses_line_is_a_usage_error_naming_the_line(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str], bad: str, said: str
) -> None:
    policy = app_suite(tmp_path / "suite", fake, n=3)
    path = tmp_path / "r.jsonl"
    path.write_text(
        json.dumps(answer("p-000", "pass")) + "\n" + json.dumps(answer("p-001", "pass")) + "\n" + bad + "\n"
    )
    assert run_app(policy, tmp_path / "out", path) == 2
    err = capsys.readouterr().err
    assert said in err and "fix:" in err and "Traceback" not in err
    assert fake.count() == 0


def test_every_bad_line_of_a_responses_file_is_reported_up_to_ten_then_how_many_more(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = app_suite(tmp_path / "suite", fake, n=3)
    path = tmp_path / "r.jsonl"
    bad = [f"not json {i}" for i in range(12)] + [json.dumps({"case_id": "p-002", "response": "x", "model": "m"})]
    path.write_text("\n".join([json.dumps(answer("p-000", "pass")), *bad]) + "\n")
    assert run_app(policy, tmp_path / "out", path) == 2
    err = capsys.readouterr().err
    assert "r.jsonl (--responses): 13 lines are not answers the gate can read" in err
    assert all(f"r.jsonl:{n} (--responses): not valid JSON" in err for n in range(2, 12))
    assert "r.jsonl:12 (--responses)" not in err and "and 3 more bad lines" in err
    assert "Traceback" not in err and fake.count() == 0


def test_a_responses_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path, fake: FakeOpenAI) -> None:
    """Editors on Windows save UTF-8 with a BOM: the first line is still an answer."""
    policy = app_suite(tmp_path / "suite", fake, n=10, limit=0.6)
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + write_responses(tmp_path / "plain.jsonl", verdicts(10, 0)).read_bytes())
    assert run_app(policy, tmp_path / "out", path) == 0
    assert result(tmp_path / "out")["product"]["slices"]["critical"]["n"] == 10


def test_a_superseded_case_needs_no_answer(tmp_path: Path, fake: FakeOpenAI) -> None:
    """p-000 was replaced by p-new (`supersedes`): the lane judges p-new, and the application is
    not asked to answer the case it replaced."""
    cases = [*(product_case(f"p-{i:03d}") for i in range(10)), product_case("p-new", supersedes="p-000")]
    slices = {"critical": {"max_false_passes": 0, "priority": 0, "max_failure_rate": 0.6}}
    policy = product_suite(tmp_path / "suite", cases, slices=slices, evaluator={"base_url": fake.base_url})
    write_calibration(policy, {"critical": GOOD_JUDGE})
    lines = [*verdicts(10, 0)[1:], answer("p-new", "pass")]
    assert run_app(policy, tmp_path / "out", write_responses(tmp_path / "r.jsonl", lines)) == 0
    res = result(tmp_path / "out")
    assert res["blockers"] == [] and res["product"]["slices"]["critical"]["n"] == 10


def test_a_product_lane_without_responses_and_responses_for_another_lane_are_usage_errors(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = app_suite(tmp_path / "suite", fake, n=3)
    assert run_app(policy, tmp_path / "out", None) == 2
    err = capsys.readouterr().err
    assert "lane app" in err and "is a product lane" in err and "fix: pass --responses FILE" in err
    responses = write_responses(tmp_path / "r.jsonl", verdicts(3, 0))
    args = ["run", "--policy", str(policy), "--lane", "calibration", "--responses", str(responses)]
    assert main([*args, "--out", str(tmp_path / "cal")]) == 2
    assert "is not a product lane" in capsys.readouterr().err
    assert fake.count() == 0


def test_every_slice_a_product_lane_judges_needs_its_max_failure_rate(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = app_suite(tmp_path / "suite", fake, n=2)
    cases = (policy.parent / "cases.jsonl").read_text()
    extra = json.dumps(product_case("g-1", slice="general"))
    (policy.parent / "cases.jsonl").write_text(cases + extra + "\n", encoding="utf-8")
    assert run_app(policy, tmp_path / "out", write_responses(tmp_path / "r.jsonl", verdicts(2, 0))) == 2
    err = capsys.readouterr().err
    assert "policy.yaml" in err and "`slices.general.max_failure_rate` is missing" in err
    assert "fix: add e.g. `max_failure_rate: 0.05`" in err


def test_stop_when_decided_stops_once_a_slice_is_exceeded_and_the_rest_are_not_needed(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    lanes = {
        "calibration": {"partitions": ["calibration"], "controls": True},
        "app": {"partitions": ["product"], "controls": True, "product": True, "stop_when_decided": True},
    }
    policy = app_suite(tmp_path / "suite", fake, n=200, lanes=lanes)
    policy_text = policy.read_text().replace("max_concurrency: 4", "max_concurrency: 1")
    policy.write_text(policy_text)
    write_calibration(policy, {"critical": GOOD_JUDGE})
    out = tmp_path / "out"
    # 100 of the 200 answers fail (in the seeded order the lane judges them in): far above 15%.
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", verdicts(200, 100))) == 1
    res = result(out)
    assert kinds(out) == ["failure_rate_exceeded"]
    stopped = res["stopped_early"]
    assert stopped["not_needed"] and stopped["judged"] < 100
    assert res["counts"]["not_needed"] == len(stopped["not_needed"]) and res["unrun_case_ids"] == []
    product = res["product"]
    assert product["sequential"] is True and product["method"].endswith("confidence-sequence")
    row = product["slices"]["critical"]
    assert row["verdict"] == "exceeded" and row["n"] < 100 and 0 < row["judged_fail"] < row["n"]
    assert fake.count() == stopped["judged"]


def test_stop_when_decided_stops_once_every_slice_passes(tmp_path: Path, fake: FakeOpenAI) -> None:
    lanes = {
        "calibration": {"partitions": ["calibration"], "controls": True},
        "app": {"partitions": ["product"], "controls": True, "product": True, "stop_when_decided": True},
    }
    policy = app_suite(tmp_path / "suite", fake, n=300, lanes=lanes)
    policy.write_text(policy.read_text().replace("max_concurrency: 4", "max_concurrency: 1"))
    write_calibration(policy, {"critical": GOOD_JUDGE})
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", verdicts(300, 0))) == 0
    res = result(out)
    assert res["state"] == "passed" and res["blockers"] == []
    row = res["product"]["slices"]["critical"]
    assert row["verdict"] == "passed" and row["high"] <= 0.15
    assert 0 < row["n"] < 300 and len(res["stopped_early"]["not_needed"]) == 300 - row["n"]


@pytest.mark.parametrize("fail_on_regression", [False, True])
def test_against_the_base_run_answers_that_turned_fail_are_paired_and_a_significant_regression_blocks(
    tmp_path: Path, fake: FakeOpenAI, fail_on_regression: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    lanes = {
        "calibration": {"partitions": ["calibration"], "controls": True},
        "app": {"partitions": ["product"], "controls": True, "product": True},
    }
    if fail_on_regression:
        lanes["app"]["fail_on_regression"] = True
    policy = app_suite(tmp_path / "suite", fake, limit=0.6, lanes=lanes)
    write_calibration(policy, {"critical": GOOD_JUDGE})
    base, head = tmp_path / "base", tmp_path / "head"
    base_lines = verdicts(40, 0)
    base_lines[39] = answer("p-039", "fail")  # one answer the base failed and the head fixes
    # The base branch's own run has nothing to compare with: under fail_on_regression it cannot pass.
    expected = 4 if fail_on_regression else 0
    assert run_app(policy, base, write_responses(tmp_path / "base.jsonl", base_lines)) == expected
    # The head's app: 12 answers the base passed now fail; still under the generous 60% limit.
    code = run_app(policy, head, write_responses(tmp_path / "head.jsonl", verdicts(40, 12)), "--base-result", str(base))
    row = result(head)["product"]["slices"]["critical"]
    assert row["verdict"] == "passed"
    paired = row["base"]
    assert (paired["both_pass"], paired["both_fail"], paired["pass_to_fail"], paired["fail_to_pass"]) == (27, 0, 12, 1)
    assert paired["turned_fail"] == [f"p-{i:03d}" for i in range(12)]
    assert paired["p_value"] < 0.05 and paired["regressed"] is True
    if fail_on_regression:
        assert code == 1
        [b] = result(head)["blockers"]
        assert b["kind"] == "regressed" and b["state"] == "quality_failed" and b["case_ids"] == paired["turned_fail"]
        assert "12 answers the base run passed are judged fail now, against 1" in b["message"]
    else:
        assert code == 0 and result(head)["blockers"] == []
    # Recorded judgments are decided anywhere: gate decide re-decides the head with the calibration file,
    # reading no provider environment.
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    before = fake.count()
    again = tmp_path / "again"
    args = ["decide", "--policy", str(policy), "--records", str(head), "--base-result", str(base), "--out", str(again)]
    assert main(args) == code
    assert result(again)["product"] == result(head)["product"] and fake.count() == before


def regression_suite(root: Path, fake: FakeOpenAI, n: int, **app: Any) -> Path:
    """A product lane `app` under a generous limit, and a second product lane `app2` on the same questions."""
    lanes = {
        "calibration": {"partitions": ["calibration"], "controls": True},
        "app": {"partitions": ["product"], "controls": True, "product": True, **app},
        "app2": {"partitions": ["product"], "controls": True, "product": True},
    }
    policy = app_suite(root, fake, n=n, limit=0.6, lanes=lanes)
    write_calibration(policy, {"critical": GOOD_JUDGE})
    return policy


@pytest.mark.parametrize("fail_on_regression", [False, True])
def test_a_base_run_of_another_lane_is_never_compared_and_under_fail_on_regression_the_run_cannot_pass(
    tmp_path: Path, fake: FakeOpenAI, fail_on_regression: bool
) -> None:
    """The base is the product run of lane app2, whose answers all passed; the head's app fails 12 of
    its 40. Paired, that would read as a regression. It is another lane's run, so no slice is compared;
    a lane that asked for the regression check sees it did not happen (review_required, naming why),
    on the run and on `gate decide`."""
    policy = regression_suite(tmp_path / "suite", fake, 40, fail_on_regression=fail_on_regression)
    base, head, again = tmp_path / "base", tmp_path / "head", tmp_path / "again"
    base_args = ["run", "--policy", str(policy), "--lane", "app2", "--out", str(base), "--no-cache"]
    assert main([*base_args, "--responses", str(write_responses(tmp_path / "b.jsonl", verdicts(40, 0)))]) == 0
    head_responses = write_responses(tmp_path / "h.jsonl", verdicts(40, 12))
    code = run_app(policy, head, head_responses, "--base-result", str(base))
    decide = ["decide", "--policy", str(policy), "--records", str(head), "--base-result", str(base)]
    assert main([*decide, "--out", str(again)]) == code == (4 if fail_on_regression else 0)
    for res in (result(head), result(again)):
        assert res["product"]["slices"]["critical"]["base"] is None
        why = f"{base} is a run of lane app2, not app"
        if fail_on_regression:
            [b] = res["blockers"]
            assert (b["kind"], b["state"]) == ("regression_unchecked", "review_required")
            assert "sets fail_on_regression, but no slice was compared with the base run" in b["message"]
            assert why in b["message"] and "fix:" in b["message"]
        else:
            assert res["blockers"] == [] and any(why in note for note in res["notes"])


def test_fail_on_regression_with_no_base_or_a_base_on_other_inputs_cannot_pass(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --base-result at all, a base run of another policy, and a base run of this lane on other
    questions: the check the lane asked for did not happen, and the run says so."""
    policy = regression_suite(tmp_path / "suite", fake, 10, fail_on_regression=True)
    good = write_responses(tmp_path / "good.jsonl", verdicts(10, 0))
    other = app_suite(tmp_path / "other-policy", fake, n=10, limit=0.6, policy_id="another-policy")
    assert run_app(other, tmp_path / "other", good) == 0
    elsewhere = app_suite(tmp_path / "elsewhere", fake, n=10, limit=0.6)
    renamed = [{**line, "case_id": line["case_id"].replace("p-", "q-")} for line in verdicts(10, 0)]
    cases = (elsewhere.parent / "cases.jsonl").read_text().replace('"p-', '"q-')
    (elsewhere.parent / "cases.jsonl").write_text(cases, encoding="utf-8")
    assert run_app(elsewhere, tmp_path / "questions", write_responses(tmp_path / "q.jsonl", renamed)) == 0
    whys = {
        "alone": "(no --base-result was given)",
        "other": "is a run of policy another-policy, not test-policy",
        "questions": "the base run judged none of this lane's questions (a run on other inputs)",
    }
    for name, why in whys.items():
        out = tmp_path / f"head-{name}"
        extra = [] if name == "alone" else ["--base-result", str(tmp_path / name)]
        assert run_app(policy, out, good, *extra) == 4, name
        [b] = result(out)["blockers"]
        assert b["kind"] == "regression_unchecked" and why in b["message"], (name, b["message"])
    # Known before any call: the dry run names it and exits as the run will.
    capsys.readouterr()
    assert run_app(policy, tmp_path / "dry", good, "--dry-run") == 4
    text = capsys.readouterr().out
    assert "cannot pass (regression_unchecked, review_required)" in text and "(no --base-result was given)" in text


# --- every lane's machinery on a product lane -----------------------------------------------------


def priced_suite(root: Path, fake: FakeOpenAI, n: int = 40) -> Path:
    price = {
        "input_per_mtok": 1.0,
        "output_per_mtok": 2.0,
        "currency": "USD",
        "batch": {"input_per_mtok": 0.5, "output_per_mtok": 1.0},
    }
    return app_suite(root, fake, n=n, evaluator={"price": price})


def test_a_batch_of_answers_is_submitted_and_collected_with_the_same_responses_only(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = priced_suite(tmp_path / "suite", fake)
    responses = write_responses(tmp_path / "r.jsonl", verdicts(40, 15))
    live = tmp_path / "live"
    assert run_app(policy, live, responses) == 1
    FakeBatches(fake, script=("validating", "completed"))
    out = tmp_path / "batch"
    # A replay of the live run's seed: the same order and audit plan, so the same product section.
    assert (
        run_app(policy, out, responses, "--batch", "submit", "--order-seed", result(live)["product"]["order_seed"]) == 3
    )
    assert (
        json.loads((out / "batch.json").read_text())["responses_sha256"] == result(live)["lineage"]["responses_sha256"]
    )
    capsys.readouterr()
    assert run_app(policy, out, None, "--batch", "collect") == 2
    assert "fix: pass --responses FILE" in capsys.readouterr().err
    other = write_responses(tmp_path / "other.jsonl", verdicts(40, 0))
    assert run_app(policy, out, other, "--batch", "collect") == 2
    assert "pass the same --responses file the batch was submitted with" in capsys.readouterr().err
    submitted = json.loads((out / "batch.json").read_text())["order_seed"]
    assert submitted == result(live)["product"]["order_seed"]
    # A calibration changed between the submit and the collect would size another audit plan: refused.
    sized = json.loads((out / "batch.json").read_text())["audit_sizing"]["critical"]
    write_calibration(policy, {"critical": {**GOOD_JUDGE, "true_fail": 50}})
    assert run_app(policy, out, responses, "--batch", "collect") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "batch.json: the run sized its audit plan when it started" in err and "Se 50/55" in err, err
    write_calibration(policy, {"critical": GOOD_JUDGE})
    assert run_app(policy, out, responses, "--batch", "collect") == 1
    collected = result(out)
    assert collected["cost"]["batch"] is True
    # The collect continues the submitted run: its order and audit plan are the submit's seed's.
    assert collected["product"]["order_seed"] == submitted
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert {r.get("order_seed") for r in records if r.get("response_sha256")} == {submitted}
    assert [r["audit_sizing"] for r in records if r.get("response_sha256")] == [sized] * 40
    assert collected["product"]["slices"] == result(live)["product"]["slices"]
    assert (out / "responses.jsonl").read_bytes() == (live / "responses.jsonl").read_bytes() == responses.read_bytes()


def test_shards_of_a_product_lane_merge_into_the_whole_lanes_verdict(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    responses = write_responses(tmp_path / "r.jsonl", verdicts(40, 6))
    whole = tmp_path / "whole"
    assert run_app(policy, whole, responses) == 4
    shards = [tmp_path / f"shard-{i}" for i in (1, 2)]
    seed = result(whole)["product"]["order_seed"]  # the shards of one run share its seed
    for i, out in enumerate(shards, start=1):
        run_app(policy, out, responses, "--shard", f"{i}/2", "--order-seed", seed)
    merged = tmp_path / "merged"
    other = write_responses(tmp_path / "other.jsonl", verdicts(40, 0))
    assert (
        main(["merge", "--policy", str(policy), *map(str, shards), "--out", str(merged), "--responses", str(other)])
        == 2
    )
    assert "fix: pass the responses file the shards ran with" in capsys.readouterr().err
    args = ["merge", "--policy", str(policy), *map(str, shards), "--out", str(merged), "--responses", str(responses)]
    assert main(args) == 4
    # The same product figures, each output named as its own (tests/decide/test_product_audit.py's merge test
    # reads the audit queue's command).
    as_whole = json.dumps(result(merged)["product"]).replace(str(merged), str(whole))
    assert json.loads(as_whole) == result(whole)["product"]
    assert (merged / "responses.jsonl").read_bytes() == responses.read_bytes()
    assert kinds(merged) == kinds(whole) == ["failure_rate_inconclusive"]


def test_merged_shards_of_a_lane_that_fails_on_regression_are_compared_with_the_base_given_to_merge(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """`gate merge --base-result` pairs the merged answers with the base run, as the whole lane's run
    does: the merge finds the regression; without the base it says the check did not happen."""
    policy = regression_suite(tmp_path / "suite", fake, 40, fail_on_regression=True)
    base, whole, merged = tmp_path / "base", tmp_path / "whole", tmp_path / "merged"
    assert run_app(policy, base, write_responses(tmp_path / "b.jsonl", verdicts(40, 0))) == 4  # no base of its own
    head = write_responses(tmp_path / "h.jsonl", verdicts(40, 12))
    assert run_app(policy, whole, head, "--base-result", str(base)) == 1
    shards = [tmp_path / f"shard-{i}" for i in (1, 2)]
    seed = result(whole)["product"]["order_seed"]  # the shards of one run share its seed
    for i, out in enumerate(shards, start=1):
        run_app(policy, out, head, "--shard", f"{i}/2", "--base-result", str(base), "--order-seed", seed)
    args = ["merge", "--policy", str(policy), *map(str, shards), "--responses", str(head)]
    assert main([*args, "--out", str(merged)]) == 4
    assert kinds(merged) == ["regression_unchecked"]
    assert main([*args, "--out", str(merged), "--base-result", str(base)]) == 1
    assert kinds(merged) == kinds(whole) == ["regressed"]
    assert result(merged)["product"] == result(whole)["product"]


def test_resume_needs_the_same_responses_and_pays_for_nothing_twice(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = app_suite(tmp_path / "suite", fake)
    responses = write_responses(tmp_path / "r.jsonl", verdicts(40, 0))
    out = tmp_path / "out"
    # A boundary that stops the run part-way: the rest is unrun, budget_exhausted, as on every lane.
    assert run_app(policy, out, responses, "--max-cost", "0.004") == 3
    stopped = result(out)
    assert "budget_exhausted" in kinds(out) and stopped["cost"]["budget_spent"] <= 0.004
    assert stopped["product"]["slices"]["critical"]["verdict"] == "incomplete"
    paid = fake.count()
    capsys.readouterr()
    assert run_app(policy, out, None, "--resume") == 2
    assert "the same file again on --resume" in capsys.readouterr().err
    judged = next(c["case_id"] for c in stopped["cases"] if c["bucket"] == "completed" and c["control_role"] is None)
    lines = verdicts(40, 0)
    lines[int(judged[2:])] = answer(judged, "fail", app_version="2.1")  # an answer already judged, changed
    edited = write_responses(tmp_path / "edited.jsonl", lines)
    assert run_app(policy, out, edited, "--resume") == 2
    err = capsys.readouterr().err
    assert "judged other answers" in err and f"case {judged}" in err and "pass the same --responses file" in err
    assert fake.count() == paid
    assert run_app(policy, out, responses, "--resume") == 0
    assert fake.count() == 40 + 5  # every answer and control judged once over both attempts
    assert result(out)["product"]["slices"]["critical"]["verdict"] == "passed"


def test_a_resume_refused_for_other_answers_changes_nothing_in_out(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose workers died with it leaves their records files in --out (and records.jsonl cut
    mid-line). --resume with an answer edited since, one a worker judged, is refused (exit 2) before
    anything in --out changes: it folded the workers' files into records.jsonl first."""
    policy = app_suite(tmp_path / "suite", fake, n=6)
    responses = write_responses(tmp_path / "r.jsonl", verdicts(6, 0))
    out = tmp_path / "out"
    assert run_app(policy, out, responses) != 2
    lines = (out / "records.jsonl").read_bytes().splitlines(keepends=True)
    (out / "records.jsonl").write_bytes(b"".join(lines[:2]) + lines[2][:30])
    (out / "records.w1.jsonl").write_bytes(b"".join(lines[2:6]))
    (out / "records.w2.jsonl").write_bytes(b"".join(lines[6:]))
    judged = next(r["case_id"] for r in map(json.loads, lines[6:]) if r["case_id"].startswith("p-"))
    edited = verdicts(6, 0)
    edited[int(judged[2:])] = answer(judged, "fail", app_version="2.1")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert run_app(policy, out, write_responses(tmp_path / "edited.jsonl", edited), "--resume") == 2
    assert f"judged other answers than --responses {tmp_path / 'edited.jsonl'} holds (case {judged}" in " ".join(
        capsys.readouterr().err.split()
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_cached_verdict_of_another_answer_is_never_reused(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = app_suite(tmp_path / "suite", fake, n=10, cache_dir="cache")
    args = ["run", "--policy", str(policy), "--lane", "app"]
    good = write_responses(tmp_path / "good.jsonl", verdicts(10, 0))
    assert main([*args, "--out", str(tmp_path / "a"), "--responses", str(good)]) in (0, 4)
    first = fake.count()
    assert main([*args, "--out", str(tmp_path / "b"), "--responses", str(good)]) in (0, 4)
    assert fake.count() == first  # the same answers: served from the cache
    bad = write_responses(tmp_path / "bad.jsonl", verdicts(10, 3))
    assert main([*args, "--out", str(tmp_path / "c"), "--responses", str(bad)]) in (1, 4)
    assert fake.count() == first + 3  # only the three new answers were judged
    assert result(tmp_path / "c")["product"]["slices"]["critical"]["judged_fail"] == 3


def test_the_action_input_responses_reaches_the_product_lane_and_the_check_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeOpenAI
) -> None:
    """Through the container entry point, as a workflow step runs it: `responses` (relative to the
    working directory) is the application's answers; the step's outputs and check run carry the verdict."""
    from fake_github import FakeGitHub
    from runner_env import parse_github_output, runner_env

    from gate.action import main as action_main

    with FakeGitHub(user_status=403) as github:
        monkeypatch.chdir(tmp_path)
        env = runner_env(tmp_path, api_url=github.base_url, lane="app", responses="app-answers.jsonl")
        env["RAGAS_DO_NOT_TRACK"] = "true"
        evals = tmp_path / "workspace" / "evals"
        policy = app_suite(evals, fake, evaluator={"api_key_env": "JUDGE_KEY"})
        write_calibration(policy, {"critical": GOOD_JUDGE})
        write_responses(evals / "app-answers.jsonl", verdicts(40, 15))
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        code = action_main()
        outputs = parse_github_output(Path(env["GITHUB_OUTPUT"]).read_text())
        assert code == 1 and outputs["state"] == "quality_failed" and outputs["exit-code"] == "1"
        saved = result(evals / "gate-out")
        assert kinds(evals / "gate-out") == ["failure_rate_exceeded"] and saved["lineage"]["responses_sha256"]
        (run,) = github.check_runs
        assert run["conclusion"] == "failure"
        (comment,) = github.comments("acme/support-bot", 17)
        assert "critical" in comment["body"] and "15 of 40" in comment["body"]


def test_controls_are_judged_first_and_a_control_that_does_not_separate_stops_the_product_lane(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    policy = app_suite(tmp_path / "suite", fake, n=20)
    lines = (policy.parent / "cases.jsonl").read_text().splitlines()
    broken = [json.loads(line) for line in lines]
    for c in broken:
        if c["case_id"] == "ctl-negative":  # people fail it; the judge will pass it
            c["response"] = "Answer for ctl-negative: refunds any time. [[judge:pass]]"
            c["response_sha256"] = hashlib.sha256(c["response"].encode()).hexdigest()
    (policy.parent / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in broken), encoding="utf-8")
    out = tmp_path / "out"
    assert run_app(policy, out, write_responses(tmp_path / "r.jsonl", verdicts(20, 0))) == 1
    res = result(out)
    assert "control_failed" in kinds(out) and res["controls"]["ok"] is False
    assert not any("App answer" in r.prompt for r in fake.requests)  # no answer was sent after it
    assert res["product"]["slices"]["critical"]["n"] == 0


def test_a_dry_run_of_a_product_lane_plans_without_responses_and_calls_no_model(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = app_suite(tmp_path / "suite", fake, n=5)
    assert run_app(policy, tmp_path / "out", None, "--dry-run") == 0
    assert "p-004" in capsys.readouterr().out and fake.count() == 0


class _Clock:
    """A clock the test drives: the pacer's waits advance it, nothing sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        import asyncio

        self.now += seconds
        await asyncio.sleep(0)


def test_the_pacer_keeps_a_product_lane_within_the_providers_rate_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fake_limits import BucketLimits

    from gate.commands.run import RunOptions, run
    from gate.judge.pacing import Pacer

    monkeypatch.setenv(KEY_ENV, "sk-test-product")
    clock = _Clock()
    limits = BucketLimits(requests_per_minute=20, clock=clock)
    with FakeOpenAI(limiter=limits) as fake:
        policy = app_suite(tmp_path / "suite", fake)
        responses = write_responses(tmp_path / "r.jsonl", verdicts(40, 0))
        pacer = Pacer(None, None, clock=clock, sleep=clock.sleep)
        opts = RunOptions(lane="app", out_dir=tmp_path / "out", use_cache=False, pacer=pacer, responses=responses)
        decision = run(policy, opts)
        requests = fake.count()
    assert decision.state.value == "passed"
    res = result(tmp_path / "out")
    assert res["product"]["slices"]["critical"]["n"] == 40
    assert limits.refused <= 4  # what went out before the first reply's headers said a word
    assert res["cost"]["http_attempts"] == requests == 45 + limits.refused
    assert clock.now >= (45 - 20) / (20 / 60) * 0.95  # it took as long as the limit says
