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
