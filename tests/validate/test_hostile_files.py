"""Hostile and malformed input files (issue 11): a clear message and exit 2 or a finding, never a
traceback, a hang or a silently changed value."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from suite import case, write_suite

from gate.cli import main
from gate.model.policy import load_policy


def _validate(policy: Path | str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["validate", "--policy", str(policy)])
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


def _edit(policy: Path, old: str, new: str) -> None:
    text = policy.read_text()
    assert old in text, old
    policy.write_text(text.replace(old, new))


# ---- special files: regular files only, with a stated size limit --------------------------------
@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/dev/zero", "is a character device, not a regular file"),
        ("/dev/urandom", "is a character device, not a regular file"),
        ("/dev/null", "is a character device, not a regular file"),
    ],
)
def test_a_device_as_the_policy_is_refused_at_once(
    target: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, text = _validate(target, capsys)
    assert rc == 2 and expected in text and "Traceback" not in text


def test_a_fifo_policy_or_prompt_file_is_refused_instead_of_hanging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path)
    os.mkfifo(tmp_path / "pipe")
    rc, text = _validate(tmp_path / "pipe", capsys)
    assert rc == 2 and "named pipe (FIFO)" in text
    _edit(policy, "prompt_file: prompt.txt", "prompt_file: pipe")
    rc, text = _validate(policy, capsys)
    assert rc == 2 and "metric.prompt_file" in text and "named pipe (FIFO)" in text


def test_a_fifo_case_file_is_named_as_not_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    os.mkfifo(tmp_path / "pipe.jsonl")
    _edit(policy, "- cases.jsonl", "- pipe.jsonl")
    rc, text = _validate(policy, capsys)
    assert rc == 2 and "`cases[0]`" in text and "not a regular file" in text


def test_a_directory_and_a_symlink_loop_each_get_their_own_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_suite(tmp_path)
    rc, text = _validate(tmp_path, capsys)
    assert rc == 2 and "is a directory" in text
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    rc, text = _validate(tmp_path / "loop", capsys)
    assert rc == 2 and "symbolic link that loops back on itself" in text and "permissions" not in text


def test_a_prompt_over_the_size_limit_is_refused_with_the_limit_stated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path)
    with (tmp_path / "prompt.txt").open("a") as f:
        f.truncate(17 * 1024 * 1024)
    rc, text = _validate(policy, capsys)
    assert rc == 2 and "over the 16 MiB limit" in text and "metric.prompt_file" in text


def test_an_empty_policy_flag_says_the_flag_is_empty(capsys: pytest.CaptureFixture[str]) -> None:
    rc, text = _validate("", capsys)
    assert rc == 2 and "--policy is empty" in text and "directory" not in text


# ---- paths stay inside the policy's directory or the workspace ----------------------------------
@pytest.mark.parametrize(
    ("old", "new", "key", "expected"),
    [
        ("- cases.jsonl", "- ../../../../../../etc/passwd", "cases[0]", "outside the policy's directory"),
        ("- cases.jsonl", "- /dev/null", "cases[0]", "is an absolute path"),
        ("evidence: evidence.yaml", "evidence: /etc/passwd", "evidence", "is an absolute path"),
        ("prompt_file: prompt.txt", "prompt_file: /dev/zero", "metric.prompt_file", "is an absolute path"),
        ("missing_evidence: block", "missing_evidence: block\ncache_dir: /tmp/elsewhere", "cache_dir", "absolute"),
        ("- cases.jsonl", "- " + "x" * 300, "cases[0]", "longer than a file system allows"),
    ],
)
def test_paths_outside_the_repository_are_refused_with_the_fix(
    tmp_path: Path, old: str, new: str, key: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path / "repo")
    _edit(policy, old, new)
    rc, text = _validate(policy, capsys)
    assert rc == 2 and f"`{key}`" in text and expected in text and "fix: write it relative" in text


def test_a_symlink_pointing_out_of_the_repository_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "secret.jsonl"
    outside.write_text(json.dumps(case("c-1")) + "\n")
    policy = write_suite(tmp_path / "repo")
    (tmp_path / "repo" / "link.jsonl").symlink_to(outside)
    _edit(policy, "- cases.jsonl", "- link.jsonl")
    rc, text = _validate(policy, capsys)
    assert rc == 2 and "outside the policy's directory" in text


# ---- values that used to crash ----------------------------------------------------------------
def test_deep_nesting_huge_numbers_and_complex_keys_in_a_policy_are_messages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path)
    good = policy.read_text()
    for extra, expected in [
        ("deep: " + "[" * 1000 + "]" * 1000 + "\n", "nests deeper than 64 levels"),
        ("huge: " + "9" * 5000 + "\n", "a number of 5000 digits is too long"),
        ("? [a, b]\n: 1\n", "a list or mapping is used as a key"),
        ("when: !!timestamp 2026-02-30\n", "cannot be read"),
        ("when: !!timestamp 2026-02-28\n  and more\n", "cannot be read"),
        ("blob: !!binary aGVsbG8=\n", "cannot be read"),
    ]:
        policy.write_text(good + extra)
        rc, text = _validate(policy, capsys)
        assert rc == 2 and expected in text and "Traceback" not in text, text


def test_an_impossible_override_date_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    policy.write_text(
        policy.read_text()
        + "overrides:\n- {id: O-1, case_ids: [c-1], blocker: false_pass_limit, approver: a, reason: r, "
        "evidence: e, expires: 2026-02-30, follow_up: f}\n"
    )
    rc, text = _validate(policy, capsys)
    assert rc == 2 and "`overrides.0.expires`" in text and "YYYY-MM-DD" in text


def _case_line_with(case_id: str, raw_field: str) -> str:
    return json.dumps(case(case_id))[:-1] + ", " + raw_field + "}\n"


def test_bad_case_lines_are_findings_naming_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    good_response = json.dumps(case("c-s1"))
    bad_lines = [
        _case_line_with("c-deep", '"provenance": {"x": ' + "[" * 1000 + "]" * 1000 + "}"),
        '{"case_id": ' + "9" * 5000 + "}\n",
        _case_line_with("c-dup", '"case_id": "c-other"'),
        good_response.replace('"response": "', '"response": "\\ud800', 1) + "\n",
        json.dumps(case("c-s2")).replace('"c-s2"', '"\\udfff"', 1) + "\n",
    ]
    with (tmp_path / "cases.jsonl").open("a") as f:
        f.writelines(bad_lines)
    rc, text = _validate(policy, capsys)
    assert rc == 1 and "Traceback" not in text
    assert "cases.jsonl:10: the JSON nests too deep" in text
    assert "cases.jsonl:11: a number is too long" in text
    assert "cases.jsonl:12: key `case_id` is written twice" in text
    assert "cases.jsonl:13: `response` holds a lone surrogate" in text
    assert "cases.jsonl:14: `case_id` holds a lone surrogate" in text


def test_a_lone_surrogate_never_crashes_dry_run_or_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    with (tmp_path / "cases.jsonl").open("a") as f:
        f.write(json.dumps(case("c-s1")).replace('"response": "', '"response": "\\ud800', 1) + "\n")
    out = tmp_path / "out"
    assert main(["run", "--dry-run", "--policy", str(policy), "--out", str(out)]) == 1
    assert main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"]) == 1
    text = capsys.readouterr().out
    assert "lone surrogate" in text
    assert json.loads((out / "result.json").read_text())["state"] == "quality_failed"


def test_a_byte_order_mark_and_crlf_line_ends_still_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    policy.write_bytes(b"\xef\xbb\xbf" + policy.read_bytes().replace(b"\n", b"\r\n"))
    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_bytes(b"\xef\xbb\xbf" + cases_file.read_bytes().replace(b"\n", b"\r\n"))
    rc, text = _validate(policy, capsys)
    assert rc == 0, text


# ---- YAML 1.2 core: values stay as written ------------------------------------------------------
def test_version_fields_keep_their_text(tmp_path: Path) -> None:
    policy = write_suite(tmp_path)
    _edit(policy, "policy_version: 2026-11-30.1", "policy_version: 1.10")
    _edit(policy, "  version: '1'", "  version: 3.10")
    loaded = load_policy(policy)
    assert loaded.policy.policy_version == "1.10"
    assert loaded.policy.metric.version == "3.10"


def test_the_policy_version_as_written_reaches_the_lineage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    _edit(policy, "policy_version: 2026-11-30.1", "policy_version: 1.10")
    out = tmp_path / "out"
    main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"])  # no key: evaluation_incomplete
    result = json.loads((out / "result.json").read_text())
    assert result["policy_version"] == "1.10"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("    retry_on:", "    on:", "`evaluator.retries.on`: unknown key"),
        ("missing_evidence: block", "missing_evidence: block\non: [push]", "`on`: unknown key"),
        ("max_false_passes: 0", "max_false_passes: yes", "`slices.critical.max_false_passes`"),
        ("max_false_passes: 0", "max_false_passes: true", "`slices.critical.max_false_passes`: true is not a number"),
        ("  temperature: 0", "  tempera\u200bture: 0", "`evaluator.tempera\\u200bture`: unknown key"),
        (
            "missing_evidence: block",
            "missing_evidence: block\n2026-12-31: x",
            "`2026-12-31`: unknown key",
        ),
    ],
)
def test_yaml_1_1_traps_are_reported_in_the_authors_terms(
    tmp_path: Path, old: str, new: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path)
    _edit(policy, old, new)
    rc, text = _validate(policy, capsys)
    assert rc == 2 and expected in text, text


def test_a_slice_named_no_is_a_slice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    _edit(policy, "  general:", "  no:\n    max_false_passes: 0\n  general:")
    with (tmp_path / "cases.jsonl").open("a") as f:
        f.write(json.dumps(case("n-1", slice="no")) + "\n")
    rc, text = _validate(policy, capsys)
    assert rc == 0, text
    assert "no" in load_policy(policy).policy.slices


def test_merge_keys_and_aliases_are_refused_in_plain_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    good = policy.read_text()
    policy.write_text(
        good.replace("  critical:\n", "  critical: &defaults\n").replace(
            "  general:\n", "  general:\n    <<: *defaults\n"
        )
    )
    rc, text = _validate(policy, capsys)
    assert rc == 2 and "write the values out in place" in text and "constructor" not in text.lower()
    policy.write_text(good.replace("  general:\n", "  general:\n    <<: {priority: 3}\n"))
    rc, text = _validate(policy, capsys)
    assert rc == 2 and "merge keys (`<<:`) are not supported" in text


def test_a_billion_laughs_policy_is_refused_quickly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = write_suite(tmp_path)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(20)
    )
    policy.write_text(policy.read_text() + bomb)
    rc, text = _validate(policy, capsys)
    assert rc == 2 and "alias" in text


def test_records_files_with_non_objects_or_many_lanes_name_the_file_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = write_suite(tmp_path)
    records = tmp_path / "records.jsonl"
    base = {"case_id": "c-1", "slice": "critical", "partition": "sentinel", "human_label": "pass", "status": "ok"}
    records.write_text("null\n")
    assert main(["decide", "--policy", str(policy), "--records", str(records)]) == 2
    assert "records.jsonl:1: a record must be a JSON object; fix:" in capsys.readouterr().err
    lines = [{**base, "lane": "pr"}, {**base, "case_id": "c-2", "lane": "x" * 100_000}]
    records.write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert main(["decide", "--policy", str(policy), "--records", str(records)]) == 2
    err = capsys.readouterr().err
    assert str(records) in err and "several lanes" in err and len(err) < 1000


def test_result_and_rollback_files_nested_too_deep_are_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hostile_corpus import base_records

    deep = "[" * 100_000 + "]" * 100_000
    for side in ("base", "head"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in base_records()))
    (tmp_path / "base" / "result.json").write_text(deep)
    (tmp_path / "base" / "rollback.json").write_text(deep)
    base, head, out = (str(tmp_path / name) for name in ("base", "head", "out"))
    assert main(["compare", "--base", base, "--head", head, "--out", out]) == 0  # the records still compare
    assert main(["publish", "--result", base]) == 2
    err = capsys.readouterr().err
    assert "result.json: the result file nests too deep to read" in err and "internal error" not in err
