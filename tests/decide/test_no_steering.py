"""Nobody can steer a product verdict: the run fixes its order and its audit plan when it starts, before
anyone sees a verdict, and every path into the decision keeps them.

Each test is one way a team steered a product at or above its limit to `passed`, driven through the
real CLI (`gate run`, `gate merge`, `gate decide`, `gate review queue`) against the fake provider.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from suite import result
from test_product_audit import WEAK_JUDGE
from test_product_audit import fake as fake  # the fixture
from test_product_lane import answer, product_case, product_suite, run_app, write_calibration, write_responses

from gate.cli import main

WORKFLOW = {"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "acme/support-bot", "GITHUB_RUN_ID": "77001"}


def in_workflow(monkeypatch: pytest.MonkeyPatch, attempt: int = 1) -> str:
    """This process is a step of attempt `attempt` of workflow run 77001; the seed that run gives."""
    for name, value in {**WORKFLOW, "GITHUB_RUN_ATTEMPT": str(attempt)}.items():
        monkeypatch.setenv(name, value)
    return f"github:acme/support-bot:77001:{attempt}"


def small_suite(root: Path, fake: Any, n: int = 6) -> tuple[Path, list[dict[str, Any]]]:
    """`n` answers of one slice, one the judge fails: enough to show an order, cheap to judge."""
    slices = {"critical": {"max_false_passes": 0, "priority": 0, "max_failure_rate": 0.2}}
    cases = [product_case(f"p-{i:03d}") for i in range(n)]
    policy = product_suite(root, cases, slices=slices, evaluator={"base_url": fake.base_url})
    write_calibration(policy, {"critical": WEAK_JUDGE})
    return policy, [answer(f"p-{i:03d}", "fail" if i == 0 else "pass") for i in range(n)]


def seed_of(out: Path) -> str:
    seed: str = result(out)["product"]["order_seed"]
    return seed


def product_records(out: Path) -> list[dict[str, Any]]:
    lines = (out / "records.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("response_sha256")]


def test_the_order_is_the_workflow_runs_and_editing_the_answers_free_form_field_does_not_change_it(
    tmp_path: Path, fake: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default order was seeded by the answers file's bytes: editing its free-form `generation`
    field (which the judge never sees) shopped for an order in a second. In a workflow the seed is the
    workflow run's; a re-run is a new attempt, and its seed says so."""
    policy, lines = small_suite(tmp_path / "suite", fake)
    seed = in_workflow(monkeypatch)
    first = write_responses(tmp_path / "a.jsonl", lines)
    edited = write_responses(tmp_path / "b.jsonl", [{**line, "generation": {"note": "try 17"}} for line in lines])
    assert run_app(policy, tmp_path / "a", first) == run_app(policy, tmp_path / "b", edited)
    assert seed_of(tmp_path / "a") == seed_of(tmp_path / "b") == seed
    assert {r["order_seed"] for r in product_records(tmp_path / "b")} == {seed}
    rerun = in_workflow(monkeypatch, attempt=2)
    run_app(policy, tmp_path / "c", edited)
    assert seed_of(tmp_path / "c") == rerun != seed

    # Outside a workflow each run draws its own seed when it starts, whatever the answers say.
    for name in WORKFLOW:
        monkeypatch.delenv(name)
    run_app(policy, tmp_path / "d", first)
    run_app(policy, tmp_path / "e", first)
    assert seed_of(tmp_path / "d").startswith("drawn:") and seed_of(tmp_path / "d") != seed_of(tmp_path / "e")


def test_order_seed_is_refused_in_a_workflow_and_beside_resume_when_it_is_not_the_records(
    tmp_path: Path, fake: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--order-seed 17016`, found by trying seeds, passed a product at its limit; `--resume --order-seed
    B` made the run and `gate decide` disagree. --order-seed now only replays a recorded run."""
    policy, lines = small_suite(tmp_path / "suite", fake, n=12)
    responses = write_responses(tmp_path / "r.jsonl", lines)
    out = tmp_path / "out"
    assert run_app(policy, out, responses, "--order-seed", "first", "--max-cost", "0.004") == 3  # stopped part-way
    capsys.readouterr()
    assert run_app(policy, out, responses, "--resume", "--order-seed", "17016") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--order-seed 17016: the records this run resumes were judged in the order of seed first" in err
    assert "fix: drop --order-seed" in err
    assert run_app(policy, out, responses, "--resume") != 3 and seed_of(out) == "first"
    assert {r["order_seed"] for r in product_records(out)} == {"first"}

    in_workflow(monkeypatch)
    capsys.readouterr()
    assert run_app(policy, tmp_path / "shopped", responses, "--order-seed", "17016") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "in a GitHub Actions workflow the order and the audit plan are the workflow run's" in err
    assert "github:acme/support-bot:77001:1" in err and not (tmp_path / "shopped" / "records.jsonl").exists()


def test_merge_refuses_shards_judged_under_different_seeds_and_decide_records_of_two_runs(
    tmp_path: Path, fake: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Shards of different seeds are different runs: a re-run of one job in another attempt, or a
    shard shopped for its order. Neither merges, and `gate decide` on records of two seeds refuses."""
    policy, lines = small_suite(tmp_path / "suite", fake)
    responses = write_responses(tmp_path / "r.jsonl", lines)
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    run_app(policy, shards[0], responses, "--shard", "1/2", "--order-seed", "github:acme/support-bot:77001:1")
    run_app(policy, shards[1], responses, "--shard", "2/2", "--order-seed", "github:acme/support-bot:77001:2")
    args = ["merge", "--policy", str(policy), *map(str, shards), "--responses", str(responses)]
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "merged")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "shard 2/2 judged in the order of seed github:acme/support-bot:77001:2" in err
    assert "shards of one run share one seed" in err and "re-run all jobs" in err
    assert not (tmp_path / "merged" / "result.json").exists()

    both = tmp_path / "both.jsonl"
    both.write_text("".join((s / "records.jsonl").read_text(encoding="utf-8") for s in shards), encoding="utf-8")
    decided = ["decide", "--policy", str(policy), "--records", str(both), "--out", str(tmp_path / "decided")]
    assert main([*decided, "--responses", str(responses)]) == 2
    assert "judged under 2 order seeds" in " ".join(capsys.readouterr().err.split())
