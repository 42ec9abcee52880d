"""`gate calibrate`: every figure of calibration.json on hand-built records with known answers.

The expected numbers are worked out by hand in the comments (Wilson bounds computed
as the roots of (k/n - p)^2 = z^2 p (1 - p) / n, a different formula from the code's).
"""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from suite import case, controls, write_suite

from gate.cli import main
from gate.measure.calibrate.alignment import AlignmentError, labels_align, ragas_comparator
from gate.measure.calibrate.stats import cohen_kappa, wilson
from gate.model.records import Attempt, Record, write_records

ROOT = Path(__file__).resolve().parents[2]

# --- the statistics -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        (1, 4, 0.045586, 0.699364),
        (1, 3, 0.061490, 0.792345),
        (5, 10, 0.236590, 0.763410),
        (0, 10, 0.0, 0.277540),  # z^2/n / (1 + z^2/n) = 0.38416 / 1.38416
        (10, 10, 0.722460, 1.0),
    ],
)
def test_wilson_matches_hand_computed_bounds(k: int, n: int, low: float, high: float) -> None:
    r = wilson(k, n)
    assert r.value == pytest.approx(k / n)
    assert r.low == pytest.approx(low, abs=1e-6)
    assert r.high == pytest.approx(high, abs=1e-6)
    assert r.to_dict() == {"value": r.value, "low": r.low, "high": r.high, "n": n}


def test_wilson_of_nothing_is_null_and_bounds_are_exact_at_the_edges() -> None:
    assert wilson(0, 0).to_dict() == {"value": None, "low": None, "high": None, "n": 0}
    assert wilson(0, 7).low == 0.0 and wilson(7, 7).high == 1.0


def test_cohen_kappa_known_tables() -> None:
    # The textbook table: 20 both yes, 15 both no, 5 / 10 split. po 0.7, pe 0.5*0.6 + 0.5*0.4 = 0.5.
    assert cohen_kappa(true_pass=20, true_fail=15, false_pass=10, false_fail=5) == pytest.approx(0.4)
    # Complete disagreement with balanced marginals: po 0, pe 0.5 -> -1.
    assert cohen_kappa(0, 0, 5, 5) == pytest.approx(-1.0)
    assert cohen_kappa(0, 0, 0, 0) is None  # no case
    assert cohen_kappa(9, 0, 0, 0) is None  # both raters used one class only: pe = 1


# --- the comparison is a ragas @discrete_metric ---------------------------------------------


def test_alignment_is_a_ragas_discrete_metric_and_none_is_an_error() -> None:
    compare = ragas_comparator()
    assert compare("pass", "pass") == "aligned"
    assert compare("fail", "pass") == "misaligned"
    from ragas.metrics import discrete_metric

    @discrete_metric(name="broken", allowed_values=["aligned", "misaligned"])
    def broken(human_label: str, judge_label: str) -> str:
        return "maybe"

    with pytest.raises(AlignmentError, match="no value"):
        ragas_comparator(broken)("pass", "pass")
    assert labels_align("pass", "PASS") == "misaligned"  # no normalization: aliases apply upstream


