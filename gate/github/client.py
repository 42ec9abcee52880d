"""Publish a gate result to GitHub with PyGithub: one check run and one sticky PR comment.

Rules:
- one check run per publish, named `ragas-gate / <policy_id> / <lane>`, on the head SHA, with the
  conclusion of the result's state; annotations at most 50 per request (the rest appended by PATCH);
- one sticky PR comment per policy and lane, found by the hidden marker
  `<!-- ragas-gate:<policy_id>:<lane> -->` as its first line (never anywhere else, where case text
  could forge it), on any page of the PR's comments, and edited only when its author is the token's
  own login (`GET /user`), or `github-actions[bot]` when `GET /user` answers 403 (the workflow's
  GITHUB_TOKEN), or the login the caller names (`comment_author`); otherwise a new comment is
  created. A comment written under the older policy-only marker `<!-- ragas-gate:<policy_id> -->`
  is taken over by the lane its report names (its header line), and by no other: of two lanes
  publishing at once, exactly that one edits it, and the other creates its own;
- a refused or failed write (a fork PR's read-only token answers 403) is a warning: `publish` never
  raises and never changes the result's state;
- retries: reads (GET/HEAD) are retried on 5xx and rate limits; writes never are. A create that
  fails ambiguously (5xx, timeout: it may have landed) is checked by listing the head SHA's check
  runs (`filter=all`) for our one-off `external_id`; it is re-sent once only when it verifiably did
  not land;
- the token is never logged: every warning is scrubbed of it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import requests
from github import Auth, Github, GithubException, GithubRetry
from github.CheckRun import CheckRun
from github.Repository import Repository

from gate.model.escape import visible
from gate.model.result import Result
from gate.model.textfit import head_bytes
from gate.report.checkrun import CheckRunPayload, annotation_batches, build_check_run
from gate.report.markdown import marker as comment_marker
from gate.report.markdown import policy_marker, reports_lane

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
ACTIONS_BOT_LOGIN = "github-actions[bot]"
# GitHub refuses comment bodies over 65,536 characters; stay under it counted in bytes as well.
COMMENT_MAX_BYTES = 65_000
COMMENT_TRIM_HINT = "the full report is in the workflow run's `ragas-gate` artifact (report.md, result.json)"


def carries_marker(body: str | None, marker: str) -> bool:
    """Whether a comment is the sticky one: the marker must be its whole first line.

    Case text could carry a forged marker somewhere in a report: only the fixed place,
    which the gate alone writes, counts.
    """
    return (body or "").split("\n", 1)[0].rstrip("\r") == marker


@dataclass(frozen=True)
class ClientOptions:
    """Throttling and retry settings. The defaults are PyGithub's polite ones; tests pass zeros."""

    seconds_between_requests: float = 0.25
    seconds_between_writes: float = 1.0
    timeout: int = 30
    read_retries: int = 3
    backoff_factor: float = 1.0
    secondary_rate_wait: float = 60.0
    # The longest single wait GitHub can ask for (Retry-After, a secondary or primary rate limit):
    # a longer one is cut to this (Retry-After) or not waited for at all (a warning instead).
    retry_after_cap: float = 60.0


@dataclass
class PublishResult:
    check_run_id: int | None = None
    check_run_url: str | None = None
    check_run_creates: int = 0  # create requests sent (2 only after a verified-absent failure)
    annotations_sent: int = 0
    comment_id: int | None = None
    comment_action: str = "none"  # created | edited | unchanged | off | skipped | failed | none
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.warnings


class _Scrubber:
    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = [s for s in secrets if s]

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


class BoundedRetry(GithubRetry):
    """PyGithub's retry, with every wait bounded and rate-limited writes re-sent.

    - Reads (GET/HEAD) are retried on 5xx, 429 and rate-limit 403s.
    - Writes (POST/PATCH) are re-sent only after a rate-limit refusal (403 or 429): GitHub did not
      apply a rate-limited request, so re-sending cannot duplicate it. A plain 403 (a read-only
      token) is recognised by `GithubRetry.increment` from its message and raised at once. A 5xx on
      a write is never re-sent here: it may hide a created object (see `_Publisher.check_run`).
    - A Retry-After longer than `retry_after_cap` is cut to it; a rate-limit reset further away
      than that is not waited for (PyGithub raises, and publishing warns).
    """

    WRITE_METHODS = frozenset({"POST", "PATCH"})
    RATE_LIMIT_STATUSES = frozenset({403, 429})

    def __init__(self, retry_after_cap: float = 60.0, **kwargs: Any) -> None:
        self.retry_after_cap = retry_after_cap
        super().__init__(**kwargs)

    def new(self, **kw: Any) -> BoundedRetry:
        retry = super().new(**kw)
        retry.retry_after_cap = self.retry_after_cap
        return retry

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        if method.upper() in self.WRITE_METHODS and status_code in self.RATE_LIMIT_STATUSES:
            return bool(self.total)
        return bool(super().is_retry(method, status_code, has_retry_after))

    def get_retry_after(self, response: Any) -> float | None:
        value = super().get_retry_after(response)
        return None if value is None else min(value, self.retry_after_cap)


