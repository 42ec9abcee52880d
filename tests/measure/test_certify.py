"""Certification (SPEC 10) and `supersedes`: the ledger rules through the real CLI, the real ragas
judge and real HTTP to the fake provider; supersedes through validate and the plan."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import PROMPT, case, controls, result, write_suite

from gate.cli import main
from gate.measure.certify import config_sha256, held_out_cases, held_out_sha256
from gate.model.cases import load_dataset
from gate.model.policy import load_policy
from gate.plan.selection import make_plan
from gate.run.lineage import JudgeSettings
from gate.validate import run_validators

KEY_ENV = "GATE_TEST_KEY"


@pytest.fixture()
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, "sk-test-cert")
    with FakeOpenAI() as server:
        yield server


def held_suite(
    root: Path, fake: FakeOpenAI, *, prompt: str = PROMPT, extra: list[dict[str, Any]] | None = None, **policy: Any
) -> Path:
    cases = [
        *controls(),
        case("s-1"),
        case("h-1", partition="held_out"),
        case("h-2", partition="held_out", label="fail"),
        *(extra or []),
    ]
    policy.setdefault("evaluator", {"base_url": fake.base_url})
    policy.setdefault("certification", {"ledger": "certification.jsonl"})
    return write_suite(root, cases, prompt=prompt, **policy)


def run(policy: Path, out: Path, lane: str = "release") -> int:
    return main(["run", "--policy", str(policy), "--lane", lane, "--out", str(out), "--no-cache"])


def test_certify_once_rerun_same_config_refuse_another(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    suite_dir = tmp_path / "suite"
    policy = held_suite(suite_dir, fake)
    assert run(policy, tmp_path / "first") == 0
    cert = result(tmp_path / "first")["certification"]
    assert len(cert["config_sha256"]) == 64 and len(cert["held_out_sha256"]) == 64
    entry = cert["ledger_entry"]
    assert entry["config_sha256"] == cert["config_sha256"] and entry["held_out_sha256"] == cert["held_out_sha256"]
    assert entry["state"] == "passed" and entry["date"] and entry["gate_version"]
    line = (tmp_path / "first" / "certification-entry.json").read_text()
    assert line.endswith("\n") and line.count("\n") == 1 and json.loads(line) == entry
    assert cert["ledger"] == "certification.jsonl"
    report = (tmp_path / "first" / "report.md").read_text()
    assert "### Certification" in report and "append `certification-entry.json`" in report
    assert cert["config_sha256"][:12] in report
    # People accept it: the entry is appended to the ledger and committed.
    (suite_dir / "certification.jsonl").write_text(line)

    # The same configuration again on the same held-out set: allowed, not a new look.
    assert run(policy, tmp_path / "again") == 0
    assert result(tmp_path / "again")["certification"]["config_sha256"] == cert["config_sha256"]

    # A tuned prompt is another configuration: refused before any model call.
    before = fake.count()
    tuned = held_suite(suite_dir, fake, prompt=PROMPT + "Be strict about dates.\n")
    assert run(tuned, tmp_path / "tuned") == 1
    assert fake.count() == before
    res = result(tmp_path / "tuned")
    spent = [b for b in res["blockers"] if b["kind"] == "held_out_spent"]
    assert len(spent) == 1 and spent[0]["state"] == "quality_failed"
    assert sorted(spent[0]["case_ids"]) == ["h-1", "h-2"]
    msg = spent[0]["message"]
    assert cert["config_sha256"][:12] in msg and "fix:" in msg and "new untouched held-out partition" in msg
    assert res["counts"]["completed"] == 0 and res["counts"]["unrun"] == res["counts"]["eligible"]
    assert res["certification"]["ledger_entry"] is None
    assert res["certification"]["config_sha256"] != cert["config_sha256"]
    assert not (tmp_path / "tuned" / "certification-entry.json").exists()

    # gate decide on the refused configuration's view gives the same refusal.
    code = main(["decide", "--policy", str(tuned), "--records", str(tmp_path / "again" / "records.jsonl")])
    assert code == 1
    assert "held_out_spent" in capsys.readouterr().out


def test_lanes_without_held_out_or_ledger_certify_nothing(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = held_suite(tmp_path / "a", fake)
    assert run(policy, tmp_path / "pr", lane="pr") == 0
    assert "certification" not in result(tmp_path / "pr")
    assert not (tmp_path / "pr" / "certification-entry.json").exists()
    plain = write_suite(
        tmp_path / "b", [*controls(), case("h-1", partition="held_out")], evaluator={"base_url": fake.base_url}
    )
    assert run(plain, tmp_path / "plain") == 0
    assert "certification" not in result(tmp_path / "plain")


def test_a_corrupt_ledger_is_a_usage_error_naming_the_line(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = held_suite(tmp_path / "s", fake)
    (tmp_path / "s" / "certification.jsonl").write_text('{"config_sha256": "a", "held_out_sha256": "b"}\n{oops\n')
    assert run(policy, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "certification.jsonl:2: not valid JSON" in err and "fix:" in err
    assert fake.count() == 0


def test_a_ledger_outside_the_repository_is_a_policy_error(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = held_suite(tmp_path / "s", fake, certification={"ledger": "../../../etc/ledger.jsonl"})
    assert run(policy, tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert "`certification.ledger`" in err and "outside the policy's directory" in err
    # An empty ledger (created, nothing appended yet) is the first certification, not an error.
    ok = held_suite(tmp_path / "e", fake)
    (tmp_path / "e" / "certification.jsonl").write_text("")
    assert run(ok, tmp_path / "out2") == 0


def _hashes(policy: Path, base_url: str = "http://127.0.0.1:1/v1") -> tuple[str, str]:
    loaded = load_policy(policy)
    plan = make_plan(loaded, load_dataset(loaded), "release")
    return (config_sha256(loaded, JudgeSettings.of(loaded, base_url), "0.4.3"), held_out_sha256(held_out_cases(plan)))


def test_what_changes_the_hashes(tmp_path: Path, fake: FakeOpenAI) -> None:
    base = _hashes(held_suite(tmp_path / "base", fake))
    # Not part of the judge: timeouts, concurrency, a sentinel case.
    assert (
        _hashes(
            held_suite(
                tmp_path / "t", fake, evaluator={"base_url": fake.base_url, "timeout_s": 99, "max_concurrency": 1}
            )
        )
        == base
    )
    assert _hashes(held_suite(tmp_path / "s", fake, extra=[case("s-2")])) == base
    # Part of the judge: sampling, repeats, aliases, the provider host (not its port), the ragas version.
    changed = [
        held_suite(tmp_path / "temp", fake, evaluator={"base_url": fake.base_url, "temperature": 0.5}),
        held_suite(tmp_path / "seed", fake, evaluator={"base_url": fake.base_url, "seed": 8}),
        held_suite(tmp_path / "alias", fake, metric={"label_aliases": {"PASS": "pass"}}),
        held_suite(tmp_path / "rep", fake, evaluator={"base_url": fake.base_url, "repeats": 3}),
    ]
    for p in changed:
        assert _hashes(p)[0] != base[0] and _hashes(p)[1] == base[1]
    assert _hashes(tmp_path / "base" / "policy.yaml", "https://api.openai.com/v1")[0] != base[0]
    assert _hashes(tmp_path / "base" / "policy.yaml", "http://127.0.0.1:2/other/v1")[0] == base[0]
    loaded = load_policy(tmp_path / "base" / "policy.yaml")
    judge = JudgeSettings.of(loaded, "http://127.0.0.1:1/v1")
    assert config_sha256(loaded, judge, "0.4.4") != base[0]
    # Part of the held-out set: any held-out case's content.
    edited = held_suite(tmp_path / "h", fake, extra=[case("h-3", partition="held_out")])
    assert _hashes(edited)[1] != base[1] and _hashes(edited)[0] == base[0]


# --- supersedes ---------------------------------------------------------------------------------


def findings_for(tmp_path: Path, cases: list[dict[str, Any]]) -> list[Any]:
    loaded = load_policy(write_suite(tmp_path, cases))
    return run_validators(loaded, load_dataset(loaded))


def test_a_superseded_case_stays_in_the_file_and_is_never_eligible(tmp_path: Path) -> None:
    cases = [
        *controls(),
        case("c-1", label="pass", pair={"id": "p-1", "kind": "flip"}),
        case("c-2", label="fail", pair={"id": "p-1", "kind": "flip"}),
        # c-1's label was wrong: corrected by a new case, the old one kept for history.
        case("c-1-v2", label="fail", supersedes="c-1", pair={"id": "p-1", "kind": "invariant"}),
    ]
    cases[-2]["pair"] = {"id": "p-1", "kind": "invariant"}
    policy = write_suite(tmp_path, cases)
    loaded = load_policy(policy)
    dataset = load_dataset(loaded)
    assert "c-1" in {c.case_id for c in dataset.cases}
    assert run_validators(loaded, dataset) == []  # the replaced pair member is not a third member
    for lane in loaded.policy.lanes:
        eligible = make_plan(loaded, dataset, lane).eligible_ids
        assert "c-1" not in eligible
    assert "c-1-v2" in make_plan(loaded, dataset, "pr").eligible_ids


@pytest.mark.parametrize(
    ("extra", "ids", "words"),
    [
        ([case("a", supersedes="c-1"), case("b", supersedes="c-1")], {"a", "b"}, "a case is corrected by one case"),
        ([case("a", supersedes="b"), case("b", supersedes="a")], {"a", "b"}, "cycle (a -> b -> a)"),
        ([case("a", supersedes="ghost")], {"a"}, "but no case in the dataset has that id"),
        ([case("a", supersedes="a")], {"a"}, "equal to their own case id"),
    ],
)
def test_supersede_defects_are_input_contract_findings(
    tmp_path: Path, extra: list[dict[str, Any]], ids: set[str], words: str
) -> None:
    found = findings_for(tmp_path, [*controls(), case("c-1"), *extra])
    contract = [f for f in found if f.kind == "input_contract" and words in f.message]
    assert len(contract) == 1, [f.message for f in found]
    assert set(contract[0].case_ids) == ids and contract[0].state.value == "quality_failed"
    assert "fix:" in contract[0].message


def test_sharded_certification_merges_to_the_same_entry(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = held_suite(tmp_path / "s", fake, extra=[case(f"h-{i}", partition="held_out") for i in range(3, 9)])
    assert run(policy, tmp_path / "whole") == 0
    whole = result(tmp_path / "whole")["certification"]
    for i in (1, 2):
        out = tmp_path / f"shard{i}"
        args = ["run", "--policy", str(policy), "--lane", "release", "--out", str(out), "--no-cache"]
        assert main([*args, "--shard", f"{i}/2"]) == 0
        # Every shard names the whole lane's held-out set, whichever share it judged.
        assert result(out)["certification"]["held_out_sha256"] == whole["held_out_sha256"]
    merged = tmp_path / "merged"
    shards = [str(tmp_path / "shard1"), str(tmp_path / "shard2")]
    assert main(["merge", "--policy", str(policy), *shards, "--out", str(merged)]) == 0
    cert = result(merged)["certification"]
    assert (cert["config_sha256"], cert["held_out_sha256"]) == (whole["config_sha256"], whole["held_out_sha256"])
    assert json.loads((merged / "certification-entry.json").read_text())["state"] == "passed"
    # Spent by another configuration: the merge refuses it too.
    other = {**whole["ledger_entry"], "config_sha256": "0" * 64}
    (tmp_path / "s" / "certification.jsonl").write_text(json.dumps(other) + "\n")
    assert main(["merge", "--policy", str(policy), *shards, "--out", str(tmp_path / "m2")]) == 1
    refused = result(tmp_path / "m2")
    assert refused["state"] == "quality_failed" and "held_out_spent" in [b["kind"] for b in refused["blockers"]]
    assert refused["counts"]["completed"] == 0 and refused["certification"]["ledger_entry"] is None


def cert_suite(root: Path, fake: FakeOpenAI, held: list[dict[str, Any]], prompt: str = PROMPT) -> Path:
    cases = [*controls(), case("s-1"), *held]
    ledger = {"ledger": "certification.jsonl"}
    return write_suite(root, cases, prompt=prompt, evaluator={"base_url": fake.base_url}, certification=ledger)


def test_spend_is_per_case_a_cosmetic_edit_or_a_supersede_reopens_nothing(tmp_path: Path, fake: FakeOpenAI) -> None:
    """SPEC 14: editing one case's provenance, or superseding one case, leaves the others spent."""
    suite_dir = tmp_path / "suite"
    h1, h2 = case("h-1", partition="held_out"), case("h-2", partition="held_out", label="fail")
    assert run(cert_suite(suite_dir, fake, [h1, h2]), tmp_path / "first") == 0
    cert = result(tmp_path / "first")["certification"]
    entry = cert["ledger_entry"]
    assert len(cert["held_out_cases"]) == 2 and entry["held_out_cases"] == cert["held_out_cases"]
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in cert["held_out_cases"])
    (suite_dir / "certification.jsonl").write_text((tmp_path / "first" / "certification-entry.json").read_text())
    tuned = PROMPT + "Be strict about dates.\n"  # another configuration
    before = fake.count()

    # A cosmetic edit: h-1's provenance and generation metadata change, nothing judged or labelled.
    cosmetic = {**h1, "provenance": {"source": "ticket 4711"}, "generation": {"model": "writer-2"}}
    assert run(cert_suite(suite_dir, fake, [cosmetic, h2], tuned), tmp_path / "cosmetic") == 1
    (spent,) = [b for b in result(tmp_path / "cosmetic")["blockers"] if b["kind"] == "held_out_spent"]
    assert sorted(spent["case_ids"]) == ["h-1", "h-2"] and "2 of the 2 held-out cases" in spent["message"]

    # h-1 superseded by a corrected case: h-2 is still spent, and named alone.
    corrected = case("h-1-v2", partition="held_out", label="fail", supersedes="h-1")
    assert run(cert_suite(suite_dir, fake, [h1, corrected, h2], tuned), tmp_path / "superseded") == 1
    (spent,) = [b for b in result(tmp_path / "superseded")["blockers"] if b["kind"] == "held_out_spent"]
    assert spent["case_ids"] == ["h-2"] and "1 of the 2 held-out cases" in spent["message"]
    assert "h-2" in spent["message"] and fake.count() == before  # refused before any model call

    # A ledger line written before `held_out_cases` still reads, and spends its whole set.
    old = {k: v for k, v in entry.items() if k != "held_out_cases"}
    (suite_dir / "certification.jsonl").write_text(json.dumps(old) + "\n")
    assert run(cert_suite(suite_dir, fake, [h1, h2], tuned), tmp_path / "old-ledger") == 1
    (spent,) = [b for b in result(tmp_path / "old-ledger")["blockers"] if b["kind"] == "held_out_spent"]
    assert sorted(spent["case_ids"]) == ["h-1", "h-2"]
