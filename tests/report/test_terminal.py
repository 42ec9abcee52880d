"""What a person sees on the terminal: the state first, plain text when piped, JSON for scripts,
colour only on a terminal, and case text never interpreted as markup or escape sequences."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_github import sample
from fake_openai import FakeOpenAI, reply
from rich.console import Console
from suite import write_suite

from gate.cli import build_parser, main
from gate.model.result import load_result
from gate.report.markdown import render_report
from gate.report.terminal import make_console, print_outcome
from gate.run.progress import Progress

KEY_ENV = "GATE_TEST_KEY"
HOSTILE_REASON = "Looks right [bold red]FORGED[/bold red] \x1b[31mred\x1b[0m **bold** <details> `x`"
ANSI = re.compile(r"\x1b\[")
MARKDOWN_MARKERS = ("**", "<details>", "###", "|---", "\\_", "`", "✅", "❌")


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A quality_failed run (c-2 is a false pass with a hostile judge reason) and its policy."""
    root = tmp_path_factory.mktemp("terminal")
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, "sk-test-terminal")
    try:
        with FakeOpenAI() as fake:
            fake.script("c-2", reply("pass", HOSTILE_REASON))
            policy = write_suite(root / "s", evaluator={"base_url": fake.base_url})
            out = root / "out"
            assert main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"]) == 1
        yield policy, out
    finally:
        mp.undo()


def _decide(failed_run: tuple[Path, Path], *extra: str) -> list[str]:
    policy, out = failed_run
    return ["decide", "--policy", str(policy), "--records", str(out / "records.jsonl"), *extra]


def test_piped_decide_is_plain_text_with_the_state_first(
    failed_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_decide(failed_run)) == 1
    text = capsys.readouterr().out
    assert text.startswith("quality_failed (exit 1): blocked: each blocker below names whose fix it is")
    assert not ANSI.search(text)
    for marker in MARKDOWN_MARKERS:
        assert marker not in text.replace(HOSTILE_REASON.replace("\x1b", "\\x1b"), ""), marker
    # blockers with case ids, then the slice table, then the cost, in that order
    blockers, slices, cost = text.index("false_pass_limit"), text.index("Slices"), text.index("Cost:")
    assert blockers < slices < cost and "c-2: human fail, judge pass" in text
    # the judge's text is shown as written, its escape character made visible
    assert "[bold red]FORGED[/bold red] \\x1b[31mred" in text


def test_terminal_output_has_colour_and_never_interprets_case_text(failed_run: tuple[Path, Path]) -> None:
    result = load_result(failed_run[1] / "result.json")
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system="truecolor", width=100, markup=False)
    print_outcome(result, failed_run[1], console)
    raw = buf.getvalue()
    assert ANSI.search(raw)  # colour on a terminal
    plain = ANSI.sub("", re.sub(r"\x1b\[[0-9;]*m", "", raw))
    assert plain.splitlines()[0].startswith("quality_failed (exit 1)")
    assert "[bold red]FORGED[/bold red]" in plain  # rich markup in a reason is text, not style
    assert "\x1b[31mred" not in raw  # the reason's own escape never reaches the terminal


def test_the_files_a_run_wrote_stay_in_their_column_at_100_columns(
    failed_run: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A release run's out dir also holds certification-entry.json, whose note is the longest.
    out = tmp_path / "gate-out-release"
    shutil.copytree(failed_run[1], out)
    (out / "certification-entry.json").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, color_system=None, width=100, markup=False)
    print_outcome(load_result(out / "result.json"), out, console)
    files, last = buf.getvalue().split("\nFiles\n", 1)[1].split("\n\n", 1)  # then the state line again
    assert last.startswith("quality_failed")
    files = files.splitlines()
    assert files[0].startswith("  gate-out-release/result.json ")
    assert "  gate-out-release/certification-entry.json  append to the certification ledger" in buf.getvalue()
    assert all(line.startswith("  ") and len(line) <= 100 for line in files), files


def _on_a_terminal(argv: list[str], **env: str) -> tuple[int, bytes]:
    """`gate ARGV` with stdout and stderr on a pseudo-terminal, as a person's shell runs it."""
    master, slave = pty.openpty()
    gate = Path(sys.executable).with_name("gate")
    environ = {k: v for k, v in os.environ.items() if k != "NO_COLOR"} | env
    proc = subprocess.Popen([str(gate), *argv], stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=environ)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks)


def test_no_color_on_a_terminal_prints_no_escape_at_all(failed_run: tuple[Path, Path]) -> None:
    """NO_COLOR (no-color.org) on a terminal: no colour, and no bold either: not one escape sequence.
    Without it the same terminal gets colour."""
    code, plain = _on_a_terminal(_decide(failed_run), NO_COLOR="1")
    assert code == 1 and plain.startswith(b"quality_failed (exit 1)")
    assert b"\x1b" not in plain and b"Blockers" in plain
    code, coloured = _on_a_terminal(_decide(failed_run))
    assert code == 1 and b"\x1b[1m" in coloured


