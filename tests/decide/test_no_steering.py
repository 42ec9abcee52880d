"""Nobody can steer a product verdict: the run fixes its order and its audit plan when it starts, before
anyone sees a verdict, and every path into the decision keeps them.

Each test is one way a team steered a product at or above its limit to `passed`, driven through the
real CLI (`gate run`, `gate merge`, `gate decide`, `gate review queue`) against the fake provider.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from suite import result
from test_product_audit import WEAK_JUDGE, answers_of, audit_suite, decide, judged_once, label, ledger_named_suite
from test_product_audit import fake as fake  # the fixture
from test_product_lane import (
    GOOD_JUDGE,
    answer,
    product_case,
    product_suite,
    run_app,
    write_calibration,
    write_responses,
)

from gate.cli import main
from gate.review.draw import draw_order

Run = tuple[Path, Path, Path, list[dict[str, Any]]]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """60 answers, 3 judged fail, a 20% limit, run once for the tests that only queue and decide over it."""
    return judged_once(tmp_path_factory.mktemp("judged"))


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


def write_queue_of(run: Path, policy: Path, out: Path, *extra: str) -> int:
    return main(["review", "queue", "--policy", str(policy), "--from", str(run), "--out", str(out), *extra])


def label_queue(ledger: Path, queue_path: Path, verdict: Any) -> None:
    """Two blind reviewers label every item of the queue (`verdict(case_id)`), as the review page appends."""
    from gate.review.ledger import append_line
    from gate.review.queue import read_queue

    queue = read_queue(queue_path)
    for item in queue.items:
        for reviewer in ("ana", "bo"):
            append_line(
                ledger,
                {
                    "kind": "label", "item_id": item.item_id, "case_id": item.case_id,
                    "response_sha256": item.response_sha256, "reviewer": reviewer, "label": verdict(item.case_id),
                    "reason": "read against the evidence", "queue_sha256": queue.sha256,
                    "rubric_version": queue.header.rubric_version, "blind": True,
                },
            )  # fmt: skip


def test_the_queue_of_a_product_run_is_its_plan_and_any_other_queue_is_refused_naming_what_differs(
    tmp_path: Path, judged: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--audit-queue` trusted the queue's draw and `gate review queue --seed S` took any seed: seed 68,
    found after 69 tries, put good answers first and passed a product at its limit; a hand-edited queue
    did the same. The queue is now the run's plan, and decide refuses any other, saying how it differs."""
    policy, _responses, run, _lines = judged
    capsys.readouterr()
    for flag, value in (("--seed", "68"), ("--sample", "10")):
        assert write_queue_of(run, policy, tmp_path / f"q{flag}.jsonl", flag, value) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"{flag}: " in err and "is a product run, whose audit plan" in err and f"fix: drop {flag}" in err
    queue = tmp_path / "queue.jsonl"
    assert write_queue_of(run, policy, queue) == 0
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]
    assert f"the run's seed {plan['seed']}" in " ".join(capsys.readouterr().out.split())

    # A queue drawn with another seed, and one with answers taken out by hand: neither is the run's plan.
    lines = queue.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["queue"]["design"]["seed"] = "68"
    shopped = tmp_path / "shopped.jsonl"
    shopped.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    passing = [json.loads(x) for x in lines[1:] if json.loads(x)["stratum"] == "judged_pass"]
    trimmed = tmp_path / "trimmed.jsonl"
    kept = [x for x in lines[1:] if json.loads(x)["case_id"] != passing[0]["case_id"]]
    trimmed.write_text("\n".join([lines[0], *kept]) + "\n", encoding="utf-8")
    decided = ["decide", "--policy", str(policy), "--records", str(run)]
    for other, says in (
        (shopped, f"it was drawn with seed 68, the run's plan with {plan['seed']}"),
        (trimmed, f"slice critical judged_pass: {len(passing) - 1} answers in the queue, {len(passing)} in the plan"),
        (queue, None),
    ):
        ledger = tmp_path / f"{other.stem}-labels.jsonl"  # people labelled that queue
        label_queue(ledger, other, lambda case_id: "fail" if case_id == "p-000" else "pass")
        capsys.readouterr()
        code = main(
            [*decided, "--audit", str(ledger), "--audit-queue", str(other), "--out", str(tmp_path / other.stem)]
        )
        if says is None:
            assert code == 0  # the run's own plan, labelled: the audit decides
            continue
        err = " ".join(capsys.readouterr().err.split())
        assert code == 2 and f"--audit-queue {other}" in err and "is not this run's audit plan" in err, err
        assert says in err and not (tmp_path / other.stem / "result.json").exists()


