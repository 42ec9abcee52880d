"""`gate validate` finds what used to pass it and fail later (issue 29, item 3), each as a finding that
names the file, the line and the fix: a control's label against its role; a reference against the
evidence it cites; a gated case without evidence ids, a reason or a response hash (unless the
policy's `gated_cases` relaxes it); a case too long for the model's context or too dear for its
share of the cost boundary; an empty lane; a missing calibration file. The real CLI throughout."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from suite import case, controls, gate, write_suite

REFERENCE = "Refunds are allowed within 7 days of purchase."


@pytest.fixture(autouse=True)
def _in_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # messages name files from the working directory, as a user runs it


def validate(policy: Path, *extra: str) -> tuple[int, str, dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = gate("validate", "--policy", policy, *extra)
    text = out.getvalue()
    json_out = io.StringIO()
    with contextlib.redirect_stdout(json_out):
        gate("validate", "--policy", policy, "--format", "json", *extra)
    return code, text, json.loads(json_out.getvalue())


def suite_with(tmp_path: Path, cases: list[dict[str, Any]], **policy: Any) -> Path:
    return write_suite(tmp_path, cases, **policy)


def messages(report: dict[str, Any]) -> list[str]:
    return [f["message"] for f in report["findings"]]


def test_a_clean_suite_stays_clean(tmp_path: Path) -> None:
    code, _, report = validate(suite_with(tmp_path, [*controls(), case("c-1"), case("c-2", label="fail")]))
    assert (code, report["findings"]) == (0, [])


@pytest.mark.parametrize(("role", "label", "need"), [("positive", "fail", "pass"), ("negative", "pass", "fail")])
def test_a_control_labelled_against_its_role(tmp_path: Path, role: str, label: str, need: str) -> None:
    cases = [c for c in controls() if c.get("expected_control_role") != role]
    cases += [case(f"ctl-{role}", role=role, label=label), case("c-1")]
    code, _, report = validate(suite_with(tmp_path, cases))
    assert code == 1
    [message] = [m for m in messages(report) if "control role" in m]
    assert message.startswith("cases.jsonl:")  # the file and the line
    assert f"case ctl-{role} has control role {role} but human label {label!r}" in message
    assert f"fix: label it {need!r}" in message and "or give it the `expected_control_role` its answer fits" in message


def test_a_reference_that_is_not_its_evidence(tmp_path: Path) -> None:
    edited = case("c-1", reference="Refunds are allowed within 30 days of purchase.")
    code, _, report = validate(suite_with(tmp_path, [*controls(), edited, case("c-2")]))
    assert code == 1
    [message] = messages(report)
    assert message.startswith("cases.jsonl:7: case c-1 has a `reference` that is not the text of the evidence cited")
    assert "refund-window in evidence.yaml" in message and "fix: copy the evidence text" in message


def test_a_reference_wrapped_differently_is_still_its_evidence(tmp_path: Path) -> None:
    wrapped = case("c-1", reference="Refunds are allowed\n within 7 days  of purchase.")
    code, _, report = validate(suite_with(tmp_path, [*controls(), wrapped]))
    assert (code, report["findings"]) == (0, [])


def _bare(case_id: str, partition: str = "sentinel", **drop: bool) -> dict[str, Any]:
    c = case(case_id, partition=partition)
    if drop.get("evidence"):
        c["human_adjudication"]["evidence"] = []
    if drop.get("reason"):
        c["human_adjudication"]["reason"] = ""
    if drop.get("hash"):
        del c["response_sha256"]
    return c


def test_gated_cases_need_evidence_a_reason_and_a_hash(tmp_path: Path) -> None:
    cases = [
        *controls(),
        _bare("no-evidence", evidence=True),
        _bare("no-reason", reason=True),
        _bare("no-hash", hash=True),
        _bare("dev-bare", "dev", evidence=True, reason=True, hash=True),  # dev is never gated on
    ]
    code, _, report = validate(suite_with(tmp_path, cases))
    assert code == 1
    found = messages(report)
    assert len(found) == 3
    assert found[0].startswith("cases.jsonl:7: case no-evidence cites no evidence")
    assert found[1].startswith("cases.jsonl:8: case no-reason has no `human_adjudication.reason`")
    assert found[2].startswith("cases.jsonl:9: case no-hash has no `response_sha256`")
    assert all("partition a lane gates on" in m and "gated_cases" in m for m in found)
    assert not any("dev-bare" in m for m in found)


def test_the_policy_may_relax_each_requirement(tmp_path: Path) -> None:
    cases = [*controls(), _bare("bare", evidence=True, reason=True, hash=True)]
    relaxed = {"evidence_ids": False, "reason": False, "response_sha256": False}
    code, _, report = validate(suite_with(tmp_path, cases, gated_cases=relaxed))
    assert (code, report["findings"]) == (0, [])


def test_a_case_longer_than_the_models_context(tmp_path: Path) -> None:
    huge = case("huge", response="word " * 700_000)  # 3.5 MB, ~875k tokens
    code, _, report = validate(suite_with(tmp_path, [*controls(), huge], limits={"max_total_cost": 100.0}))
    assert code == 1
    [message] = messages(report)
    assert message.startswith("cases.jsonl:7: case huge's rendered prompt is about 875,")
    assert "more than the model's context (`evaluator.context_tokens` 128,000)" in message
    assert "fix: shorten its response or reference" in message


def test_a_case_dearer_than_its_share_of_the_boundary(tmp_path: Path) -> None:
    long = case("long", response="word " * 40_000)  # 200 KB: 0.2 USD an attempt at 1 USD/Mtok
    code, _, report = validate(suite_with(tmp_path, [*controls(), long, case("c-2")]))
    assert code == 1
    [message] = messages(report)
    assert message.startswith("cases.jsonl:7: case long's one attempt may cost 0.20")
    assert "more than its share of the cost boundary in lane pr (0.1429 USD" in message
    assert "raise `limits.max_total_cost`" in message


def test_an_empty_lane_is_a_note_for_every_lane_and_a_finding_for_the_one_validated(tmp_path: Path) -> None:
    policy = suite_with(tmp_path, [*controls(), case("c-1")])
    code, text, report = validate(policy)
    assert code == 0
    [note] = report["notes"]
    assert "`lanes.release.partitions`: lane release runs held_out, which hold no case outside the controls" in note
    assert text.rstrip().splitlines()[-1].startswith("note: policy.yaml: `lanes.release.partitions`")
    code, _, report = validate(policy, "--lane", "release")
    assert code == 1
    [finding] = report["findings"]
    assert (finding["kind"], finding["state"]) == ("no_cases", "evaluation_incomplete")
    assert "fix: add cases to those partitions" in finding["message"]


def test_a_calibration_file_that_does_not_exist(tmp_path: Path) -> None:
    policy = suite_with(
        tmp_path,
        [*controls(), case("c-1"), case("h-1", partition="held_out")],
        calibration={"file": "calibration/calibration.json"},
        lanes={"release": {"partitions": ["held_out"], "controls": True, "require_calibration": True}},
    )
    code, _, report = validate(policy)
    assert code == 1
    [finding] = report["findings"]
    assert (finding["kind"], finding["state"]) == ("judge_uncalibrated", "review_required")
    assert finding["message"].startswith(
        "policy.yaml: `calibration.file`: calibration/calibration.json does not exist, so lane release cannot pass"
    )
    assert "`gate calibrate`" in finding["message"]


def test_a_hash_mismatch_prints_the_hash_of_the_response_now(tmp_path: Path) -> None:
    edited = case("c-1")
    edited["response"] = "Refunds within 7 days, edited after labelling."
    code, _, report = validate(suite_with(tmp_path, [*controls(), edited]))
    assert code == 1
    [message] = messages(report)
    now = hashlib.sha256(edited["response"].encode()).hexdigest()
    assert f"its sha256 now: c-1 {now})" in message
    assert "fix: label the current response again first, then write its hash" in message


@pytest.mark.parametrize("suite", ["example", "example-product"])
def test_the_shipped_examples_validate_clean(suite: str) -> None:
    root = Path(__file__).resolve().parents[2]
    code, _, report = validate(root / "policies" / suite / "policy.yaml")
    assert (code, report["findings"], report["notes"]) == (0, [], [])


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"slice": "critcal"}, "case c-1 is in slice 'critcal' (did you mean 'critical'?)"),
        ({"partition": "sentinal"}, "case c-1 is in partition 'sentinal' (did you mean 'sentinel'?)"),
        ({"label": "Fail"}, "case c-1 has human label 'Fail' (did you mean 'fail'?)"),
        ({"role": "postive"}, "`expected_control_role`: 'postive' is not one of positive, negative, boundary"),
        ({"role": "postive"}, "(did you mean 'positive'?)"),
        ({"adjudication": "pass"}, "`human_adjudication`: must be a mapping (`{key: value, ...}`), not text"),
    ],
)
def test_near_misses_get_a_did_you_mean_and_no_pydantic_text(tmp_path: Path, edit: dict[str, str], said: str) -> None:
    c = case("c-1")
    if "slice" in edit:
        c["slice"] = edit["slice"]
    if "partition" in edit:
        c["partition"] = edit["partition"]
    if "label" in edit:
        c["human_adjudication"]["label"] = edit["label"]
    if "role" in edit:
        c["expected_control_role"] = edit["role"]
    if "adjudication" in edit:
        c["human_adjudication"] = edit["adjudication"]
    code, _, report = validate(suite_with(tmp_path, [*controls(), c]))
    assert code == 1
    found = " | ".join(messages(report))
    assert said in found
    assert "Input should be" not in found and "instance of" not in found


@pytest.mark.parametrize("mode", ["review", "block"])
def test_a_case_without_a_reference_reads_in_the_singular_and_two_in_the_plural(tmp_path: Path, mode: str) -> None:
    bare = [case(f"c-{i}", reference="") for i in (1, 2)]
    for c in bare:
        c["human_adjudication"]["evidence"] = []
    outcome = "need a person" if mode == "review" else "block the gate"
    one = outcome.replace("need ", "needs ").replace("block ", "blocks ")
    _, _, report = validate(suite_with(tmp_path / "one", [*controls(), bare[0]], missing_evidence=mode))
    assert f"case c-1 has no `reference`, so it is withheld from the judge and {one}" in " ".join(messages(report))
    _, _, report = validate(suite_with(tmp_path / "two", [*controls(), *bare], missing_evidence=mode))
    assert f"2 cases have no `reference`, so they are withheld from the judge and {outcome}" in " ".join(
        messages(report)
    )
