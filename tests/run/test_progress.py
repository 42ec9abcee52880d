"""What a person sees while the gate judges: a live bar on a terminal, a quiet plain line every
~10% in a CI log, and judgments reused by `--resume` counted toward the total."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, server_error
from suite import write_suite

from gate.commands.run import RunOptions, run
from gate.judge import Judgment
from gate.run.progress import Progress

OK = Judgment(status="ok")
ERROR = Judgment(status="error", error_kind="server_error")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_ci_log_gets_a_plain_line_every_tenth() -> None:
    log = io.StringIO()
    progress = Progress(200, log, "USD", boundary=2.0)
    for i in range(200):
        progress.tick(ERROR if i == 3 else OK, 0.001 * i)
    progress.close(None, 0.2)
    lines = log.getvalue().splitlines()
    assert 10 <= len(lines) <= 11 and "\x1b" not in log.getvalue()
    assert lines[-1].startswith("gate: 200/200 judgments, 1 error, 0.1990 spent + 0.0000 reserved of 2 USD")


def test_a_terminal_gets_a_live_bar_with_errors_spend_and_eta() -> None:
    tty = Terminal()
    progress = Progress(4, tty, "EUR", boundary=0.5, reused=1)
    for j in (OK, ERROR, OK):
        progress.tick(j, 0.01)
    progress.close(None, 0.03)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", tty.getvalue())
    assert "\x1b[" in tty.getvalue()  # drawn in place, not a line per judgment
    final = plain.replace("\r", "\n").strip().splitlines()[-1]
    assert "4/4" in final and "1 error " in final and "0.0300 spent + 0.0000 reserved of 0.5 EUR" in final
    assert "ETA" in final


@pytest.mark.parametrize("reason", ["verdict_decided", "budget"])
def test_why_scheduling_stopped_is_said_once_on_a_terminal_and_with_the_figures_in_a_log(reason: str) -> None:
    tty, log = Terminal(), io.StringIO()
    for stream in (tty, log):
        progress = Progress(4, stream, "USD", boundary=0.5)
        progress.tick(OK, 0.01)
        progress.close(reason, 0.01)
    left = "not needed" if reason == "verdict_decided" else "unrun"
    why = f"scheduling stopped: {reason.replace('_', ' ')}; 3 of 4 judgments {left}"
    # The bar already shows 1/4 and the spend: the terminal's last line is the reason alone.
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", tty.getvalue()).replace("\r", "\n").strip().splitlines()
    assert plain[-1] == why and sum(line.count("1/4") for line in plain[-2:]) == 1
    assert log.getvalue().splitlines()[-1].startswith("gate: 1/4 judgments, 0 errors, 0.0100 spent")
    assert log.getvalue().splitlines()[-1].endswith(f"; {why}")
    # Nothing more is sent after a stop: no time left to estimate, on either screen.
    assert "ETA" not in log.getvalue().splitlines()[-1] and "ETA" not in plain[-2]


def test_resume_counts_reused_judgments_toward_the_total(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-progress")
    with FakeOpenAI() as fake:
        fake.script("g-1", server_error(), server_error())
        policy = write_suite(tmp_path / "s", evaluator={"base_url": fake.base_url})
        out = tmp_path / "out"
        first = io.StringIO()
        run(policy, RunOptions(lane="pr", out_dir=out, use_cache=False, progress=first))
        fake.reset()
        log = io.StringIO()
        run(policy, RunOptions(lane="pr", out_dir=out, use_cache=False, resume=True, progress=log))
    total = int(re.findall(r"/(\d+) judgments", first.getvalue())[-1])
    assert log.getvalue().splitlines()[-1].startswith(f"gate: {total}/{total} judgments ({total - 1} reused), 0 errors")