def test_the_verdict_reads_exactly_the_plan_so_labelling_until_it_passes_buys_nothing(
    tmp_path: Path, judged: Run
) -> None:
    """Deciding after every label and stopping at the first pass: the sample was the draw's prefix up to
    the last label, so a team labelled until it passed (the first 15 answers the judge passed did, at a
    20% limit). The sample is the plan: its unlabelled answers count against the verdict, a label past it
    is listed and never used, and a hint never asks for labels past it."""
    from gate.review.draw import draw_order

    policy, _responses, run, lines = judged
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]
    fail_n, pass_n = plan["judged_fail"]["sample"], plan["judged_pass"]["sample"]
    assert fail_n == 3 and 0 < pass_n < 57 and plan["items"] == fail_n + pass_n and plan["labels"] == 2 * plan["items"]
    passing = [line["case_id"] for line in lines[3:]]
    order = draw_order(plan["seed"], "critical", "judged_pass", passing)
    assert order[:pass_n] == plan["judged_pass"]["case_ids"]  # the prefix of the seed's draw
    half = pass_n // 2
    by_case = {line["case_id"]: line for line in lines}
    ledger = tmp_path / "ledger.jsonl"
    for case_id in ["p-000", "p-001", "p-002", *order[:half], order[pass_n]]:  # the last one past the plan
        label(ledger, by_case[case_id], "fail" if case_id == "p-000" else "pass")
    out = tmp_path / "stopped"
    assert decide(policy, run, out, "--audit", str(ledger)) == 4
    audit = result(out)["product"]["slices"]["critical"]["audit"]
    assert audit["verdict"] == "inconclusive" and audit["judged_pass"]["audited"] == pass_n
    assert audit["judged_pass"]["open"] == pass_n - half and audit["high"] > 0.2
    open_ = pass_n - half
    said = f"{open_} planned answers of the {plan['items']} items of this run's audit plan have no final label"
    assert said in audit["decide_hint"]
    notes = " ".join(" ".join(result(out)["notes"]).split())
    assert f"1 label of {ledger} is on answers of this run beyond its audit plan ({order[pass_n]})" in notes

    # The whole plan labelled decides it.
    for case_id in order[half:pass_n]:
        label(ledger, by_case[case_id], "pass")
    assert decide(policy, run, tmp_path / "whole", "--audit", str(ledger)) == 0


