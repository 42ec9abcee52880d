"""A product lane that stops once decided: the seeded order it judges in, the look that decided each
slice, and what the stop refuses. Through the real CLI, ragas and HTTP to the fake provider (whose
oracle reads the `[[judge:...]]` marker of each answer), plus pure tests of the order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_openai import FakeOpenAI, held, reply
from suite import result
from test_product_lane import GOOD_JUDGE, answer, app_suite, fake, product_case, write_calibration, write_responses

from gate.cli import main
from gate.decide.product.stop import ProductStopCheck
from gate.estimate.failure_rate import failure_rate, judge_accuracy, slice_verdict
from gate.model.cases import load_dataset
from gate.model.policy import load_policy
from gate.plan.selection import make_plan

__all__ = ["fake"]  # the fixture, shared with tests/decide/test_product_lane.py

STOP_LANES = {
    "calibration": {"partitions": ["calibration"], "controls": True},
    "app": {"partitions": ["product"], "controls": True, "product": True, "stop_when_decided": True},
}


def topic_suite(root: Path, fake: FakeOpenAI, good: int, bad: int, limit: float = 0.15, **policy: Any) -> Path:
    """One slice whose answers are two topics: `good` right answers whose ids sort first (a-...),
    and `bad` wrong ones whose ids sort last (z-...)."""
    path = app_suite(root, fake, n=0, limit=limit, **{"lanes": STOP_LANES, **policy})
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
    # The order's seed is drawn when the run starts, never derived from the answers: it says so.
    assert res["product"]["order_seed"].startswith("drawn:")
    # The answers went out mixed: the first twenty judged after the controls hold both topics. The seed is
    # drawn afresh each run, so this holds by chance: twenty of one topic first is 2 * C(40,20)/C(80,20),
    # about 8e-8 (ten of one topic, which this asked before, is about 1 run in 1,000: it failed once).
    first = [r.prompt for r in fake.requests if "App answer for" in r.prompt][:20]
    assert len(first) == 20, len(first)
    assert any("App answer for a-" in p for p in first) and any("App answer for z-" in p for p in first)


def test_order_seed_sets_the_order_and_is_recorded(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = topic_suite(tmp_path / "suite", fake, good=6, bad=0, evaluator={"max_concurrency": 1})
    responses = topic_answers(tmp_path / "r.jsonl", good=6, bad=0)
    sent: list[list[str]] = []
    for seed in ("7", "8"):
        before = len(fake.requests)
        assert run_lane(policy, tmp_path / seed, responses, "--order-seed", seed) in (0, 4)
        assert result(tmp_path / seed)["product"]["order_seed"] == seed
        assert any("--order-seed" in n and "replay" in n for n in result(tmp_path / seed)["notes"])
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


def _release_when_quiet(fake: FakeOpenAI, event: threading.Event, at_least: int) -> threading.Thread:
    """Set `event` once `at_least` requests came and no new one for half a second (the run stopped
    sending), so the held replies land after the stop."""

    def watch() -> None:
        seen, since = -1, time.monotonic()
        while not event.is_set() and time.monotonic() - since < 30:
            now = fake.count()
            if now != seen:
                seen, since = now, time.monotonic()
            elif now >= at_least and time.monotonic() - since > 0.5:
                event.set()
            time.sleep(0.02)
        event.set()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_answers_in_flight_at_the_stop_are_billed_and_never_undecide_the_slice(
    tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 8 in flight; the 35th to 37th answers the lane sends are wrong and slow: held until the lane
    # has stopped on the 34 right answers before them. On 0ca9dd1 they moved the slice to
    # inconclusive, every case not sent stayed unrun, and the run exited 3.
    policy = topic_suite(tmp_path / "suite", fake, good=120, bad=0, evaluator={"max_concurrency": 8})
    loaded = load_policy(policy)
    responses = topic_answers(tmp_path / "r.jsonl", good=120, bad=0)
    order = [c.case_id for c in make_plan(loaded, _answered(policy, responses), "app", "9").scheduled]
    slow = [c for c in order if not c.startswith("ctl-")][34:37]  # sent before the 34th is back
    release = threading.Event()
    for case_id in slow:
        fake.script(f"App answer for {case_id}.", held(release, reply("fail")))
    watcher = _release_when_quiet(fake, release, at_least=5 + 3 + 34)
    out = tmp_path / "out"
    assert run_lane(policy, out, responses, "--order-seed", "9") == 0
    watcher.join()
    res = result(out)
    assert res["state"] == "passed" and res["blockers"] == [] and res["unrun_case_ids"] == []
    row = res["product"]["slices"]["critical"]
    assert row["verdict"] == "passed" and row["decided_at"] == {"n": 34, "judged_fail": 0}
    # The three held answers came back after the look that decided the slice: recorded, billed, shown.
    assert row["judged_fail"] == 3 and sorted(row["failing_cases"]) == sorted(slow) and row["n"] > 34 + 3 - 1
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {r["case_id"] for r in records if r["judge_label"] == "fail" and r["human_label"] is None} == set(slow)
    assert all(r["cost"] > 0 for r in records if r["case_id"] in slow)
    stopped = res["stopped_early"]
    assert len(stopped["not_needed"]) == 120 - row["n"] and res["counts"]["not_needed"] == 120 - row["n"]
    assert fake.count() == 5 + row["n"]
    later = row["n"] - 34
    assert (
        f"decided after its first 34 answers (0 judged fail): the interval is that look's; the {later} judged"
        in (out / "report.md").read_text()
    )
    # gate decide on the records finds the same look and the same verdict, with no provider.
    monkeypatch.delenv("GATE_TEST_KEY")
    again = tmp_path / "again"
    assert main(["decide", "--policy", str(policy), "--records", str(out), "--out", str(again)]) == 0
    assert result(again)["product"] == res["product"] and result(again)["stopped_early"] == stopped
    # Records that cannot support the look (answers lost) never pass: the look is found in the records
    # themselves, and 20 right answers decide nothing.
    kept, answers = [], 0
    for r in records:
        answers += r["human_label"] is None
        if r["human_label"] is not None or answers <= 20:
            kept.append(r)
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    assert main(["decide", "--policy", str(policy), "--records", str(cut), "--out", str(tmp_path / "d2")]) == 3
    row = result(tmp_path / "d2")["product"]["slices"]["critical"]
    assert row["verdict"] != "passed" and row.get("decided_at") is None


# --- the incremental check, pure -----------------------------------------------------------------

J95 = judge_accuracy(true_fail=95, false_pass=5, true_pass=995, false_fail=5, confidence=0.95)
J80 = judge_accuracy(true_fail=40, false_pass=10, true_pass=290, false_fail=10, confidence=0.95)


def _from_scratch(answers: list[tuple[str, bool]], limits: dict[str, float], judges: dict[str, Any]) -> Any:
    """The reference: at every look, each slice's verdict computed anew from its counts so far; a
    slice's verdict is its first decided look's (an exceeded look later still wins); the lane is
    decided at the first look where a slice is exceeded or every slice has passed."""
    k = dict.fromkeys(limits, 0)
    n = dict.fromkeys(limits, 0)
    looks: dict[str, tuple[str, int, int]] = {}
    decided_at = None
    for t, (name, failed) in enumerate(answers, start=1):
        n[name] += 1
        k[name] += failed
        if name in looks and looks[name][0] == "exceeded":
            continue
        rate = failure_rate(judged_fail=k[name], n=n[name], judge=judges[name], confidence=0.95, sequential=True)
        verdict = slice_verdict(rate, limits[name])
        if verdict == "exceeded" or (verdict == "passed" and name not in looks):
            looks[name] = (verdict, n[name], k[name])
        done = any(v == "exceeded" for v, _, _ in looks.values()) or (
            len(looks) == len(limits) and all(v == "passed" for v, _, _ in looks.values())
        )
        if decided_at is None and done:
            decided_at = t
    return looks, decided_at


@pytest.mark.parametrize("seed", range(6))
def test_the_incremental_check_agrees_with_the_verdicts_computed_anew_at_every_look(seed: int) -> None:
    rng = random.Random(seed)
    limits = {"a": rng.choice([0.05, 0.1, 0.2]), "b": rng.choice([0.1, 0.3])}
    judges = {"a": J95, "b": J80}
    rates = {"a": rng.choice([0.0, 0.02, 0.1, 0.3]), "b": rng.choice([0.0, 0.05, 0.5])}
    answers = [(name, rng.random() < rates[name]) for name in rng.choices(["a", "b"], k=300)]
    check = ProductStopCheck(["a", "b"], limits, judges, 0.95)
    first = None
    for t, (name, failed) in enumerate(answers, start=1):
        if check.add(f"{name}-{t}", name, failed) and first is None:
            first = t
    looks, decided_at = _from_scratch(answers, limits, judges)
    assert first == decided_at and check.decided == (decided_at is not None)
    for name in ("a", "b"):
        look = check.look(name)
        assert (None if look is None else (look.verdict, look.n, look.judged_fail)) == looks.get(name)


def test_a_case_counts_once_and_a_slice_without_figures_never_passes() -> None:
    check = ProductStopCheck(["a", "b"], {"a": 0.3, "b": 0.3}, {"a": J95}, 0.95)
    for i in range(60):
        assert check.add(f"a-{i}", "a", False) is False  # b has no judge figures: the lane stays open
    assert check.look("a") is not None and check.look("a").verdict == "passed"  # type: ignore[union-attr]
    assert check.look("b") is None
    one = ProductStopCheck(["a"], {"a": 0.3}, {"a": J95}, 0.95)
    for _ in range(60):
        one.add("a-0", "a", True)  # the same case read again: one answer
    assert one.looks["a"].n == 1 and not one.decided
    # an exceeded slice stops the lane whatever the others
    for i in range(40):
        check.add(f"b-{i}", "b", True)
    assert not check.decided
    for i in range(300):
        if check.add(f"a-x{i}", "a", True):
            break
    assert check.decided and check.look("a").verdict == "exceeded"  # type: ignore[union-attr]


# --- stop_when_decided with fail_on_regression ---------------------------------------------------


def test_stop_when_decided_beside_fail_on_regression_is_refused_before_any_call(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    # On 0ca9dd1 such a lane passed after 6 answers, where without the stop it blocked as regressed
    # (the stop asked only about the failure rate).
    policy = topic_suite(tmp_path / "suite", fake, good=10, bad=0)
    data = yaml.safe_load(policy.read_text())
    data["lanes"]["app"]["fail_on_regression"] = True
    policy.write_text(yaml.safe_dump(data, sort_keys=False))
    responses = topic_answers(tmp_path / "r.jsonl", good=10, bad=0)
    assert main(["validate", "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert "policy.yaml" in err and "`lanes.app` sets both `stop_when_decided` and `fail_on_regression`" in err
    assert "fix: remove `stop_when_decided` from `lanes.app`" in err and "Traceback" not in err
    assert run_lane(policy, tmp_path / "out", responses) == 2
    assert "`fail_on_regression`" in capsys.readouterr().err and fake.count() == 0


def test_a_resumed_run_keeps_the_order_seed_it_was_started_with(tmp_path: Path, fake: FakeOpenAI) -> None:
    policy = topic_suite(tmp_path / "suite", fake, good=40, bad=0, evaluator={"max_concurrency": 1})
    responses = topic_answers(tmp_path / "r.jsonl", good=40, bad=0)
    out = tmp_path / "out"
    assert run_lane(policy, out, responses, "--order-seed", "first", "--max-cost", "0.004") == 3  # the boundary
    assert result(out)["product"]["order_seed"] == "first"
    assert run_lane(policy, out, responses, "--resume") == 0
    res = result(out)
    assert res["product"]["order_seed"] == "first"
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {r.get("order_seed") for r in records if r["human_label"] is None} == {"first"}


def test_a_product_lane_that_stops_once_decided_is_judged_in_one_process(
    tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its looks are one sequence, in the order the answers come back (and are written): never a
    # worker's share each.
    monkeypatch.setenv("GATE_WORKERS", "2")
    policy = topic_suite(tmp_path / "suite", fake, good=40, bad=0, evaluator={"max_concurrency": 4})
    out = tmp_path / "out"
    assert run_lane(policy, out, topic_answers(tmp_path / "r.jsonl", good=40, bad=0)) == 0
    err = capsys.readouterr().err
    assert "processes" not in err and "worker 1/2" not in err
    assert result(out)["product"]["slices"]["critical"]["decided_at"] == {"n": 34, "judged_fail": 0}


def test_the_looks_follow_the_lane_order_not_the_order_answers_come_back() -> None:
    # A judge slower on failing answers: the first answer sent is wrong and comes back last. Looked
    # at as they come back, 34 right answers would pass the slice first; in the lane's order the
    # wrong one is looked at first, wherever it comes back.
    order = [f"a-{i:02d}" for i in range(100)]
    by_arrival = ProductStopCheck(["a"], {"a": 0.15}, {"a": J95}, 0.95)
    in_order = ProductStopCheck(["a"], {"a": 0.15}, {"a": J95}, 0.95, order)
    for case_id in order[1:]:
        by_arrival.add(case_id, "a", False)
        assert in_order.add(case_id, "a", False) is False  # waiting for a-00
    assert by_arrival.look("a") is not None and by_arrival.look("a").judged_fail == 0  # type: ignore[union-attr]
    assert in_order.look("a") is None and in_order.looks["a"].n == 0
    in_order.add("a-00", "a", True)
    look = in_order.look("a")
    assert look is not None and look.judged_fail == 1 and look.n > 34
    # An answer without a verdict (an error) is passed over, never counted; one not in the order never looked at.
    check = ProductStopCheck(["a"], {"a": 0.15}, {"a": J95}, 0.95, order)
    check.add("a-00", "a", None)
    check.add("zz-other", "a", True)
    for case_id in order[1:]:
        check.add(case_id, "a", False)
    assert check.looks["a"].n == 99 and check.looks["a"].k == 0 and check.look("a") is not None


def test_a_judge_slower_on_a_wrong_answer_cannot_keep_it_out_of_the_look(tmp_path: Path, fake: FakeOpenAI) -> None:
    # The first answer the lane sends is wrong and its judgment is held back while 79 right ones
    # come back. Looked at as they came back, the slice passed on 34 right answers with the wrong
    # one still out; in the lane's order it is looked at first, whenever it comes back.
    policy = topic_suite(tmp_path / "suite", fake, good=80, bad=0, evaluator={"max_concurrency": 8})
    responses = topic_answers(tmp_path / "r.jsonl", good=80, bad=0)
    order = [c.case_id for c in make_plan(load_policy(policy), _answered(policy, responses), "app", "5").scheduled]
    first = next(c for c in order if not c.startswith("ctl-"))
    release = threading.Event()
    fake.script(f"App answer for {first}.", held(release, reply("fail")))
    watcher = _release_when_quiet(fake, release, at_least=5 + 80)
    out = tmp_path / "out"
    assert run_lane(policy, out, responses, "--order-seed", "5") == 0
    watcher.join()
    row = result(out)["product"]["slices"]["critical"]
    assert row["verdict"] == "passed" and row["failing_cases"] == [first]
    assert row["decided_at"]["judged_fail"] == 1 and row["decided_at"]["n"] >= 57


def test_a_zero_tolerance_slice_keeps_the_lane_open_until_every_one_of_its_answers_is_back() -> None:
    """`max_failures` asks people to confirm every answer the judge fails in the slice: an answer never
    judged is one nobody looked at. So the lane may stop on every slice passed only once each
    zero-tolerance slice's answers have all come back (judged, or without a verdict); an exceeded slice
    still stops it at once. It stopped a 60-answer slice after 35 passing answers, and zero tolerance
    read 'passed' over the 25 never judged."""
    order = [f"a-{i}" for i in range(60)]
    check = ProductStopCheck(["a"], {"a": 0.3}, {"a": J95}, 0.95, order, whole={"a": 60})
    decided_at = next((i for i, case_id in enumerate(order, 1) if check.add(case_id, "a", i == 60 and None)), None)
    assert decided_at == 60 and check.look("a") is not None and check.look("a").n < 60  # type: ignore[union-attr]
    plain = ProductStopCheck(["a"], {"a": 0.3}, {"a": J95}, 0.95, order)
    assert next(i for i, case_id in enumerate(order, 1) if plain.add(case_id, "a", False)) < 60
    failing = ProductStopCheck(["a"], {"a": 0.05}, {"a": J95}, 0.95, order, whole={"a": 60})
    assert next(i for i, case_id in enumerate(order, 1) if failing.add(case_id, "a", True)) < 60
