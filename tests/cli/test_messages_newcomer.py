"""What a newcomer reads (issue 29, messages): each message checked through the real CLI, against
the fake provider over real HTTP where a judge is needed."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from suite import case, controls, gate, result, write_suite

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _screen(raw: str) -> list[str]:
    """The lines a terminal ends up showing (each redraw of the bar after a carriage return)."""
    return [line for line in ANSI.sub("", raw).replace("\r", "\n").splitlines() if line.strip()]


@pytest.mark.parametrize("tty", [False, True], ids=["log", "terminal"])
def test_at_a_budget_stop_the_progress_totals_agree_with_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tty: bool
) -> None:
    """The judgment the boundary refused was never sent: it is unrun, not done. The last progress
    figures are judged + errors of the total, and the unrun rest is said, as result.json counts it."""
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-messages")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.chdir(tmp_path)
    cases = [*controls(), *(case(f"c-{i}", label="fail" if i % 4 == 0 else "pass") for i in range(1, 13))]
    with FakeOpenAI() as fake:
        policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake.base_url, "max_concurrency": 1})
        err = Terminal() if tty else io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = gate("run", "--policy", policy, "--out", "o", "--no-cache", "--max-cost", "0.003")
        sent = len(fake.requests)
    assert code == 3
    counts = result(tmp_path / "o")["counts"]
    total = counts["eligible"] - counts["withheld"]
    assert counts["unrun"] > 0 and counts["completed"] + counts["errored"] == sent
    lines = _screen(err.getvalue())
    shown = [m for line in lines for m in re.findall(rf"(\d+)/{total}\b", line)]
    assert shown and int(shown[-1]) == counts["completed"] + counts["errored"], lines[-3:]
    assert lines[-1].endswith(f"scheduling stopped: budget; {counts['unrun']} of {total} judgments unrun"), lines[-3:]
    records = [json.loads(line) for line in (tmp_path / "o" / "records.jsonl").read_text().splitlines()]
    assert sum(r["status"] != "skipped" for r in records) == sent


def _calibration_suite(root: Path, base_url: str) -> Path:
    """Six calibration cases in the critical slice (one the judge passes against its fail label)
    and a PR lane with three fail cases (one of them passed by the judge too): too few to support
    the critical slice's limit of 0."""
    cal = [case(f"k-{i}", partition="calibration", label="fail" if i < 3 else "pass") for i in range(6)]
    cal[0] = case("k-0", partition="calibration", label="fail", response="Answer for k-0. [[judge:pass]]")
    sentinel = [case(f"s-{i}", label="fail" if i < 3 else "pass") for i in range(6)]
    sentinel[0] = case("s-0", label="fail", response="Answer for s-0. [[judge:pass]]")
    return write_suite(
        root,
        [*controls(), *cal, *sentinel],
        evaluator={"base_url": base_url},
        lanes={"pr": {"partitions": ["sentinel"], "controls": True}, "cal": {"partitions": ["calibration"]}},
    )