def test_calibrate_modules_do_not_import_ragas() -> None:
    code = (
        "import sys\n"
        "import gate.measure.calibrate.core, gate.measure.calibrate.command, gate.measure.calibrate.alignment, gate.measure.calibrate.svg\n"
        "import gate.cli\n"
        "assert 'ragas' not in sys.modules, 'ragas imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr


# --- the whole command on hand-built records ------------------------------------------------


def rec(
    case_id: str,
    human: str,
    judge: str | None,
    *,
    slice: str = "critical",
    partition: str = "calibration",
    status: str = "ok",
    error_kind: str | None = None,
    repeat: int = 0,
    role: str | None = None,
    **extra: Any,
) -> Record:
    return Record(
        case_id=case_id,
        slice=slice,
        partition=partition,
        human_label=human,
        judge_label=judge,
        judge_reason=f"judge says {judge} for {case_id}" if judge else None,
        status=status,  # type: ignore[arg-type]
        error_kind=error_kind,
        repeat_index=repeat,
        control_role=role,  # type: ignore[arg-type]
        policy_id="test-policy",
        evaluator_model="gpt-4o-mini",
        metric_version="1",
        lane="calibration",
        # A verdict carries its evidence: the answered attempt it came from.
        attempts=[Attempt(status_code=200, input_tokens=100, output_tokens=10)] if status == "ok" else [],
        **extra,
    )


def three(case_id: str, human: str, labels: list[str], **kw: Any) -> list[Record]:
    return [rec(case_id, human, lab, repeat=i, **kw) for i, lab in enumerate(labels)]


def suite(tmp_path: Path, allowed: list[str] | None = None) -> Path:
    cal = [
        case("c-1", label="pass", partition="calibration"),
        case("c-2", label="pass", partition="calibration"),
        case(
            "c-3",
            label="pass",
            partition="calibration",
            human_adjudication={"label": "pass", "reason": "States the 7-day window.", "evidence": ["refund-window"]},
        ),
        case("c-4", label="fail", partition="calibration"),
        case(
            "c-5",
            label="fail",
            partition="calibration",
            human_adjudication={"label": "fail", "reason": "Drops the 7-day condition.", "evidence": ["refund-window"]},
        ),
        case("c-6", label="fail", partition="calibration"),
    ]
    held = [
        case(f"g-{i}", slice="general", partition="held_out", label=lab)
        for i, lab in enumerate(["pass", "fail", "pass", "pass", "fail"], start=1)
    ]
    sentinel = [case(f"s-{i}", label=lab) for i, lab in enumerate(["fail"] * 4 + ["pass"] * 2, start=1)]
    metric = {"allowed_values": allowed} if allowed else {}
    return write_suite(tmp_path, [*controls(), *cal, *held, *sentinel], evaluator={"repeats": 3}, metric=metric)


def hand_records() -> list[Record]:
    return [
        *three("ctl-positive", "pass", ["fail", "fail", "fail"], role="positive", partition="sentinel"),
        *three("c-1", "pass", ["pass", "fail", "pass"]),  # majority pass (unstable): true pass
        *three("c-2", "pass", ["pass"] * 3),  # true pass
        *three("c-3", "pass", ["fail"] * 3),  # false fail
        *three("c-4", "fail", ["fail"] * 3),  # true fail
        *three("c-5", "fail", ["pass", "pass", "fail"]),  # false pass (majority)
        *three("c-6", "fail", ["fail"] * 3),  # true fail
        *three("g-1", "pass", ["pass"] * 3, slice="general", partition="held_out"),  # true pass
        *three("g-2", "fail", ["fail"] * 3, slice="general", partition="held_out"),  # true fail
        # g-3: one repeat timed out -> an evaluator error, never a verdict
        *three("g-3", "pass", ["pass"] * 2, slice="general", partition="held_out"),
        rec("g-3", "pass", None, slice="general", partition="held_out", status="error", error_kind="timeout", repeat=2),
        # g-4: the budget stopped it after one repeat -> unrun
        rec("g-4", "pass", "pass", slice="general", partition="held_out"),
        rec(
            "g-4", "pass", None, slice="general", partition="held_out", status="skipped", error_kind="budget", repeat=1
        ),
        # g-5: a label outside allowed_values in the record -> an error, not a pass
        *three("g-5", "fail", ["PASS"] * 3, slice="general", partition="held_out"),
    ]


def run_calibrate(
    tmp_path: Path, records: list[Record], *extra: str, allowed: list[str] | None = None
) -> tuple[int, dict[str, Any]]:
    policy = suite(tmp_path / "suite", allowed)
    path = tmp_path / "records.jsonl"
    write_records(path, records)
    out = tmp_path / "cal"
    code = main(["calibrate", "--policy", str(policy), "--records", str(path), "--out", str(out), *extra])
    data = json.loads((out / "calibration.json").read_text()) if (out / "calibration.json").exists() else {}
    return code, data


def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}, so pytest.approx can compare nested figures."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def rate(k: int, n: int) -> dict[str, Any]:
    return wilson(k, n).to_dict()


