"""The provider's models endpoint: the judge model's announced shutdown date, asked once per run.

`GET {base_url}/models/{model}` (OpenAI's model object carries `shutdown_date`: `YYYY-MM-DD`, or null
when none is announced). One attempt, over within 5 s whatever the provider does (a socket timeout
bounds each read, not the whole: a reply trickled a byte at a time is cut at 5 s by hanging up). It
uses no tokens and is not billed, so it is neither metered nor reserved against the cost boundary.
It is sent with the key the judge uses, in
the same header, over the same TLS settings; the key is never written anywhere, and nothing the
provider says is trusted beyond one date.

Whatever goes wrong is an answer, never an error: a provider without the endpoint (llama.cpp's server
answers 404 `File Not Found`), without the field, too slow, refusing the key or unreachable is
`unknown`, and the run goes on as before. A 404 whose error code is `model_not_found` is `not_found`:
the provider does not serve the model (retired, misspelt, or not for this key).

The standard library's HTTP client, not the openai client or httpx2: a run served whole from the
cache, and `gate validate --lane`, load neither; the TLS settings are the judge's (`SSL_CERT_FILE`,
`SSL_CERT_DIR`, else the system's), and so are the proxy variables (`HTTPS_PROXY`, `NO_PROXY`). A
redirect is not followed: the key goes to the base URL's host only.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import json
import os
import re
import socket
import ssl
import urllib.request
from typing import Any
from urllib.parse import quote

from gate.model.policy import LoadedPolicy
from gate.model.retirement import NOT_ASKED, ProviderAnswer, Retirement, resolve

TIMEOUT_S = 5.0
MAX_BODY = 1 << 20  # a model object is a few hundred bytes: anything past this is not one
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# RFC 3986 `segment` characters a model name keeps as written (`ft:gpt-4o-mini:org::id`).
_SEGMENT_SAFE = "!$&'()*+,;=:@"


def model_url(base_url: str, model: str) -> str:
    """`{base_url}/models/{model}`, the model name percent-encoded as one path segment."""
    return f"{base_url.rstrip('/')}/models/{quote(model, safe=_SEGMENT_SAFE)}"


def ask_shutdown_date(base_url: str, api_key: str, model: str, *, timeout_s: float = TIMEOUT_S) -> ProviderAnswer:
    """What the provider says of `model`'s shutdown, within `timeout_s` in all: a provider (or a proxy)
    that trickles its answer a byte at a time, each inside a socket timeout, does not hold the run."""
    import threading

    if model in (".", "..") or not base_url.lower().startswith(("http://", "https://")):
        return ProviderAnswer("unknown", detail="not asked: the base URL or the model name cannot make the address")
    lookup = _Lookup(base_url, api_key, model, timeout_s)
    asking = threading.Thread(target=lookup.run, name="gate-models-lookup", daemon=True)
    asking.start()
    asking.join(timeout_s)
    if lookup.answer is None:
        lookup.hang_up()  # the thread's read ends at once, so nothing of it outlives the lookup
        asking.join(1.0)
        return ProviderAnswer("unknown", detail=f"no answer within {timeout_s:g} s")
    return lookup.answer


class _Lookup:
    """One GET of the model object on a thread, and the sockets it opened (to hang up on)."""

    def __init__(self, base_url: str, api_key: str, model: str, timeout_s: float) -> None:
        self.request = urllib.request.Request(
            model_url(base_url, model), headers={"Authorization": f"Bearer {api_key}"}
        )
        self.timeout_s = timeout_s
        self.sockets: list[socket.socket] = []
        self.answer: ProviderAnswer | None = None

    def run(self) -> None:
        self.answer = self._ask()

    def hang_up(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _ask(self) -> ProviderAnswer:
        import urllib.error

        handlers = (_Handler(self.sockets), _NoRedirect())
        opener = urllib.request.build_opener(*handlers)
        try:
            with opener.open(self.request, timeout=self.timeout_s) as reply:
                return read_answer(reply.status, _read(reply))
        except urllib.error.HTTPError as exc:
            try:
                body = _read(exc)
            except (OSError, ValueError):
                body = b""
            return read_answer(exc.code, body)
        except TooLong:
            return ProviderAnswer("unknown", detail=str(TooLong()))
        except (OSError, ValueError, http.client.HTTPException) as exc:  # URLError is an OSError
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, TimeoutError):
                return ProviderAnswer("unknown", detail=f"no answer within {self.timeout_s:g} s")
            return ProviderAnswer("unknown", detail=f"no answer ({type(reason).__name__})")


class _Handler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """urllib's HTTP and HTTPS handlers, keeping the socket of each connection they open (urllib lets
    go of it once the reply's head is read; the reply still reads from it): `_Lookup.hang_up`. The
    TLS context is built only for an https address: reading the CA certificates costs tens of
    milliseconds of CPU that a provider on plain http (a local server) never needs."""

    def __init__(self, sockets: list[socket.socket]) -> None:
        urllib.request.HTTPHandler.__init__(self)
        urllib.request.HTTPSHandler.__init__(self)
        self._sockets = sockets

    def _kept(self, cls: type[http.client.HTTPConnection]) -> type[http.client.HTTPConnection]:
        sockets = self._sockets

        class Kept(cls):  # type: ignore[valid-type,misc]
            def connect(self) -> None:
                super().connect()
                sockets.append(self.sock)

        return Kept

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._kept(http.client.HTTPConnection), req)

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._kept(http.client.HTTPSConnection), req, context=_tls())


def _tls() -> ssl.SSLContext:
    """The verifying TLS context the judge's client builds: SSL_CERT_FILE, else SSL_CERT_DIR, else the system's."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = None if cafile else os.environ.get("SSL_CERT_DIR") or None
    return ssl.create_default_context(cafile=cafile, capath=capath)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is the provider's answer, not a place to send the key to."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class TooLong(ValueError):
    def __str__(self) -> str:
        return "the reply is too long to be a model object"


