"""The review page (`gate review serve`), driven in process through Starlette's TestClient (httpx),
and as a real uvicorn server on 127.0.0.1 where only a process shows it: two reviewers and two
tabs at once, `kill -9` mid-labelling, and that the server writes nothing but the ledger.

The browser's own part (keys, focus, an answer holding `<script>` shown as text, the screenshot)
is scripts/review_ui.py (`make ui-test`).
"""

from __future__ import annotations

import asyncio
import hashlib
import html.parser
import json
import re
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gate_process
import httpx
import pytest
from starlette.testclient import TestClient
from suite import write_suite

from gate.cli import main
from gate.review.ledger import EMPTY_SHA256, final_labels, read_ledger
from gate.review.queue import QueueHeader, make_item, read_queue, write_queue
from gate.web.app import CSP, Settings, build_app
from gate.web.desk import Desk
from gate.web.serve import address, bind

WEB = Path(__file__).resolve().parents[2] / "gate" / "web"
XSS = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2"></textarea><b>bold</b>'
LOCAL = "http://127.0.0.1:8765"


def write_test_queue(
    path: Path, n: int = 4, *, labels: tuple[str, ...] = ("pass", "fail"), stratum: bool = True, **policy: Any
) -> Path:
    """A queue of n items, and beside it the policy it labels for (`policy.yaml`, with `policy` set)."""
    write_suite(path.parent, policy_id="support-refunds", **policy)
    header = QueueHeader(
        policy_id="support-refunds",
        policy_path="policy.yaml",
        policy_sha256="0" * 64,
        rubric_version="rubric-1",
        allowed_values=labels,
        sources=({"kind": "product-audit", "path": "gate-out", "sha256": "0" * 64},),
        design={"seed": "7", "strata": {"judged_fail": {"population": n, "sample": n}}},
    )
    items = [
        make_item(
            case_id=f"case-{i}",
            slice="billing",
            user_input=f"question {i}",
            reference=f"evidence text {i}",
            evidence=[f"doc-{i}", "doc-shared"],
            response=f"answer {i} {XSS}" if i == 0 else f"answer {i}",
            source="product-audit",
            stratum="judged_fail" if stratum else None,
            draw=i if stratum else None,
        )
        for i in range(n)
    ]
    write_queue(path, header, items)
    return path


class Page:
    """One browser tab's view of the API: the page's CSRF token on every write, as its script sends it."""

    def __init__(self, client: TestClient, settings: Settings) -> None:
        self.client = client
        self.settings = settings

    def next(self, reviewer: str) -> dict[str, Any]:
        reply = self.client.get("/api/next", params={"reviewer": reviewer})
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(path, json=body, headers={"X-Gate-CSRF": self.settings.csrf_token})

    def label(self, reviewer: str, item_id: str, label: str, reason: str = "the evidence says so") -> httpx.Response:
        return self.post("/api/label", {"reviewer": reviewer, "item_id": item_id, "label": label, "reason": reason})

    def label_next(self, reviewer: str, label: str, reason: str = "the evidence says so") -> str:
        item = self.next(reviewer)["item"]
        assert item is not None
        reply = self.label(reviewer, item["item_id"], label, reason)
        assert reply.status_code == 200, reply.text
        return str(item["item_id"])


def page_for(tmp_path: Path, n: int = 4, k: int = 2, *, allow_self: bool = False, **kw: Any) -> tuple[Page, Path]:
    queue = read_queue(write_test_queue(tmp_path / "queue.jsonl", n))
    ledger = tmp_path / "labels"
    ledger.mkdir(exist_ok=True)
    settings = Settings(**kw)
    desk = Desk(queue, ledger, k, allow_self_adjudication=allow_self)
    return Page(TestClient(build_app(desk, settings), base_url=LOCAL), settings), ledger


def ledger_lines(ledger: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(ledger.glob("*.jsonl")) for line in path.read_text().splitlines()]


# -- the page ---------------------------------------------------------------------------------