def test_every_figure_of_calibration_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_calibrate(tmp_path, hand_records())
    assert code == 0
    assert data["controls_left_out"] == 1
    o = data["overall"]
    # TP c-1 c-2 g-1; FF c-3; FP c-5; TF c-4 c-6 g-2; errors g-3 g-5; unrun g-4.
    assert {
        k: o[k]
        for k in (
            "cases",
            "completed",
            "true_pass",
            "true_fail",
            "false_pass",
            "false_fail",
            "errors",
            "review",
            "unrun",
            "unstable",
        )
    } == {
        "cases": 11,
        "completed": 8,
        "true_pass": 3,
        "true_fail": 3,
        "false_pass": 1,
        "false_fail": 1,
        "errors": 2,
        "review": 0,
        "unrun": 1,
        "unstable": 2,
    }
    assert o["agreement"] == pytest.approx(6 / 8)
    # po 0.75; both raters pass 4 of 8 -> pe 0.5; kappa (0.75 - 0.5) / 0.5
    assert o["cohen_kappa"] == pytest.approx(0.5)
    assert o["false_pass_rate"] == pytest.approx({"value": 0.25, "low": 0.045586, "high": 0.699364, "n": 4}, abs=1e-6)
    assert o["false_fail_rate"] == pytest.approx(rate(1, 4))

    crit = data["slices"]["critical"]
    # c-1 c-2 TP, c-3 FF, c-4 c-6 TF, c-5 FP. po 4/6; human pass 3/6, judge pass 3/6 -> pe 0.5; kappa 1/3.
    assert flat(crit) == pytest.approx(
        flat(
            {
                "cases": 6,
                "completed": 6,
                "true_pass": 2,
                "true_fail": 2,
                "false_pass": 1,
                "false_fail": 1,
                "errors": 0,
                "review": 0,
                "unrun": 0,
                "unstable": 2,
                "agreement": 4 / 6,
                "cohen_kappa": 1 / 3,
                "false_pass_rate": {"value": 1 / 3, "low": 0.061490, "high": 0.792345, "n": 3},
                "false_fail_rate": {"value": 1 / 3, "low": 0.061490, "high": 0.792345, "n": 3},
            }
        ),
        abs=1e-6,
    )
    gen = data["slices"]["general"]
    # g-1 TP, g-2 TF; g-3 error, g-5 error (label outside the contract), g-4 unrun: none in a rate.
    assert flat(gen) == pytest.approx(
        flat(
            {
                "cases": 5,
                "completed": 2,
                "true_pass": 1,
                "true_fail": 1,
                "false_pass": 0,
                "false_fail": 0,
                "errors": 2,
                "review": 0,
                "unrun": 1,
                "unstable": 0,
                "agreement": 1.0,
                "cohen_kappa": 1.0,
                "false_pass_rate": {"value": 0.0, "low": 0.0, "high": 0.793457, "n": 1},
                "false_fail_rate": {"value": 0.0, "low": 0.0, "high": 0.793457, "n": 1},
            }
        ),
        abs=1e-6,
    )
    assert list(data["slices"]) == ["critical", "general"]  # worst (highest false-pass rate) first
    assert data["partitions"]["calibration"] == crit and data["partitions"]["held_out"] == gen

    # False passes first, both reasons given.
    assert [(d["case_id"], d["kind"]) for d in data["disagreements"]] == [("c-5", "false_pass"), ("c-3", "false_fail")]
    assert data["disagreements"][0] == {
        "case_id": "c-5", "slice": "critical", "partition": "calibration", "kind": "false_pass",
        "human_label": "fail", "human_reason": "Drops the 7-day condition.",
        "judge_label": "pass", "judge_reason": "judge says pass for c-5", "cause": None,
    }  # fmt: skip
    assert data["disagreements"][1]["human_reason"] == "States the 7-day window."
    assert sum(data["causes"].values()) == 0

    # Suggested limits: calibration partition only (critical), scaled to the largest gating lane
    # (pr and nocontrols tie at 6 sentinel cases: 4 fail, 2 pass): floor(0.792345 * 4) = 3 and
    # floor(0.792345 * 2) = 1 (false-fail rate 1/3 too).
    assert data["suggested_limits"] == {
        "critical": {
            "max_false_passes": 3,
            "max_false_fails": 1,
            "basis": "calibration",
            "scaled_to": {"lane": "nocontrols", "fail_cases": 4, "pass_cases": 2},
            "current": {"max_false_passes": 0, "max_false_fails": 1},
        }
    }
    assert {(n["case_id"], n["bucket"]) for n in data["not_counted"]} == {
        ("g-3", "errors"),
        ("g-4", "unrun"),
        ("g-5", "errors"),
    }
    assert next(n["why"] for n in data["not_counted"] if n["case_id"] == "g-5") == "evaluator error: invalid_label"
    assert any("outside the contract" in note and "g-5" in note for note in data["notes"])
    assert len(data["lineage"]["policy_sha256"]) == 64

    out = capsys.readouterr().out
    assert "critical" in out and "1/3 = 33% (6%–79%)" in out and "Wrote" in out
    # Piped, a paragraph stays one line (on a terminal it wraps between words: tests/report/test_screens_fit.py).
    assert "note: " in out and "judge measured: " in out
    assert any(line.startswith("judge measured: ") and line.endswith("points)") for line in out.splitlines())


