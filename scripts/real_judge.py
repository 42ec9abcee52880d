"""`make real-judge`: the example's lanes judged by a real model on llama.cpp's own HTTP server.

Every other test talks to fakes we wrote. This one starts llama.cpp's server (scripts/llama_server.py,
under the real-judge venv) with a small model on 127.0.0.1, puts a counting pass-through in front
of it, and runs the real `gate run` on a copy of the example policy pointed at it. It then asserts
what must hold against ANY real server, whatever the model answers:
- every judgment is pass, fail or an evaluator error (never a crash, never a usage error);
- `cost.http_attempts` equals the requests that reached the server, and the prompt and completion
  tokens the gate metered equal what the server counted (its /metrics);
- the controls were judged before any other case;
- the state agrees with `gate decide` on the records.
It prints the latency per judgment and the share of judgments that came back with a label, per
response format (`evaluator.response_format`: json_object asks for JSON and hopes; json_schema
constrains decoding to the verdict's schema). `--capture DIR` keeps every reply body it saw.
A small model is a poor judge: this checks the plumbing against a real server, not the prompt.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
GATE = ROOT / ".venv" / "bin" / "gate"
EXAMPLE = ROOT / "policies" / "example"
MODEL_NAME = "smollm2-135m-instruct-q4_1"
_EXIT_STATES = {0: "passed", 1: "quality_failed", 3: "evaluation_incomplete", 4: "review_required"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Tally:
    """What crossed the pass-through: one entry per request, with the reply it got."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    replies: list[tuple[int, bytes]] = field(default_factory=list)


