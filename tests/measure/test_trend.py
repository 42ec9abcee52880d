"""The rubric trend (`trend:`, SPEC 13): a graded 1-5 judgment beside the verdict, over real HTTP to
the fake provider, under the run's one cost boundary; reported against a base, never a gate."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import Behaviour, FakeOpenAI, RecordedRequest, oracle, reply
from suite import case, controls, write_suite

from gate.cli import main

KEY_ENV = "GATE_TEST_KEY"
BANDS = {
    1: "Contradicts the reference.",
    2: "Omits a required fact.",
    3: "States every required fact but adds an unsupported claim.",
    4: "States every required fact and nothing unsupported.",
    5: "States every required fact, nothing unsupported, and names the policy it relies on.",
}
TREND_PROMPT = "Grade the answer's quality.\nReference: {reference}\nResponse: {response}\n"
BAND_ASK = "Place the response in exactly one band"


def trend_or_verdict(band_of: dict[str, str]) -> Any:
    """Trend prompts get the band scripted for the case named in them; verdicts get the oracle."""
    verdicts = oracle()

    def answer(req: RecordedRequest) -> Behaviour:
        if BAND_ASK not in req.prompt:
            return verdicts(req)
        found = re.search(r"Answer for ([\w-]+)", req.prompt)
        return reply(band_of.get(found.group(1) if found else "", "3"), "graded")

    return answer


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, "sk-test-trend")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    with FakeOpenAI() as server:
        yield server


def trend(**kw: Any) -> dict[str, Any]:
    return {"name": "answer_quality", "prompt": TREND_PROMPT, "bands": BANDS, **kw}


CASES = [
    *controls(),
    case("c-1"),
    case("c-2", label="fail"),
    case("g-1", slice="general"),
    case("g-2", slice="general"),
]


def run(root: Path, fake: FakeOpenAI, bands: dict[str, str], *extra: str, **policy: Any) -> dict[str, Any]:
    fake.default = trend_or_verdict(bands)
    policy.setdefault("evaluator", {"base_url": fake.base_url})
    path = write_suite(root, CASES, trend=trend(), **policy)
    out = root / "out"
    code = main(["run", "--policy", str(path), "--out", str(out), "--no-cache", *extra])
    res: dict[str, Any] = json.loads((out / "result.json").read_text())
    assert code == res["exit_code"]
    return res


def test_trend_with_a_base_reports_mean_distribution_and_change(tmp_path: Path, fake: FakeOpenAI) -> None:
    base = run(tmp_path / "base", fake, {"c-1": "4", "c-2": "2", "g-1": "5", "g-2": "5"})
    assert base["state"] == "passed"
    t = base["trend"]
    assert t["gate"] is False and t["slices"]["critical"]["mean"] == 3.0
    assert t["slices"]["general"]["distribution"] == {"1": 0, "2": 0, "3": 0, "4": 0, "5": 2}
    assert t["overall"]["n"] == 4 and t["overall"]["mean"] == 4.0
    # judged beside the verdict, metered like it: 9 verdicts (5 controls judged) + 4 trend judgments
    trend_lines = (tmp_path / "base" / "out" / "trend.jsonl").read_text().splitlines()
    assert len(trend_lines) == 4 and fake.count() == 13
    assert base["cost"]["http_attempts"] == 13 and base["cost"]["trend_total"] > 0
    inp, outp = fake.usage_totals()
    assert base["cost"]["total"] == pytest.approx(inp * 1.0 / 1e6 + outp * 2.0 / 1e6, rel=1e-9)
    # records.jsonl holds verdicts only
    recs = (tmp_path / "base" / "out" / "records.jsonl").read_text().splitlines()
    assert all(json.loads(line)["judge_label"] in ("pass", "fail") for line in recs)
    # `gate decide` on the records shows the same trend (from trend.jsonl beside them) and cost
    decided = tmp_path / "decided"
    assert main(["decide", "--policy", str(tmp_path / "base" / "policy.yaml"), "--records",
                 str(tmp_path / "base" / "out" / "records.jsonl"), "--out", str(decided)]) == 0  # fmt: skip
    again = json.loads((decided / "result.json").read_text())
    assert again["trend"] == base["trend"] and again["cost"]["total"] == pytest.approx(base["cost"]["total"])

    fake.reset()
    head = run(
        tmp_path / "head",
        fake,
        {"c-1": "2", "c-2": "2", "g-1": "5", "g-2": "4"},
        "--base-result",
        str(tmp_path / "base" / "out"),
    )
    # a worse trend never blocks
    assert head["state"] == "passed"
    b = head["trend"]["base"]
    assert b["compared"] is True and b["same_bands"] is True
    assert b["slices"]["critical"] == {
        "mean": 3.0,
        "distribution": {"1": 0, "2": 1, "3": 0, "4": 1, "5": 0},
        "change": -1.0,
    }
    assert b["slices"]["general"]["change"] == pytest.approx(-0.5)
    assert b["overall"]["change"] == pytest.approx(-0.75)
    report = (tmp_path / "head" / "out" / "report.md").read_text()
    assert "never a gate" in report and "| `critical` | 2 | 2.00 | 0 | 2 | 0 | 0 | 0 | 3.00 | -1.00 |" in report


def test_a_limit_on_the_trend_is_refused_with_the_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_suite(tmp_path, CASES, trend=trend(min_mean=3.5))
    assert main(["validate", "--policy", str(path)]) == 2
    err = capsys.readouterr().err
    assert "`trend.min_mean`" in err and "ordinal" in err and "pass/fail criterion" in err
    path = write_suite(tmp_path, CASES, trend=trend(), slices={"critical": {"max_false_passes": 0, "min_trend": 3}})
    assert main(["validate", "--policy", str(path)]) == 2
    assert "slices.critical.min_trend" in capsys.readouterr().err


def test_bands_that_differ_only_by_adverbs_are_a_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vague = {1: "Poor answer.", 2: "Somewhat poor answer.", 3: "Good answer.", 4: "Very good answer.", 5: "Excellent."}
    path = write_suite(tmp_path, CASES, trend=trend(bands=vague))
    assert main(["validate", "--policy", str(path), "--format", "json"]) == 1
    findings = json.loads(capsys.readouterr().out)["findings"]
    bands = [f for f in findings if f["kind"] == "trend_bands"]
    assert len(bands) == 1 and "1 “Poor answer.” vs 2 “Somewhat poor answer.”" in bands[0]["message"]
    assert "3 “Good answer.” vs 4 “Very good answer.”" in bands[0]["message"]
    path = write_suite(tmp_path, CASES, trend=trend())
    assert main(["validate", "--policy", str(path)]) == 0


def test_the_trend_spends_under_the_same_boundary_and_its_stop_blocks_nothing(tmp_path: Path, fake: FakeOpenAI) -> None:
    res = run(
        tmp_path / "s",
        fake,
        {},
        "--max-cost",
        "0.0045",
        evaluator={"base_url": fake.base_url, "max_concurrency": 1},
    )
    # the verdicts all fit; the boundary stopped the trend part-way: never a blocker
    assert res["state"] == "passed" and res["cost"]["total"] <= 0.0045
    overall = res["trend"]["overall"]
    assert 0 < overall["n"] < 4 and overall["n"] + overall["unrun"] == 4


def test_a_missing_or_broken_base_is_said_in_the_report_and_changes_nothing(tmp_path: Path, fake: FakeOpenAI) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "result.json").write_text("{not json", encoding="utf-8")
    res = run(tmp_path / "s", fake, {}, "--base-result", str(broken))
    assert res["state"] == "passed"
    base = res["trend"]["base"]
    assert base["compared"] is False and "not valid JSON" in base["note"] and "result.json" in base["note"]
    assert "No change shown" in (tmp_path / "s" / "out" / "report.md").read_text()


def test_a_base_that_raises_other_than_a_gate_error_is_a_note_never_a_failure(tmp_path: Path, fake: FakeOpenAI) -> None:
    """An OSError (a name longer than the file system allows) is only the trend's note."""
    res = run(tmp_path / "s", fake, {}, "--base-result", str(tmp_path / ("x" * 300)))
    assert res["state"] == "passed" and res["exit_code"] == 0
    note = res["trend"]["base"]["note"]
    assert res["trend"]["base"]["compared"] is False
    assert "OSError" in note and "File name too long" in note and "fix:" in note and "\n" not in note


