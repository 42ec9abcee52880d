"""`stop_when_decided` (SPEC 15): a PR lane stops paying once no remaining outcome can change
`quality_failed`. Through the real CLI, the real judge and real HTTP to the fake provider."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_limits import BucketLimits
from fake_openai import FakeOpenAI, reply, server_error, slow
from suite import case, controls, gate, result, write_suite

KEY_ENV = "GATE_TEST_KEY"
STOP_LANES = {
    "pr": {"partitions": ["sentinel"], "controls": True, "stop_when_decided": True},
    "full": {"partitions": ["sentinel"], "controls": True},
    "release": {"partitions": ["held_out"], "controls": True},
}
SENT_CONTROLS = 5  # the missing-evidence control is withheld, never sent


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-stop-0123456789")


@pytest.fixture()
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def false_pass(case_id: str, **kw: Any) -> dict[str, Any]:
    """People failed it; the judge passes it (the oracle marker)."""
    return case(case_id, label="fail", response=f"Answer for {case_id}: refunds any time. [[judge:pass]]", **kw)


def suite_with(tmp_path: Path, fake: FakeOpenAI, cases: list[dict[str, Any]], concurrency: int = 1, **ev: Any) -> Path:
    return write_suite(
        tmp_path / "s",
        [*controls(), *cases],
        evaluator={"base_url": fake.base_url, "max_concurrency": concurrency, **ev},
        lanes=STOP_LANES,
    )


def run_lane(policy: Path, out: Path, lane: str) -> int:
    return gate("run", "--policy", policy, "--lane", lane, "--out", out, "--no-cache")


def general(n: int) -> list[dict[str, Any]]:
    return [case(f"g-{i:03d}", slice="general") for i in range(n)]


def test_an_early_critical_false_pass_stops_the_lane(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = suite_with(tmp_path, fake, [false_pass("c-bad"), case("c-ok"), *general(30)])
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 1
    terminal = capsys.readouterr().out
    res = result(out)
    sent = SENT_CONTROLS + 1  # critical slices first: the false pass is the first case judged
    assert fake.count() == sent
    assert res["state"] == "quality_failed"
    assert res["stopped_early"] == {
        "judged": sent,
        "scheduled": SENT_CONTROLS + 32,
        "not_needed": ["c-ok", *[f"g-{i:03d}" for i in range(30)]],
    }
    # Not needed is neither unrun nor incomplete.
    assert res["unrun_case_ids"] == []
    assert res["counts"]["unrun"] == 0 and res["counts"]["not_needed"] == 31
    assert [b["kind"] for b in res["blockers"]] == ["false_pass_limit"]
    assert {c["case_id"]: c["bucket"] for c in res["cases"]}["g-000"] == "not_needed"
    report = (out / "report.md").read_text()
    assert "stopped after 6 of 37 judgments: no remaining outcome could change the verdict" in report
    # The counts still add up where people read them, and CI's test report never shows a case that
    # was not needed as passed: it is skipped, saying why.
    counts = "38 eligible = 6 completed + 0 errored + 1 withheld + 0 unrun + 31 not needed"
    assert f"Cases: {counts};" in terminal and f"Cases: {counts} ·" in report
    junit = ET.parse(out / "junit.xml").getroot()
    skipped = {tc.get("name"): tc.find("skipped") for tc in junit.iter("testcase")}
    assert junit.get("skipped") == "32"  # the 31 not needed and the withheld missing-evidence control
    not_needed = skipped["g-000"]
    assert not_needed is not None and (not_needed.get("message") or "").startswith("not needed: the verdict was")
    assert skipped["c-bad"] is None

    # The full lane on the same cases: the same verdict and the same first blocker, every case paid.
    full_out = tmp_path / "full"
    fake.reset()
    assert run_lane(policy, full_out, "full") == 1
    full = result(full_out)
    assert fake.count() == SENT_CONTROLS + 32 and "stopped_early" not in full
    assert full["blockers"][0]["kind"] == res["blockers"][0]["kind"]
    assert full["blockers"][0]["case_ids"] == res["blockers"][0]["case_ids"]

    # `gate decide` on the stopped run's records gives the run's result.
    again = tmp_path / "decided"
    assert gate("decide", "--policy", policy, "--lane", "pr", "--records", out / "records.jsonl", "--out", again) == 1
    assert result(again)["stopped_early"] == res["stopped_early"]


def test_a_lane_without_a_deciding_failure_judges_everything(tmp_path: Path, fake: FakeOpenAI) -> None:
    # One false pass in `general` fits its limit (max_false_passes: 1): nothing is decided early.
    policy = suite_with(tmp_path, fake, [case("c-ok"), false_pass("g-bad", slice="general"), *general(5)])
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 0
    assert fake.count() == SENT_CONTROLS + 7
    assert "stopped_early" not in result(out)


def test_repeats_a_false_pass_in_one_repeat_does_not_decide(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("c-wobbly", reply("pass"), reply("fail"), reply("fail"))
    cases = [case("c-wobbly", label="fail"), *general(4)]
    policy = suite_with(tmp_path, fake, cases, repeats=3)
    out = tmp_path / "out"
    gate_exit = run_lane(policy, out, "pr")
    res = result(out)
    # The other two repeats, at their label, outvote the first: nothing was decided, all were judged.
    assert "stopped_early" not in res
    assert fake.count() == (SENT_CONTROLS + 5) * 3
    assert res["state"] == "review_required" and gate_exit == 4  # the judge disagreed with itself


def test_repeats_a_decided_case_finishes_its_repeats_then_stops(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("c-bad", reply("pass"), reply("pass"), reply("fail"))
    cases = [case("c-bad", label="fail"), *general(4)]
    policy = suite_with(tmp_path, fake, cases, repeats=3)
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 1
    res = result(out)
    # Two of three repeats pass a fail: the majority is a false pass, but only the third repeat makes
    # the case's verdict whole (an error there would leave it errored, not failed); it agrees with
    # its label, and still decides: no other case is sent.
    assert fake.count() == (SENT_CONTROLS + 1) * 3
    assert res["stopped_early"]["not_needed"] == [f"g-{i:03d}" for i in range(4)]
    row = {c["case_id"]: c for c in res["cases"]}["c-bad"]
    assert (row["outcome"], row["labels"]) == ("false_pass", ["pass", "pass", "fail"])


def test_in_flight_judgments_finish_and_are_billed(tmp_path: Path, fake: FakeOpenAI) -> None:
    # Four in flight at once: the false pass answers first, the other three are slow but finish.
    for i in range(3):
        fake.script(f"c-slow-{i}", slow(0.4, reply("pass")))
    cases = [false_pass("c-bad"), *[case(f"c-slow-{i}") for i in range(3)], *general(20)]
    policy = suite_with(tmp_path, fake, cases, concurrency=4)
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 1
    res = result(out)
    recorded = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert {r["case_id"] for r in recorded} >= {"c-slow-0", "c-slow-1", "c-slow-2"}
    assert all(r["status"] == "ok" for r in recorded)
    assert res["cost"]["http_attempts"] == fake.count() == len(recorded)
    assert res["stopped_early"]["judged"] == len(recorded)
    assert not set(res["stopped_early"]["not_needed"]) & {r["case_id"] for r in recorded}


def test_an_error_in_flight_is_still_an_error_not_a_stop_reason(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("c-broken", slow(0.3, server_error()))  # still in flight when the false pass decides
    cases = [false_pass("c-bad"), case("c-broken"), *general(10)]
    policy = suite_with(tmp_path, fake, cases, concurrency=2, retries={"max_attempts": 1})
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 1
    res = result(out)
    # The error that was in flight is recorded and counted; the verdict was decided anyway.
    kinds = [b["kind"] for b in res["blockers"]]
    assert kinds[0] == "false_pass_limit" and "evaluator_errors" in kinds
    assert "c-broken" not in res["stopped_early"]["not_needed"]
    assert len(res["stopped_early"]["not_needed"]) == 10


def test_every_case_deciding_at_once_leaves_nothing_not_needed(tmp_path: Path, fake: FakeOpenAI) -> None:
    # Every case is in flight at once and every one is a false pass: nothing was left unsent, so
    # there is no stop to report, only the verdict.
    cases = [false_pass(f"c-bad-{i}") for i in range(3)]
    policy = suite_with(tmp_path, fake, cases, concurrency=8)
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 1
    res = result(out)
    assert fake.count() == SENT_CONTROLS + 3
    assert "stopped_early" not in res and res["counts"]["unrun"] == 0


def test_a_failed_control_decides_too(tmp_path: Path, fake: FakeOpenAI) -> None:
    fake.script("ctl-positive", reply("fail"))  # the positive control fails: no verdict can pass
    policy = suite_with(tmp_path, fake, general(10))
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 1
    res = result(out)
    assert res["blockers"][0]["kind"] == "control_failed"
    assert set(res["stopped_early"]["not_needed"]) >= {f"g-{i:03d}" for i in range(10)}
    assert res["unrun_case_ids"] == []


@pytest.mark.parametrize("partition", ["held_out", "calibration"])
def test_refused_on_a_lane_that_must_be_measured_whole(
    tmp_path: Path, partition: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lanes = {**STOP_LANES, "release": {"partitions": [partition], "controls": True, "stop_when_decided": True}}
    policy = write_suite(tmp_path / "s", lanes=lanes)
    assert gate("validate", "--policy", policy) == 2
    err = capsys.readouterr().err
    assert "lanes.release.stop_when_decided" in err and partition in err and "Traceback" not in err


def test_the_dry_run_says_the_lane_may_stop_early(
    tmp_path: Path, fake: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = suite_with(tmp_path, fake, [case("c-ok"), *general(3)])
    for lane, said in (("pr", True), ("full", False)):
        assert gate("run", "--policy", policy, "--lane", lane, "--dry-run", "--out", tmp_path / lane) == 0
        assert ("stop_when_decided: once no remaining outcome" in capsys.readouterr().out) is said, lane
    assert fake.count() == 0


def test_the_example_pr_lane_stops_when_decided() -> None:
    import yaml

    root = Path(__file__).resolve().parents[2]
    policy = yaml.safe_load((root / "policies/example/policy.yaml").read_text())
    assert policy["lanes"]["pr"].get("stop_when_decided") is True
    assert not any(lane.get("stop_when_decided") for name, lane in policy["lanes"].items() if name != "pr")


def flip_pair(judge_b: str = "[[judge:pass]]") -> list[dict[str, Any]]:
    """A flip pair in the critical slice: people pass fp-a and fail fp-b; the judge fails fp-a (a false
    fail, within the slice's limit) and answers fp-b as `judge_b` says."""
    pair = {"id": "p-flip", "kind": "flip"}
    return [
        case("fp-a", response="Answer for fp-a: refunds within 7 days. [[judge:fail]]", pair=pair),
        case("fp-b", label="fail", response=f"Answer for fp-b: refunds any time. {judge_b}", pair=pair),
    ]


def test_a_pair_with_an_unjudged_member_decides_nothing_yet(tmp_path: Path, fake: FakeOpenAI) -> None:
    # fp-a's false fail with fp-b at its label would violate the pair; but fp-b is judged a pass (a
    # critical false pass). The stopped lane must reach the full lane's verdict, never `passed`.
    policy = suite_with(tmp_path, fake, [*flip_pair(), *general(6)])
    assert run_lane(policy, tmp_path / "full", "full") == 1
    full = result(tmp_path / "full")
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 1
    res = result(out)
    assert res["state"] == full["state"] == "quality_failed"
    assert [(b["kind"], b["case_ids"]) for b in res["blockers"]] == [("false_pass_limit", ["fp-b"])]
    assert full["blockers"][0]["case_ids"] == ["fp-b"]
    assert {c["case_id"]: c["outcome"] for c in res["cases"]}["fp-b"] == "false_pass"
    # Decided once fp-b was judged: the general cases were not needed.
    assert res["stopped_early"]["not_needed"] == [f"g-{i:03d}" for i in range(6)]


def test_a_pair_member_that_errors_leaves_the_verdict_open(tmp_path: Path, fake: FakeOpenAI) -> None:
    # The judge errors on fp-b: the full lane is evaluation_incomplete (no pair judged in full, no
    # false pass), so the stopped lane may not say quality_failed, and stops nothing.
    policy = suite_with(tmp_path, fake, [*flip_pair("[[judge:http=500]]"), *general(3)], retries={"max_attempts": 1})
    assert run_lane(policy, tmp_path / "full", "full") == 3
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 3
    res, full = result(out), result(tmp_path / "full")
    assert res["state"] == full["state"] == "evaluation_incomplete"
    assert [b["kind"] for b in res["blockers"]] == [b["kind"] for b in full["blockers"]] == ["evaluator_errors"]
    assert "stopped_early" not in res and res["unrun_case_ids"] == []


def test_a_judgment_that_agrees_can_complete_a_violated_pair(tmp_path: Path, fake: FakeOpenAI) -> None:
    # fp-a is a false fail (within the limit); fp-b is judged fail as people said, which completes
    # the flip pair with two fails: violated, decided there, and the general cases are not needed.
    policy = suite_with(tmp_path, fake, [*flip_pair("[[judge:fail]]"), *general(5)])
    out = tmp_path / "out"
    assert run_lane(policy, out, "pr") == 1
    res = result(out)
    assert [(b["kind"], b["case_ids"]) for b in res["blockers"]] == [("pair_violated", ["fp-a", "fp-b"])]
    assert res["stopped_early"]["not_needed"] == [f"g-{i:03d}" for i in range(5)]
    assert fake.count() == SENT_CONTROLS + 2


def test_a_lane_that_does_not_stop_when_decided_still_stops_after_a_failed_control(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    # The full lane never chose to stop once decided, but a failed control stops every lane: no
    # other verdict could count, so the cases never sent are not_needed (neither unrun nor
    # control_error), and the note says why.
    fake.script("ctl-positive", reply("fail"))
    policy = suite_with(tmp_path, fake, general(4))
    out = tmp_path / "out"
    assert run_lane(policy, out, "full") == 1
    res = result(out)
    assert res["unrun_case_ids"] == [] and "unrun_cases" not in {b["kind"] for b in res["blockers"]}
    assert {c["case_id"] for c in res["cases"] if c["bucket"] == "not_needed"} >= {f"g-{i:03d}" for i in range(4)}
    assert any("once a control failed" in n for n in res["notes"])


def test_a_judgment_waiting_for_budget_room_is_not_sent_once_the_verdict_is_decided(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    """Three in flight, room for two reservations: the third waits for room. The first answer is a
    false pass that decides the verdict and costs nearly its whole reservation, so the waiter waits on
    for the second, slow one; when that settles the lane has stopped and the waiter sends nothing."""
    # Whichever case goes first is the false pass (all three are failed by people).
    fake.script("Answer for f-", reply("pass", completion_tokens=990), slow(0.6, reply("fail")), reply("fail"))
    cases = [case(f"f-{i}", label="fail") for i in range(3)]
    price = {"input_per_mtok": 0.001, "output_per_mtok": 1.0, "currency": "USD"}  # a bound of ~0.001 each
    policy = suite_with(tmp_path, fake, cases, concurrency=3, price=price, max_output_tokens=1000)
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--lane", "pr", "--out", out, "--no-cache", "--max-cost", "0.0026") == 1
    res = result(out)
    assert fake.count() == SENT_CONTROLS + 2  # the waiter never reached the provider
    assert res["state"] == "quality_failed" and res["counts"]["unrun"] == 0
    assert len(res["stopped_early"]["not_needed"]) == 1
    recorded = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(recorded) == SENT_CONTROLS + 2 and res["cost"]["http_attempts"] == fake.count()


def test_a_judgment_held_by_the_pacer_is_not_sent_once_the_verdict_is_decided(tmp_path: Path) -> None:
    """The provider's window (its rate-limit headers) holds seven requests a minute: the controls
    and two cases fit, the third case waits in the pacer for the window to refill (about 9 s). The
    first case answered is a false pass that decides the verdict; the waiting judgment asks the run
    again, and sends nothing."""
    limits = BucketLimits(requests_per_minute=SENT_CONTROLS + 2)
    with FakeOpenAI(limiter=limits) as fake:
        policy = suite_with(tmp_path, fake, [false_pass("c-bad"), case("c-ok"), *general(10)], concurrency=3)
        out = tmp_path / "out"
        assert run_lane(policy, out, "pr") == 1
        sent = fake.count()
    res = result(out)
    assert sent == SENT_CONTROLS + 2 and limits.refused == 0  # the held judgment never reached the provider
    assert res["state"] == "quality_failed" and res["counts"]["unrun"] == 0
    assert res["stopped_early"]["not_needed"] == [f"g-{i:03d}" for i in range(10)]
    recorded = (out / "records.jsonl").read_text().splitlines()
    assert len(recorded) == res["cost"]["http_attempts"] == sent
