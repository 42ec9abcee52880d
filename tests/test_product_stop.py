"""A product lane that stops once decided: the seeded order it judges in, the look that decided each
slice, and what the stop refuses. Through the real CLI, ragas and HTTP to the fake provider (whose
oracle reads the `[[judge:...]]` marker of each answer), plus pure tests of the order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import result
from test_product_lane import GOOD_JUDGE, answer, app_suite, fake, product_case, write_calibration, write_responses

from gate.cli import main
from gate.model.cases import load_dataset
from gate.model.policy import load_policy
from gate.plan.selection import default_order_seed, make_plan

__all__ = ["fake"]  # the fixture, shared with tests/test_product_lane.py

STOP_LANES = {
    "calibration": {"partitions": ["calibration"], "controls": True},
    "app": {"partitions": ["product"], "controls": True, "product": True, "stop_when_decided": True},
}


def topic_suite(root: Path, fake: FakeOpenAI, good: int, bad: int, limit: float = 0.15, **policy: Any) -> Path:
    """One slice whose answers are two topics: `good` right answers whose ids sort first (a-...),
    and `bad` wrong ones whose ids sort last (z-...)."""
    path = app_suite(root, fake, n=0, limit=limit, lanes=STOP_LANES, **policy)
    cases = [product_case(f"a-{i:03d}") for i in range(good)] + [product_case(f"z-{i:03d}") for i in range(bad)]
    with (path.parent / "cases.jsonl").open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(c) + "\n" for c in cases)
    write_calibration(path, {"critical": GOOD_JUDGE})
    return path


def topic_answers(path: Path, good: int, bad: int) -> Path:
    lines = [answer(f"a-{i:03d}", "pass") for i in range(good)] + [answer(f"z-{i:03d}", "fail") for i in range(bad)]
    return write_responses(path, lines)


def run_lane(policy: Path, out: Path, responses: Path, *extra: str) -> int:
    args = ["run", "--policy", str(policy), "--lane", "app", "--out", str(out), "--no-cache"]
    return main([*args, "--responses", str(responses), *extra])


def test_a_wrong_topic_whose_ids_sort_last_is_judged_early_and_fails_the_lane(tmp_path: Path, fake: FakeOpenAI) -> None:
    # In case-id order the 40 right answers came first and passed the slice after 34 of them; the
    # 40 wrong ones were never judged and the lane passed.
    policy = topic_suite(tmp_path / "suite", fake, good=40, bad=40)
    responses = topic_answers(tmp_path / "r.jsonl", good=40, bad=40)
    out = tmp_path / "out"
    assert run_lane(policy, out, responses) == 1
    res = result(out)
    assert res["state"] == "quality_failed"
    assert [b["kind"] for b in res["blockers"]] == ["failure_rate_exceeded"]
    row = res["product"]["slices"]["critical"]
    assert row["verdict"] == "exceeded" and 0 < row["judged_fail"] < row["n"]
    policy_sha = load_policy(policy).sha256
    responses_sha = hashlib.sha256(responses.read_bytes()).hexdigest()
    assert res["product"]["order_seed"] == default_order_seed(policy_sha, responses_sha)
    # The answers went out mixed: the first ten judged after the controls hold both topics.
    first = [r.prompt for r in fake.requests if "App answer for" in r.prompt][:10]
    assert any("App answer for a-" in p for p in first) and any("App answer for z-" in p for p in first)


def test_order_seed_sets_the_order_and_is_recorded(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = topic_suite(tmp_path / "suite", fake, good=6, bad=0, evaluator={"max_concurrency": 1})
    responses = topic_answers(tmp_path / "r.jsonl", good=6, bad=0)
    sent: list[list[str]] = []
    for seed in ("7", "8"):
        before = len(fake.requests)
        assert run_lane(policy, tmp_path / seed, responses, "--order-seed", seed) in (0, 4)
        assert result(tmp_path / seed)["product"]["order_seed"] == seed
        new = fake.requests[before:]
        sent.append([r.prompt.split("App answer for ")[1][:5] for r in new if "App answer for" in r.prompt])
    by_seed = [
        [c.case_id for c in make_plan(load_policy(policy), _answered(policy, responses), "app", seed).scheduled]
        for seed in ("7", "8")
    ]
    assert sent == [[c for c in ids if c.startswith("a-")] for ids in by_seed]
    assert sent[0] != sent[1] and sorted(sent[0]) == sorted(sent[1])


def test_order_seed_on_a_lane_that_is_not_a_product_lane_is_a_usage_error(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = topic_suite(tmp_path / "suite", fake, good=2, bad=0)
    args = ["run", "--policy", str(policy), "--lane", "calibration", "--out", str(tmp_path / "o"), "--order-seed", "3"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--order-seed" in err and "not a product lane" in err and "fix:" in err and "Traceback" not in err
    assert fake.count() == 0


def _answered(policy: Path, responses: Path) -> Any:
    from gate.plan.responses import answer_cases, read_responses

    loaded = load_policy(policy)
    return answer_cases(loaded, load_dataset(loaded), "app", read_responses(responses)).dataset


def test_the_product_order_depends_on_the_seed_alone_and_controls_come_first(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = topic_suite(tmp_path / "suite", fake, good=30, bad=30)
    loaded = load_policy(policy)
    dataset = load_dataset(loaded)
    plan = make_plan(loaded, dataset, "app", "s1")
    ids = [c.case_id for c in plan.eligible]
    controls = [c.case_id for c in plan.eligible if c.is_control]
    assert ids[: len(controls)] == controls and plan.order_seed == "s1"
    answers = ids[len(controls) :]
    assert answers == sorted(answers, key=lambda c: hashlib.sha256(f"s1\0{c}".encode()).hexdigest())
    # The same seed, the cases in another file order: the same order. Another seed: another order.
    shuffled = dataclasses.replace(dataset, cases=list(reversed(dataset.cases)))
    assert [c.case_id for c in make_plan(loaded, shuffled, "app", "s1").eligible][len(controls) :] == answers
    assert [c.case_id for c in make_plan(loaded, dataset, "app", "s2").eligible][len(controls) :] != answers
    # Not case-id order, and the wrong topic is not all at the end of the first half.
    assert answers != sorted(answers) and any(c.startswith("z-") for c in answers[:15])
    # A metric lane keeps its case-id order and has no seed.
    assert make_plan(loaded, dataset, "calibration").order_seed is None


def test_a_slice_judged_fail_all_but_once_is_judge_unfit_not_a_crash(tmp_path: Path, fake: FakeOpenAI) -> None:
    # k = n - 1 at n >= 77: the sequential interval's edge rounded onto 1 and raised (exit 3).
    policy = topic_suite(tmp_path / "suite", fake, good=1, bad=80)
    write_calibration(policy, {"critical": {"true_fail": 3, "false_pass": 3, "true_pass": 3, "false_fail": 3}})
    out = tmp_path / "out"
    assert run_lane(policy, out, topic_answers(tmp_path / "r.jsonl", good=1, bad=80)) == 4
    res = result(out)
    assert [b["kind"] for b in res["blockers"]] == ["judge_unfit"]
    row = res["product"]["slices"]["critical"]
    assert row["n"] == 81 and row["judged_fail"] == 80 and row["verdict"] == "judge_unfit"
