"""`gate compare`: pairs of runs that differ in exactly one artifact, and compare names it.

A few pairs are real `gate run`s against the fake provider (tests/fake_openai.py): no change
(the judge moved), a prompt change, a response change. The rest edit one field of the frozen
records fixture (tests/fixtures/schema/records-v1-lineage.jsonl), as a run with that one artifact
changed would have written it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from suite import PROMPT, case, controls, gate, write_suite

KEY_ENV = "GATE_TEST_KEY"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "schema"
LINEAGE_RECORDS = FIXTURES / "records-v1-lineage.jsonl"
OLD_RECORDS = FIXTURES / "records-v1.jsonl"
POLICY = FIXTURES / "suite" / "policy.yaml"


def compare(base: Path, head: Path, out: Path, *extra: str | Path) -> dict[str, Any]:
    assert gate("compare", "--base", base, "--head", head, "--out", out, *extra) == 0
    data: dict[str, Any] = json.loads((out / "compare.json").read_text())
    return data


def by_case(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["case_id"]: t for t in result["transitions"]}


# --- real runs through the fake provider ----------------------------------------------------

CASES = [*controls(), case("c-1"), case("c-2", label="fail"), case("g-1", slice="general")]


def run_suite(
    root: Path, fake: FakeOpenAI, cases: list[dict[str, Any]] = CASES, prompt: str = PROMPT, **policy: Any
) -> Path:
    path = write_suite(root, cases, prompt=prompt, evaluator={"base_url": fake.base_url}, **policy)
    out = root / "out"
    gate("run", "--policy", path, "--out", out, "--no-cache")
    assert (out / "records.jsonl").exists()
    return out


@pytest.fixture()
def base_run(tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    return run_suite(tmp_path / "base", fake_openai)


def test_no_difference_but_a_moved_judge_is_none(base_run: Path, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("Answer for c-1", reply("fail", "Now I doubt it."))
    head = run_suite(tmp_path / "head", fake_openai)
    res = compare(base_run, head, tmp_path / "cmp", "--policy", tmp_path / "head" / "policy.yaml")
    assert list(by_case(res)) == ["c-1"]
    t = by_case(res)["c-1"]
    assert (t["base"], t["head"], t["critical"], t["first_divergence"]) == ("pass", "fail", True, "none")
    assert res["counts"] == {"pass->fail": 1} and res["unchanged"] == 7
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "the judge itself moved" in md and "Rollback bundles differ" not in md


def test_a_prompt_change_is_named(base_run: Path, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.script("Answer for c-1", reply("fail", "The stricter rubric is not met."))
    head = run_suite(tmp_path / "head", fake_openai, prompt=PROMPT + "Be strict about dates.\n")
    res = compare(base_run, head, tmp_path / "cmp", "--policy", tmp_path / "head" / "policy.yaml")
    t = by_case(res)["c-1"]
    assert (t["base"], t["head"], t["first_divergence"]) == ("pass", "fail", "prompt")
    assert t["differing_steps"] == ["prompt"] and t["unknown_steps"] == []
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "### Critical transitions (1)" in md and "**prompt**" in md
    # The rollback bundles differ in the metric definition: compare shows both sides.
    bundles = [json.loads((out / "rollback.json").read_text()) for out in (base_run, head)]
    assert bundles[0]["metric_definition_sha256"] != bundles[1]["metric_definition_sha256"]
    assert bundles[0]["packages"]["ragas"] == "0.4.3" and bundles[0]["renderer_version"] == "1"
    assert bundles[0]["result_schema_version"] == 1 and len(bundles[0]["lock_sha256"]) == 64
    assert res["base"]["rollback"] == bundles[0] and res["head"]["rollback"] == bundles[1]
    section = md[md.index("Rollback bundles differ") :]
    assert f"| `metric_definition_sha256` | `{bundles[0]['metric_definition_sha256'][:12]}` |" in section


def test_a_response_change_is_named(base_run: Path, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    changed = [
        c if c["case_id"] != "g-1" else case("g-1", slice="general", response="Refunds within 30 days. [[judge:fail]]")
        for c in CASES
    ]
    head = run_suite(tmp_path / "head", fake_openai, cases=changed)
    res = compare(base_run, head / "records.jsonl", tmp_path / "cmp", "--policy", tmp_path / "head" / "policy.yaml")
    t = by_case(res)["g-1"]
    assert (t["base"], t["head"], t["critical"], t["first_divergence"]) == ("pass", "fail", False, "response")


# --- one artifact edited in the records -----------------------------------------------------

Edit = Callable[[dict[str, Any]], None]


def edited_pair(tmp_path: Path, case_id: str, edit: Edit, flip: bool = True) -> tuple[Path, Path]:
    """The fixture as base; as head the same records with `edit` applied to `case_id`'s, its verdict flipped."""
    lines = [json.loads(line) for line in LINEAGE_RECORDS.read_text().splitlines() if line]
    for rec in lines:
        if rec["case_id"] == case_id:
            edit(rec)
            if flip:
                rec["judge_label"] = "fail" if rec["judge_label"] == "pass" else "pass"
    head = tmp_path / "head.jsonl"
    head.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return LINEAGE_RECORDS, head