def test_rates_divide_by_their_own_denominators_on_an_unequal_table(tmp_path: Path) -> None:
    # Every other hand-worked table has as many true passes as true fails, so a false-pass rate over
    # false_pass + true_pass would pass there. Here TP 4 (c-1 c-2 c-3 s-5), TF 2 (c-4 c-6), FP 1
    # (c-5), FF 1 (s-6): false-pass rate 1 / (1 + 2), n 3; false-fail rate 1 / (1 + 4), n 5.
    records = [
        *three("c-1", "pass", ["pass"] * 3),
        *three("c-2", "pass", ["pass"] * 3),
        *three("c-3", "pass", ["pass"] * 3),
        *three("c-4", "fail", ["fail"] * 3),
        *three("c-5", "fail", ["pass"] * 3),
        *three("c-6", "fail", ["fail"] * 3),
        *three("s-5", "pass", ["pass"] * 3, partition="sentinel"),
        *three("s-6", "pass", ["fail"] * 3, partition="sentinel"),
    ]
    code, data = run_calibrate(tmp_path, records)
    assert code == 0
    o = data["overall"]
    assert (o["true_pass"], o["true_fail"], o["false_pass"], o["false_fail"]) == (4, 2, 1, 1)
    assert o["false_pass_rate"] == pytest.approx(rate(1, 3)) and o["false_pass_rate"]["n"] == 3
    assert o["false_fail_rate"] == pytest.approx(rate(1, 5)) and o["false_fail_rate"]["n"] == 5
    assert data["slices"]["critical"]["false_pass_rate"]["n"] == 3
    assert data["slices"]["critical"]["false_fail_rate"]["n"] == 5
    # By partition: calibration TP 3, TF 2, FP 1 -> n 3 and 3; sentinel TP 1, FF 1 -> n 0 and 2.
    cal, sentinel = data["partitions"]["calibration"], data["partitions"]["sentinel"]
    assert (cal["false_pass_rate"]["n"], cal["false_fail_rate"]["n"]) == (3, 3)
    assert (sentinel["false_pass_rate"]["n"], sentinel["false_fail_rate"]["n"]) == (0, 2)
    assert sentinel["false_pass_rate"]["value"] is None and sentinel["false_fail_rate"]["value"] == 0.5


