"""The review page at scale: how fast a large queue opens, how fast the API answers, and how many
labels a reviewer reaches by keyboard (`bench/README.md` has the figures and what they mean).

    .venv/bin/python bench/review.py                       # 100,000 items, 1,000 labels, no browser
    .venv/bin/python bench/review.py --browser             # and a scripted reviewer in chromium
    .venv/bin/python bench/review.py --items 10000 --labels 300

1. **Open**: `gate review serve` on a queue of N items (question ~120 characters, evidence ~600,
   answer ~300, two evidence ids), from the process's start to its address printed, and to the
   first `/api/next` of a new reviewer answered (their order of N items is made then); also
   `read_queue` and the desk alone, in this process.
2. **API**: against that server (uvicorn on 127.0.0.1, the ledger a directory on this disk, every
   label fsynced before the answer), one reviewer in a loop `GET /api/next`, `POST /api/label`;
   then two reviewers at once (a thread each). p50, p95, p99 and max per endpoint, as the client
   sees them (HTTP/1.1 keep-alive).
3. **Keyboard** (`--browser`): a scripted reviewer in headless chromium, keys only (`1`, a
   reason, Enter), on a queue of N items, for `--seconds`: labels per minute, and the same
   reviewer through the API alone beside it, which is the page's ceiling.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

EXAMPLE = ROOT / "policies" / "example-product" / "policy.yaml"
WORDS = ("refund", "annual", "plan", "within", "days", "delivery", "customer", "support", "account", "the", "is", "of")


def text(i: int, n_words: int) -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(n_words)) + f" #{i}"


def write_big_queue(path: Path, n: int) -> None:
    from gate.model.loading import sha256_hex
    from gate.review.queue import QueueHeader, make_item, write_queue

    # the product example's policy, which `gate review serve` reads (review.reviewers_per_item) and checks
    header = QueueHeader(
        policy_id="support-app", policy_path=str(EXAMPLE), policy_sha256=sha256_hex(EXAMPLE.read_bytes()),
        rubric_version="r1",
        allowed_values=("pass", "fail"), sources=({"kind": "file", "path": "answers.jsonl", "sha256": "0" * 64},),
    )  # fmt: skip
    items = (
        make_item(
            case_id=f"case-{i:06d}",
            slice=f"slice-{i % 5}",
            user_input=text(i, 20),
            reference=text(i + 1, 100),
            evidence=[f"doc-{i % 97}", f"doc-{i % 89}"],
            response=text(i + 2, 50),
            source="file",
        )
        for i in range(n)
    )
    write_queue(path, header, items)


def percentiles(ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return f"p50 {q[49]:6.1f}  p95 {q[94]:6.1f}  p99 {q[98]:6.1f}  max {max(ms):6.1f} ms  (n={len(ms)})"


class Server:
    def __init__(self, work: Path, queue: str, ledger: str) -> None:
        started = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gate.cli", "review", "serve", queue, "--ledger", ledger, "--port", "0"],
            cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        self.address = ""
        for _ in range(6):
            line = self.proc.stdout.readline()
            if "label:" in line:
                self.address = line.split()[-1].rstrip("/")
                break
        if not self.address:
            raise SystemExit(
                f"gate review serve printed no address: {self.proc.stderr.read() if self.proc.stderr else ''}"
            )
        self.open_seconds = time.perf_counter() - started
        self.open_cpu = cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far (user + system), from /proc: what its start costs on a
    quiet machine, whatever else the cores were doing meanwhile."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def csrf(client: Any) -> str:
    import re

    found = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/").text)
    assert found
    return found.group(1)


def label_loop(address: str, reviewer: str, n: int, next_ms: list[float], label_ms: list[float]) -> None:
    import httpx

    with httpx.Client(base_url=address, timeout=30) as client:
        token = csrf(client)
        for _ in range(n):
            t0 = time.perf_counter()
            reply = client.get("/api/next", params={"reviewer": reviewer})
            next_ms.append((time.perf_counter() - t0) * 1000)
            item = reply.json()["item"]
            if item is None:
                return
            body = {"reviewer": reviewer, "item_id": item["item_id"], "label": "pass", "reason": "bench"}
            t0 = time.perf_counter()
            answer = client.post("/api/label", json=body, headers={"X-Gate-CSRF": token})
            label_ms.append((time.perf_counter() - t0) * 1000)
            assert answer.status_code == 200, answer.text


def bench_open_and_api(work: Path, n: int, labels: int) -> None:
    from gate.review.queue import read_queue
    from gate.web.desk import Desk

    queue_path = work / "queue.jsonl"
    t0 = time.perf_counter()
    write_big_queue(queue_path, n)
    size = queue_path.stat().st_size
    print(f"queue: {n:,} items, {size / 1e6:.0f} MB (written in {time.perf_counter() - t0:.1f} s, not timed below)")
    t0, c0 = time.perf_counter(), time.process_time()
    queue = read_queue(queue_path)
    t_read, c_read = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    desk = Desk(queue, work / "empty-ledger.jsonl")
    t_desk = time.perf_counter() - t0
    t0 = time.perf_counter()
    desk.next_item("first-reviewer")
    t_first = time.perf_counter() - t0
    del desk, queue
    print(
        f"in process: read_queue {t_read:.2f} s ({c_read:.2f} CPU-s), the desk {t_desk:.2f} s, "
        f"a new reviewer's first item {t_first * 1000:.0f} ms"
    )

    (work / "labels").mkdir()
    server = Server(work, "queue.jsonl", "labels")
    try:
        import httpx

        with httpx.Client(base_url=server.address, timeout=30) as client:
            t0 = time.perf_counter()
            client.get("/api/next", params={"reviewer": "opener"}).raise_for_status()
            t_first_http = time.perf_counter() - t0
        print(
            f"gate review serve: address printed {server.open_seconds:.2f} s after the process started "
            f"({server.open_cpu:.2f} CPU-s of its own); "
            f"first /api/next of a new reviewer {t_first_http * 1000:.0f} ms later "
            f"(open to first item {server.open_seconds + t_first_http:.2f} s; target under 2 s)"
        )
        next_ms: list[float] = []
        label_ms: list[float] = []
        label_loop(server.address, "bench-one", labels, next_ms, label_ms)
        print("one reviewer, sequential:")
        print(f"  GET  /api/next   {percentiles(next_ms)}")
        print(f"  POST /api/label  {percentiles(label_ms)}")
        both_next: list[float] = []
        both_label: list[float] = []
        threads = [
            threading.Thread(target=label_loop, args=(server.address, who, labels // 2, both_next, both_label))
            for who in ("bench-two", "bench-three")
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("two reviewers at once:")
        print(f"  GET  /api/next   {percentiles(both_next)}")
        print(f"  POST /api/label  {percentiles(both_label)}")
    finally:
        server.stop()


def bench_keyboard(work: Path, n: int, seconds: float) -> None:
    import review_ui
    from selenium.webdriver.common.keys import Keys

    browser_dir = work / "keyboard"
    browser_dir.mkdir()
    write_big_queue(browser_dir / "queue.jsonl", n)
    (browser_dir / "labels").mkdir()
    server = Server(browser_dir, "queue.jsonl", "labels")
    driver = review_ui.browser()
    try:
        review_ui.give_name(driver, server.address, "/", "keyboard-reviewer")
        review_ui.wait(driver, lambda d: review_ui.shown(d, "item"), "the first item")
        done = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            before = review_ui.text_of(driver, "response")
            review_ui.keys(driver, "1", "ok", Keys.ENTER)
            review_ui.wait(driver, lambda d, b=before: review_ui.text_of(d, "response") != b, "the next item")
            done += 1
        elapsed = time.perf_counter() - t0
        page_rate = done / elapsed * 60
        next_ms: list[float] = []
        label_ms: list[float] = []
        t0 = time.perf_counter()
        label_loop(server.address, "api-reviewer", done, next_ms, label_ms)
        api_rate = done / (time.perf_counter() - t0) * 60
        print(f"keyboard in chromium: {done} labels in {elapsed:.0f} s = {page_rate:,.0f} labels/min "
              f"(keys 1, 'ok', Enter; waits for the next item shown)")  # fmt: skip
        print(f"the same reviewer through the API alone: {api_rate:,.0f} labels/min (the page's ceiling)")
    finally:
        driver.quit()
        server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--labels", type=int, default=1000, help="labels the API loop sends (default 1000)")
    ap.add_argument("--browser", action="store_true", help="also the keyboard reviewer in chromium")
    ap.add_argument("--browser-items", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60.0, help="how long the keyboard reviewer labels")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gate-bench-review-") as tmp:
        work = Path(tmp)
        bench_open_and_api(work, args.items, args.labels)
        if args.browser:
            bench_keyboard(work, args.browser_items, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