def test_calibrate_on_a_terminal_gives_k_of_n_and_the_warning_calibration_md_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-messages")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI() as fake:
        policy = _calibration_suite(tmp_path / "s", fake.base_url)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert gate("run", "--policy", policy, "--lane", "cal", "--out", "o", "--no-cache") in (0, 1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert gate("calibrate", "--policy", policy, "--records", "o/records.jsonl", "--out", "c") == 0
    text = " ".join(out.getvalue().split())
    md = (tmp_path / "c" / "calibration.md").read_text()
    limits = md.split("## Suggested limits", 1)[1]
    row = next(line for line in limits.splitlines() if line.startswith("| critical |"))
    passes, fails = (re.search(r"\d+ of \d+", cell).group() for cell in row.split("|")[2:4])  # type: ignore[union-attr]
    assert f"max_false_passes {passes} (policy 0" in text and f"max_false_fails {fails} (policy 1" in text, text
    warning = "stricter than this judge supports: it may block on judge error alone"
    assert warning in row and warning in text


def _run_screen(policy: Path, lane: str, out: str) -> tuple[int, str]:
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
        code = gate("run", "--policy", policy, "--lane", lane, "--out", out, "--no-cache")
    return code, " ".join(stdout.getvalue().split())


def test_a_pr_runs_next_steps_calibrate_on_the_calibration_lane_not_on_its_own_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A false pass on the PR lane: calibration is measured on the calibration partition's records,
    so the step runs the policy's calibration lane first; on that lane's own run, its records."""
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-messages")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI() as fake:
        policy = _calibration_suite(tmp_path / "s", fake.base_url)
        pr_code, pr = _run_screen(policy, "pr", "pr-out")
        cal_code, cal = _run_screen(policy, "cal", "cal-out")
    assert pr_code == 1 and cal_code == 1, (pr, cal)
    assert "gate calibrate --policy s/policy.yaml --records pr-out" not in pr, pr
    assert (
        "gate run --policy s/policy.yaml --lane cal --out gate-out-calibration, then gate calibrate --policy "
        "s/policy.yaml --records gate-out-calibration" in pr
    ), pr
    assert "gate calibrate --policy s/policy.yaml --records cal-out" in cal, cal
    # The calibration lane measures: it says what it recorded and that gate calibrate comes next, not
    # "blocked ... fix them before merging", and offers no override; the pr lane gates, and does.
    assert "quality_failed (exit 1): measured, not gated" in cal and "gate calibrate comes next" in cal, cal
    assert "fix them before merging" not in cal and "overrides:" not in cal, cal
    assert "fix them before merging" in pr and "overrides:" in pr, pr
    # What it found is headed as what it is, on the screen, in the report and in the check run.
    assert "Disagreements with people (1)" in cal and "Blockers" not in cal, cal
    assert "Blockers (1)" in pr and "Disagreements with people" not in pr, pr
    report = (tmp_path / "cal-out" / "report.md").read_text(encoding="utf-8")
    assert "### Disagreements with people" in report and "### Blockers" not in report, report


def test_a_measuring_lane_that_passed_says_it_measured_and_that_gate_calibrate_comes_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A calibration lane that passed (one false fail, within the slice's limit) still measured, not
    gated: its run says so and names gate calibrate on its records, never 'nothing blocks' alone, and
    claims no agreement it did not see."""
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-messages")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.chdir(tmp_path)
    cal = [case(f"k-{i}", partition="calibration", label="fail" if i < 3 else "pass") for i in range(6)]
    cal[3] = case("k-3", partition="calibration", label="pass", response="Answer for k-3. [[judge:fail]]")
    with FakeOpenAI() as fake:
        policy = write_suite(
            tmp_path / "s",
            [*controls(), *cal],
            evaluator={"base_url": fake.base_url},
            lanes={"cal": {"partitions": ["calibration"]}},
        )
        code, screen = _run_screen(policy, "cal", "cal-out")
    assert code == 0, screen
    assert "passed (exit 0): measured, not gated" in screen and "gate calibrate comes next" in screen, screen
    assert "nothing blocks" not in screen and "agreed with people on every" not in screen, screen
    assert result(tmp_path / "cal-out")["slices"]["critical"]["false_fail"] == 1  # a disagreement, within limits
    assert "Next steps" in screen and "gate calibrate --policy s/policy.yaml --records cal-out" in screen, screen
    report = (tmp_path / "cal-out" / "report.md").read_text()
    assert "measured, not gated" in report and "gate calibrate" in report, report


def test_the_resume_step_of_a_lane_other_than_pr_names_its_lane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Followed as written, `gate run ... --resume` without --lane resumes the pr lane into the
    calibration lane's --out: the step names the lane the run was."""
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-messages")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.chdir(tmp_path)
    cal = [case(f"k-{i}", partition="calibration", label="fail" if i < 3 else "pass") for i in range(6)]
    cal[4] = case("k-4", partition="calibration", label="pass", response="Answer for k-4. [[judge:http=400]]")
    with FakeOpenAI() as fake:
        policy = write_suite(
            tmp_path / "s",
            [*controls(), *cal],
            evaluator={"base_url": fake.base_url},
            lanes={"pr": {"partitions": ["sentinel"], "controls": True}, "cal": {"partitions": ["calibration"]}},
        )
        code, screen = _run_screen(policy, "cal", "cal-out")
    assert code == 3 and "evaluator_errors" in screen, screen
    assert "gate run --policy s/policy.yaml --lane cal --out cal-out --resume judges only what is missing" in screen, (
        screen
    )


def test_without_a_key_the_next_steps_name_the_offline_check_of_this_policy_and_a_local_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATE_TEST_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    policy = write_suite(tmp_path / "acme")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert gate("run", "--policy", policy, "--out", "o") == 3
    steps = " ".join(out.getvalue()[out.getvalue().index("Next steps") :].split())
    assert "python scripts/demo_offline.py --policy acme/policy.yaml" in steps, steps
    assert "checks the wiring" in steps and "never the prompt" in steps
    assert "docs/LOCAL_MODEL.md" in steps and "make demo" not in steps
    assert ".gate-cache/ the judgment cache: a re-run of these judgments is served from it" in steps  # Files
    out = io.StringIO()  # on another lane, the offline check runs that lane
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert gate("run", "--policy", policy, "--lane", "release", "--out", "o2") == 3
    steps = " ".join(out.getvalue()[out.getvalue().index("Next steps") :].split())
    assert "python scripts/demo_offline.py --policy acme/policy.yaml --lane release runs" in steps, steps


def test_validate_says_how_many_findings_first_and_talks_like_a_linter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_suite(tmp_path / "v", [*controls(), case("c-1", slice="mystery"), case("c-2", reference="")])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert gate("validate", "--policy", "v/policy.yaml") == 1
    text = out.getvalue()
    assert text.splitlines()[0] == "2 findings in v/policy.yaml (8 cases): 2 quality_failed", text
    assert "v/cases.jsonl:7: case c-1 is in slice 'mystery'" in text  # file:line, relative as typed
    assert "before merging" not in text and "the change is wrong" not in text and str(tmp_path) not in text


def test_a_policy_error_gives_the_line_as_well_as_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    policy = write_suite(tmp_path / "s")
    text = policy.read_text(encoding="utf-8").replace("  pr:\n", "  pr:\n    bogus: 1\n", 1)
    policy.write_text(text.replace("max_concurrency: 4", "max_concurrency: -1"), encoding="utf-8")
    numbered = policy.read_text(encoding="utf-8").splitlines()
    bogus = 1 + next(i for i, line in enumerate(numbered) if "bogus" in line)
    concurrency = 1 + next(i for i, line in enumerate(numbered) if "max_concurrency" in line)
    assert gate("validate", "--policy", policy) == 2
    err = capsys.readouterr().err
    assert f"  - line {bogus}: `lanes.pr.bogus`: unknown key" in err, err
    assert f"  - line {concurrency}: `evaluator.max_concurrency`:" in err, err
    # A problem found after the model is read (a case file that is not there) has its line too.
    policy.write_text(text.replace("- cases.jsonl", "- nowhere.jsonl").replace("    bogus: 1\n", ""), encoding="utf-8")
    cases_line = 1 + next(i for i, line in enumerate(policy.read_text().splitlines()) if "nowhere.jsonl" in line)
    assert gate("validate", "--policy", policy) == 2
    assert f"  - line {cases_line}: `cases[0]`: nowhere.jsonl" in capsys.readouterr().err
