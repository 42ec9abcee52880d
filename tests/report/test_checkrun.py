"""The check-run payload built from result.json (pure, no network)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from fake_github import sample, sample_result

from gate.model.result import Result, ResultProblem, load_result
from gate.report.checkrun import (
    MAX_ANNOTATIONS_PER_REQUEST,
    MAX_ANNOTATIONS_TOTAL,
    MAX_OUTPUT_BYTES,
    annotation_batches,
    build_check_run,
    trim_to_bytes,
)

CONCLUSIONS = {
    "passed": "success",
    "quality_failed": "failure",
    "evaluation_incomplete": "cancelled",
    "review_required": "action_required",
}


@pytest.mark.parametrize("state", sorted(CONCLUSIONS))
def test_conclusion_name_and_title_per_state(state: str) -> None:
    payload = build_check_run(sample(state), "# report")
    assert payload.name == "ragas-gate / refund-answer / pr"
    assert payload.conclusion == CONCLUSIONS[state]
    assert payload.title.startswith(state)
    assert "0.0123 USD" in payload.title
    assert payload.text == "# report"


def test_summary_lists_blockers_cost_and_unrun_ids() -> None:
    payload = build_check_run(sample("evaluation_incomplete"), "r")
    assert "budget_exhausted" in payload.summary
    assert "unrun_cases" in payload.summary
    assert "`general-shipping-007`, `general-shipping-008`" in payload.summary
    assert "Unrun cases (2)" in payload.summary
    assert "0.0123 USD" in payload.summary
    assert "HTTP attempts 14, retries 2" in payload.summary


def test_passed_has_no_blockers_and_no_annotations() -> None:
    payload = build_check_run(sample("passed"), "r")
    assert "No blockers." in payload.summary
    assert payload.annotations == []
    assert "annotations" not in payload.output([])


def test_blockers_become_annotations_levelled_by_their_own_state() -> None:
    payload = build_check_run(sample("quality_failed"), "r", annotation_path="policies/refund.yaml")
    levels = [(a["title"], a["annotation_level"]) for a in payload.annotations]
    assert levels == [
        ("quality_failed: false_pass_limit (billing-policy-critical)", "failure"),
        ("evaluation_incomplete: evaluator_errors (general)", "warning"),
    ]
    first = payload.annotations[0]
    assert first["path"] == "policies/refund.yaml"
    assert first["start_line"] == first["end_line"] == 1
    assert "refund-window-incorrect-012, refund-window-incorrect-019" in first["message"]


def test_blocker_location_pins_the_annotation() -> None:
    result = sample_result("review_required")
    result["blockers"][0]["location"] = "cases/refund.jsonl:12"
    annotation = build_check_run(Result.from_dict(result), "r").annotations[0]
    assert (annotation["path"], annotation["start_line"]) == ("cases/refund.jsonl", 12)


def test_table_cells_escape_pipes_and_newlines() -> None:
    result = sample_result("review_required")
    result["blockers"][0]["message"] = "a | b\nc"
    assert "a \\| b c" in build_check_run(Result.from_dict(result), "r").summary


def test_unknown_state_is_an_error_naming_result_json(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_text(json.dumps({**sample_result("passed"), "state": "fine"}))
    with pytest.raises(ResultProblem, match=r"result\.json.*`state`.*fix: write one of passed, quality_failed"):
        load_result(tmp_path / "result.json")


def test_annotations_are_batched_by_50_and_capped() -> None:
    blocker = sample_result("review_required")["blockers"][0]
    result = sample_result("review_required", blockers=[blocker] * (MAX_ANNOTATIONS_TOTAL + 20))
    payload = build_check_run(Result.from_dict(result), "r")
    assert len(payload.annotations) == MAX_ANNOTATIONS_TOTAL
    batches = list(annotation_batches(payload.annotations))
    assert [len(b) for b in batches] == [MAX_ANNOTATIONS_PER_REQUEST] * (MAX_ANNOTATIONS_TOTAL // 50)


def test_oversized_summary_and_text_are_trimmed_to_bytes_with_a_note() -> None:
    # 3-byte characters so that a character-count limit would not be enough.
    unrun = [f"case-€€€-{i:05d}" for i in range(8000)]
    payload = build_check_run(sample("evaluation_incomplete", unrun_case_ids=unrun), "€" * 40_000)
    for field in (payload.summary, payload.text):
        size = len(field.encode("utf-8"))
        assert 60_000 < size <= MAX_OUTPUT_BYTES
        assert "artifact" in field.splitlines()[-1]
    assert payload.summary.startswith("## evaluation_incomplete")


def test_trim_to_bytes_keeps_short_text_and_cuts_on_a_character_boundary() -> None:
    assert trim_to_bytes("short", 10) == "short"
    trimmed = trim_to_bytes("é" * 200, 151, hint="see artifact")
    assert len(trimmed.encode("utf-8")) <= 151
    assert trimmed.startswith("é") and "see artifact" in trimmed
