"""Injection through untrusted text (issue 11, SPEC 8): case ids, slice names, reasons and messages
cannot forge the sticky marker, break a table, start a workflow command or break the XML."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from fake_github import FakeGitHub, sample, sample_result
from suite import case, write_suite
from workflow_log import commands

from gate.cli import main
from gate.github.client import ClientOptions, publish
from gate.model.escape import code, log_text, markdown, visible, workflow_data, xml_text
from gate.model.result import Result
from gate.report.checkrun import build_check_run
from gate.report.junit import render_junit
from gate.report.markdown import render_report

REPO = "acme/support-bot"
PR = 17
FAST = ClientOptions(0, 0, 5, 2, 0, 0)
FORGED = "<!-- ragas-gate:policy-b:pr -->"
HOSTILE = f"x`y {FORGED} <img src=x onerror=alert(1)> [click](https://evil.example) @team\r\n::warning::pwn"


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub(user_status=403) as server:
        yield server


def _hostile_result(policy_id: str) -> dict[str, Any]:
    """A result whose every text field carries the forged marker and other injections (as a
    tampered result.json or an unescaped path would)."""
    result = sample_result("quality_failed", policy_id=policy_id)
    result["slices"][f"crit|{FORGED}"] = dict(result["slices"]["general"])
    for b in result["blockers"]:
        b["message"] = HOSTILE
        b["case_ids"] = [HOSTILE, *b.get("case_ids", [])]
        b["slice"] = f"crit|{FORGED}"
    result["unrun_case_ids"] = [HOSTILE]
    return result


def _publish(fake: FakeGitHub, result: dict[str, Any], report: str) -> Any:
    return publish(
        Result.from_dict(result),
        report,
        token="ghs_fake_token_0123456789",
        repository=REPO,
        head_sha="a" * 40,
        pr_number=PR,
        api_url=fake.base_url,
        options=FAST,
    )


def test_a_forged_marker_in_case_text_never_makes_another_policy_edit_our_comment(fake: FakeGitHub) -> None:
    result_a = _hostile_result("policy-a")
    report_a = render_report(Result.from_dict(result_a))
    assert FORGED not in report_a
    first = _publish(fake, result_a, report_a)
    assert first.comment_action == "created"
    body_a = fake.comments(REPO, PR)[0]["body"]

    second = _publish(fake, sample_result("passed", policy_id="policy-b"), render_report(sample("passed")))
    assert second.comment_action == "created" and second.comment_id != first.comment_id
    bodies = {c["id"]: c["body"] for c in fake.comments(REPO, PR)}
    assert bodies[first.comment_id] == body_a
    assert not fake.calls("PATCH", "comments")


def test_the_marker_counts_only_as_the_first_line_of_our_comment(fake: FakeGitHub) -> None:
    # Even a report that slipped the forged marker through unescaped cannot take over policy-b.
    first = _publish(fake, sample_result("passed", policy_id="policy-a"), f"# A\n{FORGED}\n")
    second = _publish(fake, sample_result("passed", policy_id="policy-b"), "# B\n")
    assert second.comment_action == "created" and second.comment_id != first.comment_id
    third = _publish(fake, sample_result("passed", policy_id="policy-b"), "# B again\n")
    assert third.comment_action == "edited" and third.comment_id == second.comment_id


def _table_rows(text: str, header_start: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def _cells(row: str) -> int:
    """Cells in a GFM table row: `|` not escaped by a backslash separates cells."""
    count, escaped = 0, False
    for ch in row:
        if ch == "|" and not escaped:
            count += 1
        escaped = ch == "\\" and not escaped
    return count - 1


def test_a_pipe_or_marker_in_names_cannot_break_tables_or_add_html(fake: FakeGitHub) -> None:
    result = _hostile_result("policy-a")
    report = render_report(Result.from_dict(result))
    rows = _table_rows(report, "| slice |")
    assert len({_cells(r) for r in rows}) == 1
    summary = build_check_run(Result.from_dict(result), report).summary
    rows = _table_rows(summary, "| state |")
    assert len({_cells(r) for r in rows}) == 1
    for text in (report, summary):
        assert "<img" not in text and "<!--" not in text.split("\n", 1)[1]
        assert "](https://" not in text and "@team" not in text
        assert "\r" not in text and "\n::warning::" not in text


def test_junit_holds_only_characters_xml_can_carry() -> None:
    result = sample_result("quality_failed")
    result["cases"] = [
        {
            "case_id": "c-1\x00\x1b[31m",
            "slice": "general",
            "partition": "sentinel",
            "control_role": None,
            "human_label": "fail",
            "verdict": "pass",
            "labels": ["pass"],
            "bucket": "completed",
            "outcome": "false_pass",
            "reason": "bad\x0bthing\ud800",
            "error_kind": None,
            "error_message": None,
            "unstable": False,
            "review": False,
        }
    ]
    xml = render_junit(Result.from_dict(result))
    xml.encode("utf-8")  # no lone surrogate left
    suite = ET.fromstring(xml)
    testcase = suite.find("testcase")
    assert testcase is not None and testcase.get("name") == "c-1\\x00\\x1b[31m"


def test_the_escaping_functions() -> None:
    assert visible("tempera\u200bture") == "tempera\\u200bture"
    assert visible("a\r\nb") == "a\\r\\nb"
    assert commands("  " + log_text("::warning::x")) == [] and "warning::x" in log_text("::warning::x")
    assert "<" not in markdown(FORGED) and "|" not in markdown("a|b").replace("\\|", "")
    assert code("refund-window-001") == "`refund-window-001`"
    assert "`" not in code("a`b").replace("\\`", "")
    assert workflow_data("a\r\nb%") == "a%0D%0Ab%25"


def test_evidence_keys_and_case_ids_never_start_a_log_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    (tmp_path / "evidence.yaml").write_text(
        'refund-window: {version: "1", text: "Refunds are allowed within 7 days of purchase."}\n'
        '"x\\r::warning::pwn\\n::error::pwn": {version: "1"}\n'
    )
    with (tmp_path / "cases.jsonl").open("a") as f:
        f.write(json.dumps(case("c-9\r::warning::id\n::error::id")) + "\n")
    assert main(["validate", "--policy", str(policy)]) == 1
    assert main(["run", "--dry-run", "--policy", str(policy), "--out", str(tmp_path / "out")]) == 1
    captured = capsys.readouterr()
    assert commands(captured.out + captured.err) == []  # read as the Actions runner reads a log
    assert "x\\r::warning::pwn\\n::error::pwn" in captured.out
    assert "cases.jsonl:10" in captured.out and "is not allowed: use letters, digits" in captured.out


@pytest.mark.parametrize("name", ["crit|cal", "a b", "<!--x-->", "x" * 201, ""])
def test_slice_names_outside_the_charset_are_refused_in_the_policy(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path)
    policy.write_text(policy.read_text().replace("  general:", f"  {json.dumps(name)}:"))
    assert main(["validate", "--policy", str(policy)]) == 2
    assert "is not allowed: use letters, digits" in capsys.readouterr().err


def test_records_with_ids_outside_the_charset_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    record = {
        "case_id": "c-1\n::warning::x",
        "slice": "critical",
        "partition": "sentinel",
        "human_label": "pass",
        "status": "ok",
        "judge_label": "pass",
    }
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(record) + "\n")
    assert main(["decide", "--policy", str(policy), "--records", str(records)]) == 2
    err = capsys.readouterr().err
    assert "records.jsonl:1: `case_id` 'c-1\\n::warning::x' is not allowed" in err


def test_a_hostile_judge_reason_reaches_no_output_raw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Provider replies are untrusted too: a reason with a lone surrogate, a forged marker and a
    workflow command is recorded and reported without a crash or an injection."""
    from fake_openai import FakeOpenAI, reply

    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-not-a-secret-123")
    with FakeOpenAI() as fake:
        fake.script("c-2", reply("pass", f"fine {FORGED}\r\n::warning::pwn <img src=x>"))
        fake.script("g-1", reply("pass", "a lone surrogate \ud800 in the reply"))
        policy = write_suite(tmp_path / "s", evaluator={"base_url": fake.base_url})
        out = tmp_path / "out"
        code = main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "<img" not in report and FORGED not in report and "::warning::pwn" in report.replace("\\", "")
    assert report.count("<!--") == 1
    by_id = {json.loads(line)["case_id"]: json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()}
    assert by_id["g-1"]["error_kind"] == "parse_error"  # an evaluator error, never a verdict or a crash
    ET.parse(out / "junit.xml")
    assert commands(captured.out + captured.err) == []
    decided = main(["decide", "--policy", str(policy), "--records", str(out / "records.jsonl")])
    assert decided == 1, capsys.readouterr().err


