"""`gate run` on a terminal (issue 29, item 5): the state line comes again last, after the Files
list (in 24 rows the first one has scrolled away), and NO_COLOR turns colour off. A real run
against the fake provider over HTTP, its output written to a stream that says it is a terminal."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from suite import gate, write_suite

COLOUR = re.compile(r"\x1b\[[0-9;]*3[0-7]m|\x1b\[[0-9;]*38;")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen_of_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> str:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-screen")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI() as fake:
        policy = write_suite(tmp_path / name, evaluator={"base_url": fake.base_url})
        tty = Terminal()
        with contextlib.redirect_stdout(tty), contextlib.redirect_stderr(io.StringIO()):
            code = gate("run", "--policy", policy, "--out", tmp_path / f"{name}-out", "--no-cache")
    assert code == 0
    return tty.getvalue()


def _plain(raw: str) -> list[str]:
    return [line for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw).splitlines() if line.strip()]


def test_the_state_line_comes_again_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    raw = screen_of_a_run(tmp_path, monkeypatch, "a")
    lines = _plain(raw)
    first = next(line for line in lines if line.startswith("passed"))
    assert lines[-1] == first
    assert lines.index("Files") < len(lines) - 1
    assert COLOUR.search(raw)  # a terminal gets colour


def test_no_color_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    raw = screen_of_a_run(tmp_path, monkeypatch, "b")
    assert not COLOUR.search(raw)
    assert _plain(raw)[-1].startswith("passed")


def test_a_budget_stop_names_the_case_that_did_not_fit_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-screen")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI() as fake:
        policy = write_suite(tmp_path / "c", evaluator={"base_url": fake.base_url, "max_concurrency": 1})
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = gate("run", "--policy", policy, "--out", tmp_path / "c-out", "--no-cache", "--max-cost", "0.001")
    text = " ".join(out.getvalue().split())  # the steps wrap at 100 columns
    assert code == 3, text
    assert "the cost boundary (0.001) stopped scheduling;" in text and "the first that did not fit: " in text
    assert "The cost boundary stopped the run: raise limits.max_total_cost" in text.replace("`", "")
    assert "shorten or drop the case that did not fit" in text