def test_each_reviewer_labels_every_item_once_in_an_order_of_their_own(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=6)
    orders = {who: [page.label_next(who, "pass") for _ in range(6)] for who in ("ann", "bob")}
    assert sorted(orders["ann"]) == sorted(orders["bob"]) and len(set(orders["ann"])) == 6
    assert orders["ann"] != orders["bob"]  # seeded by the name: another person, another order
    assert page.next("ann")["item"] is None and page.next("bob")["item"] is None
    lines = ledger_lines(ledger)
    assert {p.name for p in ledger.iterdir()} == {"ann.jsonl", "bob.jsonl"}  # one file a reviewer
    assert len(lines) == 12 and all(line["kind"] == "label" and line["blind"] for line in lines)
    assert {line["queue_sha256"] for line in lines} == {read_queue(tmp_path / "queue.jsonl").sha256}


def test_an_item_with_its_k_labels_leaves_everyone_elses_queue(tmp_path: Path) -> None:
    page, _ = page_for(tmp_path, n=3, k=2)
    labelled = {page.label_next("ann", "pass") for _ in range(3)} & {page.label_next("bob", "fail") for _ in range(3)}
    assert len(labelled) == 3
    assert page.next("carl")["item"] is None  # every item has its 2 labels


def test_an_item_shows_the_question_evidence_and_answer_and_nothing_of_the_judge_or_the_others(tmp_path: Path) -> None:
    page, _ = page_for(tmp_path, n=2, k=3)
    first = page.next("ann")["item"]
    assert set(first) == {"item_id", "slice", "user_input", "reference", "evidence", "response"}
    assert page.label("ann", first["item_id"], "fail", "ann-secret-reason").status_code == 200
    shown = json.dumps(
        [
            page.next("bob"),
            page.client.get("/api/status", params={"reviewer": "bob"}).json(),
            page.client.get("/").text,
        ]
    )
    # the stratum an audit drew the item from is what the judge decided; the draw, its place
    for word in ("judged_fail", "stratum", "draw", "ann-secret-reason", "ann", "verdict", "model"):
        assert word not in shown, word


def test_undo_appends_a_retraction_and_the_item_comes_back(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=2)
    item = page.label_next("ann", "pass")
    reply = page.post("/api/undo", {"reviewer": "ann"})
    assert reply.status_code == 200 and reply.json()["item"]["item_id"] == item
    assert page.next("ann")["item"]["item_id"] == item
    assert page.label("ann", item, "fail").status_code == 200
    kinds = [(line["kind"], line["label"]) for line in ledger_lines(ledger)]
    assert kinds == [("label", "pass"), ("retraction", "pass"), ("label", "fail")]  # nothing rewritten


def test_a_second_label_of_one_item_from_another_tab_is_refused(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=2)
    item = page.next("ann")["item"]["item_id"]
    assert page.label("ann", item, "pass").status_code == 200
    again = page.label("ann", item, "fail")  # the other tab still showed it
    assert again.status_code == 409 and "undo" in again.json()["error"]
    assert len(ledger_lines(ledger)) == 1


def test_a_label_past_the_k_th_is_refused_and_the_reviewer_gets_the_next_item(tmp_path: Path) -> None:
    """Bob and carl had the same item open when it had one label of two: bob's gives it its second;
    carl's, sent a moment later, is refused (no third label the design did not ask for), and
    carl's page moves on to the next item."""
    page, ledger = page_for(tmp_path, n=2, k=2)
    item = page.label_next("ann", "pass")
    assert page.label("bob", item, "fail").status_code == 200
    late = page.label("carl", item, "fail")
    assert late.status_code == 409, late.text
    assert "its 2 labels" in late.json()["error"] and "the next one" in late.json()["error"]
    assert [line["reviewer"] for line in ledger_lines(ledger)] == ["ann", "bob"]
    assert page.next("carl")["item"]["item_id"] != item


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"label": "maybe"}, "not one of pass, fail, abstain"),
        ({"reason": "  "}, "every label needs a reason"),
        ({"evidence": ["doc-elsewhere"]}, "not one of this item's evidence ids"),
        ({"reviewer": "ann smith"}, "name must be"),
        ({"item_id": "0" * 64}, "not in this queue"),
    ],
)
def test_a_bad_label_is_refused_and_writes_nothing(tmp_path: Path, body: dict[str, Any], says: str) -> None:
    page, ledger = page_for(tmp_path, n=1)
    item = page.next("ann")["item"]["item_id"]
    reply = page.post("/api/label", {"reviewer": "ann", "item_id": item, "label": "pass", "reason": "r", **body})
    assert reply.status_code in (400, 404) and says in reply.json()["error"]
    assert ledger_lines(ledger) == []