def test_a_currency_is_a_code_not_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    policy.write_text(policy.read_text().replace("currency: USD", 'currency: "USD\\n::warning::pwn"'))
    assert main(["validate", "--policy", str(policy)]) == 2
    assert "`evaluator.price.currency`" in capsys.readouterr().err


def test_github_error_messages_reach_the_log_as_one_visible_line(fake: FakeGitHub) -> None:
    fake.fail_next("POST", "/check-runs$", 422, message="bad\n::error::pwn\r")
    out = _publish(fake, sample_result("passed", policy_id="policy-a"), "# A\n")
    (warning,) = out.warnings
    assert "\n" not in warning and "\r" not in warning and "\\n::error::pwn" in warning


def test_xml_text_escapes_exactly_what_xml_1_0_cannot_hold() -> None:
    """XML 1.0's Char production, over every code point: allowed ones pass as they are, the rest
    become escapes (gate/model/escape.py writes the excluded ranges, a pattern that compiles fast)."""

    def xml_char(c: int) -> bool:
        return c in (0x9, 0xA, 0xD) or 0x20 <= c <= 0xD7FF or 0xE000 <= c <= 0xFFFD or 0x10000 <= c <= 0x10FFFF

    every = "".join(map(chr, range(0x110000)))
    kept = xml_text(every)
    assert kept.startswith("\\x00\\x01") and "\\ud800" in kept and "\\uffff" in kept
    assert kept == "".join(chr(c) if xml_char(c) else visible(chr(c)) for c in range(0x110000))