def make_retry(options: ClientOptions) -> GithubRetry:
    """Retry reads, and writes refused by a rate limit; never a write that failed otherwise.
    (Connection failures before a request is sent are retried by urllib3: nothing reached GitHub.)"""
    return BoundedRetry(
        retry_after_cap=options.retry_after_cap,
        total=options.read_retries,
        backoff_factor=options.backoff_factor,
        allowed_methods=frozenset({"GET", "HEAD"}),
        status_forcelist=[429, 500, 502, 503, 504],
        raise_on_status=False,
        secondary_rate_wait=min(options.secondary_rate_wait, options.retry_after_cap),
        max_rate_limit_wait=options.retry_after_cap,
    )


def make_client(token: str, api_url: str = DEFAULT_API_URL, options: ClientOptions | None = None) -> Github:
    """A PyGithub client for `api_url` (GitHub Enterprise: `https://HOST/api/v3`)."""
    options = options or ClientOptions()
    # PyGithub logs at INFO to its own stderr handler, e.g. "Request GET /user failed with 403" on
    # every run with the workflow token (an expected answer); our warnings say what matters.
    logging.getLogger("github").setLevel(logging.WARNING)
    return Github(
        auth=Auth.Token(token),
        base_url=(api_url or DEFAULT_API_URL).rstrip("/"),
        lazy=True,
        per_page=100,
        timeout=options.timeout,
        retry=make_retry(options),
        seconds_between_requests=options.seconds_between_requests,
        seconds_between_writes=options.seconds_between_writes,
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, GithubException):
        message = exc.data.get("message") if isinstance(exc.data, dict) else None
        # GitHub's answer is untrusted text on its way to a log line.
        return f"HTTP {exc.status}" + (f": {visible(message, 300)}" if message else "")
    return f"{type(exc).__name__}: {visible(exc, 300)}"


def _ambiguous(exc: BaseException) -> bool:
    """Whether a failed write may nevertheless have been applied server-side."""
    if isinstance(exc, GithubException):
        return exc.status >= 500
    return isinstance(exc, requests.RequestException)


