"""The review page's one ASGI app: thin views over the desk, the JSON API, and the guards.

Every HTML view has a JSON twin the page is a client of: `GET /api/next`, `POST /api/label`,
`POST /api/undo`, `GET|POST /api/adjudicate`, `GET /api/status`. Every response passes `Guard`:
the Host must be the one served (no DNS rebinding onto 127.0.0.1), the access token when one was
given, and headers that forbid inline script (Content-Security-Policy), framing and sniffing.
Every write must carry the page's own CSRF token in a header and a JSON body, which no cross-site
form can send. Templates are files rendered by Jinja2 with autoescape on; the page's script fills
in the item's texts as text (`textContent`), never as HTML.
"""

from __future__ import annotations

import contextlib
import hmac
import http.cookies
import json
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gate.model.errors import UsageError
from gate.web.desk import Act, Desk, Refused

HERE = Path(__file__).resolve().parent
MAX_BODY_BYTES = 64 * 1024
CSRF_HEADER = "x-gate-csrf"
ACCESS_COOKIE = "gate_review_access"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),  # the access token is in the address
    (b"cache-control", b"no-store"),
)


@dataclass(frozen=True)
class Settings:
    """What one server guards with: the hosts it answers as, the access token, the CSRF token."""

    hosts: frozenset[str] = LOOPBACK_HOSTS  # empty: any Host (another --host, behind its --token)
    access_token: str | None = None
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))


def _same(given: str | None, secret: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), secret.encode())


class Guard:
    """Every request: the Host served, the access token when set; every response: the security headers."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    def _refusal(self, scope: Scope) -> str | None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if self.settings.hosts and name.lower() not in self.settings.hosts:
            return "this page answers on 127.0.0.1 only: open the address `gate review serve` printed"
        token = self.settings.access_token
        if token is None:
            return None
        query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token", [None])[0]
        cookie = http.cookies.SimpleCookie()
        with contextlib.suppress(http.cookies.CookieError):
            cookie.load(headers.get("cookie", ""))
        morsel = cookie.get(ACCESS_COOKIE)
        if _same(query, token) or (morsel is not None and _same(morsel.value, token)):
            return None
        return "this page needs its token: open the whole address `gate review serve` printed"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            response = PlainTextResponse(refusal, status_code=403)
            await response(scope, receive, self._with_headers(send, set_cookie=False))
            return
        set_cookie = self.settings.access_token is not None and b"token=" in scope.get("query_string", b"")
        await self.app(scope, receive, self._with_headers(send, set_cookie=set_cookie))

    def _with_headers(self, send: Send, *, set_cookie: bool) -> Callable[[Message], Awaitable[None]]:
        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in dict(SECURITY_HEADERS)]
                headers += list(SECURITY_HEADERS)
                if set_cookie and self.settings.access_token is not None:
                    value = f"{ACCESS_COOKIE}={self.settings.access_token}; Path=/; HttpOnly; SameSite=Strict"
                    headers.append((b"set-cookie", value.encode("latin-1")))
                message = {**message, "headers": headers}
            await send(message)

        return wrapped


async def _body(request: Request, settings: Settings) -> dict[str, Any]:
    """A write's JSON object, after the CSRF check: the page's token in its header, a JSON body."""
    if not _same(request.headers.get(CSRF_HEADER), settings.csrf_token):
        raise Refused(
            403, "this write lacks the page's own token (a form of another site cannot label): reload the page"
        )
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise Refused(415, "a write is a JSON body (Content-Type: application/json)")
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY_BYTES:
            raise Refused(413, f"a write is at most {MAX_BODY_BYTES // 1024} KiB")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        raise Refused(400, "a write is one JSON object") from None
    if not isinstance(body, dict):
        raise Refused(400, "a write is one JSON object")
    return body


def _act(body: dict[str, Any], role: str) -> Act:
    evidence = body.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise Refused(400, "`evidence` is a list of the item's evidence ids")
    texts = {key: body.get(key) for key in ("item_id", "label", "reason")}
    bad = next((key for key, value in texts.items() if not isinstance(value, str)), None)
    if bad is not None:
        raise Refused(400, f"`{bad}` is missing or not text")
    return Act(Desk.check_name(body.get(role), role), str(texts["item_id"]), str(texts["label"]),
               str(texts["reason"]), tuple(evidence))  # fmt: skip


def build_app(desk: Desk, settings: Settings | None = None) -> ASGIApp:
    """The app `gate review serve` runs and tests drive in process."""
    settings = settings or Settings()
    templates = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, undefined=jinja2.StrictUndefined
    )
    header = desk.queue.header

    def render(name: str) -> HTMLResponse:
        keys = [{"key": str(n + 1), "label": label} for n, label in enumerate(header.labels)]
        page = templates.get_template(name).render(
            policy_id=header.policy_id, rubric_version=header.rubric_version, labels=keys, k=desk.k,
            csrf_token=settings.csrf_token, items=len(desk.queue.items),
            self_adjudication=desk.allow_self_adjudication,
        )  # fmt: skip
        return HTMLResponse(page)

    async def review_page(request: Request) -> Response:
        return render("review.html")

    async def adjudicate_page(request: Request) -> Response:
        return render("adjudicate.html")

    async def api_next(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(desk.next_item, request.query_params.get("reviewer", "")))

    async def api_label(request: Request) -> Response:
        act = _act(await _body(request, settings), "reviewer")
        line = await run_in_threadpool(desk.label, act)
        following = await run_in_threadpool(desk.next_item, act.person)
        return JSONResponse({"line_sha256": line.line_sha256, "next": following})

    async def api_undo(request: Request) -> Response:
        body = await _body(request, settings)
        sha = body.get("line_sha256")
        line, item = await run_in_threadpool(
            desk.undo, Desk.check_name(body.get("reviewer")), sha if isinstance(sha, str) else None
        )
        return JSONResponse(
            {"withdrawn": "label", "label": line.label, "retracted": line.retracts, "line_sha256": line.line_sha256,
             "item": item}
        )  # fmt: skip

    async def api_adjudicate(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse(
                await run_in_threadpool(desk.disagreements, request.query_params.get("adjudicator", ""))
            )
        act = _act(await _body(request, settings), "adjudicator")
        line = await run_in_threadpool(desk.adjudicate, act)
        return JSONResponse({"line_sha256": line.line_sha256, "self_adjudication": line.self_adjudication})

    async def api_status(request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(desk.status, request.query_params.get("reviewer")))

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        return JSONResponse({"error": exc.message}, status_code=exc.status)

    async def unusable(request: Request, exc: Exception) -> Response:
        # the ledger changed under the page into something it cannot read, or a line was not written
        return JSONResponse({"error": str(exc)}, status_code=503)

    app = Starlette(
        routes=[
            Route("/", review_page),
            Route("/adjudicate", adjudicate_page),
            Route("/api/next", api_next),
            Route("/api/label", api_label, methods=["POST"]),
            Route("/api/undo", api_undo, methods=["POST"]),
            Route("/api/adjudicate", api_adjudicate, methods=["GET", "POST"]),
            Route("/api/status", api_status),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        exception_handlers={Refused: refused, UsageError: unusable},
    )
    return Guard(app, settings)
