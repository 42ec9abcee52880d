"""What a newcomer meets after the first run (issue 24): run directories, help pages, shards that
say so, a --max-cost above the policy's, paths from the working directory, the screen after a
failed run (blockers, withheld cases, the cache, next steps), progress, and the calibration
picture's contrast. Real runs against the fake provider over HTTP; the CLI as a user types it."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply
from suite import case, controls, gate, result, write_suite

from gate.cli import SUBCOMMANDS
from gate.judge import Judgment
from gate.run.progress import Progress

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    *controls(),
    *(case(f"c-{i}", label=lab) for i, lab in enumerate(["pass", "fail", "pass", "fail", "pass", "fail"], 1)),
    *(case(f"g-{i}", slice="general", label=lab) for i, lab in enumerate(["pass", "fail", "pass"], 1)),
]
NON_CONTROL = 9


@dataclass(frozen=True)
class Runs:
    policy: Path
    failed: Path  # a full run with one false pass in the critical slice
    failed_screen: str
    shards: tuple[Path, Path]
    shard_screens: tuple[str, str]


def _run(*args: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = gate(*args)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test has the judge's key it expects (it relied on one another test's process leaked)."""
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-newcomer")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    root = tmp_path_factory.mktemp("newcomer")
    with pytest.MonkeyPatch.context() as mp, FakeOpenAI() as fake:
        mp.setenv("GATE_TEST_KEY", "sk-test-newcomer")
        mp.setenv("RAGAS_DO_NOT_TRACK", "true")
        fake.script("c-2", reply("pass", "Looks right to me."))  # people failed it: a false pass
        policy = write_suite(root / "suite", CASES, evaluator={"base_url": fake.base_url})
        failed = root / "gate-out"
        code, screen, _ = _run("run", "--policy", policy, "--out", failed, "--no-cache", "--max-cost", "50")
        assert code == 1
        shards, screens = [], []
        for i in (1, 2):
            out = root / f"gate-out-{i}"
            code, text, _ = _run("run", "--policy", policy, "--out", out, "--no-cache", "--shard", f"{i}/2")
            shards.append(out)
            screens.append(text)
        yield Runs(policy, failed, screen, (shards[0], shards[1]), (screens[0], screens[1]))


# --- 2. a run directory or its file ---------------------------------------------------------


