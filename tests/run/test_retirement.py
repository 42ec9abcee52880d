"""The judge's model retires: `gate run` asks the provider when (`GET /v1/models/{model}`), warns,
blocks a release lane close to the date, and past it says so once instead of an error per case.

The real CLI against the fake provider, whose models endpoint serves a shutdown date counted from
the day the test runs (so no test depends on the calendar); `gate decide` on the records reads the
date they carry and asks nobody."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import case, controls, gate, result, write_suite

from gate.model.policy import today

KEY_ENV = "GATE_TEST_KEY"
SECRET = "sk-test-retirement-SECRET-42"
MODEL = "gpt-4o-mini"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def in_days(n: int) -> str:
    return (today() + dt.timedelta(days=n)).isoformat()


def dated(days: int) -> FakeOpenAI:
    """The fake provider, publishing a shutdown date for the judge's model `days` from today."""
    return FakeOpenAI(models={MODEL: {"shutdown_date": in_days(days)}})


def suite(root: Path, fake: FakeOpenAI, **evaluator: Any) -> Path:
    cases = [
        *controls(),
        case("c-1"),
        case("c-2", label="fail"),
        case("h-1", partition="held_out"),
        case("h-2", partition="held_out", label="fail"),
    ]
    return write_suite(root, cases, evaluator={"base_url": fake.base_url, **evaluator})


def run(policy: Path, out: Path, lane: str = "pr", *extra: str) -> int:
    return gate("run", "--policy", policy, "--lane", lane, "--out", out, "--no-cache", *extra)


def kinds(res: dict[str, Any]) -> list[str]:
    return [b["kind"] for b in res["blockers"]]


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line]


