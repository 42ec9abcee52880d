"""`gate review export`: final labels become the cases of a new dataset version that `gate validate`
passes and `gate calibrate` reads, on the shipped example, through the real CLI (the judge of the
calibration run is the fake provider, through the real ragas client)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from test_review_status import file_queue, label

from gate.cli import main
from gate.review.queue import Queue, read_queue

ROOT = Path(__file__).resolve().parents[2]
CORRECTED = "refund-window-day-count-correct-032"  # a calibration case people now label fail


def example(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    suite = tmp_path / "example"
    shutil.copytree(ROOT / "policies" / "example", suite, ignore=shutil.ignore_patterns("__pycache__"))
    cases = [json.loads(line) for line in (suite / "cases" / "support.jsonl").read_text().splitlines()]
    return suite / "policy.yaml", [c for c in cases if c["partition"] == "calibration"]


def answers_from(calibration: list[dict[str, Any]], path: Path) -> Path:
    rows = [
        {
            "case_id": CORRECTED if i == 0 else f"reviewed-{i}",
            "user_input": c["user_input"],
            "reference": c["reference"],
            "evidence": " ".join(c["human_adjudication"]["evidence"]),
            "response": c["response"],
            "slice": "billing-policy-critical",  # one slice, so its alpha rests on every item
        }
        for i, c in enumerate(calibration[:8])
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def labelled_queue(tmp_path: Path, policy: Path, calibration: list[dict[str, Any]]) -> tuple[Queue, Path]:
    answers = answers_from(calibration, tmp_path / "answers.jsonl")
    assert (
        main(["review", "queue", "--policy", str(policy), "--from", str(answers), "--out", str(tmp_path / "q.jsonl")])
        == 0
    )
    queue = read_queue(tmp_path / "q.jsonl")
    ledger = tmp_path / "labels"
    ledger.mkdir()
    plan = [("fail", "fail"), ("pass", "pass"), ("pass", "fail"), ("abstain", "abstain")]
    plan += [("fail", "fail"), ("pass", "pass"), ("pass", "pass"), ("fail", "fail")]  # alpha 1 - 13·2/98
    for i, (a, b) in enumerate(plan):
        label(ledger, queue, i, "ana", a)
        label(ledger, queue, i, "ben", b)
    label(ledger, queue, 2, "cy", "pass", kind="adjudication")
    return queue, ledger


def test_exported_cases_pass_validate_and_feed_calibrate(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    policy, calibration = example(tmp_path)
    queue, ledger = labelled_queue(tmp_path, policy, calibration)
    capsys.readouterr()
    out = tmp_path / "new-cases.jsonl"
    args = ["review", "export", str(queue.path), "--ledger", str(ledger), "--out", str(out)]
    assert main([*args, "--partition", "held_out"]) == 2  # the certification spends the held-out set
    assert "certifies the judge on its held-out cases" in capsys.readouterr().err and not out.exists()
    assert main([*args, "--partition", "calibration"]) == 0
    printed = capsys.readouterr().out
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    assert [c["case_id"] for c in cases] == [f"{CORRECTED}-r", *(f"reviewed-{i}" for i in (1, 2, 4, 5, 6, 7))]
    assert cases[0]["provenance"]["alpha"] == pytest.approx(1 - 13 * 2 / 98)
    corrected = cases[0]
    assert corrected["supersedes"] == CORRECTED and corrected["human_adjudication"]["label"] == "fail"
    assert corrected["provenance"]["reviewers"] == ["ana", "ben"] and corrected["provenance"]["blind"] is True
    assert len(corrected["provenance"]["ledger_lines"]) == 2 and corrected["provenance"]["queue_sha256"] == queue.sha256
    adjudicated = cases[2]
    assert adjudicated["provenance"]["adjudicator"] == "cy" and adjudicated["human_adjudication"]["label"] == "pass"
    assert all(c["partition"] == "calibration" and c["human_adjudication"]["evidence"] for c in cases)
    assert "final abstain, not exported: reviewed-3" in printed and "supersede a case" in printed
    assert "unanimous 6" in printed and "Krippendorff's alpha 0.735" in printed  # the agreement it rests on
    assert "Reviewer qualifications: reviewers ana, ben; adjudicators cy" in printed and "Collection window" in printed
    assert main([*args, "--partition", "calibration"]) == 2  # never into an existing file
    # Appended to the suite: valid, and the calibration lane's run feeds gate calibrate.
    suite_cases = policy.parent / "cases" / "support.jsonl"
    suite_cases.write_text(suite_cases.read_text() + out.read_text())
    assert main(["validate", "--policy", str(policy)]) == 0
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-review")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    for line in suite_cases.read_text().splitlines():  # a judge that agrees with people (controls included)
        c = json.loads(line)
        fake_openai.script(c["response"], reply(c["human_adjudication"]["label"]))
    run = tmp_path / "run"
    main(["run", "--policy", str(policy), "--lane", "calibration", "--out", str(run), "--no-cache"])
    judged = {json.loads(line)["case_id"] for line in (run / "records.jsonl").read_text().splitlines()}
    assert f"{CORRECTED}-r" in judged and CORRECTED not in judged  # the superseded case is never judged again
    assert main(["calibrate", "--policy", str(policy), "--records", str(run), "--out", str(tmp_path / "cal")]) == 0
    calibrated = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert calibrated["overall"]["completed"] == len(calibration) - 1 + len(cases)


def test_a_slice_people_disagree_on_is_refused_unless_accepted_and_that_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = file_queue(tmp_path)
    ledger = tmp_path / "ledger.jsonl"
    for i in range(8):
        label(ledger, queue, i, "ana", "pass" if i % 2 else "fail")
        label(ledger, queue, i, "ben", "pass" if i % 3 else "fail")
    capsys.readouterr()
    out = tmp_path / "cases.jsonl"
    args = [
        "review",
        "export",
        str(queue.path),
        "--ledger",
        str(ledger),
        "--partition",
        "calibration",
        "--out",
        str(out),
    ]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "slice critical: alpha" in err and "fix the rubric" in err and not out.exists()
    assert main([*args, "--accept-low-agreement"]) == 0
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    assert cases and all(c["provenance"]["accept_low_agreement"] is True for c in cases)
    assert all(c["provenance"]["alpha"] < 0.667 for c in cases)
