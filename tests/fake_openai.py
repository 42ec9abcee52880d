"""A fake OpenAI-compatible chat-completions server, scriptable per case, for real-HTTP tests.

It answers `POST /v1/chat/completions` (and `/chat/completions`) the way `ragas.llms.llm_factory`
+ instructor `Mode.JSON` call it: the reply's `message.content` is a JSON object
`{"reason": ..., "value": ...}` and every reply reports `usage`.

It is an asyncio HTTP/1.1 server (keep-alive, many connections, many requests in flight) running
its own event loop in a background thread, so tests drive it from plain synchronous code:

    with FakeOpenAI() as fake:                           # 127.0.0.1, a free port
        fake.script("case-17", rate_limited(retry_after=1), reply("pass"))
        fake.script("case-18", server_error())           # the last behaviour repeats
        ... point the judge at fake.base_url ("http://127.0.0.1:PORT/v1") ...
        assert fake.count("case-17") == 2

Rules. `script(match, *behaviours)` adds a rule: a request whose user message contains `match`
(a substring; the rendered prompt contains the case's text) takes the rule's next behaviour; the
last behaviour repeats. The first rule added that matches wins.

Behaviours (all accept `delay=` seconds before answering, and `prompt_tokens=`/`completion_tokens=`
to override the reported usage; `usage=False` omits `usage`):
- `reply(label, reason="...")`: a well-formed verdict;
- `raw(content, finish_reason="stop")`: any message content ("PASS" label, prose, a ```json fence...);
- `length(content)`: `finish_reason: "length"` with a truncated content;
- `status(code, retry_after=None, message=...)`, `rate_limited(retry_after)`, `server_error()`,
  `unauthorized()`, `bad_request()`: an OpenAI-style error body with that status;
- `drop(delay=0)`: read the request, then close the connection without answering;
- `slow(seconds, then=reply("pass"))`: `then` after a delay;
- `held(event, then=reply("pass"))`: `then` once the test sets `event` (other requests are answered meanwhile);
- `reset_mid_body()`: a 200 with its headers and half its body, then a TCP reset;
- `never_ends()`: a 200 whose body never finishes (headers, a first chunk, then silence);
- `body(text, code=200)`: any HTTP body, sent as is (malformed JSON, `choices: []`, ...).

Unmatched requests get `fake.default`: a Behaviour, a callable `(RecordedRequest) -> Behaviour`,
or (the default) `oracle()`, which reads a marker from the prompt, so a case's own `response` text
can say what the judge answers (useful for `gate run` tests that do not script rules):
- `[[judge:pass]]`, `[[judge:fail]]`, `[[judge:<any label>]]`: reply with that label;
- `[[judge:http=503]]`: answer that HTTP status (429 carries `Retry-After: 0`);
- `[[judge:drop]]`: drop the connection;
- no marker: the oracle's fallback, `reply("pass")` unless given.
The first marker in the user message wins.

Models (`GET /v1/models`, `GET /v1/models/{model}`), as OpenAI documents them: by default the fake has
no models endpoint (404 `no route`, as llama.cpp's server answers the second). `FakeOpenAI(models={...})`
serves one: model id -> the extra fields of its model object (`{"shutdown_date": "2027-01-14"}`,
`{"shutdown_date": None}`, or `{}` for a provider that publishes no date); another id is 404
`model_not_found`. `retired={"gpt-4o-mini"}` answers every chat completion for that model 404
`model_not_found`, as a provider does after the shutdown date. Model lookups (any GET of a path
ending `/models` or holding `/models/`, mounted or not) are recorded in `model_lookups`, never in
`requests` (which stays the chat completions answered) nor in `api_calls` (Files and Batches);
`model_of(req)` is the model a chat completion asked for, so a default callable can judge per model.

Usage reported: `prompt_tokens = prompt_tokens_for(body)` (ceil(len(compact JSON of messages) / 4),
a deterministic function of the request) and `completion_tokens = ceil(len(content) / 4)` (at
least 1), unless the behaviour overrides them.

Every request is recorded (`fake.requests`, a list of RecordedRequest): parsed JSON body,
lower-cased headers WITHOUT `authorization`/`api-key` (only the sha256 of the bearer token is kept,
in `api_key_sha256`), arrival time (time.monotonic), the user prompt, the rule matched, the status
sent and the usage sent. `fake.max_in_flight` is the highest number of requests being answered at
the same time.

Also runnable as a process (for benchmarks and container smoke tests):
    python -m tests.fake_openai --port 0 --latency 0.1 [--requests-file REQS.json]
prints the base URL (`http://127.0.0.1:PORT/v1`) on stdout line 1, serves the oracle until
SIGTERM/SIGINT, then writes the recorded requests as JSON if asked and a one-line summary on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import json
import math
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

BehaviourKind = Literal["reply", "raw", "status", "drop", "reset", "hang", "body"]
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODEL_ECHO_DEFAULT = "fake-model"
BATCH_HEADER = "x-fake-batch-line"  # marks the requests `judge_offline` answered (a batch's lines)


@dataclass(frozen=True)
class Behaviour:
    """What the server does with one request. Build it with the helpers below."""

    kind: BehaviourKind
    label: str | None = None
    reason: str | None = None
    content: str | None = None
    finish_reason: str = "stop"
    status: int = 200
    retry_after: str | None = None
    message: str | None = None
    delay: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage: bool = True
    headers: tuple[tuple[str, str], ...] = ()  # extra reply headers, e.g. (("x-ratelimit-limit-tokens", "1"),)
    until: threading.Event | None = None  # answered only once the test sets it (see `held`)


def reply(label: str, reason: str = "The response matches the reference.", **kw: Any) -> Behaviour:
    """A well-formed verdict: content is `{"reason": reason, "value": label}`."""
    return Behaviour("reply", label=label, reason=reason, **kw)


def raw(content: str, *, finish_reason: str = "stop", **kw: Any) -> Behaviour:
    """Any message content, sent as is."""
    return Behaviour("raw", content=content, finish_reason=finish_reason, **kw)


def length(content: str = '{"reason": "The response states the', **kw: Any) -> Behaviour:
    """A reply cut off at max_tokens: `finish_reason: "length"`."""
    return Behaviour("raw", content=content, finish_reason="length", **kw)


def status(code: int, *, retry_after: float | str | None = None, message: str | None = None, **kw: Any) -> Behaviour:
    """An HTTP error with an OpenAI-style body; `retry_after` sets the Retry-After header."""
    ra = None if retry_after is None else (retry_after if isinstance(retry_after, str) else f"{retry_after:g}")
    return Behaviour("status", status=code, retry_after=ra, message=message, **kw)


def rate_limited(
    retry_after: float | str | None = 1, *, message: str = "Rate limit reached (fake)", **kw: Any
) -> Behaviour:
    return status(429, retry_after=retry_after, message=message, **kw)


def server_error(code: int = 500, *, message: str = "The server had an error (fake)", **kw: Any) -> Behaviour:
    return status(code, message=message, **kw)


def unauthorized(*, message: str = "Incorrect API key provided (fake)", **kw: Any) -> Behaviour:
    return status(401, message=message, **kw)


def bad_request(*, message: str = "Invalid request (fake)", **kw: Any) -> Behaviour:
    return status(400, message=message, **kw)


def drop(delay: float = 0.0) -> Behaviour:
    """Read the request, then close the connection without a response."""
    return Behaviour("drop", delay=delay)


def reset_mid_body(**kw: Any) -> Behaviour:
    """A well-formed verdict cut off halfway through its body by a TCP reset."""
    return Behaviour("reset", label="pass", reason="cut off", **kw)


def never_ends(**kw: Any) -> Behaviour:
    """Headers and the first bytes of a body, then nothing, until the client gives up."""
    return Behaviour("hang", **kw)


def body(text: str, code: int = 200, **kw: Any) -> Behaviour:
    """Any HTTP body, as is (reported `usage` is whatever the text says)."""
    return Behaviour("body", content=text, status=code, **kw)


def slow(seconds: float, then: Behaviour | None = None) -> Behaviour:
    """`then` (default: reply("pass")) after `seconds`."""
    return dataclasses.replace(then or reply("pass"), delay=seconds)


def held(until: threading.Event, then: Behaviour | None = None) -> Behaviour:
    """`then` (default: reply("pass")) once the test sets `until` (at most 60 s); other requests are
    answered meanwhile: the test, not the clock, decides what the client has seen first."""
    return dataclasses.replace(then or reply("pass"), until=until)


_MARKER = re.compile(r"\[\[judge:([^\]\s]+)\]\]")


def oracle(fallback: Behaviour | None = None) -> Callable[[RecordedRequest], Behaviour]:
    """Default behaviour reading `[[judge:...]]` markers from the user prompt (see module doc)."""
    fb = fallback or reply("pass")

    def decide(req: RecordedRequest) -> Behaviour:
        m = _MARKER.search(req.prompt)
        if m is None:
            return fb
        token = m.group(1)
        if token == "drop":
            return drop()
        if token.startswith("http="):
            code = int(token[5:])
            return status(code, retry_after=0 if code == 429 else None)
        return reply(token, reason=f"oracle marker says {token}")

    return decide


def model_not_found(model: str) -> Behaviour:
    """What OpenAI answers a request for a model it does not serve (retired, misspelt, no access)."""
    return Behaviour(
        "status",
        status=404,
        message=f"The model `{model}` does not exist or you do not have access to it.",
        headers=(("x-fake-error-code", "model_not_found"),),
    )


def model_of(req: RecordedRequest) -> str | None:
    """The model a chat completion asked for (None when its body names none)."""
    model = req.body.get("model") if isinstance(req.body, dict) else None
    return model if isinstance(model, str) else None


def prompt_tokens_for(body: Any) -> int:
    """The prompt_tokens the server reports: ceil(len(compact JSON of `messages`) / 4), at least 1."""
    messages = body.get("messages", []) if isinstance(body, dict) else []
    text = json.dumps(messages, separators=(",", ":"), ensure_ascii=False)
    return max(1, math.ceil(len(text) / 4))


def completion_tokens_for(content: str) -> int:
    return max(1, math.ceil(len(content) / 4))


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased, without authorization / api-key
    body: Any  # parsed JSON (None if the body was not JSON)
    arrival: float  # time.monotonic() when the request was fully read
    prompt: str  # the user message(s) joined by "\n"
    api_key_sha256: str | None = None  # sha256 of the bearer token, never the token
    rule: str | None = None  # the `match` of the rule used, None for the default
    status: int | None = None  # status sent; None when the connection was dropped
    usage: dict[str, int] | None = None  # usage sent
    finished: float | None = None  # time.monotonic() when the answer was written

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Rule:
    match: str
    behaviours: list[Behaviour]
    hits: int = 0

    def next(self) -> Behaviour:
        b = self.behaviours[min(self.hits, len(self.behaviours) - 1)]
        self.hits += 1
        return b


def _user_prompt(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    parts: list[str] = []
    for msg in body.get("messages") or []:
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts += [p.get("text", "") for p in content if isinstance(p, dict)]
    return "\n".join(parts)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    411: "Length Required",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}


class FakeOpenAI:
    """The server. Thread-safe for scripting and reading from the test thread."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        default: Behaviour | Callable[[RecordedRequest], Behaviour] | None = None,
        prefix: str = "/v1",
        limiter: Any = None,
        models: dict[str, dict[str, Any]] | None = None,
        retired: set[str] | frozenset[str] = frozenset(),
    ) -> None:
        """`prefix` is the path the API is mounted under: "/v1" (OpenAI, vLLM, Ollama, LiteLLM) or an
        Azure-style "/openai/v1"; with any other prefix than "/v1" only `prefix/chat/completions` answers.
        `limiter` (tests/fake_limits.py `BucketLimits`) enforces a rate limit: a request that does not
        fit is answered 429, and every answer carries its headers."""
        self.limiter = limiter
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self.chat_paths = CHAT_PATHS if self.prefix == "/v1" else (self.prefix + "/chat/completions",)
        self.host = host
        self._port = port
        self.latency = latency
        self.default: Behaviour | Callable[[RecordedRequest], Behaviour] = default or oracle()
        self._rules: list[Rule] = []
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.in_flight = 0
        self.max_in_flight = 0
        self.connections = 0  # TCP connections accepted
        # Other API routes (tests/fake_batches.py: Files + Batches): `(request, raw body) -> (status,
        # body bytes, content type)`, or None when the route is not theirs. Their requests are
        # recorded in `api_calls`, not `requests` (which stays the chat completions answered).
        self.routes: Callable[[RecordedRequest, bytes], tuple[int, bytes, str] | None] | None = None
        self.api_calls: list[RecordedRequest] = []
        # The models endpoint (None: none) and the models past their shutdown (see the module doc).
        self.models = models
        self.retired = set(retired)
        self.model_lookups: list[RecordedRequest] = []

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._start_server())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start")
        return self

    async def _start_server(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self._port, backlog=1024)
        self._port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.close()
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def base_url(self) -> str:
        """What OPENAI_BASE_URL / evaluator.base_url should be."""
        return self.url + self.prefix

    # -- scripting ----------------------------------------------------------------------------
    def script(self, match: str, *behaviours: Behaviour) -> Rule:
        if not behaviours:
            raise ValueError("script() needs at least one behaviour")
        rule = Rule(match, list(behaviours))
        with self._lock:
            self._rules.append(rule)
        return rule

    def reset(self) -> None:
        """Forget rules, recorded requests and counters (the default behaviour stays)."""
        with self._lock:
            self._rules.clear()
            self._requests.clear()
            self.max_in_flight = self.in_flight

    # -- observations -------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_for(self, match: str) -> list[RecordedRequest]:
        return [r for r in self.requests if match in r.prompt]

    def count(self, match: str | None = None) -> int:
        """Requests received (all, or those whose user prompt contains `match`)."""
        return len(self.requests if match is None else self.requests_for(match))

    def usage_totals(self, match: str | None = None) -> tuple[int, int]:
        """(prompt_tokens, completion_tokens) summed over the usage the server sent."""
        reqs = self.requests if match is None else self.requests_for(match)
        p = sum((r.usage or {}).get("prompt_tokens", 0) for r in reqs)
        c = sum((r.usage or {}).get("completion_tokens", 0) for r in reqs)
        return p, c

    # -- HTTP ---------------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        with self._lock:
            self.connections += 1
        try:
            while True:
                keep_going = await self._one_request(reader, writer)
                if not keep_going:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        line = await reader.readline()
        if not line:
            return False
        try:
            method, target, version = line.decode("latin-1").strip().split(" ", 2)
        except ValueError:
            return False
        headers: dict[str, str] = {}
        while True:
            h = await reader.readline()
            if h in (b"\r\n", b"\n", b""):
                break
            name, _, value = h.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            raw_body = await reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            raw_body = await _read_chunked(reader)
        else:
            raw_body = b""
        keep_alive = headers.get("connection", "").lower() != "close" and version.upper() == "HTTP/1.1"
        path = target.split("?", 1)[0]

        try:
            body: Any = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = None
        auth = headers.pop("authorization", None)
        headers.pop("api-key", None)
        key_sha = None
        if auth:
            token = auth.split(" ", 1)[1] if " " in auth else auth
            key_sha = hashlib.sha256(token.encode()).hexdigest()
        rec = RecordedRequest(
            method=method,
            path=path,
            headers=headers,
            body=body,
            arrival=time.monotonic(),
            prompt=_user_prompt(body),
            api_key_sha256=key_sha,
        )

        routed = self.routes(rec, raw_body) if self.routes is not None else None
        if routed is not None:
            code, data, ctype = routed
            rec.status = code
            with self._lock:
                self.api_calls.append(rec)
            head = (
                f"HTTP/1.1 {code} {_REASONS.get(code, 'Status')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(data)}\r\nConnection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
            )
            writer.write(head.encode("latin-1") + data)
            await writer.drain()
            rec.finished = time.monotonic()
            return keep_alive

        if method == "GET" and (path.endswith("/models") or "/models/" in path):
            code, payload = self._models_answer(path)
            rec.status = code
            with self._lock:
                self.model_lookups.append(rec)
            await _write(writer, code, payload, {}, keep_alive)
            rec.finished = time.monotonic()
            return keep_alive

        if method != "POST" or path not in self.chat_paths:
            with self._lock:
                self._requests.append(rec)
            rec.status = 404
            await _write(writer, 404, {"error": {"message": f"no route {method} {path}"}}, {}, keep_alive)
            rec.finished = time.monotonic()
            return keep_alive

        model = model_of(rec)
        behaviour = model_not_found(model) if model is not None and model in self.retired else self._choose(rec)
        limit_headers: dict[str, str] = {}
        if self.limiter is not None:
            fits, limit_headers = self.limiter.take(body)
            if not fits:
                behaviour = status(429, message="Rate limit reached (fake bucket)")
        with self._lock:
            self._requests.append(rec)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            delay = behaviour.delay + self.latency
            if delay > 0:
                await asyncio.sleep(delay)
            if behaviour.until is not None:
                await asyncio.get_running_loop().run_in_executor(None, behaviour.until.wait, 60)
            if behaviour.kind == "drop":
                rec.finished = time.monotonic()
                transport = writer.transport
                transport.abort()
                return False
            if behaviour.kind in ("reset", "hang"):
                code, payload, extra = self._answer(dataclasses.replace(behaviour, kind="reply"), rec)
                data = json.dumps(payload).encode()
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
                writer.write(head.encode("latin-1") + data[: len(data) // 2])
                await writer.drain()
                rec.status = code
                if behaviour.kind == "hang":
                    await reader.read()  # until the client closes the connection
                rec.finished = time.monotonic()
                writer.transport.abort()
                return False
            if behaviour.kind == "body":
                text = (behaviour.content or "").encode()
                with contextlib.suppress(ValueError):
                    sent = json.loads(text)
                    if isinstance(sent, dict) and isinstance(sent.get("usage"), dict):
                        rec.usage = sent["usage"]
                rec.status = behaviour.status
                head = (
                    f"HTTP/1.1 {behaviour.status} {_REASONS.get(behaviour.status, 'Status')}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(text)}\r\n"
                    f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
                )
                writer.write(head.encode("latin-1") + text)
                await writer.drain()
                rec.finished = time.monotonic()
                return keep_alive
            code, payload, extra = self._answer(behaviour, rec)
            rec.status = code
            await _write(writer, code, payload, {**extra, **limit_headers}, keep_alive)
            rec.finished = time.monotonic()
        finally:
            with self._lock:
                self.in_flight -= 1
        return keep_alive

    def judge_offline(self, body: Any, path: str) -> tuple[int | None, Any]:
        """Answer one request body the way the scripted judge answers it over HTTP (the same rules,
        oracle and usage), without a connection: the Batch fake (tests/fake_batches.py) runs each
        line through it. Recorded in `requests` like a live request. Returns (status, JSON body);
        status None when the behaviour gives no answer (a dropped or cut-off connection). Its recorded
        headers carry `BATCH_HEADER`, so tests tell batch lines from live requests."""
        rec = RecordedRequest(
            method="POST",
            path=path,
            headers={BATCH_HEADER: "1"},
            body=body,
            arrival=time.monotonic(),
            prompt=_user_prompt(body),
        )
        behaviour = self._choose(rec)
        with self._lock:
            self._requests.append(rec)
        rec.finished = time.monotonic()
        if behaviour.kind in ("drop", "reset", "hang"):
            return None, None
        if behaviour.kind == "body":
            rec.status = behaviour.status
            try:
                sent = json.loads(behaviour.content or "")
            except ValueError:
                sent = behaviour.content
            if isinstance(sent, dict) and isinstance(sent.get("usage"), dict):
                rec.usage = sent["usage"]
            return behaviour.status, sent
        code, payload, _extra = self._answer(behaviour, rec)
        rec.status = code
        return code, payload

    def _models_answer(self, path: str) -> tuple[int, Any]:
        """`GET /models` and `GET /models/{id}`: OpenAI's list and model objects, or 404s."""
        mounted = path == f"{self.prefix}/models" or path.startswith(f"{self.prefix}/models/")
        if self.models is None or not mounted:
            return 404, {"error": {"message": f"no route GET {path}"}}

        def model_object(model_id: str) -> dict[str, Any]:
            return {
                "id": model_id,
                "object": "model",
                "created": 1_700_000_000,
                "owned_by": "fake",
                **self.models[model_id],
            }

        if path == f"{self.prefix}/models":
            return 200, {"object": "list", "data": [model_object(m) for m in self.models]}
        from urllib.parse import unquote

        wanted = unquote(path[len(f"{self.prefix}/models/") :])
        if wanted not in self.models:
            return 404, {
                "error": {
                    "message": f"The model `{wanted}` does not exist or you do not have access to it.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "model_not_found",
                }
            }
        return 200, model_object(wanted)

    def _choose(self, rec: RecordedRequest) -> Behaviour:
        with self._lock:
            for rule in self._rules:
                if rule.match in rec.prompt:
                    rec.rule = rule.match
                    return rule.next()
            default = self.default
        return default if isinstance(default, Behaviour) else default(rec)

    def _answer(self, b: Behaviour, rec: RecordedRequest) -> tuple[int, Any, dict[str, str]]:
        if b.kind == "status":
            extra = {"Retry-After": b.retry_after} if b.retry_after is not None else {}
            headers = dict(b.headers)
            code = headers.pop("x-fake-error-code", None)  # the error body's `code` (e.g. model_not_found)
            extra.update(headers)
            err = {
                "error": {
                    "message": b.message or f"fake error {b.status}",
                    "type": _ERROR_TYPES.get(b.status, "server_error"),
                    "param": None,
                    "code": code,
                }
            }
            if b.usage and (b.prompt_tokens is not None or b.completion_tokens is not None):
                usage = {"prompt_tokens": b.prompt_tokens or 0, "completion_tokens": b.completion_tokens or 0}
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
                err["usage"] = usage
                rec.usage = usage
            return b.status, err, extra
        content = json.dumps({"reason": b.reason, "value": b.label}) if b.kind == "reply" else (b.content or "")
        model = rec.body.get("model", MODEL_ECHO_DEFAULT) if isinstance(rec.body, dict) else MODEL_ECHO_DEFAULT
        payload: dict[str, Any] = {
            "id": f"chatcmpl-fake-{id(rec):x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": b.finish_reason,
                }
            ],
        }
        if b.usage:
            pt = b.prompt_tokens if b.prompt_tokens is not None else prompt_tokens_for(rec.body)
            ct = b.completion_tokens if b.completion_tokens is not None else completion_tokens_for(content)
            usage = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
            payload["usage"] = usage
            rec.usage = usage
        return 200, payload, dict(b.headers)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    out = bytearray()
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return bytes(out)
        out += await reader.readexactly(size)
        await reader.readline()