def test_abstain_is_a_label(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=1)
    page.label_next("ann", "abstain", "the evidence does not say")
    assert ledger_lines(ledger)[0]["label"] == "abstain"


# -- adjudication ----------------------------------------------------------------------------


def test_a_disagreement_is_settled_by_someone_who_did_not_label_it(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=1)
    item = page.label_next("ann", "pass", "ann says pass")
    page.label_next("bob", "fail", "bob says fail")
    listed = page.client.get("/api/adjudicate", params={"adjudicator": "cat"}).json()
    assert listed["awaiting"] == 1
    shown = listed["items"][0]
    assert shown["item_id"] == item and shown["you_labelled"] is False
    assert {(x["reviewer"], x["label"], x["reason"]) for x in shown["labels"]} == {
        ("ann", "pass", "ann says pass"),
        ("bob", "fail", "bob says fail"),
    }
    own = page.post("/api/adjudicate", {"adjudicator": "ann", "item_id": item, "label": "pass", "reason": "mine"})
    assert own.status_code == 403 and "another person" in own.json()["error"]
    settled = page.post("/api/adjudicate", {"adjudicator": "cat", "item_id": item, "label": "fail", "reason": "doc-0"})
    assert settled.status_code == 200 and settled.json()["self_adjudication"] is False
    queue = read_queue(tmp_path / "queue.jsonl")
    final = final_labels(read_ledger(ledger, queue), queue, 2)[item]
    assert (final.status, final.label, final.adjudicator) == ("adjudicated", "fail", "cat")
    assert page.client.get("/api/adjudicate", params={"adjudicator": "cat"}).json()["awaiting"] == 0
    assert (
        page.post(
            "/api/adjudicate", {"adjudicator": "dan", "item_id": item, "label": "pass", "reason": "x"}
        ).status_code
        == 409
    )


def test_self_adjudication_when_allowed_is_recorded(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=1, allow_self=True)
    item = page.label_next("ann", "pass")
    page.label_next("bob", "abstain")
    assert page.client.get("/api/adjudicate", params={"adjudicator": "ann"}).json()["items"][0]["you_labelled"]
    reply = page.post("/api/adjudicate", {"adjudicator": "ann", "item_id": item, "label": "pass", "reason": "r"})
    assert reply.status_code == 200 and reply.json()["self_adjudication"] is True
    (line,) = [x for x in ledger_lines(ledger) if x["kind"] == "adjudication"]
    assert line["reviewer"] == "ann" and line["self_adjudication"] is True


def test_labels_that_agree_await_no_adjudication(tmp_path: Path) -> None:
    page, _ = page_for(tmp_path, n=1)
    item = page.label_next("ann", "pass")
    page.label_next("bob", "pass")
    assert page.client.get("/api/adjudicate", params={"adjudicator": "cat"}).json()["awaiting"] == 0
    reply = page.post("/api/adjudicate", {"adjudicator": "cat", "item_id": item, "label": "fail", "reason": "r"})
    assert reply.status_code == 409


# -- untrusted text, CSP, CSRF, binding ------------------------------------------------------


