"""Records are untrusted input: a recorded judgment outside the contract is an evaluator error, never
a verdict, on every path into the decision (`gate decide`, `gate run --resume`), as on the live path.

Each test starts from the records.jsonl of a real run (the ragas judge over real HTTP to the fake
provider), edits one line the way a careless script or a hand edit would, and decides again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import write_suite

from gate.cli import main

KEY_ENV = "GATE_TEST_KEY"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, FakeOpenAI]]:
    """A suite and the records of one clean run of it (state passed)."""
    root = tmp_path_factory.mktemp("recorded")
    mp = pytest.MonkeyPatch()
    mp.setenv(KEY_ENV, "sk-test-untrusted-records-0123")
    mp.setenv("RAGAS_DO_NOT_TRACK", "true")
    with FakeOpenAI() as fake:
        # A reviewed alias (FAIL -> fail), so that a recorded alias reads as its label; PASS has none.
        policy = write_suite(
            root / "suite", evaluator={"base_url": fake.base_url}, metric={"label_aliases": {"FAIL": "fail"}}
        )
        assert main(["run", "--policy", str(policy), "--out", str(root / "run"), "--no-cache"]) == 0
        yield root, fake
    mp.undo()


def lines(root: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (root / "run" / "records.jsonl").read_text().splitlines() if x]


def decide_edited(
    tmp_path: Path, root: Path, edit: Callable[[dict[str, Any]], None], case_id: str
) -> tuple[int, dict[str, Any]]:
    recs = lines(root)
    (target,) = [r for r in recs if r["case_id"] == case_id]
    edit(target)
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "decided"
    code = main(["decide", "--policy", str(root / "suite" / "policy.yaml"), "--records", str(path), "--out", str(out)])
    return code, json.loads((out / "result.json").read_text())


def setter(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda r: r.update(fields)


def case_row(res: dict[str, Any], case_id: str) -> dict[str, Any]:
    (row,) = [c for c in res["cases"] if c["case_id"] == case_id]
    return row


BAD_RECORDS = [
    ("PASS", setter(judge_label="PASS"), "invalid_label"),
    ("trailing-space", setter(judge_label="fail "), "invalid_label"),
    ("not-allowed", setter(judge_label="review_required"), "invalid_label"),
    ("null-label", setter(judge_label=None), "parse_error"),
    ("number-label", setter(judge_label=1), "parse_error"),
    ("list-label", setter(judge_label=["fail"]), "parse_error"),
    ("bool-label", setter(judge_label=True), "parse_error"),
    ("no-reason", setter(judge_reason=None), "parse_error"),
    ("blank-reason", setter(judge_reason="   "), "parse_error"),
    ("number-reason", setter(judge_reason=7), "parse_error"),
    ("ok-with-error-kind", setter(error_kind="rate_limit"), "parse_error"),
]


@pytest.mark.parametrize(("name", "edit", "kind"), BAD_RECORDS, ids=[b[0] for b in BAD_RECORDS])
def test_a_recorded_label_outside_the_contract_is_an_evaluator_error(
    tmp_path: Path, recorded: tuple[Path, FakeOpenAI], name: str, edit: Callable[[dict[str, Any]], None], kind: str
) -> None:
    root, _ = recorded
    # c-2: people said fail, the judge said fail. Edited, it must neither pass nor fail.
    code, res = decide_edited(tmp_path, root, edit, "c-2")
    assert code == 3 and res["state"] == "evaluation_incomplete", res["blockers"]
    blockers = {b["kind"]: b for b in res["blockers"]}
    assert blockers["evaluator_errors"]["case_ids"] == ["c-2"]
    row = case_row(res, "c-2")
    assert row["bucket"] == "errored" and row["verdict"] is None and row["error_kind"] == kind
    assert "record" in row["error_message"]
    tally = res["slices"]["critical"]
    assert tally["errors"] == 1 and tally["true_fail"] == 0 and tally["false_pass"] == 0


def test_a_bad_control_record_is_an_error_not_a_control_verdict(
    tmp_path: Path, recorded: tuple[Path, FakeOpenAI]
) -> None:
    root, _ = recorded
    code, res = decide_edited(tmp_path, root, setter(judge_label="PASS"), "ctl-positive")
    # A control without a verdict did not separate (SPEC 14): never ok, never absorbed as an error.
    assert code == 3 and res["controls"]["ok"] is False
    assert case_row(res, "ctl-positive")["error_kind"] == "invalid_label"
    assert {b["kind"]: b["case_ids"] for b in res["blockers"]}["control_error"] == ["ctl-positive"]


def test_a_reviewed_alias_in_a_record_reads_as_its_label(tmp_path: Path, recorded: tuple[Path, FakeOpenAI]) -> None:
    root, _ = recorded
    code, res = decide_edited(tmp_path, root, setter(judge_label="FAIL"), "c-2")
    assert code == 0 and res["state"] == "passed", res["blockers"]
    assert case_row(res, "c-2")["verdict"] == "fail"


def test_the_case_file_is_the_answer_key_not_the_record(tmp_path: Path, recorded: tuple[Path, FakeOpenAI]) -> None:
    """A record claiming people said `pass` for c-2 (they said fail) cannot turn a false pass true."""
    root, _ = recorded
    code, res = decide_edited(tmp_path, root, setter(judge_label="pass", human_label="pass"), "c-2")
    assert code == 1 and res["state"] == "quality_failed"
    assert {b["kind"]: b["case_ids"] for b in res["blockers"]}["false_pass_limit"] == ["c-2"]
    assert any("human label" in n and "case file" in n for n in res["notes"])


def test_a_control_record_cannot_disown_its_role(tmp_path: Path, recorded: tuple[Path, FakeOpenAI]) -> None:
    root, _ = recorded
    edit = setter(judge_label="pass", human_label="pass", control_role=None)
    code, res = decide_edited(tmp_path, root, edit, "ctl-negative")
    assert code == 1 and res["controls"]["ok"] is False
    assert res["controls"]["failures"][0]["case_id"] == "ctl-negative"


@pytest.mark.parametrize("index", [-1, 1, 7])
def test_a_repeat_index_out_of_range_is_no_verdict(
    tmp_path: Path, recorded: tuple[Path, FakeOpenAI], index: int
) -> None:
    root, _ = recorded
    code, res = decide_edited(tmp_path, root, setter(repeat_index=index), "c-2")
    assert code == 3 and res["state"] == "evaluation_incomplete"
    assert "c-2" in res["unrun_case_ids"]
    assert res["slices"]["critical"]["true_fail"] == 0
    assert any("repeat_index" in n for n in res["notes"])


@pytest.mark.parametrize(
    ("field", "value"),
    [("cost", float("nan")), ("cost", float("inf")), ("cost", -0.5), ("input_tokens", -3)],
)
def test_money_and_tokens_in_a_record_must_be_finite_and_not_negative(
    tmp_path: Path, recorded: tuple[Path, FakeOpenAI], field: str, value: float, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NaN cost would turn the budget's comparisons off on resume and make result.json invalid JSON."""
    root, _ = recorded
    recs = lines(root)
    recs[-1][field] = value
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    code = main(["decide", "--policy", str(root / "suite" / "policy.yaml"), "--records", str(path)])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{path}:{len(recs)}" in err and field in err and "Traceback" not in err


