"""`--resume` keeps a judgment that failed deterministically (parse_error, invalid_label) and sends
it again only when asked, with `--rejudge-parse-errors` (issue 30, item 5): it re-sent every
parse error, paying again for a reply the same judge would very likely give again. Real CLI, real
ragas, real HTTP to the fake provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, raw, reply, server_error
from suite import case, gate, result, write_suite


def test_resume_keeps_parse_errors_unless_asked(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-resume-parse")
    fake_openai.script("c-1", raw("I think it passes."))  # every time: a parse error
    fake_openai.script("c-2", server_error(), server_error(), reply("pass"))  # transient: resumed as before
    cases = [case("c-1"), case("c-2"), case("c-3")]
    policy = write_suite(tmp_path / "s", cases, evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "out"
    args = ("run", "--policy", policy, "--lane", "nocontrols", "--out", out, "--no-cache")
    assert gate(*args) == 3
    sent_c1, sent_c2 = fake_openai.count("Question for c-1"), fake_openai.count("Question for c-2")
    assert gate(*args, "--resume") == 3  # c-2 judged again; c-1's parse error kept
    assert fake_openai.count("Question for c-1") == sent_c1
    assert fake_openai.count("Question for c-2") == sent_c2 + 1
    assert [c["error_kind"] for c in result(out)["cases"] if c["case_id"] == "c-1"] == ["parse_error"]
    fake_openai.reset()  # the judge now answers (the oracle)
    assert gate(*args, "--resume", "--rejudge-parse-errors") == 0
    assert fake_openai.count("Question for c-1") == 1 and fake_openai.count() == 1
    assert result(out)["state"] == "passed"