async def _write(
    writer: asyncio.StreamWriter, code: int, payload: Any, extra: dict[str, str], keep_alive: bool
) -> None:
    data = json.dumps(payload).encode()
    head = [
        f"HTTP/1.1 {code} {_REASONS.get(code, 'Status')}",
        "Content-Type: application/json",
        f"Content-Length: {len(data)}",
        f"Connection: {'keep-alive' if keep_alive else 'close'}",
    ]
    head += [f"{k}: {v}" for k, v in extra.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
    await writer.drain()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fake OpenAI chat-completions server (oracle mode)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added before every answer")
    ap.add_argument("--requests-file", type=Path, default=None, help="write recorded requests here on exit")
    ap.add_argument("--requests-per-minute", type=float, default=None, help="enforce a request bucket (429 past it)")
    ap.add_argument("--tokens-per-minute", type=float, default=None, help="enforce a token bucket (429 past it)")
    ap.add_argument("--period-s", type=float, default=60.0, help="the bucket's minute (a bench may compress it)")
    ap.add_argument("--no-rate-headers", action="store_true", help="send no x-ratelimit-* / retry-after headers")
    ap.add_argument("--stats-file", type=Path, default=None, help="write the rate limiter's counts here on exit")
    args = ap.parse_args(argv)

    limiter = None
    if args.requests_per_minute or args.tokens_per_minute:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as `-m tests.fake_openai`
        from fake_limits import BucketLimits

        limiter = BucketLimits(
            args.requests_per_minute,
            args.tokens_per_minute,
            headers=not args.no_rate_headers,
            period_s=args.period_s,
        )
    fake = FakeOpenAI(host=args.host, port=args.port, latency=args.latency, limiter=limiter).start()
    print(fake.base_url, flush=True)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop.wait(0.2):
        pass
    fake.stop()
    reqs = fake.requests
    if args.requests_file is not None:
        args.requests_file.write_text(json.dumps([r.to_json() for r in reqs], indent=1), encoding="utf-8")
    if args.stats_file is not None:
        stats = {
            "requests": len(reqs),
            "first_arrival": min((r.arrival for r in reqs), default=0.0),
            "accepted": limiter.accepted if limiter is not None else [],
            "accepted_tokens": limiter.accepted_tokens if limiter is not None else 0.0,
            "refused": limiter.refused if limiter is not None else 0,
        }
        args.stats_file.write_text(json.dumps(stats), encoding="utf-8")
    print(
        f"fake-openai: {len(reqs)} requests, max in flight {fake.max_in_flight}, {fake.connections} connections",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
