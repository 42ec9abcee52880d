"""The provider fault matrix: each fault as a burst of 32 judgments at concurrency 32, through real
HTTP to the fake provider, compared with the fake's own request and usage log.

Each row names the fault, the behaviour the fake answers every request of a case with (the last
one repeats), the error kind every record must end with (None: a verdict), and how many requests
each judgment makes (`max_attempts` is 2). docs/RELIABILITY.md lists the same rows.

`timeout_s` bounds a whole judgment (ragas, the parse, the HTTP round trip) in the process that
runs 32 at once. It is short (0.5 s) only for the row whose fault is the timeout, where waiting for
it is the point; every other row answers at once and gets a bound no busy machine reaches, so a
loaded machine never turns its fault into a timeout.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from fake_openai import (
    Behaviour,
    FakeOpenAI,
    body,
    length,
    never_ends,
    rate_limited,
    raw,
    reply,
    reset_mid_body,
    server_error,
    unauthorized,
)
from suite import case, write_suite

from gate.cli import main

KEY_ENV = "GATE_TEST_KEY"
BURST = 32
TIMEOUT_ROW = "a reply that never ends"
PRICE_IN, PRICE_OUT = 1.0, 2.0
EMPTY_CHOICES = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 11, "completion_tokens": 0, "total_tokens": 11},
    }
)

# fault -> (behaviours, error kind of every record, requests per judgment)
MATRIX: dict[str, tuple[tuple[Behaviour, ...], str | None, int]] = {
    "429 with Retry-After, then a verdict": ((rate_limited(retry_after=0.3), reply("pass")), None, 2),
    "429 without Retry-After": ((rate_limited(retry_after=None),), "rate_limit", 2),
    "500": ((server_error(500),), "server_error", 2),
    "502": ((server_error(502),), "server_error", 2),
    "503": ((server_error(503),), "server_error", 2),
    "401": ((unauthorized(),), "auth", 1),
    "connection refused": ((), "connection", 2),
    "reset mid-body": ((reset_mid_body(),), "connection", 2),
    "a reply that never ends": ((never_ends(),), "timeout", 2),
    "malformed JSON": ((body('{"choices": [{"message": '),), "parse_error", 1),
    "empty choices": ((body(EMPTY_CHOICES),), "parse_error", 1),
    "label outside the list": ((raw('{"reason": "Looks right.", "value": "PASS"}'),), "invalid_label", 1),
    "missing reason": ((raw('{"value": "pass"}'),), "parse_error", 1),
    "missing usage": ((reply("pass", usage=False),), None, 1),
    "finish_reason length": ((length(),), "parse_error", 1),
}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-matrix")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there now


@pytest.mark.parametrize("fault", list(MATRIX))
def test_fault_burst(fault: str, tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    behaviours, kind, per_judgment = MATRIX[fault]
    ids = [f"b-{i:02d}" for i in range(BURST)]
    for cid in ids:
        if behaviours:
            fake_openai.script(f"Answer for {cid}:", *behaviours)
    base_url = fake_openai.base_url if behaviours else closed_port_url()
    ev = {
        "base_url": base_url,
        "max_concurrency": BURST,
        # 3 s: long enough that a loaded machine still gets some requests to the provider before
        # the timeout (at 0.5 s, load 13 timed out every attempt before its bytes were sent).
        "timeout_s": 3.0 if fault == TIMEOUT_ROW else 60.0,
        "retries": {"max_attempts": 2, "retry_on": ["rate_limit", "server_error", "timeout", "connection"]},
    }
    lanes = {"pr": {"partitions": ["sentinel"], "controls": False}}
    policy = write_suite(tmp_path / "s", [case(cid) for cid in ids], evaluator=ev, lanes=lanes)
    out = tmp_path / "out"
    code = main(["run", "--policy", str(policy), "--out", str(out), "--no-cache"])
    res: dict[str, Any] = json.loads((out / "result.json").read_text())
    recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]

    # Each ends as its documented kind; nothing lost, nothing double-counted.
    assert sorted(r["case_id"] for r in recs) == ids, fault
    assert {r["error_kind"] for r in recs} == {kind}, fault
    assert all(len(r["attempts"]) == per_judgment for r in recs), fault
    if kind is None:
        assert (code, res["state"]) == (0, "passed"), fault
    else:
        assert (code, res["state"]) == (3, "evaluation_incomplete"), fault
        assert sorted(next(b for b in res["blockers"] if b["kind"] == "evaluator_errors")["case_ids"]) == ids
    # Nothing double-paid: the bill is the provider's own log.
    sent = BURST * per_judgment
    assert res["cost"]["http_attempts"] == sent, fault
    journal = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    assert sum(e["event"] == "sent" for e in journal) == sent, fault  # each written ahead of its request
    if fault == TIMEOUT_ROW:
        # The timeout runs from before the request is built: on a busy machine an attempt can time
        # out before its bytes reach the provider. It is billed all the same (held at its
        # reservation, below), so the provider sees at most what the gate bills, and some arrive.
        assert 0 < fake_openai.count() <= sent, fault
    else:
        assert fake_openai.count() == (sent if behaviours else 0), fault
    pt, ct = fake_openai.usage_totals()
    billed = (pt * PRICE_IN + ct * PRICE_OUT) / 1e6
    if kind in ("timeout", "connection"):
        # No answer reached the gate (the fake may have billed a reply cut off in transit): each
        # attempt holds its reservation, an upper bound of what the provider can have billed.
        assert res["cost"]["unanswered_attempts"] == sent and res["cost"]["total"] == 0
        assert res["cost"]["budget_spent"] >= billed
    else:
        assert (res["cost"]["input_tokens"], res["cost"]["output_tokens"]) == (pt, ct), fault
        assert res["cost"]["total"] == pytest.approx(billed, rel=1e-12, abs=1e-15)
        assert res["cost"]["budget_spent"] >= res["cost"]["total"]
    if fault == "missing usage":
        assert res["cost"]["usage_missing"] == BURST and res["cost"]["budget_spent"] > 0
    if fault == "429 with Retry-After, then a verdict":  # honoured: no retry came back sooner
        for cid in ids:
            first, second = (r.arrival for r in fake_openai.requests_for(f"Answer for {cid}:"))
            assert second - first >= 0.3, cid