def test_markdown_and_picture_read_worst_first_and_warn_on_small_n(tmp_path: Path) -> None:
    code, _ = run_calibrate(tmp_path, hand_records())
    assert code == 0
    md = (tmp_path / "cal" / "calibration.md").read_text()
    assert md.index("| critical |") < md.index("| general |")
    assert "Too few cases to mean much" in md and "79 points wide on n = 1" in md
    assert "`c-5` | critical | **false pass**" in md
    svg = ET.parse(tmp_path / "cal" / "calibration.svg").getroot()  # well-formed
    texts = [t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert texts.index("critical") < texts.index("general") < texts.index("all slices")
    assert "1/3 = 33%  (6%–79%)" in texts


def test_review_and_errors_are_beside_the_rates(tmp_path: Path) -> None:
    agreed = [*three("c-1", "pass", ["pass"] * 3), *three("c-4", "fail", ["fail"] * 3)]
    # An abstention the policy does not allow is an evaluator error, outside every rate.
    code, data = run_calibrate(tmp_path / "a", [*agreed, *three("c-6", "fail", ["review_required"] * 3)])
    assert code == 0
    o = data["overall"]
    assert (o["completed"], o["errors"], o["review"]) == (2, 1, 0)
    assert o["false_pass_rate"]["n"] == 1 and o["agreement"] == 1.0
    # Allowed, it routes the case to review: still outside every rate.
    code, data = run_calibrate(
        tmp_path / "b",
        [*agreed, *three("c-6", "fail", ["review_required"] * 3)],
        allowed=["pass", "fail", "review_required"],
    )
    o = data["overall"]
    assert (o["completed"], o["errors"], o["review"]) == (2, 0, 1)
    assert o["false_pass_rate"]["n"] == 1 and o["agreement"] == 1.0


def test_no_completed_calibration_case_means_no_suggested_limits(tmp_path: Path) -> None:
    code, data = run_calibrate(tmp_path, three("g-1", "pass", ["pass"] * 3, slice="general", partition="held_out"))
    assert code == 0 and "suggested_limits" not in data
    md = (tmp_path / "cal" / "calibration.md").read_text()
    assert "the `calibration` partition has no completed case" in md


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_causes_fill_cause_and_summary(tmp_path: Path, fmt: str) -> None:
    causes = tmp_path / f"causes.{fmt}"
    if fmt == "jsonl":
        causes.write_text(
            json.dumps({"case_id": "c-5", "kind": "false_pass", "cause": "prompt_gap"})
            + "\n"
            + json.dumps({"case_id": "c-3", "cause": None})
            + "\n"
        )
    else:
        causes.write_text("case_id,cause\nc-5,prompt_gap\nc-3,gold_defect\n")
    code, data = run_calibrate(tmp_path, hand_records(), "--causes", str(causes))
    assert code == 0
    got = {d["case_id"]: d["cause"] for d in data["disagreements"]}
    if fmt == "jsonl":
        assert got == {"c-5": "prompt_gap", "c-3": None}
        assert data["causes"]["prompt_gap"] == 1 and sum(data["causes"].values()) == 1
    else:
        assert got == {"c-5": "prompt_gap", "c-3": "gold_defect"}
        assert data["causes"]["gold_defect"] == 1 and sum(data["causes"].values()) == 2
    assert set(data["causes"]) == {
        "gold_defect",
        "rubric_ambiguity",
        "missing_evidence",
        "prompt_gap",
        "evaluator_reasoning",
        "parser_defect",
        "provider_failure",
        "out_of_scope",
    }


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("c-5,prompt_gap\nc-3,judge_was_grumpy\n", ":2: unknown cause 'judge_was_grumpy' for case c-3"),
        ("c-5,prompt_gap\nc-1,gold_defect\n", ":2: case 'c-1' is not a disagreement"),
        ('{"case_id": "nope", "cause": "prompt_gap"}\n', ":1: case 'nope' is not a disagreement"),
    ],
)
def test_bad_causes_are_usage_errors_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    causes = tmp_path / "causes.txt"
    causes.write_text(content)
    code, _ = run_calibrate(tmp_path, hand_records(), "--causes", str(causes))
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "fix:" in err and "Traceback" not in err


def test_records_of_another_judge_or_mixed_gold_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = [r.model_copy(update={"evaluator_model": "gpt-4o"}) for r in three("c-1", "pass", ["pass"] * 3)]
    code, _ = run_calibrate(tmp_path / "a", other)
    assert code == 2 and "evaluator_model 'gpt-4o'" in capsys.readouterr().err
    edited = [r.model_copy(update={"prompt_template_sha256": "0" * 64}) for r in three("c-1", "pass", ["pass"] * 3)]
    code, _ = run_calibrate(tmp_path / "p", edited)
    assert code == 2 and "prompt template sha256 '000000" in capsys.readouterr().err
    # A case no longer in the case file, recorded with two different gold labels: ambiguous.
    mixed = [*three("gone-1", "pass", ["pass"] * 3), rec("gone-1", "fail", "pass", repeat=0)]
    code, _ = run_calibrate(tmp_path / "b", mixed)
    err = capsys.readouterr().err
    assert code == 2 and "disagree on its human_label" in err and "supersede" in err


