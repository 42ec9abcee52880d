"""records.jsonl: written a line at a time, read back strictly, older versions readable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.cli import main
from gate.model.records import Attempt, Record, RecordsError, RecordsFile, RecordWriter, iter_records, read_records


def rec(case_id: str = "c-1") -> Record:
    return Record(
        case_id=case_id,
        slice="critical",
        partition="sentinel",
        human_label="pass",
        judge_label="pass",
        judge_reason="ok",
        status="ok",
        attempts=[Attempt(status_code=200, latency_ms=3.5, input_tokens=10, output_tokens=2)],
        input_tokens=10,
        output_tokens=2,
        cost=1.4e-5,
    )


def test_each_record_is_on_disk_as_soon_as_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    writer = RecordWriter(path)
    writer.write(rec("a"))
    # Another process (a crash, a `tail -f`) sees the line before the writer is closed.
    assert [json.loads(line)["case_id"] for line in path.read_text().splitlines()] == ["a"]
    writer.write(rec("b"))
    writer.close()
    assert [r.case_id for r in read_records(path)] == ["a", "b"]
    assert read_records(path)[0] == rec("a")


def test_a_torn_last_line_from_a_killed_run_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(rec("a").model_dump(mode="json")) + "\n" + '{"case_id": "b", "sli')
    assert [r.case_id for r in read_records(path)] == ["a"]


def test_a_reason_holding_a_line_separator_reads_back_as_written(tmp_path: Path) -> None:
    """A judge may answer with U+2028 or U+0085, which JSON leaves unescaped: lines end at "\n" only."""
    path = tmp_path / "records.jsonl"
    odd = rec("a").model_copy(update={"judge_reason": "states the window\u2028and the fee\x85"})
    with RecordWriter(path) as writer:
        writer.write(odd)
        writer.write(rec("b"))
    assert read_records(path) == [odd, rec("b")]
    assert list(iter_records(path)) == [odd, rec("b")]


def test_a_run_s_records_file_reads_one_line_at_a_time_from_where_the_run_began(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as writer:
        writer.write(rec("earlier"))
        start = writer.size()
        writer.write(rec("a"))
    with path.open("ab") as fh:
        fh.write(b'{"case_id": "b", "sli')  # the line a kill cut short
    unwritten = rec("kept-in-memory")
    assert [r.case_id for r in RecordsFile(path, (unwritten,), start)] == ["a", "kept-in-memory"]
    assert [r.case_id for r in RecordsFile(path)] == ["earlier", "a"]
    assert list(RecordsFile(tmp_path / "none.jsonl")) == []


def test_a_corrupt_line_in_the_middle_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    good = json.dumps(rec().model_dump(mode="json"))
    path.write_text(good + "\n{not json\n" + good + "\n")
    with pytest.raises(RecordsError, match=r"records.jsonl:2: not valid JSON"):
        read_records(path)


def test_a_newer_schema_version_asks_for_an_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps({**rec().model_dump(mode="json"), "schema_version": 2}) + "\n")
    with pytest.raises(RecordsError, match="upgrade ragas-gate"):
        read_records(path)


def test_a_version_1_record_without_the_later_lineage_fields_reads(tmp_path: Path) -> None:
    minimal = {
        "case_id": "c-1", "slice": "critical", "partition": "held_out", "control_role": None,
        "human_label": "fail", "judge_label": None, "judge_reason": None, "status": "error",
        "error_kind": "timeout", "repeat_index": 0, "attempts": [], "input_tokens": 0, "output_tokens": 0,
        "cost": 0.0, "cache": "off", "prompt_sha256": "", "input_sha256": "", "metric_version": "1",
        "evaluator_model": "m", "ragas_version": "0.4.3",
    }  # fmt: skip
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(minimal) + "\n")
    (r,) = read_records(path)
    assert r.schema_version == 1 and r.error_kind == "timeout" and r.judge_label is None


def test_decide_on_a_corrupt_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from suite import write_suite

    policy = write_suite(tmp_path / "s")
    path = tmp_path / "records.jsonl"
    path.write_text('{"case_id": 3}\n')
    assert main(["decide", "--policy", str(policy), "--records", str(path), "--lane", "pr"]) == 2
    err = capsys.readouterr().err
    assert "records.jsonl:1" in err and "Traceback" not in err


def test_bad_bytes_and_empty_files_are_named(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    good = json.dumps(rec().model_dump(mode="json")).encode()
    path.write_bytes(good + b"\n" + b"\xff\xfe\n" + good + b"\n")
    with pytest.raises(RecordsError, match=r"records.jsonl:2: not UTF-8"):
        read_records(path)
    path.write_text("\n")
    with pytest.raises(RecordsError, match="is empty"):
        read_records(path)