def test_thirty_days_from_the_shutdown_the_run_says_so_where_people_look(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with dated(30) as provider:
        policy, out = suite(tmp_path / "s", provider), tmp_path / "out"
        assert run(policy, out) == 0  # a warning, not a blocker
    screen = capsys.readouterr().out
    said = f"Judge model {MODEL} shuts down on {in_days(30)} (the provider's date): 30 days left"
    assert said in screen and "gate calibrate --candidate-model NEW" in screen
    for name in ("report.md", "summary.md"):
        text = (out / name).read_text()
        assert said in text and "`gate calibrate --candidate-model NEW`" in text, name
    from gate.model.result import load_result
    from gate.report.checkrun import build_check_run

    check = build_check_run(load_result(out / "result.json"), (out / "report.md").read_text())
    assert said in check.output()["summary"]  # the PR's check run says it too
    res = result(out)
    assert res["judge_retirement"] == {
        "model": MODEL,
        "shutdown_date": in_days(30),
        "source": "provider",
        "days_left": 30,
        "notice_days": 60,
        "blocks_within_days": 14,
        "release_lane": False,
    }
    assert (res["lineage"]["judge_shutdown_date"], res["lineage"]["judge_shutdown_source"]) == (in_days(30), "provider")
    assert {(r["judge_shutdown_date"], r["judge_shutdown_source"]) for r in records(out)} == {(in_days(30), "provider")}
    # Asked once, with the judge's key, which no output holds.
    (lookup,) = provider.model_lookups
    assert lookup.method == "GET" and lookup.path == f"/v1/models/{MODEL}"
    assert lookup.api_key_sha256 == hashlib.sha256(SECRET.encode()).hexdigest()
    assert all(SECRET not in p.read_text() for p in out.iterdir() if p.is_file())


def test_seven_days_out_the_release_lane_is_judge_retiring_and_decide_agrees_without_asking(tmp_path: Path) -> None:
    with dated(7) as provider:
        policy = suite(tmp_path / "s", provider)
        assert run(policy, tmp_path / "pr") == 0  # not a release lane: it only warns
        assert run(policy, tmp_path / "release", "release") == 4
        lookups = len(provider.model_lookups)
        decided = tmp_path / "decided"
        assert gate("decide", "--policy", policy, "--records", tmp_path / "release", "--out", decided) == 4
        assert len(provider.model_lookups) == lookups  # decide reads the records' date, asks nobody
    res = result(tmp_path / "release")
    assert kinds(res) == ["judge_retiring"]
    (blocker,) = res["blockers"]
    assert blocker["state"] == "review_required"
    assert f"{MODEL} shuts down on {in_days(7)} (the provider's date, 7 days left)" in blocker["message"]
    assert "gate calibrate --candidate-model NEW" in blocker["message"]
    assert kinds(result(decided)) == ["judge_retiring"]
    assert result(decided)["judge_retirement"] == res["judge_retirement"]


def test_past_the_shutdown_the_run_sends_nothing_and_says_so_in_one_blocker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with dated(-1) as provider:
        policy, out = suite(tmp_path / "s", provider), tmp_path / "out"
        assert run(policy, out) == 3
        assert provider.count() == 0  # not one request for a model that has shut down
    res = result(out)
    assert kinds(res) == ["judge_retired"]
    (blocker,) = res["blockers"]
    assert blocker["state"] == "evaluation_incomplete"
    assert blocker["message"].startswith(
        f"the judge's model {MODEL} shut down on {in_days(-1)} (the provider's date): nothing was sent to it; 7 cases"
    )
    assert sorted(blocker["case_ids"]) == sorted(r["case_id"] for r in records(out))
    assert {r["error_kind"] for r in records(out)} == {"model_retired"}
    assert capsys.readouterr().out.count("shut down on") == 2  # the header and the one blocker, no wall
    assert gate("decide", "--policy", policy, "--records", out, "--out", tmp_path / "d") == 3
    assert result(tmp_path / "d")["blockers"] == res["blockers"]


def test_a_provider_answering_404_model_not_found_stops_the_run_with_one_blocker(tmp_path: Path) -> None:
    with FakeOpenAI(retired={MODEL}) as provider:
        policy, out = suite(tmp_path / "s", provider), tmp_path / "out"
        assert run(policy, out) == 3
        assert 1 <= provider.count() <= 4  # the first answers stop it (max_concurrency 4 were in flight)
    res = result(out)
    assert kinds(res) == ["judge_retired"]  # not control_error, evaluator_errors and unrun_cases besides
    message = res["blockers"][0]["message"]
    assert "404 model_not_found" in message and "7 cases were not judged" in message
    unjudged = {row["case_id"] for row in res["cases"] if row["bucket"] in ("errored", "unrun")}
    assert set(res["blockers"][0]["case_ids"]) == unjudged and len(unjudged) == 7
    report = (out / "report.md").read_text()
    assert report.count("does not exist or you do not have access") == 0  # listed by id, not one error each


@pytest.mark.parametrize("models", [None, {MODEL: {}}], ids=["no endpoint", "no field"])
def test_a_provider_that_publishes_no_date_runs_as_before(tmp_path: Path, models: Any) -> None:
    with FakeOpenAI(models=models) as fake:
        policy, out = suite(tmp_path / "s", fake), tmp_path / "out"
        assert run(policy, out) == 0
        assert len(fake.model_lookups) == 1
    res = result(out)
    assert "judge_retirement" not in res and "judge_shutdown_date" not in res["lineage"]
    assert all("judge_shutdown_date" not in r for r in records(out))
    assert "shuts down" not in (out / "report.md").read_text()


def test_the_providers_date_wins_over_the_pin_and_the_difference_is_a_note(tmp_path: Path) -> None:
    with dated(40) as provider:
        policy = suite(tmp_path / "s", provider, shutdown_date=in_days(5))
        assert run(policy, tmp_path / "out", "release") == 0  # 40 days: the provider's date counts, no block
    res = result(tmp_path / "out")
    assert res["judge_retirement"]["source"] == "provider" and res["judge_retirement"]["days_left"] == 40
    assert any(f"the policy pins evaluator.shutdown_date {in_days(5)}" in n for n in res["notes"])


def test_the_pin_counts_where_the_provider_says_nothing_and_a_dry_run_asks_nobody(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI() as fake:
        policy = suite(tmp_path / "s", fake, shutdown_date=in_days(3))
        assert run(policy, tmp_path / "dry", "release", "--dry-run") == 4
        assert fake.model_lookups == [] and fake.count() == 0
        assert "before any call: review_required (judge_retiring)" in capsys.readouterr().out
        assert run(policy, tmp_path / "out", "release") == 4
    res = result(tmp_path / "out")
    assert kinds(res) == ["judge_retiring"] and res["judge_retirement"]["source"] == "policy"
    assert "(the policy's evaluator.shutdown_date, 3 days left)" in res["blockers"][0]["message"]


def test_validate_lane_asks_the_provider_and_blocks_as_the_run_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with dated(7) as provider:
        policy = suite(tmp_path / "s", provider)
        assert gate("validate", "--policy", policy, "--lane", "release") == 1
        shown = capsys.readouterr().out
        assert "judge_retiring: the judge's model gpt-4o-mini shuts down on" in shown
        assert f"note: judge model: {MODEL} shuts down on {in_days(7)} (the provider's date, 7 days left)" in shown
        assert len(provider.model_lookups) == 1
        monkeypatch.delenv(KEY_ENV)
        assert gate("validate", "--policy", policy, "--lane", "pr") == 0
        assert f"(not asked: no key in ${KEY_ENV})" in capsys.readouterr().out
        assert len(provider.model_lookups) == 1


def test_a_batch_past_the_shutdown_submits_nothing_and_says_so_in_one_blocker(tmp_path: Path) -> None:
    from fake_batches import FakeBatches

    with dated(-2) as provider:
        batches = FakeBatches(provider)
        price = {
            "input_per_mtok": 1.0,
            "output_per_mtok": 2.0,
            "batch": {"input_per_mtok": 0.5, "output_per_mtok": 1.0},
        }
        policy, out = suite(tmp_path / "s", provider, price=price), tmp_path / "out"
        assert run(policy, out, "pr", "--batch", "submit") == 3
        assert provider.count() == 0 and batches.lines_run == 0 and provider.api_calls == []
    res = result(out)
    assert kinds(res) == ["judge_retired"]
    assert res["blockers"][0]["message"].startswith(f"the judge's model {MODEL} shut down on {in_days(-2)}")


def test_a_resume_and_a_collect_whose_lookup_fails_keep_the_date_their_records_carry(tmp_path: Path) -> None:
    """The first run read a date 7 days out; the provider's models endpoint is down when the run is
    resumed or its batch collected: the records' date still blocks the release lane, as `gate decide`
    on the same records says (it passed, exit 0)."""
    from fake_batches import FakeBatches

    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0, "batch": {"input_per_mtok": 0.5, "output_per_mtok": 1.0}}
    with dated(7) as provider:
        FakeBatches(provider)
        policy, live, batch = suite(tmp_path / "s", provider, price=price), tmp_path / "live", tmp_path / "batch"
        assert run(policy, live, "release") == 4
        assert run(policy, batch, "release", "--batch", "submit") == 3
        provider.models = None  # the lookup now finds no endpoint: nobody says
        assert run(policy, live, "release", "--resume") == 4
        codes = [run(policy, batch, "release", "--batch", "collect") for _ in range(4)]
        assert codes[-1] == 4, codes
    for out in (live, batch):
        res = result(out)
        assert kinds(res) == ["judge_retiring"], out.name
        assert res["judge_retirement"]["shutdown_date"] == in_days(7)
        assert gate("decide", "--policy", policy, "--records", out, "--out", tmp_path / f"d-{out.name}") == 4
        assert result(tmp_path / f"d-{out.name}")["judge_retirement"] == res["judge_retirement"]


def test_a_merge_keeps_the_date_one_shard_read_when_another_read_none_announced(tmp_path: Path) -> None:
    """Matrix jobs ask at different moments: shard 1 read a date 7 days out (judge_retiring, exit 4),
    shard 2 read `shutdown_date: null`. The merge blocks as shard 1 did, in either order (it passed)."""
    with dated(7) as provider:
        policy = suite(tmp_path / "s", provider)
        assert run(policy, tmp_path / "s1", "release", "--shard", "1/2") == 4
        provider.models = {MODEL: {"shutdown_date": None}}
        run(policy, tmp_path / "s2", "release", "--shard", "2/2")
    assert "judge_retiring" not in kinds(result(tmp_path / "s2"))
    for order in (("s1", "s2"), ("s2", "s1")):
        merged = tmp_path / f"m-{'-'.join(order)}"
        assert gate("merge", "--policy", policy, *(tmp_path / d for d in order), "--out", merged) == 4, order
        assert kinds(result(merged)) == ["judge_retiring"]
        assert result(merged)["judge_retirement"]["shutdown_date"] == in_days(7)
    assert gate("decide", "--policy", policy, "--records", tmp_path / "m-s2-s1", "--out", tmp_path / "d") == 4


def test_a_run_resumed_after_the_shutdown_keeps_its_verdicts_and_names_the_retirement_for_the_rest(
    tmp_path: Path,
) -> None:
    """The first run, 7 days before the shutdown, could not judge h-2 (the provider answered 500); it is
    resumed after the date: the judged cases keep their verdicts, h-2 is the retirement's, never an
    evaluator error to retry ("--resume judges only what is missing" cannot), and no judged case gets a
    second, refused record."""
    from fake_openai import status

    with dated(7) as provider:
        provider.script("Answer for h-2", status(500), status(500))
        policy, out = suite(tmp_path / "s", provider), tmp_path / "out"
        assert run(policy, out, "release") == 3  # evaluator_errors (and judge_retiring)
        provider.models = {MODEL: {"shutdown_date": in_days(-1)}}
        sent = provider.count()
        assert run(policy, out, "release", "--resume") == 3
        assert provider.count() == sent
    res = result(out)
    assert kinds(res) == ["judge_retired"]
    assert res["blockers"][0]["case_ids"] == ["h-2"] and "1 case was not judged" in res["blockers"][0]["message"]
    assert [r["case_id"] for r in records(out) if r["error_kind"] == "model_retired"] == ["h-2"]
    assert gate("decide", "--policy", policy, "--records", out, "--out", tmp_path / "d") == 3
    assert kinds(result(tmp_path / "d")) == ["judge_retired"]
