"""Case and evidence loading: every bad line is an input_contract finding naming file, line, fix."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1]))

import pytest
from validate_factory import Suite, make_case

from gate.model.cases import MAX_FINDINGS_PER_FILE
from gate.model.errors import PolicyError
from gate.model.loading import sha256_hex
from gate.model.states import Finding, State

CASES = "cases/cases.jsonl"
EVIDENCE = "evidence/evidence.yaml"


@pytest.fixture(autouse=True)
def _from_the_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case locations are shown relative to the working directory (issue 24): work from the suite's."""
    monkeypatch.chdir(tmp_path)


def lines(suite: Suite, *extra: str) -> None:
    suite.raw["cases/cases.jsonl"] = "".join(json.dumps(c) + "\n" for c in suite.cases) + "".join(
        e + "\n" for e in extra
    )


def loader_findings(suite: Suite) -> list[Finding]:
    _loaded, dataset = suite.load()
    for f in dataset.findings:
        assert (f.state, f.kind) == (State.QUALITY_FAILED, "input_contract")
        assert "fix" in f.message and "Traceback" not in f.message
    return dataset.findings


def test_valid_cases_load_with_locations(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    _loaded, dataset = suite.load()
    assert dataset.findings == []
    assert [c["case_id"] for c in suite.cases] == [c.case_id for c in dataset.cases]
    assert dataset.case_locations == [f"{CASES}:{i}" for i in range(1, len(suite.cases) + 1)]
    assert dataset.locations["s-1"] == f"{CASES}:7"
    assert len(dataset.sha256) == 64


def test_dataset_hash_follows_content(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    first = suite.load()[1].sha256
    assert suite.load()[1].sha256 == first
    suite.case("s-1")["response"] += " Changed."
    assert suite.load()[1].sha256 != first


def test_malformed_json_line_names_the_line(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    n = len(suite.cases)
    lines(suite, '{"case_id": "x-1", "partition": ')
    (f,) = loader_findings(suite)
    assert f"{CASES}:{n + 1}" in f.message and "not valid JSON" in f.message
    assert f.location == f"{CASES}:{n + 1}"


def test_blank_lines_are_skipped_and_line_numbers_kept(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.raw["cases/cases.jsonl"] = "\n" + json.dumps(make_case("only")) + "\n\n[1, 2]\n"
    _loaded, dataset = suite.load()
    assert dataset.case_locations == [f"{CASES}:2"]
    (f,) = dataset.findings
    assert f"{CASES}:4" in f.message and "JSON object" in f.message


def test_a_line_repeated_is_a_case_each_time_at_its_own_line(tmp_path: Path) -> None:
    """A line equal to one of the last few case lines is read as that case again (parsed once); each
    copy is still a case at its own line, in turn with another or after a blank line, and a copy with
    a bad key is not taken for its neighbour."""
    suite = Suite(tmp_path)
    line, other = json.dumps(make_case("copy")), json.dumps(make_case("other"))
    bad = line.replace('"slice"', '"slise"')
    suite.raw["cases/cases.jsonl"] = "\n".join([line, line, "", other, line, bad, other, line]) + "\n"
    _loaded, dataset = suite.load()
    assert [c.case_id for c in dataset.cases] == ["copy", "copy", "other", "copy", "other", "copy"]
    assert dataset.case_locations == [f"{CASES}:{i}" for i in (1, 2, 4, 5, 7, 8)]
    assert dataset.findings and all(f"{CASES}:6" in f.message for f in dataset.findings)
    assert any("slise" in f.message for f in dataset.findings)


def test_unknown_key_in_a_case(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.case("s-1")["notes"] = "x"
    (f,) = loader_findings(suite)
    assert f"{CASES}:7" in f.message and "(case s-1)" in f.message and "`notes`: unknown key" in f.message
    assert f.case_ids == ("s-1",)


def test_unknown_nested_key_in_a_case(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.case("s-1")["human_adjudication"]["labels"] = "pass"
    (f,) = loader_findings(suite)
    assert "`human_adjudication.labels`" in f.message


def test_wrong_type_and_missing_field(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.case("s-1")["response"] = 42
    del suite.case("h-1")["user_input"]
    suite.case("h-2")["expected_control_role"] = "adversarial"
    found = loader_findings(suite)
    messages = "\n".join(f.message for f in found)
    assert "`response`" in messages and "write it as a quoted string" in messages
    assert "add `user_input`" in messages and f"{CASES}:9" in messages
    assert "`expected_control_role`: 'adversarial' is not one of positive, negative, boundary" in messages
    assert "fix: write one of positive" in messages and "Input should be" not in messages
    _loaded, dataset = suite.load()
    assert {c.case_id for c in dataset.cases} == {c["case_id"] for c in suite.cases} - {"s-1", "h-1", "h-2"}


def test_every_bad_line_is_reported(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    lines(suite, "{bad", "[]", json.dumps(make_case("z", response=None)))
    found = loader_findings(suite)
    assert len(found) == 3
    n = len(suite.cases)
    assert [f.location for f in found] == [f"{CASES}:{n + i}" for i in (1, 2, 3)]


def test_problems_per_file_are_capped(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    lines(suite, *["{bad"] * (MAX_FINDINGS_PER_FILE + 20))
    found = loader_findings(suite)
    assert len(found) == MAX_FINDINGS_PER_FILE + 1
    assert "more problems not shown" in found[-1].message


def test_missing_case_file_is_a_broken_policy(tmp_path: Path) -> None:
    # A path that leads nowhere is the policy's defect (exit 2), not a product failure (exit 1).
    suite = Suite(tmp_path)
    suite.policy["cases"].append("cases/extra.jsonl")
    with pytest.raises(PolicyError) as err:
        loader_findings(suite)
    assert "`cases[1]`: cases/extra.jsonl" in err.value.message and "does not exist" in err.value.message


def test_empty_case_file(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.raw["cases/cases.jsonl"] = "\n\n"
    (f,) = loader_findings(suite)
    assert CASES in f.message and "is empty" in f.message


def test_several_case_files(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.policy["cases"].append("cases/more.jsonl")
    suite.raw["cases/more.jsonl"] = json.dumps(make_case("m-1")) + "\n"
    _loaded, dataset = suite.load()
    assert dataset.findings == [] and dataset.case_locations[-1] == "cases/more.jsonl:1"


def test_evidence_file_problems(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.evidence = {
        "refund-window": {"version": 1, "text": "Refunds within 30 days."},
        "no-body": {"version": "1"},
        "bad-hash": {"version": "1", "text": "abc", "sha256": sha256_hex("abd")},
        "typo": {"version": "1", "txt": "x"},
        "scalar": "just text",
    }
    found = loader_findings(suite)
    messages = "\n".join(f.message for f in found)
    assert all(EVIDENCE in f.message for f in found)
    assert "`no-body` has neither `text` nor `sha256`" in messages
    assert "`bad-hash.sha256` does not match" in messages
    assert "`typo.txt`: unknown key" in messages
    assert "`scalar` must be a mapping" in messages
    _loaded, dataset = suite.load()
    assert dataset.evidence["refund-window"].version == "1"


def test_malformed_evidence_yaml(tmp_path: Path) -> None:
    suite = Suite(tmp_path)
    suite.raw[EVIDENCE] = "a:\n  version: 1\n text: [\n"
    (f,) = loader_findings(suite)
    assert EVIDENCE in f.message and "not valid YAML at line" in f.message