class _Publisher:
    def __init__(self, gh: Github, repository: str, out: PublishResult, scrub: _Scrubber) -> None:
        self.gh = gh
        self.repository = repository
        self.out = out
        self.scrub = scrub
        self._repo: Repository | None = None

    @property
    def repo(self) -> Repository:
        if self._repo is None:
            self._repo = self.gh.get_repo(self.repository)
        return self._repo

    def warn(self, message: str) -> None:
        message = self.scrub(message)
        log.warning("%s", message)
        self.out.warnings.append(message)

    # ---- check run -------------------------------------------------------------------------
    def check_run(self, head_sha: str, payload: CheckRunPayload) -> None:
        batches = list(annotation_batches(payload.annotations))
        first = batches[0] if batches else []
        external_id = f"ragas-gate-{uuid.uuid4().hex}"
        run: CheckRun | None = None
        for attempt in (1, 2):
            try:
                self.out.check_run_creates += 1
                run = self.repo.create_check_run(
                    name=payload.name,
                    head_sha=head_sha,
                    external_id=external_id,
                    status="completed",
                    conclusion=payload.conclusion,
                    completed_at=datetime.now(UTC),
                    output=payload.output(first),
                )
                break
            except Exception as exc:  # any failure is a warning, never a crash
                if not _ambiguous(exc):
                    self.warn(f"check run '{payload.name}' not created ({_describe(exc)}).")
                    return
                try:
                    run = self._find_check_run(head_sha, payload.name, external_id)
                except Exception as lookup_exc:
                    self.warn(
                        f"check run '{payload.name}': create failed ({_describe(exc)}) and whether it "
                        f"landed could not be checked ({_describe(lookup_exc)}); not re-sent, to avoid "
                        "a duplicate."
                    )
                    return
                if run is not None:
                    log.info("check run create answered %s but the run exists; using it", _describe(exc))
                    break
                if attempt == 2:
                    self.warn(f"check run '{payload.name}' not created after 2 attempts ({_describe(exc)}).")
                    return
                log.info("check run create failed (%s) and did not land; re-sending once", _describe(exc))
        assert run is not None
        self.out.check_run_id = run.id
        self.out.check_run_url = run.html_url
        self.out.annotations_sent = len(first)
        for batch in batches[1:]:
            try:
                run.edit(output=payload.output(batch))
            except Exception as exc:
                self.warn(
                    f"check run '{payload.name}': {self.out.annotations_sent} of {len(payload.annotations)} "
                    f"annotations sent; appending more failed ({_describe(exc)})."
                )
                return
            self.out.annotations_sent += len(batch)

    def _find_check_run(self, head_sha: str, name: str, external_id: str) -> CheckRun | None:
        # `filter=all`: GitHub's default (`latest`) lists only the newest run of each name, so a
        # run of the same name completed after ours (a re-run, another workflow) would hide it.
        for run in self.repo.get_commit(head_sha).get_check_runs(check_name=name, filter="all"):
            if run.external_id == external_id:
                return run
        return None

    # ---- sticky comment --------------------------------------------------------------------
    def editable_authors(self, comment_author: str | None) -> set[str]:
        if comment_author:
            return {comment_author}
        try:
            return {self.gh.get_user().login}
        except GithubException as exc:
            if exc.status == 403:  # an installation token (the workflow's GITHUB_TOKEN)
                return {ACTIONS_BOT_LOGIN}
            self.warn(f"could not tell the token's own login (GET /user: {_describe(exc)}).")
            return set()

    def sticky_comment(self, pr_number: int, policy_id: str, lane: str, body: str, comment_author: str | None) -> None:
        authors = self.editable_authors(comment_author)
        issue = self.repo.get_issue(pr_number)
        marker, older = comment_marker(policy_id, lane), policy_marker(policy_id)
        existing = inherited = None
        try:
            for comment in issue.get_comments():
                user = comment.user
                if user is None or user.login not in authors:
                    continue
                if carries_marker(comment.body, marker):
                    existing = comment
                    break
                older_lane = inherited is None and carries_marker(comment.body, older)
                if older_lane and reports_lane(comment.body or "", policy_id, lane):
                    inherited = comment  # written before markers named the lane, reporting this lane
            existing = existing or inherited
        except Exception as exc:
            self.out.comment_action = "failed"
            self.warn(
                f"PR #{pr_number}: could not list comments ({_describe(exc)}); no comment posted, to avoid a duplicate."
            )
            return
        try:
            if existing is None:
                created = issue.create_comment(body)
                self.out.comment_id = created.id
                self.out.comment_action = "created"
            elif existing.body == body:
                self.out.comment_id = existing.id
                self.out.comment_action = "unchanged"
            else:
                self._edit(existing, body)
                self.out.comment_id = existing.id
                self.out.comment_action = "edited"
        except Exception as exc:
            self.out.comment_action = "failed"
            if existing is None:
                self.warn(f"PR #{pr_number}: sticky comment not created ({_describe(exc)}).")
            else:
                self.warn(
                    f"PR #{pr_number}: sticky comment not edited ({_describe(exc)}); it still shows the previous "
                    "result: read this run's summary instead."
                )

    @staticmethod
    def _edit(comment: Any, body: str) -> None:
        """Edit the comment, once more after an ambiguous failure: an edit to the same body is
        idempotent, and leaving the previous result on the PR would mislead."""
        try:
            comment.edit(body)
        except Exception as exc:
            if not _ambiguous(exc):
                raise
            log.info("sticky comment edit failed (%s); re-sending the same body once", _describe(exc))
            comment.edit(body)


def comment_body(policy_id: str, lane: str, report_md: str, *, limit: int = COMMENT_MAX_BYTES) -> str:
    """The sticky comment: the marker, then the report, trimmed to `limit` bytes with a note."""
    marker = comment_marker(policy_id, lane)
    body = report_md if carries_marker(report_md, marker) else f"{marker}\n{report_md}"
    if len(body.encode("utf-8")) <= limit:
        return body
    note = f"\n\n---\n_Comment trimmed to fit GitHub's size limit: {COMMENT_TRIM_HINT}._\n"
    head = head_bytes(body, limit - len(note.encode("utf-8")))
    if not carries_marker(head, marker):
        head = marker + "\n" + head[: max(0, len(head) - len(marker) - 1)]
    return head + note


def publish(
    result: Result,
    report_md: str,
    *,
    token: str,
    repository: str,
    head_sha: str | None,
    pr_number: int | None = None,
    api_url: str = DEFAULT_API_URL,
    comment: bool = True,
    comment_author: str | None = None,
    annotation_path: str = "result.json",
    options: ClientOptions | None = None,
    secrets: Iterable[str] = (),
) -> PublishResult:
    """Publish `result`. Never raises: failures come back as warnings."""
    out = PublishResult()
    scrub = _Scrubber([token, *secrets])
    gh: Github | None = None
    try:
        payload = build_check_run(result, report_md, annotation_path=annotation_path)
        gh = make_client(token, api_url, options)
        publisher = _Publisher(gh, repository, out, scrub)
        if head_sha:
            publisher.check_run(head_sha, payload)
        else:
            publisher.warn("no head SHA known: no check run published.")
        if not comment:
            out.comment_action = "off"
        elif pr_number is None:
            out.comment_action = "skipped"
        else:
            policy_id, lane = result.policy_id, result.lane
            body = comment_body(policy_id, lane, report_md)
            publisher.sticky_comment(pr_number, policy_id, lane, body, comment_author)
    except Exception as exc:  # publishing must never change the outcome
        message = scrub(f"publishing failed: {_describe(exc)}")
        log.warning("%s", message)
        out.warnings.append(message)
    finally:
        if gh is not None:
            gh.close()
    return out
