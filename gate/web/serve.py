"""`gate review serve`: check the queue and the ledger, bind, print the address, serve the page.

Binds 127.0.0.1 unless told otherwise; another host is served only behind a `--token`, which the
printed address carries. Everything is checked before the socket opens (the queue, every ledger
line against it, the flags), so a bad file is exit 2 naming it, never a page that half works.
The server writes nothing but the ledger.
"""

from __future__ import annotations

import gc
import ipaddress
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import quote

from gate.model.errors import UsageError
from gate.model.paths import from_working_directory, shown_path
from gate.model.wording import plural

LOOPBACK = "127.0.0.1"
MIN_TOKEN_CHARS = 16


@dataclass(frozen=True)
class ServeOptions:
    queue: Path
    ledger: Path
    port: int = 8765
    host: str = LOOPBACK
    token: str | None = None
    reviewers_per_item: int | None = None  # None: the policy's review.reviewers_per_item
    policy: Path | None = None  # None: the policy the queue's header names
    allow_self_adjudication: bool = False
    ledger_directory: bool = False  # --ledger ended in "/": a directory, made when it does not exist yet


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_options(opts: ServeOptions) -> None:
    """The flags alone: a usage error before any file is read."""
    if opts.reviewers_per_item is not None and opts.reviewers_per_item < 1:
        raise UsageError("gate review serve: --reviewers-per-item must be 1 or more (default 2)")
    if not 0 <= opts.port <= 65535:
        raise UsageError(f"gate review serve: --port {opts.port} is not a port (0 to 65535; 0 lets the system pick)")
    if not is_loopback(opts.host) and opts.token is None:
        raise UsageError(
            f"gate review serve: --host {opts.host} serves the page beyond this machine, so it needs --token "
            "(a secret of at least 16 characters the printed address carries); fix: add --token, or drop --host "
            "to serve 127.0.0.1 only"
        )
    if opts.token is not None and (len(opts.token) < MIN_TOKEN_CHARS or not opts.token.isprintable()):
        raise UsageError(
            f"gate review serve: --token must be at least {MIN_TOKEN_CHARS} printable characters; "
            'fix: pass a long random one, e.g. `--token "$(python3 -c "import secrets; print(secrets.token_urlsafe())")"`'
        )
    ledger = from_working_directory(opts.ledger)
    if not ledger.exists() and not ledger.parent.is_dir():
        raise UsageError(
            f"{shown_path(opts.ledger)}: the ledger's directory does not exist; fix: create it, or pass "
            "--ledger in an existing directory (a directory for one file per reviewer, or a .jsonl file)"
        )


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio turns Nagle's algorithm off only on sockets that say they are TCP;
    # with it on, a keep-alive client waits for a delayed ACK (~40 ms) on every answer
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"gate review serve: cannot listen on {host}:{port} ({exc.strerror}); fix: pass another --port "
            "(0 lets the system pick one)"
        ) from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def address(host: str, port: int, token: str | None, path: str = "/") -> str:
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}{path}" + (f"?token={quote(token, safe='')}" if token else "")


def serve(opts: ServeOptions, out: TextIO = sys.stdout) -> int:
    """Serve the page until interrupted (Ctrl-C: exit 0)."""
    check_options(opts)
    from gate.commands.review import check_current_rubric, queue_policy
    from gate.review.queue import read_queue
    from gate.web.desk import Desk

    queue = read_queue(opts.queue)
    # K as `gate review status` and `export` count it: the policy's, unless the flag says otherwise
    policy = queue_policy(queue, opts.policy)
    check_current_rubric(queue, policy)
    k = opts.reviewers_per_item or policy.policy.review.reviewers_per_item
    if opts.ledger_directory and not from_working_directory(opts.ledger).exists():
        from_working_directory(opts.ledger).mkdir()
    desk = Desk(queue, opts.ledger, k, allow_self_adjudication=opts.allow_self_adjudication)
    gc.freeze()  # the queue lives as long as the page: no collection between two labels rescans it

    import uvicorn

    from gate.web.app import LOOPBACK_HOSTS, Settings, build_app

    hosts = LOOPBACK_HOSTS if is_loopback(opts.host) else frozenset()
    app = build_app(desk, Settings(hosts=hosts, access_token=opts.token))
    sock = bind(opts.host, opts.port)
    port = sock.getsockname()[1]
    where = "a directory, one file per reviewer" if from_working_directory(opts.ledger).is_dir() else "one file"
    out.write(
        f"Review page for {plural(len(queue.items), 'item')} of {shown_path(opts.queue)}, "
        f"{plural(k, 'reviewer')} an item; labels go to {shown_path(opts.ledger)} ({where}).\n"
        f"  label:      {address(opts.host, port, opts.token)}\n"
        f"  adjudicate: {address(opts.host, port, opts.token, '/adjudicate')}\n"
        + (
            f"  (on other machines, put this machine's name or address in place of {opts.host})\n"
            if opts.host in ("0.0.0.0", "::", "[::]")
            else ""
        )
        + "Stop with Ctrl-C: every label the page confirmed is already on disk.\n"
    )
    out.flush()
    config = uvicorn.Config(
        app, lifespan="off", log_level="warning", access_log=False, server_header=False, proxy_headers=False
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0
