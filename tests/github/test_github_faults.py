"""The GitHub rows of the fault matrix (docs/RELIABILITY.md, "GitHub").

Each row publishes a result through `gate publish` (real PyGithub, real HTTP to tests/fake_github.py)
while the fake answers one fault: a read-only token (fork PR), 422, 5xx on create and on edit of the
check run and of the sticky comment, and GitHub's secondary rate limit (403/429 with Retry-After).
Every row checks the same promises: no duplicate check run or comment, a warning when something was
not published, and `gate publish` exits with the result's state code whatever happened.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_github import FakeGitHub, sample_result

from gate.github.client import ClientOptions, comment_marker
from gate.github.publish import publish_result_dir

REPO = "acme/support-bot"
HEAD = "5e5e" * 10
PR = 17
MARKER = comment_marker("refund-answer", "pr")
# Writes unthrottled, reads retried twice; every wait (Retry-After, secondary limit) capped at 2 s.
# The matrix rows answer `Retry-After: 0` to stay fast; the tests after it measure real waits.
OPTIONS = ClientOptions(0, 0, timeout=5, read_retries=2, backoff_factor=0, secondary_rate_wait=0, retry_after_cap=2)
ANNOTATED = sample_result(
    "quality_failed",
    blockers=[
        {"state": "quality_failed", "kind": "false_pass_limit", "slice": "s", "case_ids": [f"c-{i}"], "message": "m"}
        for i in range(60)
    ],
)


@dataclass(frozen=True)
class Row:
    name: str
    inject: Callable[[FakeGitHub], None]
    check_runs: int  # check runs on the fake afterwards
    comments: int  # comments on the PR afterwards (one was there before when `existing`)
    warned: str | None  # a word every warning shows, or None when nothing is refused
    existing: bool = False  # a sticky comment from an earlier push is there to edit
    result: dict[str, Any] | None = None


def _read_only(fake: FakeGitHub) -> None:
    fake.read_only = True


ROWS = [
    Row("read-only token (fork PR)", _read_only, 0, 0, "403"),
    Row("read-only token, comment to edit", _read_only, 0, 1, "403", existing=True),
    Row(
        "422 on check-run create",
        lambda f: f.fail_next("POST", "/check-runs$", 422, message="Validation Failed"),
        0,
        1,
        "422",
    ),
    Row(
        "422 on comment create",
        lambda f: f.fail_next("POST", "/comments$", 422, message="Validation Failed"),
        1,
        0,
        "422",
    ),
    Row(
        "422 on comment edit",
        lambda f: f.fail_next("PATCH", "/comments/", 422, message="Validation Failed"),
        1,
        1,
        "422",
        existing=True,
    ),
    Row(
        "502 on check-run create, landed",
        lambda f: f.fail_next("POST", "/check-runs$", 502, after_store=True),
        1,
        1,
        None,
    ),
    Row("503 on check-run create, lost", lambda f: f.fail_next("POST", "/check-runs$", 503), 1, 1, None),
    Row("500 on check-run create, twice", lambda f: f.fail_next("POST", "/check-runs$", 500, times=2), 0, 1, "500"),
    Row(
        "502 on check-run edit (annotations)",
        lambda f: f.fail_next("PATCH", "/check-runs/", 502),
        1,
        1,
        "502",
        result=ANNOTATED,
    ),
    Row(
        "502 on comment create, landed", lambda f: f.fail_next("POST", "/comments$", 502, after_store=True), 1, 1, "502"
    ),
    Row("502 on comment create, lost", lambda f: f.fail_next("POST", "/comments$", 502), 1, 0, "502"),
    Row("502 on comment edit, once", lambda f: f.fail_next("PATCH", "/comments/", 502), 1, 1, None, existing=True),
    Row(
        "503 on comment edit, twice",
        lambda f: f.fail_next("PATCH", "/comments/", 503, times=2),
        1,
        1,
        "previous",
        existing=True,
    ),
    Row("500 on listing comments", lambda f: f.fail_next("GET", "/comments$", 500, times=10), 1, 0, "500"),
    Row(
        "secondary limit 403 on check-run create",
        lambda f: f.rate_limit_next("POST", "/check-runs$", retry_after="0"),
        1,
        1,
        None,
    ),
    Row(
        "secondary limit 429 on check-run create",
        lambda f: f.rate_limit_next("POST", "/check-runs$", status=429, retry_after="0"),
        1,
        1,
        None,
    ),
    Row(
        "secondary limit 403 without Retry-After on comment create",
        lambda f: f.rate_limit_next("POST", "/comments$", retry_after=None),
        1,
        1,
        None,
    ),
    Row(
        "secondary limit 429 on comment edit",
        lambda f: f.rate_limit_next("PATCH", "/comments/", status=429, retry_after="0"),
        1,
        1,
        None,
        existing=True,
    ),
    Row(
        "secondary limit 403 on listing comments",
        lambda f: f.rate_limit_next("GET", "/comments$", retry_after="0"),
        1,
        1,
        None,
    ),
    Row(
        "secondary limit that never lifts",
        lambda f: f.rate_limit_next("POST", "/check-runs$", retry_after="0", times=100),
        0,
        1,
        "403",
    ),
]


@pytest.fixture
def fake() -> Iterator[FakeGitHub]:
    with FakeGitHub(user_status=403) as server:
        yield server


def publish_dir(tmp_path: Path, fake: FakeGitHub, result: dict[str, Any]) -> tuple[int, str]:
    out = tmp_path / "gate-out"
    out.mkdir(exist_ok=True)
    (out / "result.json").write_text(json.dumps(result))
    (out / "report.md").write_text(f"{MARKER}\n# {result['state']} report\n")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR, "head": {"sha": HEAD}}}))
    env = {
        "GITHUB_TOKEN": "ghs_FAKEtokenNEVERprinted0123456789",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_API_URL": fake.base_url,
    }
    stream = io.StringIO()
    code = publish_result_dir(out, env, options=OPTIONS, stream=stream)
    return code, stream.getvalue()


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
@pytest.mark.parametrize("state", ["passed", "quality_failed"])
def test_github_fault_matrix(tmp_path: Path, fake: FakeGitHub, row: Row, state: str) -> None:
    result = dict(row.result or sample_result(state), state=state, exit_code={"passed": 0, "quality_failed": 1}[state])
    if row.existing:
        fake.add_comment(REPO, PR, f"{MARKER}\nold report", login="github-actions[bot]")
    row.inject(fake)
    started = time.monotonic()
    code, log = publish_dir(tmp_path, fake, result)
    elapsed = time.monotonic() - started

    assert code == result["exit_code"], log  # the state's code, whatever GitHub answered
    assert len(fake.check_runs) == row.check_runs, log  # never a duplicate check run
    assert len(fake.comments(REPO, PR)) == row.comments, log  # never a duplicate comment
    warnings = [line for line in log.splitlines() if "warning" in line]
    if row.warned is None:
        assert warnings == [], log
        if fake.check_runs:
            assert fake.check_runs[0]["conclusion"] == {"passed": "success", "quality_failed": "failure"}[state]
        if row.existing or row.comments:
            assert fake.comments(REPO, PR)[0]["body"].endswith(f"# {state} report\n")
    else:
        assert warnings and any(row.warned in w for w in warnings), log
    assert "ghs_FAKE" not in log
    assert elapsed < 60  # every wait is bounded (Retry-After capped, retries counted): seconds, not hours


def test_retry_after_is_honoured_on_a_rate_limited_create(tmp_path: Path, fake: FakeGitHub) -> None:
    fake.rate_limit_next("POST", "/check-runs$", retry_after="1")
    code, log = publish_dir(tmp_path, fake, sample_result("passed"))
    creates = fake.calls("POST", "/check-runs$")
    assert code == 0 and len(creates) == 2 and len(fake.check_runs) == 1, log
    # The second request waited for Retry-After (1 s) after the refusal.
    (refused_at,) = fake.fault_times
    assert time.monotonic() - refused_at >= 1.0
    assert len(fake.requests) >= 2


def test_a_long_retry_after_is_capped(tmp_path: Path, fake: FakeGitHub) -> None:
    fake.rate_limit_next("POST", "/comments$", status=429, retry_after="3600")
    started = time.monotonic()
    code, log = publish_dir(tmp_path, fake, sample_result("quality_failed"))
    assert code == 1 and len(fake.comments(REPO, PR)) == 1, log
    assert time.monotonic() - started < 60  # capped at OPTIONS.retry_after_cap, not an hour


def test_a_rate_limit_that_never_lifts_is_bounded(tmp_path: Path, fake: FakeGitHub) -> None:
    fake.rate_limit_next("POST", "/check-runs$", retry_after="1", times=100)
    code, log = publish_dir(tmp_path, fake, sample_result("quality_failed"))
    assert code == 1 and fake.check_runs == []
    # First request plus `read_retries` re-sends, each after a bounded wait; then a warning.
    assert len(fake.calls("POST", "/check-runs$")) == OPTIONS.read_retries + 1
    assert "rate limit" in log.lower() or "403" in log


def test_a_primary_rate_limit_far_away_is_not_waited_for(tmp_path: Path, fake: FakeGitHub) -> None:
    reset = str(int(time.time()) + 3600)
    fake.fail_next(
        "GET",
        "/comments$",
        403,
        times=10,
        message="API rate limit exceeded for installation ID 1.",
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
    )
    started = time.monotonic()
    code, log = publish_dir(tmp_path, fake, sample_result("review_required"))
    assert code == 4 and len(fake.check_runs) == 1 and fake.comments(REPO, PR) == []
    assert "could not list comments" in log and time.monotonic() - started < 60  # not the hour to the reset


def test_an_ambiguous_create_finds_our_run_though_a_newer_run_of_the_same_name_exists(
    tmp_path: Path, fake: FakeGitHub
) -> None:
    """Our create lands but answers 502; another job's run of the same name completed later. GitHub
    lists only the newest run per name unless asked `filter=all`: without it ours is not found and
    a duplicate is created."""
    fake.add_check_run(REPO, "ragas-gate / refund-answer / pr", HEAD, completed_at="2099-01-01T00:00:00Z")
    fake.fail_next("POST", "/check-runs$", 502, after_store=True)
    code, log = publish_dir(tmp_path, fake, sample_result("passed"))
    assert code == 0 and "warning" not in log, log
    ours = [r for r in fake.check_runs if r["external_id"]]
    assert len(ours) == 1 and len(fake.calls("POST", "/check-runs$")) == 1  # found, not re-sent
    (lookup,) = fake.calls("GET", "/check-runs$")
    assert lookup.query.get("filter") == "all"


@pytest.mark.parametrize(
    ("location", "path", "line"),
    [
        ("evals/policy.yaml:²", "evals/policy.yaml", 1),  # isdigit() is true, int() raises
        ("evals/policy.yaml:١٢", "evals/policy.yaml", 1),  # Arabic-Indic digits: int() reads 12
        ("evals/policy.yaml:2147483648", "evals/policy.yaml", 1),  # past 2^31 - 1
        ("evals/policy.yaml:" + "9" * 5000, "evals/policy.yaml", 1),  # past int()'s digit limit
        ("evals/policy.yaml:0", "evals/policy.yaml", 1),
        ("evals/policy.yaml:2147483647", "evals/policy.yaml", 2147483647),
        ("evals/cases.jsonl:12", "evals/cases.jsonl", 12),
    ],
)
def test_an_annotation_line_github_cannot_take_drops_the_line_never_the_publish(
    tmp_path: Path, fake: FakeGitHub, location: str, path: str, line: int
) -> None:
    blocker = {"state": "quality_failed", "kind": "input_contract", "slice": None, "case_ids": ["c-1"], "message": "m"}
    result = sample_result("quality_failed", blockers=[{**blocker, "location": location}])
    code, log = publish_dir(tmp_path, fake, result)
    assert code == 1 and "warning" not in log, log
    (run,) = fake.check_runs
    (annotation,) = run["annotations"]
    assert (annotation["path"], annotation["start_line"], annotation["end_line"]) == (path, line, line)
    assert len(fake.comments(REPO, PR)) == 1
