"""Runs of another policy (issue 29, item 5): `gate decide` and `gate merge` refuse records judged
under another policy with exit 2 naming both policy ids (they read as stale records, or as
controls never judged, which blamed the connection); `gate compare` across two policies says so
first. Real runs against the fake provider over HTTP; the CLI as a user types it."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI
from suite import gate, write_suite


def run(*args: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = gate(*args)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("policies")
    with pytest.MonkeyPatch.context() as mp, FakeOpenAI() as fake:
        mp.setenv("GATE_TEST_KEY", "sk-test-other-policy")
        mp.setenv("RAGAS_DO_NOT_TRACK", "true")
        mp.chdir(root)
        for name in ("acme-sla", "support"):
            write_suite(root / name, policy_id=name, evaluator={"base_url": fake.base_url})
            assert run("run", "--policy", f"{name}/policy.yaml", "--out", f"{name}-out", "--no-cache")[0] == 0
            code = run(
                "run", "--policy", f"{name}/policy.yaml", "--out", f"{name}-shard", "--no-cache", "--shard", "1/1"
            )
            assert code[0] == 0
        yield root


def test_decide_on_another_policys_records_names_both_policies(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(runs)
    code, out, err = run("decide", "--policy", "support/policy.yaml", "--records", "acme-sla-out")
    assert code == 2
    assert (
        "acme-sla-out/records.jsonl: these records were judged under policy 'acme-sla', not under support/policy.yaml's policy "
        "'support'; fix: pass --policy with the policy whose policy_id is 'acme-sla'" in err
    )
    assert "control_error" not in out + err and "connection" not in out + err


def test_merge_of_another_policys_shards_names_both_policies(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(runs)
    code, _, err = run("merge", "--policy", "support/policy.yaml", "acme-sla-shard", "--out", "merged")
    assert code == 2
    assert "acme-sla-shard: these records were judged under policy 'acme-sla', not under" in err


def test_decide_on_its_own_records_still_decides(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(runs)
    assert run("decide", "--policy", "support/policy.yaml", "--records", "support-out")[0] == 0


def test_compare_across_policies_says_so_first(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(runs)
    code, out, _ = run("compare", "--base", "acme-sla-out", "--head", "support-out", "--out", "cmp")
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("warning: these runs are of two policies (base 'acme-sla', head 'support')")
    assert json.loads((runs / "cmp" / "compare.json").read_text())["across_policies"].startswith("these runs are")
    assert "**Warning:** these runs are of two policies" in (runs / "cmp" / "compare.md").read_text()
    code, out, _ = run("compare", "--base", "support-out", "--head", "support-out", "--out", "cmp-same")
    assert "two policies" not in out
