"""Every screen a newcomer meets fits a terminal 100 columns wide: `gate init`, `gate validate`,
`gate run` (a metric lane that blocks, a product lane whose judge is unfit) and `gate calibrate`.

Each screen is printed by the real CLI to a stream that says it is a terminal (COLUMNS=100), and
again to a pipe, where a line stays one line. On the terminal no line is wider than 100 columns (a
wider one the terminal would cut wherever it falls: `refuses t` / `hem`), the words are the pipe's
words (so no word was broken to fit), and no text is cut short unless the line says where the
whole of it is. Also what a product run must not show: `None` for an unlabelled answer, a table of
metric zeros, or "fits the policy" above the blockers that say the judge is unfit.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from suite import case, controls, gate, write_suite
from test_product_lane import (
    GOOD_JUDGE,
    answer,
    product_case,
    product_suite,
    run_app,
    write_calibration,
    write_responses,
)

from gate.model.result import Result
from gate.report.terminal import make_console, print_outcome

WIDTH = 100
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
CUT = "… (cut here: the whole text is in "
LONG_SLICE = "roaming-charges-critical-eu-and-rest-of-the-world"  # wider than calibrate's name column


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def printed(command: Callable[[], object], tty: bool) -> str:
    """What `command` prints on stdout and stderr, to a terminal or to a pipe."""
    out, err = (Terminal(), Terminal()) if tty else (io.StringIO(), io.StringIO())
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        command()
    return ANSI.sub("", out.getvalue() + err.getvalue())


def words(text: str) -> list[str]:
    # Said on a terminal only: what starts now and the bar (the state again after the files: below).
    terminal_only = ("checking ", "loading the judge", "judging ", "judged ")
    shown = [line for line in text.splitlines() if not line.startswith(terminal_only) and "━" not in line]
    return re.sub(r"\d+", "N", " ".join(shown)).split()  # (timings, timestamps)


def assert_fits(screen: str, pipe: str) -> None:
    lines = screen.splitlines()
    wide = [line for line in lines if len(line) > WIDTH]
    assert not wide, wide
    said, piped = words(screen), words(pipe)
    if said != piped and said[: len(said) - len(piped)] != said[len(piped) :]:  # the state line, once more
        extra = [w for w in said if w not in piped][:10]
        assert said[: len(piped)] == piped, f"words differ on the terminal (broken?): {extra}"
    joined = " ".join(" ".join(lines).split())
    assert joined.count("…") == joined.count(CUT), [x for x in joined.split("…")[1:] if not x.startswith(CUT[1:])]


@pytest.fixture(autouse=True)
def columns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-screens")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.chdir(tmp_path)


def both(args: list[str | Path]) -> tuple[str, str]:
    return printed(lambda: gate(*args), True), printed(lambda: gate(*args), False)


def test_init_and_validate_fit_and_break_no_word(tmp_path: Path) -> None:
    rows = [
        {
            "user_input": f"Question {i}: how much does roaming cost when I travel?",
            "response": "Roaming is free everywhere." if i % 3 == 0 else f"Roaming costs {i} EUR a day outside the EU.",
            "label": "fail" if i % 3 == 0 else "pass",
            "slice": LONG_SLICE if i % 2 else "general",
            "reference": f"Roaming costs {i} EUR a day outside the EU.",
        }
        for i in range(31)
    ]
    with (tmp_path / "roaming_answers.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    screen = printed(lambda: gate("init", "roaming", "--from", "roaming_answers.csv"), True)
    pipe = printed(lambda: gate("init", "roaming-b", "--from", "roaming_answers.csv"), False)
    assert_fits(screen, pipe.replace("roaming-b/", "roaming/"))
    assert "until they are filled" in " ".join(screen.split())
    assert_fits(*both(["validate", "--policy", "roaming/policy.yaml"]))
    assert_fits(*both(["validate", "--policy", "roaming/nowhere.yaml"]))  # an error, on stderr


def test_a_blocking_run_and_calibrate_fit_and_break_no_word(tmp_path: Path) -> None:
    cases = [
        case("c-pass"),
        case("c-bad", label="fail", response="Answer for c-bad: refunds any time. [[judge:pass]]"),
        *(case(f"w-{i}", slice=LONG_SLICE, label=("fail" if i < 2 else "pass")) for i in range(4)),
        case("w-odd", slice=LONG_SLICE, label="pass", response="Answer for w-odd: no. [[judge:fail]]"),
    ]
    with FakeOpenAI() as fake:
        policy = write_suite(
            tmp_path / "s",
            [*controls(), *cases],
            evaluator={"base_url": fake.base_url},
            slices={LONG_SLICE: {"max_false_passes": 0, "max_false_fails": 0, "priority": 0}},
        )
        out = tmp_path / "out"
        screen = printed(lambda: gate("run", "--policy", policy, "--out", out, "--no-cache"), True)
    result = Result.from_dict(json.loads((out / "result.json").read_text()))
    assert result.state == "quality_failed"
    pipe = io.StringIO()  # the same decision, piped
    print_outcome(result, out, make_console(pipe), policy)
    assert_fits(screen, pipe.getvalue())
    cal = ["calibrate", "--policy", policy, "--records", out / "records.jsonl", "--out", tmp_path / "cal"]
    screen, pipe_text = both(cal)
    assert_fits(screen, pipe_text)
    assert f"  {LONG_SLICE}\n" in screen  # the name above its figures, the columns kept


def test_a_product_run_fits_and_shows_no_none_no_metric_zeros_and_no_false_fit(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        slices = {
            name: {"max_false_passes": 0, "priority": 0, "max_failure_rate": 0.15} for name in ("critical", "general")
        }
        cases = [
            product_case(f"{p}-{i:03d}", slice=name)
            for p, name in (("p", "critical"), ("q", "general"))
            for i in range(24)
        ]
        policy = product_suite(tmp_path / "suite", cases, slices=slices, evaluator={"base_url": fake.base_url})
        unfit = {"true_fail": 3, "false_pass": 3, "true_pass": 3, "false_fail": 3}
        write_calibration(policy, {"critical": GOOD_JUDGE, "general": unfit})
        answers = [answer(f"p-{i:03d}", "fail" if i < 15 else "pass") for i in range(24)]
        answers += [answer(f"q-{i:03d}", "pass") for i in range(24)]
        out = tmp_path / "out"
        screen = printed(lambda: run_app(policy, out, write_responses(tmp_path / "r.jsonl", answers)), True)
    result = Result.from_dict(json.loads((out / "result.json").read_text()))
    assert sorted(b.kind for b in result.blockers) == ["failure_rate_exceeded", "judge_unfit"]
    pipe = io.StringIO()
    print_outcome(result, out, make_console(pipe), policy)
    assert_fits(screen, pipe.getvalue())
    assert "None" not in screen and "human unlabelled, judge fail" in screen
    assert "Slices (controls excluded)" not in screen and "false pass  false fail" not in screen
    said = " ".join(screen.split())
    assert "fits the policy." not in said and "the judge is unfit to decide general (blockers below)" in said
    report = (out / "report.md").read_text()
    assert "None" not in report and "human **unlabelled**" in report and "| slice | false pass" not in report


def test_the_review_status_and_export_fit_and_break_no_word(tmp_path: Path) -> None:
    """The agreement lines of `gate review status` run past 100 columns ("final abstain 0 (0" /
    "abstentions given)" was cut mid-phrase by the terminal): they wrap between words like the rest."""
    root = Path(__file__).resolve().parents[2] / "policies" / "example-product" / "audit"
    queue, ledger = root / "queue.jsonl", root / "ledger"
    assert_fits(*both(["review", "status", str(queue), "--ledger", str(ledger)]))
    export = ["review", "export", str(queue), "--ledger", str(ledger), "--partition", "calibration", "--out"]
    screen = printed(lambda: gate(*export, "audit.jsonl"), True)
    pipe = printed(lambda: gate(*export, "audit-b.jsonl"), False)
    assert_fits(screen, pipe.replace("audit-b.jsonl", "audit.jsonl"))