def counting_proxy(upstream_port: int, tally: Tally) -> ThreadingHTTPServer:
    """A pass-through on 127.0.0.1 that counts every chat-completions request it forwards."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in {"host", "content-length"}}
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=900)
            try:
                conn.request("POST", self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                status, reply_headers = answer.status, answer.getheaders()
            except OSError:
                self.close_connection = True  # the client sees a dropped connection, as it would
                return
            finally:
                conn.close()
            with tally.lock:
                if self.path.endswith("/chat/completions"):
                    tally.requests += 1
                    tally.replies.append((status, data))
            try:
                self.send_response(status)
                for key, value in reply_headers:
                    if key.lower() not in {"transfer-encoding", "connection", "content-length"}:
                        self.send_header(key, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the gate gave up on this attempt (timeout): it is still counted above

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def server_metrics(port: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    figures: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition(" ")
            figures[name] = float(value)
    return figures


def start_server(python: Path, slots: int, ctx: int) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    cmd = [str(python), str(ROOT / "scripts" / "llama_server.py"), "--port", str(port)]
    cmd += ["--slots", str(slots), "--ctx", str(ctx)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 300
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("listening"):
            return proc, port
        if time.monotonic() > deadline:
            break
    proc.kill()
    sys.exit(f"real-judge: llama.cpp's server did not start (exit {proc.wait()}); run it by hand: {' '.join(cmd)}")


def policy_copy(workdir: Path, *, base_url: str, slots: int, response_format: str) -> Path:
    """The example policy, judged by the local model: its own directory, so nothing of the example
    changes. Sampling and prices stay the example's; concurrency matches the server's slots."""
    target = workdir / f"policy-{response_format}"
    shutil.copytree(EXAMPLE, target)
    path = target / "policy.yaml"
    policy = yaml.safe_load(path.read_text())
    policy["evaluator"].update(
        model=MODEL_NAME,
        base_url=base_url,
        max_concurrency=slots,
        timeout_s=600,  # a request waits in the server's queue while its timeout runs
        max_output_tokens=96,
    )
    if response_format != "json_object":  # the default, left unwritten as a team would
        policy["evaluator"]["response_format"] = response_format
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


@dataclass(frozen=True)
class LaneRun:
    response_format: str
    exit_code: int
    state: str
    decided_state: str
    judgments: int
    labelled: int
    latencies_ms: tuple[float, ...]
    seconds: float


def run_lane(policy: Path, lane: str, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [str(GATE), "run", "--policy", str(policy), "--lane", lane, "--out", str(out), "--no-cache"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)


Counters = Callable[[], tuple[int, tuple[float, float]]]


def check_run(fmt: str, policy: Path, lane: str, out: Path, env: dict[str, str], counters: Counters) -> LaneRun:
    """Run the lane once; then the assertions that hold against any real server. `counters` gives,
    after the run, the requests the pass-through forwarded and the (prompt, generated) tokens the
    server counted during it."""
    started = time.monotonic()
    proc = run_lane(policy, lane, out, env)
    seconds = time.monotonic() - started
    sent, tokens = counters()
    failures: list[str] = []
    if proc.returncode not in _EXIT_STATES or "Traceback" in proc.stderr:
        sys.exit(
            f"real-judge [{fmt}]: gate run exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    result = json.loads((out / "result.json").read_text())
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]
    allowed = set(records[0]["allowed_values"]) if records else {"pass", "fail"}
    sent_records = [r for r in records if r["attempts"]]
    for r in sent_records:
        if r["status"] == "ok" and r["judge_label"] not in allowed:
            failures.append(f"{r['case_id']}: status ok with label {r['judge_label']!r}")
        if r["status"] != "ok" and r["judge_label"] is not None:
            failures.append(f"{r['case_id']}: an evaluator error carries the verdict {r['judge_label']!r}")
    if result["cost"]["http_attempts"] != sent:
        failures.append(f"http_attempts {result['cost']['http_attempts']} but the server got {sent} requests")
    metered = (float(result["cost"]["input_tokens"]), float(result["cost"]["output_tokens"]))
    if metered != tokens:
        failures.append(f"metered tokens (in, out) {metered} but the server counted {tokens}")
    roles = [r["control_role"] is not None for r in sent_records]
    if True in roles and False in roles and roles.index(False) < len(roles) - roles[::-1].index(True) - 1:
        failures.append("a case was judged before every control was")
    decided = subprocess.run(
        [str(GATE), "decide", "--policy", str(policy), "--records", str(out), "--lane", lane, "--format", "json"],
        env={k: v for k, v in env.items() if not k.startswith("OPENAI")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    decided_state = json.loads(decided.stdout)["state"] if decided.stdout.strip().startswith("{") else "?"
    if decided_state != result["state"]:
        failures.append(f"gate decide says {decided_state}, the run said {result['state']}")
    if failures:
        sys.exit(f"real-judge [{fmt}]: " + "; ".join(failures))
    latencies = tuple(a["latency_ms"] for r in sent_records for a in r["attempts"] if a.get("latency_ms") is not None)
    labelled = sum(1 for r in sent_records if r["status"] == "ok")
    return LaneRun(
        fmt, proc.returncode, result["state"], decided_state, len(sent_records), labelled, latencies, seconds
    )


def describe(run: LaneRun) -> str:
    lat = sorted(run.latencies_ms)
    p50 = statistics.median(lat) / 1000 if lat else 0.0
    p90 = lat[int(0.9 * (len(lat) - 1))] / 1000 if lat else 0.0
    share = run.labelled / run.judgments if run.judgments else 0.0
    return (
        f"{run.response_format:12} {run.state:22} labelled {run.labelled}/{run.judgments} ({share:.0%})  "
        f"latency p50 {p50:.1f} s, p90 {p90:.1f} s  ({run.seconds:.0f} s in all)"
    )


def since_now(port: int, tally: Tally) -> Counters:
    """Counters from this moment: requests forwarded and tokens the server counted since."""
    before, sent_before = server_metrics(port), tally.requests

    def counters() -> tuple[int, tuple[float, float]]:
        after = server_metrics(port)
        prompt, done = ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total")
        return tally.requests - sent_before, (after[prompt] - before[prompt], after[done] - before[done])

    return counters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-python", type=Path, default=ROOT / ".venv-real" / "bin" / "python")
    parser.add_argument("--lane", default="pr")
    parser.add_argument("--formats", default="json_object,json_schema")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--out", type=Path, default=ROOT / "gate-out-real")
    parser.add_argument("--capture", type=Path, help="write every reply body the server gave here")
    args = parser.parse_args()

    server, port = start_server(args.server_python, args.slots, args.ctx)
    tally = Tally()
    proxy = counting_proxy(port, tally)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    env.update(OPENAI_API_KEY="sk-local-llama", RAGAS_DO_NOT_TRACK="true")
    runs: list[LaneRun] = []
    try:
        with tempfile.TemporaryDirectory(prefix="real-judge-") as tmp:
            for fmt in args.formats.split(","):
                base_url = f"http://127.0.0.1:{proxy.server_address[1]}/v1"
                policy = policy_copy(Path(tmp), base_url=base_url, slots=args.slots, response_format=fmt)
                out = args.out / fmt
                shutil.rmtree(out, ignore_errors=True)
                run = check_run(fmt, policy, args.lane, out, env, since_now(port, tally))
                runs.append(run)
                print(describe(run), flush=True)
        if args.capture:
            args.capture.mkdir(parents=True, exist_ok=True)
            for i, (status, body) in enumerate(tally.replies):
                (args.capture / f"reply-{i:03d}-{status}.json").write_bytes(body)
    finally:
        proxy.shutdown()
        server.terminate()
        server.wait(timeout=30)
    print(f"real-judge: every assertion held on {len(runs)} run(s) of lane {args.lane} against llama.cpp's server")


if __name__ == "__main__":
    main()