def test_the_case_file_is_the_answer_key(tmp_path: Path) -> None:
    # A record claiming people passed c-5 (the case file says fail) cannot turn a false pass into agreement.
    forged = [r.model_copy(update={"human_label": "pass"}) for r in three("c-5", "fail", ["pass"] * 3)]
    code, data = run_calibrate(tmp_path, forged)
    assert code == 0
    assert data["overall"]["false_pass"] == 1 and data["overall"]["true_pass"] == 0
    assert any("the case file is the answer key" in note for note in data["notes"])


def test_superseded_cases_are_left_out_with_a_note(tmp_path: Path) -> None:
    policy = suite(tmp_path / "suite")
    cases_path = tmp_path / "suite" / "cases.jsonl"
    fixed = case("c-5-v2", label="pass", partition="calibration", supersedes="c-5")
    cases_path.write_text(cases_path.read_text() + json.dumps(fixed) + "\n")
    path = tmp_path / "records.jsonl"
    write_records(path, [*three("c-5", "fail", ["pass"] * 3), *three("c-5-v2", "pass", ["pass"] * 3)])
    assert main(["calibrate", "--policy", str(policy), "--records", str(path), "--out", str(tmp_path / "o")]) == 0
    data = json.loads((tmp_path / "o" / "calibration.json").read_text())
    assert data["overall"]["cases"] == 1 and data["overall"]["true_pass"] == 1 and data["disagreements"] == []
    assert any("1 superseded case left out" in n and "c-5" in n for n in data["notes"])


def test_too_few_cases_suggest_no_limit_and_no_warning_on_the_wrong_slice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One or two calibration cases behind a rate: no suggested limit, said so, and no "stricter than
    this judge supports" (which two cases put on the slice without the error, not on the one with it)."""
    cases = [
        *controls(),
        case("c-1", label="fail", partition="calibration"),  # judged pass: the one error
        case("c-2", label="pass", partition="calibration"),
        case("cg-1", label="fail", slice="general", partition="calibration"),
        case("cg-2", label="pass", slice="general", partition="calibration"),
        *[case(f"s-{i}", label="pass") for i in range(2)],
        *[case(f"t-{i}", label=lab, slice="general") for i, lab in enumerate(["fail", "fail", "pass", "pass"])],
    ]
    policy = write_suite(tmp_path / "suite", cases, slices={"general": {"max_false_passes": 0, "priority": 1}})
    records = [
        rec("c-1", "fail", "pass"),
        rec("c-2", "pass", "pass"),
        rec("cg-1", "fail", "fail", slice="general"),
        rec("cg-2", "pass", "pass", slice="general"),
    ]
    write_records(tmp_path / "records.jsonl", records)
    out_dir = tmp_path / "cal"
    assert (
        main(
            ["calibrate", "--policy", str(policy), "--records", str(tmp_path / "records.jsonl"), "--out", str(out_dir)]
        )
        == 0
    )
    out = capsys.readouterr().out
    data = json.loads((out_dir / "calibration.json").read_text())
    for name in ("critical", "general"):
        assert data["suggested_limits"][name]["max_false_passes"] is None
        assert data["suggested_limits"][name]["max_false_fails"] is None
    assert "stricter than this judge supports" not in out
    assert "stricter than this judge supports" not in (out_dir / "calibration.md").read_text()
    said = " ".join(out.split())
    assert "critical max_false_passes – (too few cases to suggest a limit: 1, at least 3)" in said
    assert "general max_false_passes – (too few cases to suggest a limit: 1, at least 3)" in said
    assert (
        "| general | – (too few cases to suggest a limit: 1, at least 3) |" in (out_dir / "calibration.md").read_text()
    )