def test_a_slice_no_audit_of_the_run_can_decide_says_so_before_anyone_labels_and_queues_nothing(
    tmp_path: Path, fake: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A new user's trial: 70 answers a slice, a 5% limit. The default queue was every answer, twice (400
    labels, 2-3 person-hours), and only then did the gate say no audit of 70 answers could decide 5%.
    `gate validate --lane` says so before the run, the run says so before anyone labels (result.json,
    terminal, report), with what would, and the queue holds nothing of that slice; of a zero-tolerance
    slice no audit can decide either, only the answer the judge failed, which people read whatever."""
    from gate.review.queue import read_queue

    slices = {
        "critical": {"max_false_passes": 0, "priority": 0, "max_failure_rate": 0.05},
        "account": {"max_false_passes": 0, "priority": 1, "max_failure_rate": 0.05, "max_failures": 0},
    }
    cases = [product_case(f"p-{i:03d}") for i in range(70)]
    cases += [product_case(f"a-{i}", slice="account") for i in range(10)]
    policy = product_suite(tmp_path / "suite", cases, slices=slices, evaluator={"base_url": fake.base_url})
    write_calibration(policy, {"critical": GOOD_JUDGE, "account": GOOD_JUDGE})
    capsys.readouterr()
    main(["validate", "--policy", str(policy), "--lane", "app"])
    before = " ".join(capsys.readouterr().out.split())
    assert "slice critical: no audit of 70 answers can pass a limit below 4.2%" in before, before
    assert "The audit plan is fixed before the run, from calibration and the slice's size" in before
    assert (
        "a run failing at 1.2% (about 1 of 70 judged fail) would have no audit plan that decides it: even people "
        "labelling all 70 would pass it only" in before
    ), before
    assert "what would: a run of about " in before

    lines = [answer(f"p-{i:03d}", "fail" if i < 2 else "pass") for i in range(70)]  # the judge fails 2 of 70
    lines += [answer(f"a-{i}", "fail" if i == 0 else "pass") for i in range(10)]
    run = tmp_path / "run"
    capsys.readouterr()
    run_app(policy, run, write_responses(tmp_path / "r.jsonl", lines))
    screen = " ".join(capsys.readouterr().out.split())
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]
    said = "no audit of this run's 70 answers can decide its 5% limit: if the failure rate is 1.2% (a quarter of the limit)"
    assert plan["items"] == plan["labels"] == 0 and said in plan["undecidable"], plan["undecidable"]
    assert plan["answers_needed"] > 70 and f"a run of about {plan['answers_needed']:,} answers" in plan["undecidable"]
    assert f"audit plan: nothing to label: {said}" in screen
    assert said in " ".join((run / "report.md").read_text(encoding="utf-8").split())
    account = result(run)["product"]["slices"]["account"]["audit_plan"]
    assert account["undecidable"] and account["judged_fail"]["case_ids"] == ["a-0"]
    assert account["judged_fail"]["rate_sample"] == account["judged_pass"]["sample"] == 0

    assert write_queue_of(run, policy, tmp_path / "queue.jsonl") == 0
    queued = read_queue(tmp_path / "queue.jsonl")
    assert [(i.slice, i.case_id) for i in queued.items] == [("account", "a-0")]
    notes = " ".join(capsys.readouterr().out.split())
    assert f"slice critical: nothing is queued: {said}" in notes
    assert "slice account: only the answers the judge failed are queued (zero tolerance reads each one)" in notes


def test_require_audit_holds_a_slice_no_label_of_its_plan_decides_whatever_the_calibration_says(
    tmp_path: Path, fake: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit protected only those who ran it: without --audit, or with a ledger of another run's
    answers (a note only), calibration decided, and a judge worse on this run than on calibration's
    answers passed a product at its limit. `require_audit: true` (the lane's, or the slice's): no label
    of the plan, no pass."""
    policy = audit_suite(tmp_path / "suite", fake, 0.15)
    write_calibration(policy, {"critical": {"true_fail": 990, "false_pass": 10, "true_pass": 990, "false_fail": 10}})
    lines = answers_of(3)  # the judge fails 3 of 60; people fail every third answer it passed
    responses = write_responses(tmp_path / "r.jsonl", lines)
    policy.write_text(policy.read_text().replace("product: true", "product: true\n    require_audit: true"))
    run = tmp_path / "run"
    assert run_app(policy, run, responses) == 4
    row = result(run)["product"]["slices"]["critical"]
    [b] = result(run)["blockers"]
    # The calibration estimate alone passes the slice (`verdict`); the lane requires the audit.
    assert (b["kind"], b["state"], row["verdict"], row["audit_required"]) == (
        "audit_required",
        "review_required",
        "passed",
        True,
    )
    message = " ".join(b["message"].split())
    assert "slice critical requires people's audit (`require_audit`)" in message
    plan = row["audit_plan"]
    assert f"the plan, {plan['items']} items (all 3 answers the judge failed and " in message
    assert f"{plan['labels']} labels at two reviewers an item" in message
    assert "audit required (the calibration estimate alone passed it)" in " ".join(capsys.readouterr().out.split())

    other = tmp_path / "other.jsonl"  # a ledger of another release's answers: a note, and still no pass
    label(other, {**lines[5], "response": "An older answer for p-005."}, "pass")
    assert decide(policy, run, tmp_path / "older", "--audit", str(other)) == 4
    assert [x["kind"] for x in result(tmp_path / "older")["blockers"]] == ["audit_required"]

    ledger = tmp_path / "ledger.jsonl"
    for i, line in enumerate(lines):
        label(ledger, line, "fail" if i < 3 or i % 3 == 0 else "pass")
    assert decide(policy, run, tmp_path / "audited", "--audit", str(ledger)) in (1, 4)
    audited = result(tmp_path / "audited")
    assert audited["product"]["slices"]["critical"]["decided_by"] == "audit"  # people's labels of the plan decide
    assert "audit_required" not in {x["kind"] for x in audited["blockers"]}

    # On a slice alone: the lane without the key, the slice with it.
    data = policy.read_text().replace("\n    require_audit: true", "")
    policy.write_text(data.replace("max_failure_rate: 0.15", "max_failure_rate: 0.15\n    require_audit: true"))
    assert decide(policy, run, tmp_path / "slice") == 4
    assert [x["kind"] for x in result(tmp_path / "slice")["blockers"]] == ["audit_required"]