def test_resume_does_not_reuse_a_record_outside_the_contract(
    tmp_path: Path, recorded: tuple[Path, FakeOpenAI], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, fake = recorded
    monkeypatch.setenv(KEY_ENV, "sk-test-untrusted-records-0123")
    out = tmp_path / "run"
    recs = lines(root)
    for r in recs:
        if r["case_id"] == "c-2":
            r["judge_label"] = "PASS"
    out.mkdir()
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    before = fake.count("for c-2:")
    code = main(["run", "--policy", str(root / "suite" / "policy.yaml"), "--out", str(out), "--resume", "--no-cache"])
    # c-2 is judged again (its recorded label was not a verdict); nothing else is paid again.
    assert fake.count("for c-2:") == before + 1
    assert code == 0
    res = json.loads((out / "result.json").read_text())
    assert res["state"] == "passed" and case_row(res, "c-2")["verdict"] == "fail"


def test_a_poisoned_cache_entry_is_judged_again_and_overwritten_never_a_verdict(
    tmp_path: Path, recorded: tuple[Path, FakeOpenAI], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judgment cache is restored from CI storage: an entry outside the contract is no verdict.
    It is a miss: judged again (paid, metered), the entry overwritten, and the result says so; so it
    does not turn into an evaluator error on every later run."""
    import sqlite3

    root, fake = recorded
    monkeypatch.setenv(KEY_ENV, "sk-test-untrusted-records-0123")
    policy = str(root / "suite" / "policy.yaml")
    cache = tmp_path / "cache"
    assert main(["run", "--policy", policy, "--out", str(tmp_path / "first"), "--cache-dir", str(cache)]) == 0
    (db,) = [p for p in cache.rglob("*") if p.is_file() and p.read_bytes()[:16] == b"SQLite format 3\x00"]
    with sqlite3.connect(db) as conn:
        tampered = conn.execute("UPDATE judgments SET label = 'PASS' WHERE label = 'fail'").rowcount
    assert tampered > 0
    paid = fake.count()
    out = tmp_path / "second"
    assert main(["run", "--policy", policy, "--out", str(out), "--cache-dir", str(cache)]) == 0
    assert fake.count() == paid + tampered  # each bad entry judged again, nothing else
    res = json.loads((out / "result.json").read_text())
    assert res["state"] == "passed" and case_row(res, "c-2")["verdict"] == "fail"
    assert res["cost"]["http_attempts"] == tampered and res["cost"]["total"] > 0
    assert any("failed vetting" in n and "c-2" in n for n in res["notes"])
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x]
    (c2,) = [r for r in recs if r["case_id"] == "c-2"]
    assert c2["status"] == "ok" and c2["judge_label"] == "fail" and c2["cache"] == "rejudged"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judgments WHERE label = 'PASS'").fetchone() == (0,)
    # The next run is served wholly from the (repaired) cache.
    third = tmp_path / "third"
    assert main(["run", "--policy", policy, "--out", str(third), "--cache-dir", str(cache)]) == 0
    assert fake.count() == paid + tampered and json.loads((third / "result.json").read_text())["state"] == "passed"


@pytest.mark.parametrize("order", ["fail-then-pass", "pass-then-fail"])
def test_two_records_of_one_judgment_that_disagree_go_to_a_person(
    tmp_path: Path, recorded: tuple[Path, FakeOpenAI], order: str
) -> None:
    """`gate decide --records a b` with c-2 judged fail in one file and pass in the other: neither
    file order may decide the verdict (the later line used to win, hiding a false pass)."""
    root, _ = recorded
    recs = lines(root)
    flipped = [dict(r, judge_label="pass") if r["case_id"] == "c-2" else r for r in recs]
    files = [recs, flipped] if order == "fail-then-pass" else [flipped, recs]
    paths = []
    for i, content in enumerate(files):
        path = tmp_path / f"records-{i}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in content))
        paths.append(str(path))
    out = tmp_path / "decided"
    code = main(["decide", "--policy", str(root / "suite" / "policy.yaml"), "--records", *paths, "--out", str(out)])
    res = json.loads((out / "result.json").read_text())
    assert code == 4 and res["state"] == "review_required", res["blockers"]
    assert {b["kind"]: b["case_ids"] for b in res["blockers"]}["unstable_verdict"] == ["c-2"]
    assert any("disagree" in n and "c-2" in n for n in res["notes"])


def test_an_ok_record_with_no_attempt_and_no_cache_hit_is_no_verdict(
    tmp_path: Path, recorded: tuple[Path, FakeOpenAI]
) -> None:
    """Fabricated evidence: a record claiming `ok` that no judge produced (no answered HTTP attempt,
    no cache hit) counts as an evaluator error in `gate decide`, never as a pass or a fail."""
    root, _ = recorded
    recs = lines(root)
    forged = [dict(r, attempts=[], cache="off") if r["case_id"] == "c-2" else r for r in recs]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in forged))
    out = tmp_path / "decided"
    code = main(["decide", "--policy", str(root / "suite" / "policy.yaml"), "--records", str(path), "--out", str(out)])
    res = json.loads((out / "result.json").read_text())
    assert code == 3 and res["state"] == "evaluation_incomplete"
    row = case_row(res, "c-2")
    assert row["bucket"] == "errored" and row["error_kind"] == "parse_error"
    assert any("no answered attempt or cache hit" in n and "c-2" in n for n in res["notes"])
    # An attempt that failed (a 500) is no evidence either; a cache hit is.
    failed = [
        dict(r, attempts=[{"status_code": 500, "error_kind": "server_error"}]) if r["case_id"] == "c-2" else r
        for r in recs
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in failed))
    assert (
        main(["decide", "--policy", str(root / "suite" / "policy.yaml"), "--records", str(path), "--out", str(out)])
        == 3
    )
    hit = [dict(r, attempts=[], cache="hit") if r["case_id"] == "c-2" else r for r in recs]
    path.write_text("".join(json.dumps(r) + "\n" for r in hit))
    assert (
        main(["decide", "--policy", str(root / "suite" / "policy.yaml"), "--records", str(path), "--out", str(out)])
        == 0
    )
