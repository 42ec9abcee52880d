"""`owners:` routes each blocker to the owner of its kind's group, in result.json, the report
(the PR comment) and the terminal."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fake_github import FakeGitHub
from suite import case, write_suite

from gate.cli import main
from gate.github.client import ClientOptions, comment_marker
from gate.github.publish import publish_result_dir
from gate.model.errors import PolicyError
from gate.model.escape import markdown
from gate.model.overrides import NOT_WAIVABLE, WAIVABLE
from gate.model.owners import KIND_GROUP, OWNER_GROUPS
from gate.model.policy import load_policy
from gate.model.records import Attempt, Record, write_records
from gate.model.result import load_result
from gate.report.checkrun import build_check_run

OWNERS = {"product": "@app-team", "gold_set": "@labelers", "evaluator": "@ml-eval", "provider": "@platform"}
FAST = ClientOptions(0, 0, timeout=5, read_retries=2, backoff_factor=0, secondary_rate_wait=0)


def rec(case_id: str, human: str, judge: str | None, **kw: object) -> Record:
    return Record(
        case_id=case_id,
        slice="critical",
        partition="sentinel",
        human_label=human,
        judge_label=judge,
        judge_reason=f"judge says {judge}" if judge else None,
        status="ok" if judge else "error",  # type: ignore[arg-type]
        lane="nocontrols",
        attempts=[Attempt(status_code=200 if judge else 500)],
        **kw,  # type: ignore[arg-type]
    )


def test_every_known_blocker_kind_has_a_group() -> None:
    assert set(WAIVABLE) | set(NOT_WAIVABLE) <= set(KIND_GROUP)
    assert set(KIND_GROUP.values()) == set(OWNER_GROUPS)


def test_blockers_are_routed_to_their_owners_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # c-1: people failed it, the judge passed it (false pass -> evaluator: a frozen answer); c-2: evaluator error (provider);
    # c-3: people could not agree (label_conflict -> gold set); the rubric has no owner named.
    cases = [case("c-1", label="fail"), case("c-2"), case("c-3", label="review_required")]
    policy = write_suite(
        tmp_path / "s", cases, owners=OWNERS, metric={"allowed_values": ["pass", "fail", "review_required"]}
    )
    records = [
        rec("c-1", "fail", "pass"),
        rec("c-2", "pass", None, error_kind="timeout", error_message="timed out"),
        rec("c-3", "review_required", "pass"),
    ]
    path = tmp_path / "records.jsonl"
    write_records(path, records)
    out = tmp_path / "out"
    assert (
        main(["decide", "--policy", str(policy), "--records", str(path), "--out", str(out), "--lane", "nocontrols"])
        == 1
    )
    blockers = {b["kind"]: b for b in json.loads((out / "result.json").read_text())["blockers"]}
    routed = {k: (b["owner_group"], b["owner"]) for k, b in blockers.items()}
    assert routed["false_pass_limit"] == ("evaluator", "@ml-eval")
    assert routed["evaluator_errors"] == ("provider", "@platform")
    assert routed["label_conflict"] == ("gold_set", "@labelers")
    # The comment names owners without @-mentioning them (the sticky comment is rewritten on every push).
    report = (out / "report.md").read_text()
    assert f"**`false_pass_limit`** · slice `critical` · owner {markdown('@ml-eval')} (evaluator):" in report
    assert f"owner {markdown('@platform')} (provider)" in report
    assert f"owner {markdown('@labelers')} (gold set)" in report
    terminal = capsys.readouterr().out
    assert "owner @ml-eval (evaluator)" in terminal and "owner @platform (provider)" in terminal

    # The check run too (published through PyGithub to the fake GitHub): its summary's blocker table
    # has an owner column, each annotation names the owner.
    (out / "report.md").write_text(f"{comment_marker('refund-answer', 'pr')}\n# report\n")
    env = {"GITHUB_TOKEN": "ghs_t", "GITHUB_REPOSITORY": "acme/bot", "GITHUB_SHA": "5e" * 20}
    with FakeGitHub(user_status=403) as github:
        publish_result_dir(out, {**env, "GITHUB_API_URL": github.base_url}, options=FAST, stream=io.StringIO())
        (run,) = github.check_runs
    summary = run["output_data"]["summary"]
    assert "| state | kind | slice | owner | cases | message |" in summary
    assert f"| {markdown('@ml-eval (evaluator)')} |" in summary and f"| {markdown('@platform (provider)')} |" in summary
    notes = {a["title"].split(": ", 1)[1].split(" ")[0]: a["message"] for a in run["annotations"]}
    assert "Owner: @ml-eval (evaluator)" in notes["false_pass_limit"]
    assert "Owner: @labelers (gold set)" in notes["label_conflict"]


def test_without_owners_blockers_are_not_routed(tmp_path: Path) -> None:
    policy = write_suite(tmp_path / "s", [case("c-1", label="fail")])
    path = tmp_path / "records.jsonl"
    write_records(path, [rec("c-1", "fail", "pass")])
    out = tmp_path / "out"
    main(["decide", "--policy", str(policy), "--records", str(path), "--out", str(out), "--lane", "nocontrols"])
    blocker = json.loads((out / "result.json").read_text())["blockers"][0]
    assert "owner" not in blocker and "owner" not in (out / "report.md").read_text()
    payload = build_check_run(load_result(out / "result.json"), "r")
    assert "owner" not in payload.summary.lower() and all("Owner" not in a["message"] for a in payload.annotations)


@pytest.mark.parametrize("owners", [{"legal": "@x"}, {"product": "<img src=x>"}])
def test_unknown_groups_and_unsafe_handles_are_policy_errors(tmp_path: Path, owners: dict[str, str]) -> None:
    with pytest.raises(PolicyError):
        load_policy(write_suite(tmp_path, owners=owners))
