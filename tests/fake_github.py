"""A small fake of the GitHub REST API, enough for real PyGithub 2.10 to publish a gate result.

Runs `http.server.ThreadingHTTPServer` on 127.0.0.1 (port 0) in a background thread:

    with FakeGitHub(prefix="/api/v3") as gh:
        client = Github(auth=Auth.Token("t"), base_url=gh.base_url, ...)

Every object URL it returns is on its own host and under its prefix (PyGithub asserts that).
Every request is recorded (`gh.requests`: method, path without the prefix, query, json body).
Listing a commit's check runs honours `filter` as GitHub does: `latest` (the default) lists only
the most recent run of each name (by `completed_at`), `all` every run; `add_check_run` makes one
as another job would.

Fault injection:
- `read_only = True`: every POST/PATCH answers 403 "Resource not accessible by integration";
- `user_status = 403`: `GET /user` answers 403 (an Actions GITHUB_TOKEN);
- `fail_next(method, pattern, status=502, after_store=False, times=1, message=..., headers={})`: the
  next `times` matching requests answer `status` with `message` and `headers` (e.g. a secondary rate
  limit: 403 + `Retry-After`); with `after_store` the write is applied first (the answer was lost).
  `fault_times` records when each injected fault answered (time.monotonic()), to measure waits.

Also runnable as a process for the container smoke test:
    python tests/fake_github.py --port-file PORT --requests-file REQS.json [--prefix /api/v3]
(writes the port, serves until SIGTERM/SIGINT, then dumps the recorded requests as JSON).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import re
import signal
import threading
import time
import types
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlencode, urlsplit

if TYPE_CHECKING:
    from gate.model.result import Result

READ_ONLY_MESSAGE = "Resource not accessible by integration"
SECONDARY_RATE_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
BOT_LOGIN = "github-actions[bot]"
_TS = "2026-11-30T12:00:00Z"


ANNOTATION_LEVELS = ("notice", "warning", "failure")


def _bad_annotation(annotations: list[Any]) -> str | None:
    """Why GitHub would refuse these annotations (422), or None: each needs a path, start and end
    lines, a level and a non-empty message."""
    for a in annotations:
        if not isinstance(a, dict):
            return "an annotation is not an object"
        for key in ("path", "message"):
            if not isinstance(a.get(key), str) or not a[key].strip():
                return f"annotation `{key}` is missing or empty"
        if a.get("annotation_level") not in ANNOTATION_LEVELS:
            return "annotation `annotation_level` is not notice, warning or failure"
        for key in ("start_line", "end_line"):
            if not isinstance(a.get(key), int) or isinstance(a.get(key), bool):
                return f"annotation `{key}` is not an integer"
    return None


@dataclass
class Request:
    method: str
    path: str  # without the prefix and the query string
    query: dict[str, str]
    body: Any
    status: int = 0


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    after_store: bool
    remaining: int = 1
    message: str = "Bad Gateway (injected)"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Store:
    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    check_runs: list[dict[str, Any]] = field(default_factory=list)


class FakeGitHub:
    def __init__(
        self,
        *,
        prefix: str = "",
        login: str = "gate-bot",
        user_status: int = 200,
        read_only: bool = False,
    ) -> None:
        self.prefix = prefix.rstrip("/")
        self.login = login
        self.user_status = user_status
        self.read_only = read_only
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.fault_times: list[float] = []
        self.store = _Store()
        self._ids = itertools.count(1001)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def host_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return self.host_url + self.prefix

    # ---- seeding and faults ----------------------------------------------------------------
    def add_comment(self, repo: str, number: int, body: str, login: str | None = None) -> int:
        with self._lock:
            return int(self._new_comment(repo, number, body, login or self.login)["id"])

    def add_check_run(self, repo: str, name: str, head_sha: str, completed_at: str) -> int:
        """A check run someone else made (another workflow's job of the same name, a re-run)."""
        body = {"name": name, "head_sha": head_sha, "conclusion": "success", "completed_at": completed_at}
        with self._lock:
            return int(self._new_check_run(repo, body)["id"])

    def add_comments(self, repo: str, number: int, count: int, login: str = "someone") -> None:
        for i in range(count):
            self.add_comment(repo, number, f"comment {i}", login)

    def fail_next(
        self,
        method: str,
        pattern: str,
        status: int = 502,
        *,
        after_store: bool = False,
        times: int = 1,
        message: str = "Bad Gateway (injected)",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.faults.append(
            Fault(method.upper(), re.compile(pattern), status, after_store, times, message, dict(headers or {}))
        )

    def rate_limit_next(
        self, method: str, pattern: str, *, status: int = 403, retry_after: str | None = "1", times: int = 1
    ) -> None:
        """GitHub's secondary rate limit: 403 (or 429) with the documented message and Retry-After."""
        self.fail_next(
            method,
            pattern,
            status,
            times=times,
            message=SECONDARY_RATE_LIMIT_MESSAGE,
            headers={} if retry_after is None else {"Retry-After": retry_after},
        )

    @property
    def writer_login(self) -> str:
        """Who the token writes as: its own login, or the Actions bot when GET /user is refused."""
        return self.login if self.user_status == 200 else BOT_LOGIN

    # ---- queries for tests -----------------------------------------------------------------
    def calls(self, method: str, pattern: str = "") -> list[Request]:
        rx = re.compile(pattern)
        return [r for r in self.requests if r.method == method.upper() and rx.search(r.path)]

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        return list(self.store.comments.get((repo, number), []))

    @property
    def check_runs(self) -> list[dict[str, Any]]:
        return list(self.store.check_runs)

    # ---- object builders (caller holds the lock) -------------------------------------------
    def _url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def _user(self, login: str) -> dict[str, Any]:
        return {
            "login": login,
            "id": abs(hash(login)) % 10**6,
            "type": "Bot" if login.endswith("[bot]") else "User",
            "url": self._url(f"/users/{login}"),
        }

    def _new_comment(self, repo: str, number: int, body: str, login: str) -> dict[str, Any]:
        cid = next(self._ids)
        comment = {
            "id": cid,
            "node_id": f"IC_{cid}",
            "url": self._url(f"/repos/{repo}/issues/comments/{cid}"),
            "html_url": f"{self.host_url}/{repo}/pull/{number}#issuecomment-{cid}",
            "issue_url": self._url(f"/repos/{repo}/issues/{number}"),
            "body": body,
            "user": self._user(login),
            "created_at": _TS,
            "updated_at": _TS,
        }
        self.store.comments.setdefault((repo, number), []).append(comment)
        return comment

    def _find_comment(self, cid: int) -> dict[str, Any] | None:
        for comments in self.store.comments.values():
            for c in comments:
                if c["id"] == cid:
                    return c
        return None

    def _new_check_run(self, repo: str, body: dict[str, Any]) -> dict[str, Any]:
        rid = next(self._ids)
        output = dict(body.get("output") or {})
        run = {
            "id": rid,
            "node_id": f"CR_{rid}",
            "name": body.get("name"),
            "head_sha": body.get("head_sha"),
            "external_id": body.get("external_id"),
            "status": body.get("status") or ("completed" if body.get("conclusion") else "queued"),
            "conclusion": body.get("conclusion"),
            "started_at": body.get("started_at") or _TS,
            "completed_at": body.get("completed_at"),
            "url": self._url(f"/repos/{repo}/check-runs/{rid}"),
            "html_url": f"{self.host_url}/{repo}/runs/{rid}",
            "details_url": body.get("details_url"),
            "check_suite": {"id": 7},
            "annotations": list(output.pop("annotations", [])),
            "output_data": output,
        }
        self.store.check_runs.append(run)
        return run

    @staticmethod
    def _check_run_json(run: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in run.items() if k not in ("annotations", "output_data")}
        out["output"] = {
            "title": run["output_data"].get("title"),
            "summary": run["output_data"].get("summary"),
            "text": run["output_data"].get("text"),
            "annotations_count": len(run["annotations"]),
            "annotations_url": run["url"] + "/annotations",
        }
        return out

    # ---- dispatch --------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        split = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        path = split.path
        if self.prefix:
            if not path.startswith(self.prefix + "/"):
                return 404, {"message": "Not Found (outside the API prefix)"}, {}
            path = path[len(self.prefix) :]
        record = Request(method, path, query, body)
        with self._lock:
            self.requests.append(record)
            fault = next(
                (f for f in self.faults if f.remaining > 0 and f.method == method and f.pattern.search(path)),
                None,
            )
            if fault is not None:
                fault.remaining -= 1
                if fault.after_store:
                    self._route(method, path, query, body)
                record.status = fault.status
                self.fault_times.append(time.monotonic())
                return fault.status, {"message": fault.message}, dict(fault.headers)
            if self.read_only and method in ("POST", "PATCH", "PUT", "DELETE"):
                record.status = 403
                return 403, {"message": READ_ONLY_MESSAGE, "documentation_url": "https://docs.github.com"}, {}
            status, payload, headers = self._route(method, path, query, body)
            record.status = status
            return status, payload, headers

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any, dict[str, str]]:
        if method == "GET" and path == "/user":
            if self.user_status != 200:
                return self.user_status, {"message": READ_ONLY_MESSAGE}, {}
            return 200, self._user(self.login), {}

        m = re.fullmatch(r"/repos/([^/]+/[^/]+)(/.*)?", path)
        if not m:
            return 404, {"message": "Not Found"}, {}
        repo, rest = m.group(1), m.group(2) or ""
        body = body if isinstance(body, dict) else {}

        if method == "GET" and rest == "":
            owner, name = repo.split("/")
            return (
                200,
                {
                    "id": 42,
                    "name": name,
                    "full_name": repo,
                    "owner": self._user(owner),
                    "url": self._url(f"/repos/{repo}"),
                    "html_url": f"{self.host_url}/{repo}",
                },
                {},
            )

        if m2 := re.fullmatch(r"/(issues|pulls)/(\d+)", rest):
            if method != "GET":
                return 405, {"message": "Method Not Allowed"}, {}
            number = int(m2.group(2))
            data: dict[str, Any] = {
                "number": number,
                "id": number,
                "url": self._url(f"/repos/{repo}/{m2.group(1)}/{number}"),
                "html_url": f"{self.host_url}/{repo}/pull/{number}",
                "comments_url": self._url(f"/repos/{repo}/issues/{number}/comments"),
                "title": "A change",
                "state": "open",
            }
            if m2.group(1) == "pulls":
                data["head"] = {"sha": "0" * 40, "ref": "feature"}
            return 200, data, {}

        if m2 := re.fullmatch(r"/issues/(\d+)/comments", rest):
            number = int(m2.group(1))
            if method == "POST":
                return 201, self._new_comment(repo, number, str(body.get("body", "")), self.writer_login), {}
            if method == "GET":
                return self._page(repo, number, query, path)
            return 405, {"message": "Method Not Allowed"}, {}

        if m2 := re.fullmatch(r"/issues/comments/(\d+)", rest):
            comment = self._find_comment(int(m2.group(1)))
            if comment is None:
                return 404, {"message": "Not Found"}, {}
            if method == "PATCH":
                comment["body"] = str(body.get("body", ""))
                comment["updated_at"] = "2026-11-30T12:05:00Z"
            return 200, comment, {}

        if rest == "/check-runs" and method == "POST":
            if not body.get("name") or not body.get("head_sha"):
                return 422, {"message": "Validation Failed"}, {}
            annotations = (body.get("output") or {}).get("annotations") or []
            if len(annotations) > 50:
                return 422, {"message": "Only 50 annotations are allowed per request"}, {}
            if (bad := _bad_annotation(annotations)) is not None:
                return 422, {"message": "Validation Failed", "errors": [bad]}, {}
            return 201, self._check_run_json(self._new_check_run(repo, body)), {}

        if m2 := re.fullmatch(r"/check-runs/(\d+)", rest):
            run = next((r for r in self.store.check_runs if r["id"] == int(m2.group(1))), None)
            if run is None:
                return 404, {"message": "Not Found"}, {}
            if method == "PATCH":
                output = dict(body.get("output") or {})
                annotations = output.pop("annotations", []) or []
                if len(annotations) > 50:
                    return 422, {"message": "Only 50 annotations are allowed per request"}, {}
                if (bad := _bad_annotation(annotations)) is not None:
                    return 422, {"message": "Validation Failed", "errors": [bad]}, {}
                if output and ("title" not in output or "summary" not in output):
                    return 422, {"message": "output requires title and summary"}, {}
                run["annotations"].extend(annotations)
                if output:
                    run["output_data"] = output
                for key in ("name", "status", "conclusion", "completed_at", "details_url", "external_id"):
                    if key in body:
                        run[key] = body[key]
            return 200, self._check_run_json(run), {}

        if (m2 := re.fullmatch(r"/commits/([^/]+)/check-runs", rest)) and method == "GET":
            found = [
                r
                for r in self.store.check_runs
                if r["head_sha"] == m2.group(1) and ("check_name" not in query or r["name"] == query["check_name"])
            ]
            # GitHub's `filter`: `latest` (the default) lists only the most recent run of each name
            # (by completed_at); `all` lists every run.
            which = query.get("filter", "latest")
            if which not in ("latest", "all"):
                return 422, {"message": "Validation Failed: filter must be latest or all"}, {}
            if which == "latest":
                newest: dict[str, dict[str, Any]] = {}
                for r in found:
                    if r["name"] not in newest or _recency(r) >= _recency(newest[r["name"]]):
                        newest[r["name"]] = r
                found = [r for r in found if newest[r["name"]] is r]
            runs = [self._check_run_json(r) for r in found]
            return 200, {"total_count": len(runs), "check_runs": runs}, {}

        return 404, {"message": "Not Found"}, {}

    def _page(self, repo: str, number: int, query: dict[str, str], path: str) -> tuple[int, Any, dict[str, str]]:
        items = self.store.comments.get((repo, number), [])
        per_page = max(1, min(100, int(query.get("per_page", "30"))))
        page = max(1, int(query.get("page", "1")))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]

        def link(p: int) -> str:
            return f"<{self._url(path)}?{urlencode({'per_page': per_page, 'page': p})}>"

        rels = []
        if page < last:
            rels += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
        if page > 1:
            rels += [f'{link(page - 1)}; rel="prev"', f'{link(1)}; rel="first"']
        headers = {"Link": ", ".join(rels)} if rels else {}
        return 200, chunk, headers