def test_every_command_that_reads_a_run_takes_its_directory_or_its_file(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    by_dir = gate("decide", "--policy", runs.policy, "--records", runs.failed, "--out", tmp_path / "d1")
    by_file = gate(
        "decide", "--policy", runs.policy, "--records", runs.failed / "records.jsonl", "--out", tmp_path / "d2"
    )
    assert by_dir == by_file == 1
    assert result(tmp_path / "d1")["blockers"] == result(tmp_path / "d2")["blockers"]

    assert gate("calibrate", "--policy", runs.policy, "--records", runs.failed, "--out", tmp_path / "cal") == 0
    assert json.loads((tmp_path / "cal" / "calibration.json").read_text())["overall"]["completed"] == NON_CONTROL

    capsys.readouterr()
    # No token: nothing is published, and the exit code is the result's state code, not a usage error.
    assert gate("publish", "--result", runs.failed / "result.json") == 1
    assert gate("publish", "--result", runs.failed) == 1
    err = capsys.readouterr().err
    assert "Not a directory" not in err and "nothing published" in err

    shard_files = [s / "result.json" for s in runs.shards]
    assert gate("merge", "--policy", runs.policy, *shard_files, "--out", tmp_path / "merged") in (0, 1)
    assert result(tmp_path / "merged")["merged_shards"]["indices"] == [1, 2]


# --- 3. help ------------------------------------------------------------------------------


def _help(command: str, columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    capsys.readouterr()
    with pytest.raises(SystemExit):
        gate(*([command] if command else []), "--help")
    return capsys.readouterr().out


def _exit_rows(text: str) -> list[list[str]]:
    """The exit table's rows, each with its wrapped continuation lines."""
    table = text[text.index("exit codes:") :].splitlines()[1:]
    rows: list[list[str]] = []
    for line in table:
        if not line.strip():
            break
        if re.match(r"  \d", line):
            rows.append([line])
        else:
            rows[-1].append(line)
    return rows


@pytest.mark.parametrize("columns", [100, 240])
def test_each_help_page_fits_100_columns_has_examples_and_its_own_exit_codes(
    columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pages = {c.name: _help(c.name, columns, monkeypatch, capsys) for c in SUBCOMMANDS}
    pages["gate"] = _help("", columns, monkeypatch, capsys)
    for name, text in pages.items():
        too_wide = [line for line in text.splitlines() if len(line) > 100]
        assert not too_wide, (name, too_wide)
        for row in _exit_rows(text):
            # A wrapped meaning continues under its own first word.
            fields = list(re.finditer(r"\S+(?: \S+)*", row[0]))  # code, name, meaning: two spaces apart
            start = fields[2].start()
            for more in row[1:]:
                assert len(more) - len(more.lstrip()) == start, (name, row)
        if name != "gate":
            assert "examples:" in text and f"gate {name} " in text[text.index("examples:") :], name
    for name in ("compare", "calibrate"):
        codes = [row[0].split()[0] for row in _exit_rows(pages[name])]
        assert "1" not in codes and "4" not in codes and {"0", "2"} <= set(codes), name
        assert "quality_failed" not in pages[name][pages[name].index("exit codes:") :]
    for name in ("run", "decide", "merge"):
        rows = {row[0].split()[0]: " ".join(line.strip() for line in row) for row in _exit_rows(pages[name])}
        assert "input_contract" in rows["1"] and "case" not in rows["2"], rows
    # Where a command writes when --out is not given is said (a newcomer looks for the files).
    for name, default in (("run", "gate-out/"), ("calibrate", "gate-calibration/"), ("compare", "gate-compare/")):
        assert f"(default {default})" in " ".join(pages[name].split()), name


# --- 4. a shard says it is one ---------------------------------------------------------------


def test_a_shard_says_which_share_of_the_lane_it_judged(runs: Runs) -> None:
    shares = []
    for i, (out, screen) in enumerate(zip(runs.shards, runs.shard_screens, strict=True), start=1):
        m = re.search(rf"shard {i}/2: (\d+) of (\d+) cases", screen)
        assert m is not None, screen
        assert int(m.group(2)) == NON_CONTROL
        shares.append(int(m.group(1)))
        for name in ("report.md", "summary.md"):
            assert f"shard {i}/2: {m.group(1)} of {NON_CONTROL} cases" in (out / name).read_text()
    assert sum(shares) == NON_CONTROL
    assert "shard" not in runs.failed_screen.split("Blockers")[0]
    # The plan of a shard says the same, before anything is paid.
    code, out, _ = _run("run", "--policy", runs.policy, "--shard", "1/2", "--dry-run", "--format", "json")
    assert code == 0 and json.loads(out)["shard"] == {
        "index": 1,
        "count": 2,
        "cases": shares[0],
        "lane_cases": NON_CONTROL,
    }


# --- 5. --max-cost above the policy's ---------------------------------------------------------


def test_a_max_cost_above_the_policys_says_the_lower_boundary_applies(runs: Runs, tmp_path: Path) -> None:
    said = "--max-cost 50 is above the policy's limits.max_total_cost 1: the lower boundary, 1 USD, applies"
    assert said in runs.failed_screen
    assert any(said in note for note in result(runs.failed)["notes"])
    assert result(runs.failed)["limits"]["max_total_cost"] == 1
    code, screen, _ = _run("decide", "--policy", runs.policy, "--records", runs.failed, "--max-cost", "0.5")
    assert code == 1 and "--max-cost" not in screen  # a lower one is simply the boundary
    # The dry run, where a newcomer tries the flag first, says it too.
    code, plan, _ = _run("run", "--policy", runs.policy, "--dry-run", "--max-cost", "50", "--out", tmp_path / "d")
    assert code == 0 and said in plan and "boundary 1 USD" in plan


# --- 6. paths from the working directory ----------------------------------------------------


def test_a_broken_case_is_named_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = [*CASES[:-1], {**CASES[-1], "slice": "no such slice!"}]
    write_suite(tmp_path / "mypol", broken)
    monkeypatch.chdir(tmp_path)
    assert gate("validate", "--policy", "mypol/policy.yaml") == 1
    out = capsys.readouterr().out
    assert f"mypol/cases.jsonl:{len(broken)}" in out
    monkeypatch.chdir(tmp_path / "mypol")
    assert gate("validate", "--policy", "policy.yaml") == 1
    assert f" cases.jsonl:{len(broken)}" in capsys.readouterr().out


def test_a_mistyped_lane_or_run_names_what_was_typed_and_what_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_suite(tmp_path / "mypol", CASES)
    monkeypatch.chdir(tmp_path)
    assert gate("run", "--policy", "mypol/policy.yaml", "--lane", "nope", "--dry-run") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: mypol/policy.yaml: lane 'nope' is not defined") and str(tmp_path) not in err
    assert gate("decide", "--policy", "mypol/policy.yaml", "--records", "gate-ot") == 2
    err = capsys.readouterr().err
    assert "gate-ot: the records file does not exist; fix: pass a run's --out directory or its records.jsonl" in err


# --- 7. after a failed run -------------------------------------------------------------------


def test_after_a_failed_run_the_screen_and_report_say_it_once_and_say_what_next(runs: Runs) -> None:
    screen = runs.failed_screen
    assert "false_pass_limit in slice critical: 1 false pass, limit 0" in screen
    assert "slice critical: slice critical" not in screen
    assert "withheld (no reference evidence, never sent to the judge): ctl-missing" in screen
    report = (runs.failed / "report.md").read_text()
    assert "· slice `critical`: slice critical" not in report and "ctl-missing" in report
    for text in (screen, report):
        assert "cached calls" not in text and "0 judgments from cache" in text
        assert re.findall(r"\d+ (?:cached|from cache)", text) == []
    steps = screen[screen.index("Next steps") :]
    policy = str(runs.policy)
    # Calibration is measured on the calibration partition, never on these (sentinel) records.
    assert f"gate calibrate --policy {policy} --records {runs.failed}" not in steps
    assert f"gate run --policy {policy} --lane LANE --out gate-out-calibration, then gate calibrate" in steps
    assert "LANE: a lane over the calibration partition" in " ".join(steps.split())
    assert f"--head {runs.failed}" in steps and "gate compare" in steps and "overrides:" in steps
    assert "--resume" not in steps  # nothing is missing: judging again would not help
    assert "### Next steps" in report and "`gate calibrate --policy POLICY --records gate-out-calibration`" in report
    assert "`" not in steps  # Markdown stays in the report


def test_next_steps_follow_the_blockers_and_a_missing_key_says_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GATE_TEST_KEY", raising=False)
    policy = write_suite(tmp_path / "s", CASES)
    code, screen, _ = _run("run", "--policy", policy, "--out", tmp_path / "out")
    assert code == 3
    assert "on your machine, export GATE_TEST_KEY=...; in GitHub Actions, set that secret" in screen
    steps = screen[screen.index("Next steps") :]
    assert "Provide the judge's key" in steps and "gate calibrate" not in steps
    _, passed, _ = _run("validate", "--policy", policy)
    assert "Next steps" not in passed


def test_after_a_failed_control_the_next_steps_point_at_the_judge_and_offer_no_override(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("ctl-negative", reply("pass", "Looks right to me."))  # a negative control passed
        policy = write_suite(tmp_path / "s", CASES, evaluator={"base_url": fake.base_url})
        code, screen, _ = _run("run", "--policy", policy, "--out", tmp_path / "out", "--no-cache")
    assert code == 1 and "control_failed" in screen
    steps = " ".join(screen[screen.index("Next steps") :].split())
    assert "A control failed: the judge got a case with a known answer wrong" in steps
    assert "no override waives a control" in steps and "overrides:" not in steps  # none could waive it
    assert "fix the product" not in steps


def test_after_provider_errors_the_next_steps_say_where_to_look_and_to_resume(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on: every attempt is a connection error
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    policy = write_suite(tmp_path / "s", CASES, evaluator={"base_url": closed, "timeout_s": 2})
    code, screen, _ = _run("run", "--policy", policy, "--out", tmp_path / "out", "--no-cache")
    assert code == 3 and "control_error" in screen
    steps = " ".join(screen[screen.index("Next steps") :].split())
    assert "never the product's" in steps and "check the evaluator's base_url and key" in steps
    assert "--resume judges only what is missing" in steps
    assert "gate calibrate" not in steps and "overrides:" not in steps  # no verdict to question


# --- 8. progress -----------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _screen(raw: str) -> str:
    """What a terminal shows of rich's output, escapes taken out, redraws as lines."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw).replace("\r", "\n")


def test_progress_shows_spent_and_reserved_apart_and_an_eta_from_the_whole_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "100")  # the terminal: the bar, the counts and the spend fit
    clock, tty = Clock(), Terminal()
    progress = Progress(30, tty, "EUR", boundary=0.5, clock=clock)
    progress.status("loading the judge (m through ragas)")
    clock.now += 5  # loading takes time; it is not judging
    progress.phase("controls", 8)
    for _ in range(5):  # a burst: five answers at once after 0.5 s
        clock.now += 0.1
        progress.tick(Judgment(status="ok"), 0.01, reserved=0.02)
    clock.now += 6.5  # then a slow stretch: 7 done after 7 s of judging
    progress.tick(Judgment(status="ok"), 0.012, reserved=0.018)
    progress.tick(Judgment(status="ok"), 0.013, reserved=0.017)
    assert progress.eta() == "0:00:23"  # 23 left at 1 a second, not the burst's 10 a second
    screen = _screen(tty.getvalue())
    assert screen.index("loading the judge") < screen.index("judging 8 controls")
    last = [line for line in screen.splitlines() if "7/30" in line][-1]
    assert "0.0130 spent + 0.0170 reserved of 0.5 EUR" in last and "ETA 0:00:23" in last
    log = io.StringIO()  # a CI log: the same figures on its plain lines
    plain = Progress(30, log, "EUR", boundary=0.5, clock=clock)
    plain.phase("controls", 8)
    clock.now += 7
    plain.advance(7, 0, 0.013, 0.017)  # 15 s since the last line: one is written
    line = log.getvalue().splitlines()[-1]
    assert line.startswith("gate: 7/30 judgments, 0 errors, 0.0130 spent + 0.0170 reserved of 0.5 EUR")
    assert line.endswith("ETA 0:00:23") and "judging 8 controls" not in log.getvalue()


def test_a_run_says_what_it_loads_and_judges_before_the_first_judgment(tmp_path: Path) -> None:
    from gate.commands.run import RunOptions, run

    with pytest.MonkeyPatch.context() as mp, FakeOpenAI() as fake:
        mp.setenv("GATE_TEST_KEY", "sk-test-newcomer")
        mp.setenv("COLUMNS", "100")
        policy = write_suite(tmp_path / "s", CASES, evaluator={"base_url": fake.base_url})
        tty = Terminal()
        run(policy, RunOptions(lane="pr", out_dir=tmp_path / "out", use_cache=False, progress=tty))
    screen = _screen(tty.getvalue())
    order = [
        screen.index("checking "),
        screen.index("loading the judge (gpt-4o-mini through ragas)"),
        screen.index("judging 5 controls"),  # the missing-evidence control is withheld
        screen.index(f"judging {NON_CONTROL} cases"),
    ]
    assert order == sorted(order) and order[-1] < screen.index("14/14")
    final = [line for line in screen.splitlines() if "14/14" in line][-1]
    assert final.startswith("judged") and "spent + 0.0000 reserved of 1 USD" in final


# --- 10. minor --------------------------------------------------------------------------------


def test_a_mistyped_cause_gets_did_you_mean(runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cal"
    assert gate("calibrate", "--policy", runs.policy, "--records", runs.failed, "--out", out) == 0
    disagreement = json.loads((out / "calibration.json").read_text())["disagreements"][0]["case_id"]
    causes = tmp_path / "causes.csv"
    causes.write_text(f"{disagreement},prompt_gapp\n")
    capsys.readouterr()
    assert gate("calibrate", "--policy", runs.policy, "--records", runs.failed, "--causes", causes, "--out", out) == 2
    assert "did you mean 'prompt_gap'?" in capsys.readouterr().err


def _luminance(hex_colour: str, opacity: float) -> float:
    """Relative luminance (WCAG 2) of a colour laid at `opacity` over white."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    shown = [c * opacity + (1 - opacity) for c in channels]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in shown]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def test_every_digit_of_the_calibration_picture_reads_against_its_cell(tmp_path: Path) -> None:
    from test_calibrate import suite, three

    from gate.model.records import write_records

    # Mostly false fails: the amber cell is at its darkest, where a white digit used to sit.
    records = [r for i in (1, 2, 3) for r in three(f"c-{i}", "pass", ["fail"] * 3)] + three("c-4", "fail", ["fail"] * 3)
    policy = suite(tmp_path / "suite")
    write_records(tmp_path / "records.jsonl", records)
    assert gate("calibrate", "--policy", policy, "--records", tmp_path / "records.jsonl", "--out", tmp_path / "o") == 0
    svg = ET.parse(tmp_path / "o" / "calibration.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    children = list(svg)
    checked = 0
    for rect, text in itertools.pairwise(children):
        if rect.tag != f"{ns}rect" or text.tag != f"{ns}text" or rect.get("stroke") != "#d0d7de":
            continue
        back = _luminance(rect.get("fill", "#ffffff"), float(rect.get("fill-opacity", "1")))
        ink = _luminance(text.get("fill", "#000000"), 1.0)
        ratio = (max(back, ink) + 0.05) / (min(back, ink) + 0.05)
        assert ratio >= 4.5, (rect.attrib, text.attrib, ratio)
        checked += 1
    assert checked >= 8  # two 2x2 squares at least
    dark_amber = [
        r for r in svg.iter(f"{ns}rect") if r.get("fill") == "#ef8f00" and float(r.get("fill-opacity", 0)) > 0.5
    ]
    assert dark_amber  # the case that was hard to read is drawn
