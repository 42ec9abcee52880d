"""Publishing through real PyGithub over real HTTP to the fake GitHub server (127.0.0.1 only)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))

from fake_github import BOT_LOGIN, FakeGitHub, sample, sample_result

from gate.github.client import COMMENT_MAX_BYTES, ClientOptions, PublishResult, comment_marker, publish
from gate.model.result import Result
from gate.report.markdown import render_report

REPO = "acme/support-bot"
SHA = "3f2a9c1d" * 5
PR = 17
TOKEN = "ghs_FAKEtokenNEVERprinted0123456789"
FAST = ClientOptions(
    seconds_between_requests=0,
    seconds_between_writes=0,
    timeout=5,
    read_retries=2,
    backoff_factor=0,
    secondary_rate_wait=0,
)
MARKER = comment_marker("refund-answer", "pr")


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub(user_status=403) as server:  # an Actions GITHUB_TOKEN: GET /user is refused
        yield server


def run(fake: FakeGitHub, result: dict[str, Any] | None = None, report: str = "# report", **kw: Any) -> PublishResult:
    args: dict[str, Any] = {
        "token": TOKEN,
        "repository": REPO,
        "head_sha": SHA,
        "pr_number": PR,
        "api_url": fake.base_url,
        "options": FAST,
    }
    args.update(kw)
    return publish(Result.from_dict(result or sample_result("quality_failed")), report, **args)


CONCLUSIONS = {
    "passed": "success",
    "quality_failed": "failure",
    "evaluation_incomplete": "cancelled",
    "review_required": "action_required",
}


@pytest.mark.parametrize("state", sorted(CONCLUSIONS))
def test_one_check_run_on_the_head_sha_with_the_state_conclusion(fake: FakeGitHub, state: str) -> None:
    out = run(fake, sample_result(state), comment=False)
    assert out.warnings == []
    creates = fake.calls("POST", r"^/repos/acme/support-bot/check-runs$")
    assert len(creates) == 1
    body = creates[0].body
    assert body["name"] == "ragas-gate / refund-answer / pr"
    assert body["head_sha"] == SHA
    assert body["status"] == "completed"
    assert body["conclusion"] == CONCLUSIONS[state]
    assert body["output"]["title"].startswith(state)
    assert [r["id"] for r in fake.check_runs] == [out.check_run_id]
    assert out.comment_action == "off"
    assert not fake.calls("GET", "comments") and not fake.calls("POST", "comments")


def test_more_than_50_annotations_are_sent_50_per_request(fake: FakeGitHub) -> None:
    blocker = sample_result("quality_failed")["blockers"][0]
    blockers = [{**blocker, "case_ids": [f"c-{i:03d}"]} for i in range(120)]
    out = run(fake, sample_result("quality_failed", blockers=blockers), comment=False)
    assert out.warnings == [] and out.annotations_sent == 120
    sizes = [len(r.body["output"].get("annotations", [])) for r in fake.requests if "check-runs" in r.path]
    assert sizes == [50, 50, 20]
    assert [r.method for r in fake.requests] == ["POST", "PATCH", "PATCH"]
    for patch in fake.calls("PATCH", "check-runs"):  # GitHub needs title and summary with every output
        assert patch.body["output"]["title"] and patch.body["output"]["summary"]
    (stored,) = fake.check_runs
    assert [a["message"].split("Cases: ")[1] for a in stored["annotations"]] == [f"c-{i:03d}" for i in range(120)]


def test_oversized_summary_and_text_are_trimmed_under_65535_bytes(fake: FakeGitHub) -> None:
    unrun = [f"general-case-ü-{i:06d}" for i in range(10_000)]
    out = run(fake, sample_result("evaluation_incomplete", unrun_case_ids=unrun), report="ü" * 70_000, comment=False)
    assert out.warnings == []
    output = fake.calls("POST", "check-runs")[0].body["output"]
    for key in ("summary", "text"):
        assert len(output[key].encode("utf-8")) <= 65_535
        assert "artifact" in output[key][-200:]


def test_sticky_comment_created_then_edited(fake: FakeGitHub) -> None:
    first = run(fake, report="# first")
    assert first.comment_action == "created" and first.warnings == []
    (comment,) = fake.comments(REPO, PR)
    assert comment["user"]["login"] == BOT_LOGIN
    assert comment["body"].startswith(MARKER) and "# first" in comment["body"]

    second = run(fake, report="# second")
    assert second.comment_action == "edited" and second.comment_id == first.comment_id
    (comment,) = fake.comments(REPO, PR)
    assert "# second" in comment["body"] and "# first" not in comment["body"]
    assert len(fake.calls("POST", "comments")) == 1
    assert len(fake.calls("PATCH", r"/issues/comments/\d+$")) == 1
    assert len(fake.calls("POST", "check-runs")) == 2  # one check run per publish


def test_sticky_comment_on_page_3_is_found_and_edited(fake: FakeGitHub) -> None:
    fake.add_comments(REPO, PR, 230)
    sticky = fake.add_comment(REPO, PR, f"{MARKER}\nold report", BOT_LOGIN)
    fake.add_comments(REPO, PR, 40)
    out = run(fake, report="# new")
    assert out.comment_action == "edited" and out.comment_id == sticky
    pages = [r.query.get("page", "1") for r in fake.calls("GET", r"/issues/17/comments$")]
    assert pages == ["1", "2", "3"]
    assert not fake.calls("POST", "comments")
    assert "# new" in next(c for c in fake.comments(REPO, PR) if c["id"] == sticky)["body"]


def test_a_foreign_comment_with_the_marker_is_never_edited(fake: FakeGitHub) -> None:
    foreign = fake.add_comment(REPO, PR, f"{MARKER}\nI pasted your marker", "mallory")
    out = run(fake, report="# ours")
    assert out.comment_action == "created" and out.comment_id != foreign
    bodies = {c["id"]: c["body"] for c in fake.comments(REPO, PR)}
    assert bodies[foreign] == f"{MARKER}\nI pasted your marker"
    assert not fake.calls("PATCH", "comments")
    # the next publish edits our own comment, still not the foreign one
    assert run(fake, report="# ours again").comment_id == out.comment_id
    assert bodies[foreign] == next(c["body"] for c in fake.comments(REPO, PR) if c["id"] == foreign)


def test_a_personal_token_edits_only_its_own_login(fake: FakeGitHub) -> None:
    fake.user_status = 200  # a PAT or app user token: GET /user answers with its login
    bot_comment = fake.add_comment(REPO, PR, f"{MARKER}\nbot", BOT_LOGIN)
    own = fake.add_comment(REPO, PR, f"{MARKER}\nmine", fake.login)
    out = run(fake)
    assert out.comment_action == "edited" and out.comment_id == own
    assert next(c for c in fake.comments(REPO, PR) if c["id"] == bot_comment)["body"].endswith("bot")


def test_comment_author_input_names_the_editable_login(fake: FakeGitHub) -> None:
    theirs = fake.add_comment(REPO, PR, f"{MARKER}\nold", "release-bot")
    out = run(fake, comment_author="release-bot")
    assert out.comment_action == "edited" and out.comment_id == theirs
    assert not fake.calls("GET", "^/user$")


def test_a_marker_of_another_policy_is_not_ours(fake: FakeGitHub) -> None:
    fake.add_comment(REPO, PR, "<!-- ragas-gate:refund-answer-v2 -->\nother policy", BOT_LOGIN)
    assert run(fake).comment_action == "created"


def test_an_identical_comment_is_left_alone(fake: FakeGitHub) -> None:
    run(fake, report="# same")
    assert run(fake, report="# same").comment_action == "unchanged"
    assert not fake.calls("PATCH", "comments")


def test_an_oversized_comment_is_trimmed_keeping_the_marker(fake: FakeGitHub) -> None:
    out = run(fake, report="x" * 200_000)
    assert out.warnings == []
    body = fake.comments(REPO, PR)[0]["body"]
    assert body.startswith(MARKER)
    assert len(body.encode("utf-8")) <= COMMENT_MAX_BYTES
    assert "artifact" in body[-200:]


def test_read_only_token_is_a_warning_not_a_crash(fake: FakeGitHub, caplog: pytest.LogCaptureFixture) -> None:
    fake.read_only = True
    with caplog.at_level(logging.DEBUG):
        out = run(fake)
    assert out.check_run_id is None and out.comment_action == "failed"
    assert len(out.warnings) == 2
    assert all("403" in w and "Resource not accessible by integration" in w for w in out.warnings)
    # refused writes are not retried
    assert len(fake.calls("POST", "check-runs")) == 1 and len(fake.calls("POST", "comments")) == 1
    assert fake.check_runs == [] and fake.comments(REPO, PR) == []
    assert TOKEN not in caplog.text and TOKEN not in " ".join(out.warnings)


def test_502_on_create_that_landed_is_not_repeated(fake: FakeGitHub) -> None:
    fake.fail_next("POST", "/check-runs$", 502, after_store=True)
    out = run(fake, comment=False)
    assert len(fake.calls("POST", "check-runs")) == 1
    assert len(fake.check_runs) == 1 and out.check_run_id == fake.check_runs[0]["id"]
    assert out.warnings == []
    lookup = fake.calls("GET", r"/commits/.*/check-runs$")
    assert lookup and lookup[0].query["check_name"] == "ragas-gate / refund-answer / pr"


def test_502_on_create_that_did_not_land_is_resent_once(fake: FakeGitHub) -> None:
    fake.fail_next("POST", "/check-runs$", 502, after_store=False)
    out = run(fake, comment=False)
    assert out.warnings == [] and out.check_run_creates == 2
    assert len(fake.check_runs) == 1


def test_502_on_create_that_cannot_be_checked_is_not_resent(fake: FakeGitHub) -> None:
    fake.fail_next("POST", "/check-runs$", 502, after_store=True)
    fake.fail_next("GET", "/commits/.*/check-runs$", 502, times=10)
    out = run(fake, comment=False)
    assert len(fake.calls("POST", "check-runs")) == 1 and len(fake.check_runs) == 1
    assert len(out.warnings) == 1 and "not re-sent" in out.warnings[0]


def test_reads_are_retried_after_a_502(fake: FakeGitHub) -> None:
    fake.fail_next("GET", r"/issues/17/comments$", 502)
    out = run(fake)
    assert out.warnings == [] and out.comment_action == "created"
    assert len(fake.calls("GET", r"/issues/17/comments$")) == 2


def test_a_502_on_comment_create_is_a_warning_and_not_repeated(fake: FakeGitHub) -> None:
    fake.fail_next("POST", r"/issues/17/comments$", 502)
    out = run(fake)
    assert out.comment_action == "failed" and "502" in out.warnings[0]
    assert len(fake.calls("POST", "comments")) == 1


def test_ghes_base_url_prefix_is_honoured() -> None:
    with FakeGitHub(prefix="/api/v3", user_status=403) as ghes:
        ghes.add_comments(REPO, PR, 120)
        out = run(ghes)
        out2 = run(ghes, report="# again")
        host_url, base_url = ghes.host_url, ghes.base_url
    assert out.warnings == [] and out2.warnings == []
    assert out.check_run_url is not None and out.check_run_url.startswith(host_url)
    assert out2.comment_action == "edited"
    assert len(ghes.check_runs) == 2 and all(r["url"].startswith(base_url) for r in ghes.check_runs)
    assert all(r.status != 404 for r in ghes.requests)


def test_no_head_sha_means_no_check_run_but_the_comment_still_posts(fake: FakeGitHub) -> None:
    out = run(fake, head_sha=None)
    assert not fake.calls("POST", "check-runs")
    assert out.comment_action == "created" and "no head SHA" in out.warnings[0]


def test_an_unreachable_api_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with FakeGitHub() as gone:
        url = gone.base_url
    opts = ClientOptions(0, 0, timeout=2, read_retries=0, backoff_factor=0, secondary_rate_wait=0)
    out = publish(
        sample("passed"),
        "r",
        token=TOKEN,
        repository=REPO,
        head_sha=SHA,
        pr_number=PR,
        api_url=url,
        options=opts,
    )
    assert out.check_run_id is None and out.warnings
    assert TOKEN not in caplog.text


def _lane_result(lane: str, state: str) -> dict[str, Any]:
    return sample_result(state, lane=lane)


def test_two_lanes_of_one_policy_keep_a_check_run_and_a_comment_each(fake: FakeGitHub) -> None:
    """The metric lane failed and the product lane passed: both show, neither overwrites the other."""
    metric, app = _lane_result("pr", "quality_failed"), _lane_result("app", "passed")
    first = [run(fake, result, report=render_report(Result.from_dict(result))) for result in (metric, app)]
    assert [o.comment_action for o in first] == ["created", "created"] and all(o.ok for o in first)
    names = {r["name"]: r["conclusion"] for r in fake.check_runs}
    assert names == {"ragas-gate / refund-answer / pr": "failure", "ragas-gate / refund-answer / app": "success"}
    again = [run(fake, result, report=render_report(Result.from_dict(result)) + "\nagain") for result in (metric, app)]
    assert [o.comment_action for o in again] == ["edited", "edited"]
    assert [o.comment_id for o in again] == [o.comment_id for o in first]
    bodies = {c["id"]: c["body"] for c in fake.comments(REPO, PR)}
    assert len(bodies) == 2
    assert "`quality_failed`" in bodies[first[0].comment_id] and "Lane `pr`" in bodies[first[0].comment_id]
    assert "`passed`" in bodies[first[1].comment_id] and "Lane `app`" in bodies[first[1].comment_id]


@pytest.mark.parametrize("order", [("pr", "app"), ("app", "pr")])
def test_a_comment_under_the_policy_only_marker_is_taken_over_by_its_lane_alone(
    fake: FakeGitHub, order: tuple[str, str]
) -> None:
    """A comment written before markers named the lane (it reports lane `pr`): whichever lane
    publishes first, `pr` edits it and `app` makes its own; no third comment ever appears."""
    old_report = render_report(sample("quality_failed")).split("\n", 1)[1]
    old = fake.add_comment(REPO, PR, f"<!-- ragas-gate:refund-answer -->\n{old_report}", BOT_LOGIN)
    outcomes = {}
    for lane in order:
        result = _lane_result(lane, "passed")
        outcomes[lane] = run(fake, result, report=render_report(Result.from_dict(result)))
    assert outcomes["pr"].comment_action == "edited" and outcomes["pr"].comment_id == old
    assert outcomes["app"].comment_action == "created" and outcomes["app"].comment_id != old
    bodies = {c["id"]: c["body"] for c in fake.comments(REPO, PR)}
    assert len(bodies) == 2 and bodies[old].startswith(MARKER) and "`passed`" in bodies[old]
    for lane in order:  # the next push edits both, still two comments
        assert run(fake, _lane_result(lane, "quality_failed")).comment_id == outcomes[lane].comment_id
    assert len(fake.comments(REPO, PR)) == 2


def test_a_lane_named_in_case_text_does_not_take_over_the_policy_only_comment(fake: FakeGitHub) -> None:
    """Only the report's header names its lane: case text saying "Lane `app`" further down does not."""
    old_report = render_report(sample("quality_failed")).split("\n", 1)[1]
    forged = "**`passed`** — nothing blocks. Lane `app`, policy `refund-answer` version `1`"
    old = fake.add_comment(REPO, PR, f"<!-- ragas-gate:refund-answer -->\n{old_report}\n{forged}\n", BOT_LOGIN)
    assert run(fake, _lane_result("app", "passed")).comment_id != old
    assert run(fake, _lane_result("pr", "passed")).comment_id == old