# ---- result.json fixtures (SPEC section 5) for the publishing tests ---------------------------
EXIT_CODES = {"passed": 0, "quality_failed": 1, "evaluation_incomplete": 3, "review_required": 4}
_BLOCKERS: dict[str, list[dict[str, Any]]] = {
    "passed": [],
    "quality_failed": [
        {
            "state": "quality_failed",
            "kind": "false_pass_limit",
            "slice": "billing-policy-critical",
            "case_ids": ["refund-window-incorrect-012", "refund-window-incorrect-019"],
            "message": "2 false passes in billing-policy-critical; max_false_passes is 0",
        },
        {
            "state": "evaluation_incomplete",
            "kind": "evaluator_errors",
            "slice": "general",
            "case_ids": ["general-shipping-004"],
            "message": "1 evaluator error (timeout); max_evaluator_errors is 0",
        },
    ],
    "evaluation_incomplete": [
        {
            "state": "evaluation_incomplete",
            "kind": "budget_exhausted",
            "slice": None,
            "case_ids": ["general-shipping-007", "general-shipping-008"],
            "message": "max_total_cost 0.02 USD reached; 2 cases not run",
        },
        {
            "state": "evaluation_incomplete",
            "kind": "unrun_cases",
            "slice": "general",
            "case_ids": ["general-shipping-007", "general-shipping-008"],
            "message": "2 eligible cases were not run",
        },
    ],
    "review_required": [
        {
            "state": "review_required",
            "kind": "unstable_verdict",
            "slice": "general",
            "case_ids": ["general-refund-tone-003"],
            "message": "repeats disagreed (pass, fail, pass)",
        }
    ],
}