class _Scripts(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[dict[str, str | None]] = []
        self.inline: list[str] = []
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handlers += [name for name, _ in attrs if name.startswith("on")]
        if tag == "script":
            self.scripts.append(dict(attrs))
            self._in_script = True

    def handle_endtag(self, tag: str) -> None:
        self._in_script = self._in_script and tag != "script"

    def handle_data(self, data: str) -> None:
        if self._in_script and data.strip():
            self.inline.append(data)


def test_every_page_loads_script_from_static_files_only_and_says_so_in_its_policy(tmp_path: Path) -> None:
    page, _ = page_for(tmp_path)
    for path in ("/", "/adjudicate"):
        parsed = _Scripts()
        parsed.feed(page.client.get(path).text)
        assert parsed.scripts and all(str(s.get("src", "")).startswith("/static/") for s in parsed.scripts)
        assert parsed.inline == [] and parsed.handlers == []
    for path in ("/", "/adjudicate", "/api/next?reviewer=ann", "/static/review.js", "/nowhere"):
        reply = page.client.get(path)
        policy = reply.headers["content-security-policy"]
        assert policy == CSP and "script-src 'self';" in policy and "unsafe-inline" not in policy, path
        assert reply.headers["x-content-type-options"] == "nosniff" and reply.headers["x-frame-options"] == "DENY"


def test_text_from_the_queue_is_escaped_and_the_script_writes_text_only(tmp_path: Path) -> None:
    """The header's labels and policy id go through the templates (autoescaped); an item's texts go
    through the page's script, which sets textContent and never parses HTML."""
    hostile = '<img src=x onerror="alert(1)">'
    path = write_test_queue(tmp_path / "queue.jsonl", 1, labels=("pass", hostile))
    queue = read_queue(path)
    client = TestClient(build_app(Desk(queue, tmp_path / "ledger.jsonl")), base_url=LOCAL)
    for view in ("/", "/adjudicate"):
        text = client.get(view).text
        assert hostile not in text and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in text
        assert "window.pwned" not in text  # an item's text is never in the HTML
    for script in (WEB / "static").glob("*.js"):
        code = script.read_text()
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", code)


def test_a_cross_site_form_post_labels_nothing(tmp_path: Path) -> None:
    page, ledger = page_for(tmp_path, n=1)
    item = page.next("ann")["item"]["item_id"]
    form = {"reviewer": "mallory", "item_id": item, "label": "pass", "reason": "forged"}
    evil = {"Origin": "https://evil.example", "Referer": "https://evil.example/x"}
    attempts = [
        page.client.post("/api/label", data=form, headers=evil),  # what a cross-site <form> can send
        page.client.post("/api/label", json=form, headers=evil),
        page.client.post("/api/label", json=form, headers={"X-Gate-CSRF": "a-guessed-token"}),
        page.client.post("/api/undo", json={"reviewer": "ann"}, headers=evil),
        page.client.post("/api/adjudicate", json={**form, "adjudicator": "mallory"}),
        page.client.post(
            "/api/label",
            content=json.dumps(form),
            headers={"X-Gate-CSRF": page.settings.csrf_token, "Content-Type": "text/plain"},
        ),
    ]
    assert [r.status_code for r in attempts] == [403, 403, 403, 403, 403, 415]
    assert ledger_lines(ledger) == []
    assert page.label("ann", item, "pass").status_code == 200  # the page's own token works
    assert Settings().csrf_token != page.settings.csrf_token  # a secret of each server


def test_the_page_answers_only_as_127_0_0_1(tmp_path: Path) -> None:
    """A site that points its own name at 127.0.0.1 (DNS rebinding) gets nothing."""
    page, _ = page_for(tmp_path)
    assert page.client.get("/api/status").status_code == 200
    rebound = page.client.get("/api/status", headers={"Host": "evil.example:8765"})
    assert rebound.status_code == 403 and "127.0.0.1" in rebound.text


def test_another_host_needs_the_token_in_the_address(tmp_path: Path) -> None:
    token = "s3cret-token-of-the-team-0123"
    page, _ = page_for(tmp_path, hosts=frozenset(), access_token=token)
    assert page.client.get("/").status_code == 403
    assert (
        page.client.get("/api/next", params={"reviewer": "ann", "token": "wrong-token-wrong-token"}).status_code == 403
    )
    opened = page.client.get("/", params={"token": token})
    assert opened.status_code == 200 and "HttpOnly" in opened.headers["set-cookie"]
    assert page.next("ann")["item"] is not None  # the cookie the address set carries it on


def test_the_printed_address_carries_the_token() -> None:
    assert address("0.0.0.0", 8765, "a/b+c d=e-0123456789") == "http://0.0.0.0:8765/?token=a%2Fb%2Bc%20d%3De-0123456789"
    assert address("::1", 80, None, "/adjudicate") == "http://[::1]:80/adjudicate"


def test_serve_refuses_another_host_without_a_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queue = write_test_queue(tmp_path / "queue.jsonl", 1)
    assert main(["review", "serve", str(queue), "--ledger", str(tmp_path), "--host", "0.0.0.0"]) == 2
    assert "needs --token" in capsys.readouterr().err
    assert (
        main(["review", "serve", str(queue), "--ledger", str(tmp_path), "--host", "0.0.0.0", "--token", "short"]) == 2
    )
    assert "at least 16" in capsys.readouterr().err


# -- bad files: exit 2 before the page opens -------------------------------------------------


def _good_line(queue_path: Path) -> dict[str, Any]:
    queue = read_queue(queue_path)
    item = queue.items[0]
    return {
        "kind": "label", "item_id": item.item_id, "case_id": item.case_id, "response_sha256": item.response_sha256,
        "reviewer": "ann", "label": "pass", "reason": "r", "evidence": [], "at": "2026-01-01T00:00:00Z",
        "queue_sha256": queue.sha256, "rubric_version": "rubric-1", "blind": True,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("{not json", "not a JSON object"),
        ({"label": "maybe"}, "label `maybe` is not one of pass, fail, abstain"),
        ({"item_id": "f" * 64, "queue_sha256": "e" * 64}, "is in no queue given"),
    ],
)
def test_serve_refuses_a_ledger_it_cannot_use_naming_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: Any, says: str
) -> None:
    queue = write_test_queue(tmp_path / "queue.jsonl", 1)
    good = json.dumps({**_good_line(queue), "prev": EMPTY_SHA256})
    after = {"prev": hashlib.sha256(good.encode()).hexdigest()}  # the chain holds: the line itself is at fault
    bad = line if isinstance(line, str) else json.dumps({**_good_line(queue), **after, **line})
    (tmp_path / "ledger.jsonl").write_text(f"{good}\n{bad}\n")
    code = main(["review", "serve", str(queue), "--ledger", str(tmp_path / "ledger.jsonl"), "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "ledger.jsonl:2" in err and says in err, err


@pytest.mark.parametrize("rubrics", [["rubric-2"], ["rubric-1", "rubric-2"]])
def test_serve_refuses_a_queue_built_under_a_rubric_the_policy_no_longer_gates_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rubrics: list[str]
) -> None:
    """The policy moved to rubric-2 (rubric-1 dropped, or kept as history) after the queue was built under
    rubric-1: the page served it, people labelled by today's rules under the old rubric's name, and every
    reader then refused those lines (a dropped rubric) or the product audit never used them (an older
    one). Refused before the page opens (exit 2), naming the queue, both rubrics and the fix."""
    queue = write_test_queue(tmp_path / "queue.jsonl", 1, rubrics=rubrics)
    code = main(["review", "serve", str(queue), "--ledger", str(tmp_path / "labels.jsonl"), "--port", "0"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "queue.jsonl" in err, err
    assert "built under rubric rubric-1" in err and "the policy gates under rubric-2" in err, err
    assert "gate review queue" in err and not (tmp_path / "labels.jsonl").exists()


# -- a real server: two at once, kill -9, nothing written but the ledger ---------------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path, Any]]:
    """`gate review serve` in a process of its own on 127.0.0.1, a free port, its working directory
    tmp_path; yields its address, the ledger directory and the process."""
    write_test_queue(tmp_path / "queue.jsonl", 20)
    proc = start_server(tmp_path)
    try:
        yield read_address(proc), tmp_path / "labels", proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def start_server(cwd: Path) -> Any:
    argv = ["review", "serve", "queue.jsonl", "--ledger", "labels/", "--port", "0"]  # made a directory
    return gate_process.popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def read_address(proc: Any) -> str:
    for _ in range(5):
        line = proc.stdout.readline()
        found = re.search(r"label:\s+(http://127\.0\.0\.1:\d+)/", line)
        if found:
            return found.group(1)
    raise AssertionError(f"no address printed: {proc.stderr.read()}")


def csrf_of(client: httpx.Client) -> str:
    found = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/").text)
    assert found
    return found.group(1)


def labeller(
    base: str,
    reviewer: str,
    confirmed: list[dict[str, str]],
    stop: threading.Event,
    together: threading.Barrier | None = None,
    halfway: threading.Barrier | None = None,
) -> None:
    """One tab: label what /api/next gives until nothing is left; keep what the server confirmed.
    Tabs that share `together` send each label at the same moment (the same item, from two tabs).
    A tab given `halfway` waits there once the server confirmed its 4th label, then goes on."""
    mine = 0
    with httpx.Client(base_url=base, timeout=30) as client:
        token = csrf_of(client)
        while not stop.is_set():
            try:
                item = client.get("/api/next", params={"reviewer": reviewer}).json()["item"]
                if together is not None:
                    together.wait(timeout=30)
                if item is None:
                    return
                body = {"reviewer": reviewer, "item_id": item["item_id"], "label": "pass", "reason": f"by {reviewer}"}
                reply = client.post("/api/label", json=body, headers={"X-Gate-CSRF": token})
                if together is not None:
                    together.wait(timeout=30)
            except httpx.TransportError:
                return  # the server was killed
            if reply.status_code == 200:
                confirmed.append({"sha": reply.json()["line_sha256"], "item": item["item_id"], "who": reviewer})
                mine += 1
                if halfway is not None and mine == 4:
                    halfway.wait(timeout=60)
            else:
                assert reply.status_code == 409, reply.text  # the other tab labelled it first


def test_two_reviewers_and_two_tabs_at_once_lose_and_interleave_nothing(server: tuple[str, Path, Any]) -> None:
    base, ledger, _ = server
    confirmed: list[dict[str, str]] = []
    stop = threading.Event()
    barriers = {"ann": threading.Barrier(2), "bob": threading.Barrier(2)}
    tabs = [
        threading.Thread(target=labeller, args=(base, who, confirmed, stop, barriers[who]))
        for who in ("ann", "ann", "bob", "bob")
    ]
    for tab in tabs:
        tab.start()
    for tab in tabs:
        tab.join(timeout=60)
    queue = read_queue(ledger.parent / "queue.jsonl")
    lines = read_ledger(ledger, queue)  # every line whole and valid
    assert sorted(x.line_sha256 for x in lines) == sorted(c["sha"] for c in confirmed)
    # each of the two labelled each of the 20 items once: of two tabs sending one item, one is refused
    assert len(confirmed) == 40
    assert {(x.reviewer, x.item_id) for x in lines} == {(c["who"], c["item"]) for c in confirmed}


def test_kill_9_mid_labelling_loses_no_confirmed_label(server: tuple[str, Path, Any], tmp_path: Path) -> None:
    base, ledger, proc = server
    confirmed: list[dict[str, str]] = []
    stop = threading.Event()
    # Both tabs labelling when the kill comes, however slowly either starts under load: each waits
    # after its 4th confirmed label until the other has 4 too, then both go on, and the page is killed
    # as their next labels are written (polling for 8 labels let one fast tab reach them while the
    # other had not opened the page: it proved nothing of two tabs, and that tab's ConnectError was lost).
    halfway = threading.Barrier(3)
    tabs = [
        threading.Thread(target=labeller, args=(base, who, confirmed, stop), kwargs={"halfway": halfway})
        for who in ("ann", "bob")
    ]
    for tab in tabs:
        tab.start()
    halfway.wait(timeout=60)
    while len(confirmed) < 10 and all(t.is_alive() for t in tabs):
        threading.Event().wait(0.002)
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    stop.set()
    for tab in tabs:
        tab.join(timeout=60)
    queue = read_queue(tmp_path / "queue.jsonl")
    lines = read_ledger(ledger, queue)  # every line whole: no line cut off by the kill
    assert {c["sha"] for c in confirmed} <= {x.line_sha256 for x in lines}
    again = start_server(tmp_path)  # the page opens again on what was written, and goes on
    try:
        address = read_address(again)
        with httpx.Client(base_url=address) as client:
            left = client.get("/api/status", params={"reviewer": "ann"}).json()["you"]["left"]
        assert left == 20 - sum(1 for x in lines if x.reviewer == "ann")
    finally:
        again.kill()
        again.wait(timeout=30)


def test_the_server_writes_nothing_but_the_ledger(server: tuple[str, Path, Any], tmp_path: Path) -> None:
    def files() -> dict[str, int]:
        return {str(p.relative_to(tmp_path)): p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}

    base, _, _ = server  # started in tmp_path, which held the queue and an empty labels/
    before = files()
    assert "queue.jsonl" in before and not any(name.startswith("labels") for name in before)
    with httpx.Client(base_url=base) as client:
        token = csrf_of(client)
        item = client.get("/api/next", params={"reviewer": "ann"}).json()["item"]
        body = {"reviewer": "ann", "item_id": item["item_id"], "label": "fail", "reason": "r"}
        assert client.post("/api/label", json=body, headers={"X-Gate-CSRF": token}).status_code == 200
        client.get("/adjudicate")
        client.get("/static/review.css")
    after = files()
    assert {k: v for k, v in after.items() if k != "labels/ann.jsonl"} == before
    assert "labels/ann.jsonl" in after


def test_serve_takes_the_reviewers_an_item_from_the_policy_as_status_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """review.reviewers_per_item: 3 in the queue's policy: the page keeps an item in the queue until
    its third label, as `gate review status` counts it; --reviewers-per-item overrides both."""
    write_test_queue(tmp_path / "queue.jsonl", 1, review={"reviewers_per_item": 3})
    proc = start_server(tmp_path)
    try:
        banner = proc.stdout.readline()
        base = read_address(proc)
        assert "3 reviewers an item" in banner, banner
        with httpx.Client(base_url=base) as client:
            token = csrf_of(client)
            for who in ("ann", "bob"):
                item = client.get("/api/next", params={"reviewer": who}).json()["item"]
                body = {"reviewer": who, "item_id": item["item_id"], "label": "pass", "reason": "r"}
                assert client.post("/api/label", json=body, headers={"X-Gate-CSRF": token}).status_code == 200
            assert client.get("/api/next", params={"reviewer": "cat"}).json()["item"] is not None  # 2 of 3
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert main(["review", "status", str(tmp_path / "queue.jsonl"), "--ledger", str(tmp_path / "labels")]) == 0
    assert "1 item, 0 with 3 labels or settled" in capsys.readouterr().out
    code = main(["review", "status", str(tmp_path / "queue.jsonl"), "--ledger", str(tmp_path / "labels"),
                 "--reviewers-per-item", "2"])  # fmt: skip
    assert code == 0 and "1 item, 1 with 2 labels or settled" in capsys.readouterr().out


def test_the_servers_socket_sends_each_answer_at_once() -> None:
    """Nagle's algorithm off on every connection: otherwise a keep-alive client (a browser, httpx)
    waits for a delayed ACK, ~40 ms, on every answer. asyncio turns it off only on a socket that
    says it is TCP."""

    async def accepted_nodelay() -> int:
        seen: list[int] = []
        listening = bind("127.0.0.1", 0)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            seen.append(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(handle, sock=listening)
        async with server:
            reader, writer = await asyncio.open_connection(*listening.getsockname()[:2])
            await reader.read()
            writer.close()
        return seen[0]

    assert asyncio.run(accepted_nodelay()) != 0