def test_the_progress_on_a_terminal_under_no_color_is_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for no_color, bar in (("1", False), ("", True)):
        monkeypatch.setenv("NO_COLOR", no_color)
        stream = Terminal()
        progress = Progress(2, stream)
        progress.status("judging 2 cases")
        progress.advance(2, 0, 0.001)
        progress.close(None, 0.001)
        assert ("\x1b" in stream.getvalue()) is bar, stream.getvalue()
        assert bar or "gate: 2/2 judgments, 0 errors" in stream.getvalue()


def test_make_console_is_plain_for_a_pipe() -> None:
    buf = io.StringIO()
    console = make_console(buf)
    assert not console.is_terminal and console.no_color


def test_format_json_prints_the_result_only(failed_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_decide(failed_run, "--format", "json")) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["state"] == "quality_failed" and data["exit_code"] == 1
    assert data == json.loads((failed_run[1] / "result.json").read_text()) | {"notes": data["notes"]}


def test_dry_run_json_keeps_the_plan_off_stdout(
    failed_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    policy, _ = failed_run
    assert main(["run", "--dry-run", "--format", "json", "--policy", str(policy)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["notes"] == ["dry run: no model call"]
    assert "estimated cost" in captured.err


def test_files_are_named_relative_to_the_working_directory(
    failed_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = failed_run[1]
    monkeypatch.chdir(out.parent)
    assert main(_decide(failed_run, "--out", "again")) == 1
    text = capsys.readouterr().out
    assert "  again/result.json" in text and str(out.parent) not in text


@pytest.mark.parametrize("command", [None, "validate", "run", "decide", "merge", "calibrate", "compare", "publish"])
def test_help_lists_the_exit_codes_and_a_sentence_for_every_flag(command: str | None) -> None:
    parser = build_parser()
    if command is not None:
        sub = next(a for a in parser._actions if a.dest == "command")
        assert isinstance(sub.choices, dict)
        parser = sub.choices[command]
    text = parser.format_help()
    if command in (None, "run", "decide", "merge"):  # the commands that decide exit with the state's code
        for code, state in ((0, "passed"), (1, "quality_failed"), (2, "usage"), (3, "evaluation_incomplete")):
            assert re.search(rf"^  {code}  {state}\b", text, re.M), (command, state)
        assert re.search(r"^  4  review_required\b", text, re.M)
    else:  # each other command lists its own (tests/cli/test_newcomer.py checks them)
        assert re.search(r"^  2 +usage\b", text, re.M), command
    for action in parser._actions:
        if action.option_strings or (command is not None and action.dest != "help"):
            assert action.help and len(action.help) > 10, (command, action.dest)


def test_publish_help_names_the_environment_it_reads(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["publish", "--help"])
    text = capsys.readouterr().out
    for name in (
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_REPOSITORY",
        "GITHUB_EVENT_PATH",
        "GITHUB_API_URL",
        "GATE_COMMENT",
    ):
        assert name in text


def test_messages_name_paths_relative_to_the_working_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from suite import case, controls

    policy = write_suite(tmp_path / "evals", [*controls(), case("c-1"), case("c-2", slice="nope")])
    monkeypatch.chdir(tmp_path)  # as the Action runs in /github/workspace
    assert main(["validate", "--policy", str(policy.resolve())]) == 1
    assert main(["validate", "--policy", str(policy.resolve()), "--format", "json"]) == 1
    text = capsys.readouterr().out
    assert "which evals/policy.yaml does not define" in text and str(tmp_path) not in text
    (tmp_path / "evals" / "cases.jsonl").rename(tmp_path / "evals" / "moved.jsonl")
    assert main(["validate", "--policy", str(policy.resolve())]) == 2
    err = capsys.readouterr().err
    assert "(evals/cases.jsonl) does not exist" in err and str(tmp_path) not in err


def test_compare_prints_plain_counts_and_transitions(
    failed_run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy, out = failed_run
    records = str(out / "records.jsonl")
    args = ["compare", "--base", records, "--head", records, "--policy", str(policy), "--out", str(tmp_path / "c")]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert text.startswith("gate compare: base ") and "No verdict changed" in text
    assert not ANSI.search(text) and "##" not in text and "|---" not in text and "<details>" not in text


def test_the_cost_line_counts_in_words() -> None:
    """'66 HTTP attempts (1 retry), 1 judgment from cache', never '(1 retries)' (seen in a product run
    that retried one 500), on the terminal and in the report."""
    res = sample("passed")
    res = res.with_(cost=res.cost.model_copy(update={"http_attempts": 66, "retries": 1, "cached_calls": 1}))
    console = Console(file=io.StringIO(), width=200, no_color=True)
    print_outcome(res, None, console)
    screen = console.file.getvalue()  # type: ignore[attr-defined]
    assert "66 HTTP attempts (1 retry), 1 judgment from cache" in screen, screen
    assert "66 HTTP attempts (1 retry) · 1 judgment from cache" in render_report(res)