def test_dry_run_counts_the_trend_in_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_suite(tmp_path, CASES, trend=trend())
    assert main(["run", "--policy", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "then the trend: 4 judgments" in out and "under the same boundary" in out


def test_a_base_result_of_the_wrong_shape_names_the_field_and_changes_nothing(tmp_path: Path, fake: FakeOpenAI) -> None:
    base = run(tmp_path / "base", fake, {"c-1": "4", "c-2": "2", "g-1": "5", "g-2": "5"})
    base["trend"]["overall"]["mean"] = "high"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "result.json").write_text(json.dumps(base), encoding="utf-8")
    res = run(tmp_path / "s", fake, {}, "--base-result", str(bad))
    assert res["state"] == "passed"
    note = res["trend"]["base"]["note"]
    assert res["trend"]["base"]["compared"] is False
    assert str(bad / "result.json") in note and "`trend.overall.mean`" in note and "fix" in note


def test_a_band_1_slice_and_a_collapse_against_the_base_never_block(tmp_path: Path, fake: FakeOpenAI) -> None:
    """The trend is never a gate (SPEC 13): not when a slice's mean is the lowest band, and not when
    every slice collapses against the base run."""
    low = run(tmp_path / "low", fake, {"c-1": "1", "c-2": "1", "g-1": "5", "g-2": "5"})
    assert low["trend"]["slices"]["critical"]["mean"] == 1.0
    assert (low["state"], low["exit_code"], low["blockers"]) == ("passed", 0, [])

    fake.reset()
    run(tmp_path / "base", fake, {"c-1": "5", "c-2": "5", "g-1": "5", "g-2": "5"})
    fake.reset()
    head = run(
        tmp_path / "head",
        fake,
        {"c-1": "2", "c-2": "2", "g-1": "2", "g-2": "2"},
        "--base-result",
        str(tmp_path / "base" / "out"),
    )
    changes = head["trend"]["base"]["slices"]
    assert changes["critical"]["change"] == -3.0 and changes["general"]["change"] == -3.0
    assert head["trend"]["base"]["overall"]["change"] == -3.0
    assert (head["state"], head["exit_code"], head["blockers"]) == ("passed", 0, [])
