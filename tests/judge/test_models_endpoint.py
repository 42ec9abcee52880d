"""The judge model's shutdown-date lookup over real HTTP (`gate.judge.models_endpoint`): one attempt
that ends within its timeout whatever the provider does, and a key that goes to the base URL's host
only. The servers are raw sockets, to answer as no well-behaved provider would."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gate.judge.models_endpoint import ask_shutdown_date

KEY = "sk-models-endpoint-SECRET-7"


@contextmanager
def raw_server(answer: Callable[[socket.socket, bytes], None]) -> Iterator[tuple[str, list[bytes]]]:
    """A server on 127.0.0.1 that reads each request's head, keeps it, and lets `answer` write."""
    listener = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                heads.append(head)
                with contextlib.suppress(OSError):  # the client hung up
                    answer(conn, head)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", heads
    finally:
        listener.close()


def test_a_provider_that_trickles_its_answer_is_unknown_within_the_timeout() -> None:
    """A byte at a time, each well inside the timeout (a proxy holding the line open): the lookup
    still ends at its timeout, not when the provider stops (a run or `gate validate` waited for as
    long as the provider kept trickling)."""
    finished = threading.Event()

    def trickle(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        for _ in range(120):  # 30 s of one byte each 0.25 s
            time.sleep(0.25)
            conn.sendall(b" ")
        finished.set()

    with raw_server(trickle) as (base_url, _heads):
        answer = ask_shutdown_date(base_url, KEY, "gpt-4o-mini", timeout_s=0.5)
        assert not finished.is_set()  # it did not wait for the provider to stop
    assert answer.kind == "unknown" and answer.detail == "no answer within 0.5 s"


def test_a_reply_too_long_to_be_a_model_object_says_so() -> None:
    def flood(conn: socket.socket, _head: bytes) -> None:
        data = b'{"shutdown_date": "2027-01-14", "pad": "' + b"x" * (2 << 20) + b'"}'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(data) + data)

    with raw_server(flood) as (base_url, _heads):
        answer = ask_shutdown_date(base_url, KEY, "gpt-4o-mini")
    assert answer.kind == "unknown" and answer.detail == "the reply is too long to be a model object"


def test_a_redirect_is_the_providers_answer_and_the_key_never_goes_to_the_other_host() -> None:
    def elsewhere(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\n" + b'{"shutdown_date": "2020-01-01"}'[:30])

    with raw_server(elsewhere) as (other_url, other_heads):
        for code in (301, 302, 307, 308):

            def redirect(conn: socket.socket, _head: bytes, code: int = code) -> None:
                location = f"{other_url}/models/gpt-4o-mini".encode()
                conn.sendall(b"HTTP/1.1 %d Moved\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n" % (code, location))

            with raw_server(redirect) as (base_url, heads):
                answer = ask_shutdown_date(base_url, KEY, "gpt-4o-mini")
            assert (answer.kind, answer.detail) == ("unknown", f"HTTP {code}")
            assert KEY.encode() in heads[0]  # the provider itself was asked with the key
    assert other_heads == []  # nothing at all reached the other host