def _recency(run: dict[str, Any]) -> tuple[dt.datetime, int]:
    """How recent a check run is for `filter=latest`: its completed_at (unfinished: oldest), then its id."""
    try:
        at = dt.datetime.fromisoformat(str(run["completed_at"]))
    except ValueError:
        at = dt.datetime.min
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return at, int(run["id"])


def sample(state: str = "quality_failed", **overrides: Any) -> Result:
    """`sample_result`, as the typed result the renderers and the publisher take."""
    from gate.model.result import Result

    return Result.from_dict(sample_result(state, **overrides))


def sample_result(state: str = "quality_failed", **overrides: Any) -> dict[str, Any]:
    """A realistic result.json dict (schema_version 1) in `state`."""
    blockers = [dict(b) for b in _BLOCKERS[state]]
    unrun = sorted({c for b in blockers if b["kind"] in ("unrun_cases", "budget_exhausted") for c in b["case_ids"]})
    result: dict[str, Any] = {
        "schema_version": 1,
        "policy_id": "refund-answer",
        "policy_version": "2026-11-30.1",
        "lane": "pr",
        "state": state,
        "exit_code": EXIT_CODES[state],
        "blockers": blockers,
        "counts": {
            "eligible": 12,
            "completed": 12 - len(unrun) - (1 if state == "quality_failed" else 0),
            "errored": 1 if state == "quality_failed" else 0,
            "withheld": 0,
            "unrun": len(unrun),
            "cached": 3,
            "review": 1 if state == "review_required" else 0,
        },
        "unrun_case_ids": unrun,
        "slices": {
            "billing-policy-critical": {
                "true_pass": 3,
                "true_fail": 2,
                "false_pass": 2 if state == "quality_failed" else 0,
                "false_fail": 0,
                "errors": 0,
                "review": 0,
                "unrun": 0,
            },
            "general": {
                "true_pass": 4,
                "true_fail": 1,
                "false_pass": 0,
                "false_fail": 0,
                "errors": 1 if state == "quality_failed" else 0,
                "review": 1 if state == "review_required" else 0,
                "unrun": len(unrun),
            },
        },
        "controls": {"ok": True, "failures": []},
        "cost": {
            "total": 0.0123456789,
            "currency": "USD",
            "input_tokens": 48210,
            "output_tokens": 1630,
            "http_attempts": 14,
            "retries": 2,
            "cached_calls": 3,
            "by_slice": {"billing-policy-critical": 0.0061, "general": 0.0062456789},
        },
        "lineage": {
            "policy_sha256": "a" * 64,
            "dataset_sha256": "b" * 64,
            "prompt_sha256": "c" * 64,
            "metric_version": "3",
            "evaluator_model": "gpt-4o-mini",
            "ragas_version": "0.4.3",
            "gate_version": "0.1.0",
        },
    }
    result.update(overrides)
    return result


class _Handler(BaseHTTPRequestHandler):
    owner: FakeGitHub
    protocol_version = "HTTP/1.1"
    # One buffered write per response and no Nagle delay: keep-alive requests stay fast.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        status, payload, headers = self.owner.handle(self.command, self.path, body)
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve


def _main() -> None:
    parser = argparse.ArgumentParser(description="Serve the fake GitHub API until SIGTERM/SIGINT.")
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--requests-file", type=Path, required=True)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--user-status", type=int, default=403)
    parser.add_argument("--read-only", action="store_true")
    args = parser.parse_args()
    stop = threading.Event()

    def on_signal(signum: int, frame: types.FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with FakeGitHub(prefix=args.prefix, user_status=args.user_status, read_only=args.read_only) as fake:
        args.port_file.write_text(str(fake.port))
        stop.wait()
        dump = {
            "requests": [r.__dict__ for r in fake.requests],
            "check_runs": fake.check_runs,
            "comments": {f"{k[0]}#{k[1]}": v for k, v in fake.store.comments.items()},
        }
        args.requests_file.write_text(json.dumps(dump, indent=1))


if __name__ == "__main__":
    _main()
