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
from gate.review.ledger import append_line
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


def labelled_queue(
    tmp_path: Path, policy: Path, calibration: list[dict[str, Any]], *, adjudicated: bool = True
) -> tuple[Queue, Path]:
    """Eight answers ana and ben label, disagreeing on reviewed-2 (which cy settles, unless not `adjudicated`)."""
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
    if adjudicated:
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
        if bool(i % 2) != bool(i % 3):
            label(ledger, queue, i, "cy", "pass", kind="adjudication")
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


def _export(queue: Queue, ledger: Path, out: Path, *extra: str) -> int:
    args = ["review", "export", str(queue.path), "--ledger", str(ledger), "--partition", "calibration"]
    return main([*args, "--out", str(out), *extra])


def test_items_awaiting_adjudication_stop_the_export_unless_partial_which_says_what_it_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten wrong answers, three of them disputed (ana and ben disagree, nobody adjudicated yet): an export
    of the other seven would lean to the easy items and exited 0. It is refused (exit 1), naming the three
    and the page that settles them; `--partial` exports the rest and says, on the screen and for the
    dataset card, what it left out."""
    queue = file_queue(tmp_path, n=20)
    ledger = tmp_path / "labels"
    ledger.mkdir()
    for i in range(20):
        label(ledger, queue, i, "ana", "fail" if i < 10 else "pass")
        label(ledger, queue, i, "ben", "pass" if i in (3, 5, 8) or i >= 10 else "fail")
    capsys.readouterr()
    out = tmp_path / "cases.jsonl"
    assert _export(queue, ledger, out) == 1 and not out.exists()
    err = " ".join(capsys.readouterr().err.split())
    assert "3 items await adjudication (a-critical-3, a-critical-5, a-critical-8)" in err, err
    assert "/adjudicate" in err and "--partial" in err
    assert _export(queue, ledger, out, "--partial") == 0
    said = " ".join(capsys.readouterr().out.split())
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(cases) == 17 and not {"a-critical-3", "a-critical-5", "a-critical-8"} & {c["case_id"] for c in cases}
    assert "left out, awaiting adjudication: a-critical-3, a-critical-5, a-critical-8" in said, said
    assert "Known gaps: this export leaves out 3 items awaiting adjudication" in said


def test_blind_and_accepted_low_agreement_are_recorded_on_the_cases_they_are_true_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two slices: `critical`, where people agree, and `general`, where they do not (exported with
    --accept-low-agreement): only general's cases record it. A case whose labels include one made not
    blind (a label changed after seeing others, a Label Studio import) says `blind: false`; the others
    true. A case people confirmed as it is labelled is listed, never exported as a case superseding itself."""
    queue = file_queue(tmp_path, n=8, slices=("critical", "general"))
    ledger = tmp_path / "labels"
    ledger.mkdir()
    for i in range(8):  # critical: all agree
        label(ledger, queue, i, "ana", "fail" if i < 4 else "pass")
        label(ledger, queue, i, "ben", "fail" if i < 4 else "pass")
    for i in range(8, 16):  # general: alpha below 0.667, every difference adjudicated
        label(ledger, queue, i, "ana", "pass" if i % 2 else "fail")
        label(ledger, queue, i, "ben", "pass" if i % 3 else "fail")
        if ("pass" if i % 2 else "fail") != ("pass" if i % 3 else "fail"):
            label(ledger, queue, i, "cy", "pass", kind="adjudication")
    item = queue.items[1]
    append_line(
        ledger / "ben.jsonl",
        {
            "kind": "label", "item_id": item.item_id, "case_id": item.case_id, "response_sha256": item.response_sha256,
            "reviewer": "ben", "label": "fail", "reason": "looked again", "queue_sha256": queue.sha256,
            "rubric_version": queue.header.rubric_version, "blind": False,
        },
    )  # fmt: skip
    out = tmp_path / "cases.jsonl"
    assert _export(queue, ledger, out, "--accept-low-agreement") == 0
    cases = {c["case_id"]: c for c in (json.loads(line) for line in out.read_text().splitlines())}
    accepted = {c for c, case in cases.items() if case["provenance"].get("accept_low_agreement")}
    assert accepted == {c for c, case in cases.items() if case["slice"] == "general"} and accepted
    assert cases["a-critical-1"]["provenance"]["blind"] is False
    assert [c for c, case in cases.items() if not case["provenance"]["blind"]] == ["a-critical-1"]


