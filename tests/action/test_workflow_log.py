"""The log is not a command channel (SPEC 14, issue 19 defect 2).

Untrusted text (case ids legal by SPEC 8's pattern such as `::error::x`, judge reasons, record
text) reaches the terminal's disagreement list, messages and errors of real CLI runs and of the
Action's entry point. The step log each prints is read with the runner's own rules
(tests/workflow_log.py): no workflow command is found in it but the gate's own.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from fake_openai import FakeOpenAI, reply
from runner_env import API_KEY, runner_env
from suite import case, controls, write_suite
from workflow_log import commands, forged

from gate.action import main as action_main
from gate.cli import main
from gate.model.escape import log_text, neutral_line

# Case ids the id pattern allows (letters, digits and . _ : / -) that are workflow commands.
HOSTILE_IDS = ("::error::forged-id", "::add-mask::c-9", "::stop-commands::t0k", "::WARNING::x")
# Judge reasons: a reply is any text.
HOSTILE_REASONS = (
    "fine\n   ::warning file=a.py,line=1::forged annotation",
    "looks right ##[error]forged old-syntax error",
    "\t::add-mask::sk-real-looking",
    "::stop-commands::hide-the-gate",
    "\u2003::error::after an em space",
)


def test_the_reader_finds_what_the_runner_would() -> None:
    log = "\n".join(
        [
            "plain",
            "   ::error::indented",  # leading whitespace is trimmed
            "x ##[warning]anywhere",
            "x ::error::mid-line is text",
            "::stop-commands::tok",
            "::error::hidden while stopped",
            "::TOK::",
            "::notice::after resuming",
        ]
    )
    assert [(c.name, c.data) for c in commands(log)] == [
        ("error", "indented"),
        ("warning", "anywhere"),
        ("stop-commands", "tok"),
        ("notice", "after resuming"),
    ]


@pytest.mark.parametrize("text", [*HOSTILE_IDS, *HOSTILE_REASONS, "a##[b]##[c]", "###[x]", " :: "])
def test_neutral_lines_and_log_text_are_never_commands(text: str) -> None:
    for line in text.split("\n"):
        assert commands(neutral_line(line)) == []
        # A fragment printed indented, or after an empty fragment, is still no command.
        for shown in (log_text(line), "   " + log_text(line), log_text("") + log_text(line)):
            assert commands(shown) == [], shown


def hostile_suite(root: Path, base_url: str) -> Path:
    cases = [
        *controls(),
        case("c-1"),
        case("c-2", label="fail"),
        *(case(cid, label="fail") for cid in HOSTILE_IDS),  # the judge passes them: disagreements
    ]
    return write_suite(root, cases, evaluator={"base_url": base_url})


def script_hostile_judge(fake: FakeOpenAI) -> None:
    for cid, reason in zip(HOSTILE_IDS, HOSTILE_REASONS, strict=False):
        fake.script(f"Answer for {cid}:", reply("pass", reason))
    fake.script("Answer for c-2:", reply("pass", HOSTILE_REASONS[-1]))


def test_cli_run_decide_and_compare_print_no_workflow_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-not-a-secret-123")
    with FakeOpenAI() as fake:
        script_hostile_judge(fake)
        policy = hostile_suite(tmp_path / "s", fake.base_url)
        out = tmp_path / "out"
        assert main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"]) == 1
    ran = capsys.readouterr()
    assert "forged-id" in ran.out  # the disagreement list names the hostile cases
    records = str(out / "records.jsonl")
    assert main(["decide", "--policy", str(policy), "--records", records, "--out", str(tmp_path / "d")]) == 1
    decided = capsys.readouterr()
    assert main(["decide", "--policy", str(policy), "--records", records, "--format", "json"]) == 1
    as_json = capsys.readouterr()
    assert main(["compare", "--base", records, "--head", str(out), "--out", str(tmp_path / "cmp")]) == 0
    compared = capsys.readouterr()
    for printed in (ran, decided, as_json, compared):
        log = printed.out + printed.err
        assert forged(log) == [], log


def test_the_action_entry_prints_only_its_own_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI() as fake:
        env = runner_env(tmp_path, api_url="", github_token="", fail_on="")
        env["JUDGE_KEY"] = API_KEY
        evals = tmp_path / "workspace" / "evals"
        cases = [*controls(), case("c-1"), *(case(cid, label="fail") for cid in HOSTILE_IDS)]
        write_suite(evals, cases, evaluator={"base_url": fake.base_url, "api_key_env": "JUDGE_KEY"})
        script_hostile_judge(fake)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path / "workspace")
        assert action_main() == 1
    printed = capsys.readouterr()
    log = printed.out + printed.err
    assert "forged-id" in log
    own: list[Any] = [(c.name, c.data) for c in commands(log)]
    # The gate's own: the key's mask and the notice that nothing was published (no token).
    assert ("add-mask", API_KEY) in own
    assert own == [c for c in own if c[0] == "add-mask" or (c[0] == "notice" and c[1].startswith("ragas-gate:"))]
    assert not {data for name, data in own if name == "add-mask"} & {"c-9", "sk-real-looking"}