def _read(reply: Any) -> bytes:
    data: bytes = reply.read(MAX_BODY + 1)
    if len(data) > MAX_BODY:
        raise TooLong()
    return data


def read_answer(status: int, body: bytes) -> ProviderAnswer:
    """The answer in a reply of the models endpoint (pure: the provider's reply is untrusted)."""
    try:
        data = json.loads(body) if body else None
    except (ValueError, RecursionError):
        data = None
    if status == 404:
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and error.get("code") == "model_not_found":
            return ProviderAnswer("not_found", detail="404 model_not_found")
        return ProviderAnswer("unknown", detail="the provider has no models endpoint for it (HTTP 404)")
    if status in (401, 403):
        return ProviderAnswer("unknown", detail=f"the provider refused the key (HTTP {status})")
    if status != 200:
        return ProviderAnswer("unknown", detail=f"HTTP {status}")
    if not isinstance(data, dict) or "shutdown_date" not in data:
        return ProviderAnswer("unknown", detail="the model object has no shutdown_date")
    value = data["shutdown_date"]
    if value is None:
        return ProviderAnswer("none")
    if isinstance(value, str) and _DATE.match(value):
        try:
            return ProviderAnswer("date", dt.date.fromisoformat(value))
        except ValueError:
            pass
    return ProviderAnswer("unknown", detail="its shutdown_date is not a YYYY-MM-DD date")


def judge_retirement(loaded: LoadedPolicy, base_url: str, api_key: str, *, ask: bool = True) -> Retirement:
    """The judge model's shutdown date for a run: the provider asked once (when `ask` and there is a
    key: the endpoint wants one), weighed against the policy's pin (`gate.model.retirement.resolve`)."""
    ev = loaded.policy.evaluator
    answer = ask_shutdown_date(base_url, api_key, ev.model) if ask and api_key else NOT_ASKED
    return resolve(ev.model, answer, ev.shutdown_date)