def _set(key: str, value: Any) -> Edit:
    def edit(rec: dict[str, Any]) -> None:
        rec[key] = value

    return edit


def _field(name: str) -> Edit:
    def edit(rec: dict[str, Any]) -> None:
        rec["field_sha256"][name] = "0" * 64

    return edit


def _sampling(key: str, value: Any) -> Edit:
    def edit(rec: dict[str, Any]) -> None:
        rec["sampling"][key] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_set("gold_sha256", "1" * 64), "gold"),
        (_field("response"), "response"),
        (_field("reference"), "reference"),
        (_field("user_input"), "user_input"),
        (_set("rubric_version", "rubric-2"), "rubric_version"),
        (_set("prompt_template_sha256", "2" * 64), "prompt"),
        (_set("evaluator_model", "gpt-4.1-mini"), "evaluator_model"),
        (_sampling("temperature", 0.7), "provider_settings"),
        (_sampling("seed", 8), "provider_settings"),
        (_set("base_url_host", "api.example.com"), "provider_settings"),
        (_set("ragas_version", "0.4.4"), "ragas_version"),
        (_set("allowed_values", ["pass", "fail", "review_required"]), "allowed_values"),
        (_set("label_aliases_sha256", "3" * 64), "parser"),
        (_set("gate_version", "0.2.0"), "parser"),
        (lambda rec: None, "none"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_one_edited_artifact_is_the_first_divergence(tmp_path: Path, edit: Edit, expected: str) -> None:
    base, head = edited_pair(tmp_path, "c-1", edit)
    res = compare(base, head, tmp_path / "cmp", "--policy", POLICY)
    assert [t["case_id"] for t in res["transitions"]] == ["c-1"]
    t = res["transitions"][0]
    assert (t["base"], t["head"], t["first_divergence"]) == ("pass", "fail", expected)
    assert t["differing_steps"] == ([] if expected == "none" else [expected])


def test_earlier_step_wins_when_two_artifacts_differ(tmp_path: Path) -> None:
    def two(rec: dict[str, Any]) -> None:
        rec["evaluator_model"] = "other-model"
        rec["field_sha256"]["reference"] = "0" * 64

    base, head = edited_pair(tmp_path, "c-1", two)
    t = compare(base, head, tmp_path / "cmp")["transitions"][0]
    assert t["first_divergence"] == "reference" and t["differing_steps"] == ["reference", "evaluator_model"]
    assert t["critical"] is None  # no --policy: which slices are critical is unknown, not "no"


def test_records_written_before_lineage_compare_as_unknown(tmp_path: Path) -> None:
    lines = [json.loads(line) for line in OLD_RECORDS.read_text().splitlines() if line]
    for rec in lines:
        if rec["case_id"] == "c-1":
            rec["judge_label"] = "fail"
    head = tmp_path / "head.jsonl"
    head.write_text("".join(json.dumps(r) + "\n" for r in lines))
    res = compare(OLD_RECORDS, head, tmp_path / "cmp", "--policy", POLICY)
    t = res["transitions"][0]
    assert t["first_divergence"] == "unknown" and "gold" in t["unknown_steps"]
    # Against a record that has the lineage, the old side still cannot answer those steps.
    res = compare(OLD_RECORDS, LINEAGE_RECORDS, tmp_path / "cmp2")
    assert res["transitions"] == [] and res["unchanged"] == 9


def test_a_gold_label_change_is_seen_even_in_old_records(tmp_path: Path) -> None:
    lines = [json.loads(line) for line in OLD_RECORDS.read_text().splitlines() if line]
    for rec in lines:
        if rec["case_id"] == "g-2":
            rec["human_label"], rec["judge_label"] = "pass", "fail"
    head = tmp_path / "head.jsonl"
    head.write_text("".join(json.dumps(r) + "\n" for r in lines))
    t = compare(OLD_RECORDS, head, tmp_path / "cmp")["transitions"][0]
    assert (t["case_id"], t["first_divergence"], t["base_value"], t["head_value"]) == (
        "g-2",
        "gold",
        "fail/general/sentinel",
        "pass/general/sentinel",
    )


def test_verdicts_cover_absent_error_unrun_review_and_repeat_majority(tmp_path: Path) -> None:
    base_lines = [json.loads(line) for line in LINEAGE_RECORDS.read_text().splitlines() if line]
    head_lines: list[dict[str, Any]] = []
    for rec in base_lines:
        new = dict(rec)
        cid = rec["case_id"]
        if cid == "ctl-positive":
            continue  # absent on head
        if cid == "c-1":
            new.update(status="error", error_kind="timeout", judge_label=None)
        if cid == "c-2":
            new.update(status="skipped", error_kind="budget", judge_label=None)
        if cid == "g-1":  # a judge allowed to abstain (the record carries its allowed values)
            new.update(judge_label="review_required", allowed_values=["pass", "fail", "review_required"])
        if cid == "g-2":  # three repeats on head: fail, fail, pass -> fail by majority
            for i, label in enumerate(["fail", "fail", "pass"]):
                rep = dict(rec, repeat_index=i, judge_label=label, sampling={**rec["sampling"], "repeats": 3})
                head_lines.append(rep)
            continue
        head_lines.append(new)
    head = tmp_path / "head.jsonl"
    head.write_text("".join(json.dumps(r) + "\n" for r in head_lines))
    res = compare(LINEAGE_RECORDS, head, tmp_path / "cmp", "--policy", POLICY)
    kinds = {t["case_id"]: (t["base"], t["head"]) for t in res["transitions"]}
    assert kinds == {
        "ctl-positive": ("pass", "absent"),
        "c-1": ("pass", "error"),
        "c-2": ("fail", "unrun"),
        "g-1": ("pass", "review"),
        "g-2": ("pass", "fail"),
    }
    t = by_case(res)
    assert t["ctl-positive"]["first_divergence"] == "gold"
    assert t["g-2"]["first_divergence"] == "provider_settings"  # repeats 1 -> 3
    # Critical slices first.
    order = [x["critical"] for x in res["transitions"]]
    assert order == sorted(order, reverse=True) and order[0] is True


def test_a_withheld_case_is_unrun_not_absent(tmp_path: Path) -> None:
    head = tmp_path / "head"
    head.mkdir()
    lines = [line for line in LINEAGE_RECORDS.read_text().splitlines() if '"case_id": "g-1"' not in line]
    (head / "records.jsonl").write_text("\n".join(lines) + "\n")
    blocker = {
        "state": "quality_failed",
        "kind": "missing_evidence",
        "slice": None,
        "case_ids": ["g-1"],
        "message": "no reference",
    }
    fixture = json.loads((FIXTURES / "result-v1-card.json").read_text())
    (head / "result.json").write_text(json.dumps({**fixture, "blockers": [blocker], "unrun_case_ids": []}))
    (t,) = compare(LINEAGE_RECORDS, head, tmp_path / "cmp")["transitions"]
    assert (t["case_id"], t["base"], t["head"], t["first_divergence"]) == ("g-1", "pass", "unrun", "unknown")


def test_compare_md_fits_one_screen_and_escapes_record_text(tmp_path: Path) -> None:
    def hostile(rec: dict[str, Any]) -> None:
        rec["evaluator_model"] = "<img src=x onerror=alert(1)> @team [x](https://evil)"

    base, head = edited_pair(tmp_path, "c-1", hostile)
    compare(base, head, tmp_path / "cmp", "--policy", POLICY)
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "<img" not in md and "@team" not in md and "](https://evil)" not in md
    assert md.index("| transition | cases |") < md.index("### Critical transitions (1)")
    assert len(md.splitlines()) < 40


@pytest.mark.parametrize(
    "args",
    [
        ["--base", "nope/records.jsonl", "--head", str(LINEAGE_RECORDS)],
        ["--base", str(FIXTURES), "--head", str(LINEAGE_RECORDS)],  # a directory without records.jsonl
        ["--base", str(POLICY), "--head", str(LINEAGE_RECORDS)],  # not a records file
        ["--head", str(LINEAGE_RECORDS)],
    ],
)
def test_usage_errors_exit_2_with_a_message(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gate("compare", *args, "--out", tmp_path / "cmp") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and ("fix" in err or "--help" in err)


def test_an_ok_record_without_a_reason_or_an_allowed_label_is_an_error_not_a_verdict(tmp_path: Path) -> None:
    """`gate compare` vets records as `gate decide` does, with the allowed values each carries."""
    base_lines = [json.loads(line) for line in LINEAGE_RECORDS.read_text().splitlines() if line]
    head_lines = []
    for rec in base_lines:
        if rec["case_id"] == "c-1":
            rec = dict(rec, judge_reason=None)  # no reason: the live path's parse_error
        if rec["case_id"] == "g-1":
            rec = dict(rec, judge_label="review_required")  # not in this record's allowed values
        if rec["case_id"] == "g-2":
            rec = dict(rec, attempts=[], cache="off")  # no answered attempt, no cache hit
        head_lines.append(rec)
    head = tmp_path / "head.jsonl"
    head.write_text("".join(json.dumps(r) + "\n" for r in head_lines))
    res = compare(LINEAGE_RECORDS, head, tmp_path / "cmp", "--policy", POLICY)
    kinds = {t["case_id"]: (t["base"], t["head"]) for t in res["transitions"]}
    assert kinds == {"c-1": ("pass", "error"), "g-1": ("pass", "error"), "g-2": ("pass", "error")}


# SPEC 11's order, spelled out here (not read from the code): each edit changes one step.
ORDERED_EDITS: list[tuple[str, Edit]] = [
    ("gold", _set("gold_sha256", "1" * 64)),
    ("response", _field("response")),
    ("reference", _field("reference")),
    ("user_input", _field("user_input")),
    ("rubric_version", _set("rubric_version", "rubric-2")),
    ("prompt", _set("prompt_template_sha256", "2" * 64)),
    ("evaluator_model", _set("evaluator_model", "gpt-4.1-mini")),
    ("provider_settings", _set("base_url_host", "api.example.com")),
    ("ragas_version", _set("ragas_version", "0.4.4")),
    ("allowed_values", _set("allowed_values", ["pass", "fail", "review_required"])),
    ("parser", _set("label_aliases_sha256", "3" * 64)),
]


def test_every_step_changed_at_once_follows_the_full_order(tmp_path: Path) -> None:
    """With the steps from the k-th on all changed, the first divergence is the k-th: the whole
    order is checked, not only that each step is named when it alone changes."""
    for k, (expected, _) in enumerate(ORDERED_EDITS):

        def every_later(rec: dict[str, Any], k: int = k) -> None:
            for _, edit in ORDERED_EDITS[k:]:
                edit(rec)

        root = tmp_path / expected
        root.mkdir()
        base, head = edited_pair(root, "c-1", every_later)
        (t,) = compare(base, head, root / "cmp", "--policy", POLICY)["transitions"]
        assert t["first_divergence"] == expected, (k, t)
        assert t["differing_steps"] == [name for name, _ in ORDERED_EDITS[k:]]


def test_two_run_directories_mark_critical_without_the_policy(
    base_run: Path, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    """result.json carries the limits it applied (SPEC 14), so compare needs no --policy."""
    slices = json.loads((base_run / "result.json").read_text())["slices"]
    assert slices["critical"]["max_false_passes"] == 0 and slices["critical"]["max_false_fails"] == 1
    assert slices["general"]["max_false_passes"] == 1 and slices["general"]["max_false_fails"] is None
    fake_openai.script("Answer for c-1", reply("fail", "Now I doubt it."))
    fake_openai.script("Answer for g-1", reply("fail", "Not sure."))
    head = run_suite(tmp_path / "head", fake_openai)
    res = compare(base_run, head, tmp_path / "cmp")
    assert res["critical_slices"] == ["critical"]
    assert (by_case(res)["c-1"]["critical"], by_case(res)["g-1"]["critical"]) == (True, False)
    assert [t["case_id"] for t in res["transitions"]] == ["c-1", "g-1"]  # critical first
    # Records alone (no result.json beside them) carry no limits: unknown, as before.
    for side in ("base", "head"):
        (tmp_path / "alone" / side).mkdir(parents=True)
        source = base_run if side == "base" else head
        (tmp_path / "alone" / side / "records.jsonl").write_text((source / "records.jsonl").read_text())
    alone = compare(*(tmp_path / "alone" / side / "records.jsonl" for side in ("base", "head")), tmp_path / "cmp2")
    assert alone["critical_slices"] is None and by_case(alone)["c-1"]["critical"] is None