def test_a_case_people_confirm_is_left_as_it_is_and_one_they_correct_is_superseded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy, calibration = example(tmp_path)
    answers = answers_from(calibration, tmp_path / "answers.jsonl")
    assert main(["review", "queue", "--policy", str(policy), "--from", str(answers), "--out", str(tmp_path / "q")]) == 0
    queue = read_queue(tmp_path / "q")
    ledger = tmp_path / "labels"
    ledger.mkdir()
    held = calibration[0]["human_adjudication"]["label"]
    for reviewer in ("ana", "ben"):
        label(ledger, queue, 0, reviewer, held)  # people confirm the case as it is labelled
    out = tmp_path / "cases.jsonl"
    capsys.readouterr()
    assert _export(queue, ledger, out) == 0
    assert (
        out.read_text() == "" and f"1 confirmed as labelled, left as they are: {CORRECTED}" in capsys.readouterr().out
    )


def _appended(policy: Path, cases_file: str, out: Path) -> list[dict[str, Any]]:
    """The exported cases, appended to the suite's cases file as a team does after an export."""
    target = policy.parent / "cases" / cases_file
    target.write_text(target.read_text(encoding="utf-8") + out.read_text(encoding="utf-8"), encoding="utf-8")
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def test_the_same_labels_exported_again_add_no_case_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped audit of app v2.4, exported into calibration and appended; exported again (a second
    export after more labels, or by mistake): every one of the 322 answers was written again under a
    new id (`...-76dd97262`), and the calibration partition held each labelled answer twice, which
    `gate validate` passed and `gate calibrate` would have counted twice. Now the second export adds
    nothing and says they are there already."""
    suite = tmp_path / "example-product"
    shutil.copytree(ROOT / "policies" / "example-product", suite, ignore=shutil.ignore_patterns("__pycache__"))
    queue, ledger = read_queue(suite / "audit" / "queue.jsonl"), suite / "audit" / "ledger"
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    assert _export(queue, ledger, first) == 0
    exported = _appended(suite / "policy.yaml", "calibration.jsonl", first)
    assert len(exported) == len(queue.items)
    capsys.readouterr()
    assert _export(queue, ledger, second) == 0
    assert second.read_text(encoding="utf-8") == ""
    said = " ".join(capsys.readouterr().out.split())
    assert f"{len(queue.items)} confirmed as labelled, left as they are: {exported[0]['case_id']}" in said, said


def test_a_partial_export_then_the_rest_after_adjudication_supersedes_each_case_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--partial` while one item awaits adjudication, appended; then the adjudication, and the rest
    exported and appended. The case people corrected in the first export (CORRECTED, superseded by
    CORRECTED-r) was superseded a second time (CORRECTED-r2), and `gate validate` refused the suite
    (two cases supersede one). Now the second export holds the adjudicated item alone."""
    policy, calibration = example(tmp_path)
    queue, ledger = labelled_queue(tmp_path, policy, calibration, adjudicated=False)
    partial, rest = tmp_path / "partial.jsonl", tmp_path / "rest.jsonl"
    assert _export(queue, ledger, partial, "--partial") == 0
    first = _appended(policy, "support.jsonl", partial)
    assert f"{CORRECTED}-r" in {c["case_id"] for c in first} and "reviewed-2" not in {c["case_id"] for c in first}
    label(ledger, queue, 2, "cy", "pass", kind="adjudication")
    assert _export(queue, ledger, rest) == 0
    assert [c["case_id"] for c in _appended(policy, "support.jsonl", rest)] == ["reviewed-2"]
    capsys.readouterr()
    assert main(["validate", "--policy", str(policy)]) == 0, capsys.readouterr().out