def label_through_the_page(queue_path: Path, ledger: Path, verdict: Any) -> list[str]:
    """Two reviewers take what the review page serves them (GET /api/next) and label it (POST /api/label),
    as `gate review serve` runs it; the case ids served, in order."""
    from starlette.testclient import TestClient

    from gate.review.queue import read_queue
    from gate.web.app import CSRF_HEADER, Settings, build_app
    from gate.web.desk import Desk

    queue = read_queue(queue_path)
    items = {item.item_id: item for item in queue.items}
    settings = Settings()
    client = TestClient(build_app(Desk(queue, ledger, 2), settings), base_url="http://127.0.0.1")
    served: list[str] = []
    for reviewer in ("ana", "bo"):
        while (shown := client.get("/api/next", params={"reviewer": reviewer}).json()["item"]) is not None:
            case_id = items[shown["item_id"]].case_id or ""
            served.append(case_id)
            body = {"reviewer": reviewer, "item_id": shown["item_id"], "label": verdict(case_id), "reason": "read it"}
            assert client.post("/api/label", json=body, headers={CSRF_HEADER: settings.csrf_token}).status_code == 200
    return served


def test_labels_of_unchanged_answers_carry_over_and_the_page_serves_only_what_still_needs_a_label(
    tmp_path: Path, fake: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Last release's labels on unchanged answers were read by `gate decide` but refused by `gate review
    serve` with the new queue (another queue's lines: exit 2), so the team labelled everything again. The
    next run's queue carries them over: same item, same rubric, a final label; the page serves the rest."""
    policy = ledger_named_suite(tmp_path / "suite", fake)
    (policy.parent / "labels").mkdir()
    first = answers_of(3)
    assert run_app(policy, tmp_path / "v1", write_responses(tmp_path / "v1.jsonl", first)) == 4
    assert write_queue_of(tmp_path / "v1", policy, tmp_path / "q1.jsonl") == 0
    people = lambda case_id: "fail" if case_id == "p-000" else "pass"  # noqa: E731
    plan1 = result(tmp_path / "v1")["product"]["slices"]["critical"]["audit_plan"]
    labelled = {*plan1["judged_fail"]["case_ids"], *plan1["judged_pass"]["case_ids"]}
    assert len(label_through_the_page(tmp_path / "q1.jsonl", policy.parent / "labels", people)) == 2 * len(labelled)

    # The next release changes five of the answers people labelled; the others are what they already read.
    changed = set(plan1["judged_pass"]["case_ids"][:5])
    second = [
        {**line, "response": f"A new answer for {line['case_id']}."} if line["case_id"] in changed else line
        for line in first
    ]
    run = tmp_path / "v2"
    assert run_app(policy, run, write_responses(tmp_path / "v2.jsonl", second)) == 4
    plan2 = result(run)["product"]["slices"]["critical"]["audit_plan"]
    planned = {*plan2["judged_fail"]["case_ids"], *plan2["judged_pass"]["case_ids"]}
    carried = (planned & labelled) - changed  # drawn again by the new seed, the same answer: labelled already
    capsys.readouterr()
    assert write_queue_of(run, policy, tmp_path / "q2.jsonl") == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"{len(carried)} of its {len(planned)} items already have people's final label" in said, said
    assert f"asks only for the other {len(planned) - len(carried)}" in said and carried
    served = label_through_the_page(tmp_path / "q2.jsonl", policy.parent / "labels", people)
    assert set(served) == planned - carried and len(served) == 2 * len(planned - carried)
    status = ["review", "status", str(tmp_path / "q2.jsonl"), "--ledger", str(policy.parent / "labels")]
    settled = f"slice critical: {len(planned)} items, {len(planned)} with 2 labels or settled"
    assert main(status) == 0 and settled in capsys.readouterr().out
    assert decide(policy, run, tmp_path / "decided", "--audit-queue", str(tmp_path / "q2.jsonl")) == 0
    audit = result(tmp_path / "decided")["product"]["slices"]["critical"]["audit"]
    assert audit["judged_pass"]["open"] == audit["judged_fail"]["open"] == 0 and audit["verdict"] == "passed"


def test_more_labels_never_turn_exceeded_back_into_a_verdict_an_override_may_waive(tmp_path: Path, fake: Any) -> None:
    """More evidence weakened the verdict: the sample was the labelled prefix, so four confirmed failures
    of four labelled gave `exceeded`, and thirteen labels (ten failing) `inconclusive`, which an override
    may waive. The sample is the plan: a label more only settles one of its open answers (confirmed
    failures only accumulate), and a label past it is never read, so `exceeded`, once reached, stays."""
    policy = audit_suite(tmp_path / "suite", fake, 0.05)
    lines = answers_of(20)  # 20 of 60 judged fail, a 5% limit
    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "r.jsonl", lines)) == 4
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]
    assert (plan["aim"], plan["judged_fail"]["sample"], plan["judged_pass"]["sample"]) == ("exceeded", 6, 0)
    failing = [line["case_id"] for line in lines[:20]]
    order = draw_order(plan["seed"], "critical", "judged_fail", failing)  # the plan is its first 6
    people = [1, 0, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0]  # 15 of the 20 truly fail
    by_case = {line["case_id"]: line for line in lines}
    ledger = tmp_path / "ledger.jsonl"
    verdicts = []
    for m in range(1, 21):
        label(ledger, by_case[order[m - 1]], "fail" if people[m - 1] else "pass")
        if m in (4, 5, 6, 20):
            out = tmp_path / f"after-{m}"
            decide(policy, run, out, "--audit", str(ledger))
            verdicts.append(result(out)["product"]["slices"]["critical"]["audit"]["verdict"])
    # It read exceeded at 5 and 12 labels, inconclusive at 13, exceeded again at 20. Now a label more only settles
    # an open answer of the plan (4 failing of 6 once the fifth is in), and the 14 past it change nothing.
    assert verdicts == ["inconclusive", "exceeded", "exceeded", "exceeded"], verdicts


def edit(path: Path, old: str, new: str) -> str:
    """Replace `old` (present) with `new` in the file; its text before."""
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return text


def said(capsys: pytest.CaptureFixture[str]) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_decide_reads_the_audit_plan_the_run_sized_and_refuses_a_calibration_or_limit_changed_after_it(
    tmp_path: Path, judged: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gate decide` sized the plan again from the policy and calibration.json given to it: another Se for
    the slice, another limit or confidence, gave another prefix of the same draw after the run, so a team
    could try calibrations until a prefix passed. The run writes what sized the plan on every answer, and
    decide refuses what would size it otherwise, naming it; an edit the plan does not read still decides."""
    given, _responses, run, _lines = judged
    suite = shutil.copytree(given.parent, tmp_path / "suite")
    policy = suite / given.name
    queue, ledger = tmp_path / "queue.jsonl", tmp_path / "labels.jsonl"
    assert write_queue_of(run, policy, queue) == 0
    label_queue(ledger, queue, lambda case_id: "fail" if case_id == "p-000" else "pass")
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]

    # Edits the plan does not read: another slice, the policy's version, another slice's figures.
    edit(policy, "max_false_passes: 1", "max_false_passes: 2")
    edit(policy, "policy_version: 2026-11-30.1", "policy_version: 2026-12-01.1")
    write_calibration(policy, {"critical": WEAK_JUDGE, "general": GOOD_JUDGE})
    assert decide(policy, run, tmp_path / "unrelated", "--audit", str(ledger)) == 0
    assert result(tmp_path / "unrelated")["product"]["slices"]["critical"]["audit_plan"] == plan

    # A judge that catches more failing answers sizes fewer labels of the answers it passed.
    write_calibration(policy, {"critical": {**WEAK_JUDGE, "true_fail": 95, "false_pass": 1}})
    capsys.readouterr()
    assert decide(policy, run, tmp_path / "better-se", "--audit", str(ledger)) == 2
    err = said(capsys)
    assert "the run sized its audit plan when it started" in err, err
    assert "calibration.json gives slice critical Se 95/96, Sp 60/66" in err
    assert "the run's calibration gave Se 20/25, Sp 60/66 (calibration file sha256 " in err
    assert "fix: decide under the policy and calibration the run was made with" in err and "run the lane again" in err
    assert not (tmp_path / "better-se" / "result.json").exists()
    write_calibration(policy, {"critical": WEAK_JUDGE})

    for old, new, says in (
        ("max_failure_rate: 0.2", "max_failure_rate: 0.3", "`slices.critical.max_failure_rate` is 0.3 in "),
        ("product: true", "product: true\n    confidence: 0.9", "`lanes.app.confidence` is 0.9 in "),
    ):
        before = edit(policy, old, new)
        assert decide(policy, run, tmp_path / "edited", "--audit", str(ledger)) == 2
        err = said(capsys)
        assert says in err and "the run's was " in err and str(policy.name) in err, err
        policy.write_text(before, encoding="utf-8")

    # The records are untrusted: one line claiming another calibration is refused; stripping the sizing from
    # every line decides as records of an older gate do, and says so.
    [sizing] = {json.dumps(r["audit_sizing"], sort_keys=True) for r in product_records(run)}
    assert json.loads(sizing)["judge"] == WEAK_JUDGE and json.loads(sizing)["max_failure_rate"] == 0.2
    lines = [json.loads(x) for x in (run / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    answers = [r for r in lines if r.get("audit_sizing")]
    answers[-1]["audit_sizing"]["judge"] = {**WEAK_JUDGE, "true_fail": 95, "false_pass": 1}
    (tmp_path / "claimed").mkdir()
    (tmp_path / "claimed" / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert decide(policy, tmp_path / "claimed", tmp_path / "out-claimed") == 2
    assert "answers of slice critical carry different audit sizings" in said(capsys)
    for r in answers:
        del r["audit_sizing"]
    (tmp_path / "claimed" / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert decide(policy, tmp_path / "claimed", tmp_path / "out-stripped") in (0, 4)
    notes = " ".join(" ".join(result(tmp_path / "out-stripped")["notes"]).split())
    assert "carry an order seed but not what sized its audit plan" in notes


def test_merge_and_resume_keep_the_audit_sizing_the_run_started_with(
    tmp_path: Path, fake: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gate merge` decides the shards' answers with the calibration it is given now, and `--resume` went on
    under it: the same steering path. Shards keep what sized the plan (a shard's own result.json is its share,
    never read for it); the merge and the resume refuse another Se, and merge with another slice's figures."""
    policy, lines = small_suite(tmp_path / "suite", fake, n=12)
    responses = write_responses(tmp_path / "r.jsonl", lines)
    shards = [tmp_path / "shard-1", tmp_path / "shard-2"]
    for i, shard in enumerate(shards, 1):
        run_app(policy, shard, responses, "--shard", f"{i}/2", "--order-seed", "github:acme/support-bot:77001:1")
    merge = ["merge", "--policy", str(policy), *map(str, shards), "--responses", str(responses), "--out"]
    write_calibration(policy, {"critical": WEAK_JUDGE, "general": WEAK_JUDGE})  # another slice's figures
    assert main([*merge, str(tmp_path / "merged")]) in (0, 4)
    write_calibration(policy, {"critical": {**WEAK_JUDGE, "true_fail": 95, "false_pass": 1}})
    capsys.readouterr()
    assert main([*merge, str(tmp_path / "resized")]) == 2
    err = said(capsys)
    assert "calibration.json gives slice critical Se 95/96, Sp 60/66" in err and "Se 20/25" in err, err
    assert not (tmp_path / "resized" / "result.json").exists()
    write_calibration(policy, {"critical": WEAK_JUDGE})
    before = edit(policy, "max_failure_rate: 0.2", "max_failure_rate: 0.2\n    audit_sized_at: 0.1")
    assert main([*merge, str(tmp_path / "rate-added")]) == 2
    # A policy edited after the shards ran (a rate added) is refused before its plan is even sized.
    assert "the shards ran a policy" in said(capsys)
    assert not (tmp_path / "rate-added" / "result.json").exists()
    policy.write_text(before, encoding="utf-8")

    # A run stopped part-way and resumed under another calibration: refused before anything is paid.
    write_calibration(policy, {"critical": WEAK_JUDGE})
    out = tmp_path / "stopped"
    assert run_app(policy, out, responses, "--max-cost", "0.004") == 3
    write_calibration(policy, {"critical": {**WEAK_JUDGE, "true_fail": 95, "false_pass": 1}})
    capsys.readouterr()
    assert run_app(policy, out, responses, "--resume") == 2
    err = said(capsys)
    assert f"the records in {out} (--resume): the run sized its audit plan when it started" in err, err
    write_calibration(policy, {"critical": WEAK_JUDGE})
    before = edit(policy, "max_failure_rate: 0.2", "max_failure_rate: 0.2\n    audit_sized_at: 0.1")
    assert run_app(policy, out, responses, "--resume") == 2
    assert "the run's was not set (a quarter of the limit)" in said(capsys)
    policy.write_text(before, encoding="utf-8")
    assert run_app(policy, out, responses, "--resume") != 3
    assert len({json.dumps(r["audit_sizing"]) for r in product_records(out)}) == 1


def test_decide_refuses_a_dataset_that_moved_withdrew_or_added_a_product_slices_cases_after_the_run(
    tmp_path: Path, judged: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """A slice's plan is sized from its answers too: moving a case to another slice or withdrawing one between
    the run and the decide changed the slice's n (and K), hence its plan, after the run, and decide went on.
    The run writes the slice's case count and a sha256 of its case ids beside the rest of its sizing, and
    decide refuses a dataset that holds another set, naming the slice, both counts and the cases that moved;
    an edit that leaves every product slice's cases as they were still decides (a changed question is a stale
    record, as before)."""
    given, responses, run, _lines = judged
    suite = shutil.copytree(given.parent, tmp_path / "suite")
    policy, cases = suite / given.name, suite / "cases.jsonl"
    queue, ledger = tmp_path / "queue.jsonl", tmp_path / "labels.jsonl"
    assert write_queue_of(run, policy, queue) == 0
    label_queue(ledger, queue, lambda case_id: "fail" if case_id == "p-000" else "pass")
    [sizing] = {json.dumps(r["audit_sizing"], sort_keys=True) for r in product_records(run)}
    assert json.loads(sizing)["cases"] == 60

    # A case outside the product lane, added: every product slice holds the cases it held.
    original = cases.read_text(encoding="utf-8")
    line = {x["case_id"]: x for x in map(json.loads, original.splitlines())}
    cases.write_text(
        original + json.dumps({**line["ctl-positive"], "case_id": "s-900", "expected_control_role": None}) + "\n"
    )
    assert decide(policy, run, tmp_path / "unrelated", "--audit", str(ledger)) == 0

    # p-005 moved to slice general (given a limit), p-010 withdrawn, p-061 added: each refused, naming the
    # slice, the counts and the case.
    edit(policy, "max_false_passes: 1", "max_false_passes: 1\n    max_failure_rate: 0.2")
    p005, p010 = (json.dumps(line[i]) + "\n" for i in ("p-005", "p-010"))
    for old, new, says in (
        (p005, json.dumps({**line["p-005"], "slice": "general"}) + "\n", "(p-005 moved to slice general)"),
        (p010, "", "(p-010 is no longer in lane app)"),
        (p010, p010 + json.dumps({**line["p-010"], "case_id": "p-061"}) + "\n", "(p-061 was not in it)"),
    ):
        count = "59" if "p-061" not in says else "61"
        cases.write_text(original.replace(old, new, 1), encoding="utf-8")
        capsys.readouterr()
        assert decide(policy, run, tmp_path / "edited", "--audit", str(ledger)) == 2
        err = said(capsys)
        assert f"slice critical has {count} cases in {cases}, the run's had 60 {says}" in err, err
        assert "fix: decide under the policy, calibration and dataset the run was made with" in err, err
        assert not (tmp_path / "edited" / "result.json").exists()

    # A product case's question reworded: the same cases, and its record is stale, as before.
    cases.write_text(original.replace("Question for p-007:", "Question for p-007 (reworded):", 1), encoding="utf-8")
    assert decide(policy, run, tmp_path / "reworded", "--audit", str(ledger), "--responses", str(responses)) == 3
    assert "stale_records" in [b["kind"] for b in result(tmp_path / "reworded")["blockers"]]
    # Without --responses too (the records say what they judged): the question its record judged is not the
    # case's now, so that record is no evidence for it (it decided exit 0 on the reworded case).
    assert decide(policy, run, tmp_path / "reworded-bare", "--audit", str(ledger)) == 3
    [stale] = [b for b in result(tmp_path / "reworded-bare")["blockers"] if b["kind"] == "stale_records"]
    assert stale["case_ids"] == ["p-007"] and "the case's user_input changed since it was judged" in stale["message"]
    cases.write_text(original, encoding="utf-8")

    # Records of a gate that sealed no case set (a sizing without one) decide, and say so.
    lines = [json.loads(x) for x in (run / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    for r in lines:
        for key in ("cases", "case_ids_sha256"):
            (r.get("audit_sizing") or {}).pop(key, None)
    (tmp_path / "older").mkdir()
    (tmp_path / "older" / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert decide(policy, tmp_path / "older", tmp_path / "out-older", "--audit", str(ledger)) == 0
    notes = " ".join(" ".join(result(tmp_path / "out-older")["notes"]).split())
    assert "carry what sized its audit plan but not its slices' cases" in notes, notes


def test_a_slice_planned_for_its_own_rate_is_sized_there_before_the_run_and_held_to_it_after(
    tmp_path: Path, fake: Any, judged: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    """A product that runs near its limit passes less often than 8 times in 10 with a plan sized at a quarter of
    it. `audit_sized_at` sizes the design to pass at the team's own rate instead: `gate validate --lane` shows
    the plan before the run, the run labels that plan, and the rate is fixed with the rest of the plan, so a
    rate chosen after the run (added, changed or dropped) is refused, naming it. A rate at or over the limit,
    or one with no limit, is a policy error naming the field and the fix."""
    given, _responses, default_run, _lines = judged
    suite = shutil.copytree(given.parent, tmp_path / "suite")
    policy = suite / given.name
    served = re.search(r"base_url: (\S+)", policy.read_text(encoding="utf-8"))
    assert served is not None
    original = policy.read_text(encoding="utf-8").replace(served[1], fake.base_url)  # the judged run's server is gone

    for old, new, says in (
        (
            "max_failure_rate: 0.2",
            "max_failure_rate: 0.2\n    audit_sized_at: 0.2",
            "`audit_sized_at` (0.2) must be below",
        ),
        (
            "max_false_passes: 1",
            "max_false_passes: 1\n    audit_sized_at: 0.01",
            "which is not set; fix: add `max_failure_rate`",
        ),
    ):
        policy.write_text(original.replace(old, new, 1), encoding="utf-8")
        capsys.readouterr()
        assert main(["validate", "--policy", str(policy)]) == 2
        err = said(capsys)
        assert str(policy) in err and says in err and "fix:" in err and "Traceback" not in err, err

    # The judged run was sized at a quarter of the limit: a rate added after it is refused.
    policy.write_text(original.replace("max_failure_rate: 0.2", "max_failure_rate: 0.2\n    audit_sized_at: 0.1"))
    capsys.readouterr()
    assert decide(policy, default_run, tmp_path / "added-after") == 2
    err = said(capsys)
    assert "`slices.critical.audit_sized_at` is 0.1 in " in err, err
    assert "the run's was not set (a quarter of the limit)" in err and "run the lane again" in err, err
    assert not (tmp_path / "added-after" / "result.json").exists()

    # Before the run: at 10%, half the limit, no audit of 60 answers passes it 8 times in 10, and it says so.
    main(["validate", "--policy", str(policy), "--lane", "app"])
    before = " ".join(capsys.readouterr().out.split())
    assert "a run failing at 10% (about 10 of 60 judged fail) would have no audit plan that decides it" in before
    assert "what would: a run of about " in before, before
    # ... and the rate that would: sized there, the plan decides.
    highest = re.search(r"or an `audit_sized_at` of ([0-9.]+)% or less", before)
    assert highest is not None and 5 < float(highest[1]) < 10, before
    rate = f"{float(highest[1]) / 100:.4f}"
    policy.write_text(original.replace("max_failure_rate: 0.2", f"max_failure_rate: 0.2\n    audit_sized_at: {rate}"))
    main(["validate", "--policy", str(policy), "--lane", "app"])
    there = " ".join(capsys.readouterr().out.split())
    assert "sized before the run to pass it " in there and f"if the failure rate is {highest[1]}% (the slice's" in there
    policy.write_text(original.replace("max_failure_rate: 0.2", "max_failure_rate: 0.2\n    audit_sized_at: 0.07"))
    main(["validate", "--policy", str(policy), "--lane", "app"])
    before = " ".join(capsys.readouterr().out.split())
    assert "if the failure rate is 7% (the slice's `audit_sized_at`)" in before, before

    run = tmp_path / "run"
    assert run_app(policy, run, write_responses(tmp_path / "r.jsonl", answers_of(3))) == 4
    screen = " ".join(capsys.readouterr().out.split())
    assert (
        "sized before the run to pass it " in screen
        and "if the failure rate is 7% (the slice's `audit_sized_at`)" in screen
    )
    plan = result(run)["product"]["slices"]["critical"]["audit_plan"]
    default = result(default_run)["product"]["slices"]["critical"]["audit_plan"]
    assert plan["aim"] == default["aim"] == "passed" and plan["sized_at"] == 0.07 and default["sized_at"] == 0.05
    assert plan["labels"] > default["labels"] and plan["power"] >= 0.8, (plan, default)
    assert {json.dumps(r["audit_sizing"]["audit_sized_at"]) for r in product_records(run)} == {"0.07"}
    # Decided under the policy it was run with, it decides; with the rate dropped or changed, refused.
    assert decide(policy, run, tmp_path / "same") == 4
    assert result(tmp_path / "same")["product"]["slices"]["critical"]["audit_plan"] == plan
    for text, says in (
        (original, "`slices.critical.audit_sized_at` is not set (a quarter of the limit) in "),
        (original.replace("max_failure_rate: 0.2", "max_failure_rate: 0.2\n    audit_sized_at: 0.15"), "is 0.15 in "),
    ):
        policy.write_text(text, encoding="utf-8")
        capsys.readouterr()
        assert decide(policy, run, tmp_path / "edited") == 2
        err = said(capsys)
        assert says in err and "the run's was 0.07" in err, err
