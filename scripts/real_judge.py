"""`make real-judge`: the example policy judged by a real model on llama.cpp's own HTTP server.

Every other test talks to fakes we wrote. This one starts llama.cpp's server (scripts/llama_server.py,
under the real-judge venv) with a small model on 127.0.0.1, puts a counting pass-through in front
of it, and runs the real `gate run` on a copy of the example policy pointed at it, once per
response format (`evaluator.response_format`: json_object asks for JSON and hopes; json_schema
constrains decoding to the verdict's schema), then once with a wrong key. It asserts what must
hold against ANY real server, whatever the model answers:
- every judgment is pass, fail or an evaluator error (never a crash, never a usage error);
- `cost.http_attempts` equals the requests that reached the server, and the prompt and completion
  tokens the gate metered equal what the server counted (its /metrics);
- the controls were judged before any other case;
- the state agrees with `gate decide` on the records;
- with a wrong key, the server's 401 is an `auth` error and the lane stops at once;
- each run asks the server once when the judge's model shuts down (`GET /v1/models/{model}`):
  llama.cpp's server lists its model at `GET /v1/models` without a `shutdown_date` and has no
  per-model endpoint (404), so the date is unknown and the run goes on as before (no
  `judge_retirement` in result.json, no shutdown date in the lineage); the harness checks what the
  server answers first, and stops if a newer server starts to answer otherwise.
It prints each judgment's outcome and latency, and per format the share that came back labelled.

The lane is small so that two cores do it in a couple of minutes: `real-judge` is one of each of
the example's controls and two ordinary cases (eight judgments at most; a small model usually
fails a control, and the lane then stops). `--lane bench` judges the
example's 23 sentinel and held-out cases without controls (for bench/README.md's figures).
`--capture DIR` keeps every reply body the server sent, as sent.
A small model is a poor judge: this checks the plumbing against a real server, not the prompt.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
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

from gate.model.wording import plural

ROOT = Path(__file__).resolve().parent.parent
GATE = ROOT / ".venv" / "bin" / "gate"
EXAMPLE = ROOT / "policies" / "example"
MODEL_NAME = "smollm2-135m-instruct-q4_1"
SERVER_KEY = "sk-local-llama"  # the local server's key: a placeholder, not a secret
_EXIT_STATES = {0: "passed", 1: "quality_failed", 3: "evaluation_incomplete", 4: "review_required"}
# The real-judge lane: one control of each role the example defines (a lane with controls needs
# them all; the missing-evidence one is never sent), then two ordinary cases.
SUBSET = (
    "refund-window-correct-001",
    "refund-window-incorrect-002",
    "refund-request-boundary-optional-003",
    "refund-request-boundary-required-004",
    "trial-refund-persuasion-005",
    "two-factor-recovery-injection-006",
    "account-lockout-missing-evidence-008",
    "password-reset-correct-012",
    "account-lockout-incorrect-013",
)
LANES: dict[str, dict[str, Any]] = {
    "real-judge": {"partitions": ["sentinel"], "controls": True},
    "bench": {"partitions": ["sentinel", "held_out"], "controls": False},
}
# Generous on purpose: on a busy shared machine one judgment has taken minutes. The work is sized
# so that a quiet machine never comes near these.
SERVER_START_S = 300
REQUEST_TIMEOUT_S = 600
RUN_TIMEOUT_S = 1800
# Enough for a one-sentence reason and the label; a model that rambles is cut here (finish_reason
# "length": a parse error, never a label). Generating is a third of a judgment's time.
MAX_OUTPUT_TOKENS = 96


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Tally:
    """What crossed the pass-through: the chat-completions requests forwarded, with their replies
    written to `capture` (if set) as they arrive, named by `tag` (the run under way)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    lookups: list[tuple[str, int]] = field(default_factory=list)  # (path, status) of each GET .../models...
    capture: Path | None = None
    tag: str = ""

    def count(self, status: int, data: bytes) -> None:
        with self.lock:
            self.requests += 1
            if self.capture is not None:
                self.capture.mkdir(parents=True, exist_ok=True)
                (self.capture / f"{self.tag}-{self.requests:03d}-{status}.json").write_bytes(data)


def counting_proxy(upstream_port: int, tally: Tally) -> ThreadingHTTPServer:
    """A pass-through on 127.0.0.1 that counts every chat-completions request it forwards."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the gate's models lookup (a shutdown date), forwarded and noted
            self.forward("GET")

        def do_POST(self) -> None:
            self.forward("POST")

        def forward(self, method: str) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0)) if method == "POST" else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in {"host", "content-length"}}
            conn = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=REQUEST_TIMEOUT_S * 2)
            try:
                conn.request(method, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                status, reply_headers = answer.status, answer.getheaders()
            except OSError:
                self.close_connection = True  # the client sees a dropped connection, as it would
                return
            finally:
                conn.close()
            if self.path.endswith("/chat/completions"):
                tally.count(status, data)
            elif "/models" in self.path:
                with tally.lock:
                    tally.lookups.append((self.path, status))
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


def models_answer(port: int) -> str:
    """What llama.cpp's server answers the two models endpoints, checked against what the gate expects
    of it: a list without `shutdown_date`, and no per-model endpoint (404), so the date is unknown."""
    answers: dict[str, tuple[int, Any]] = {}
    for path in ("/v1/models", f"/v1/models/{MODEL_NAME}"):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", path, headers={"Authorization": f"Bearer {SERVER_KEY}"})
        answer = conn.getresponse()
        text = answer.read().decode()
        conn.close()
        try:
            answers[path] = (answer.status, json.loads(text))
        except ValueError:
            answers[path] = (answer.status, text)
    listed = answers["/v1/models"]
    data = listed[1].get("data") if isinstance(listed[1], dict) else None
    fields = sorted({k for m in data or [] if isinstance(m, dict) for k in m})
    one = answers[f"/v1/models/{MODEL_NAME}"]
    if listed[0] != 200 or not data or "shutdown_date" in fields or one[0] != 404:
        sys.exit(
            f"real-judge: llama.cpp's models endpoints changed: GET /v1/models {listed[0]} (fields {fields}), GET "
            f"/v1/models/{MODEL_NAME} {one[0]}; the gate reads a shutdown date from the second: check what it does now"
        )
    return (
        f"GET /v1/models 200 ({plural(len(data), 'model')}, fields {', '.join(fields)}: no shutdown_date); GET "
        f"/v1/models/{MODEL_NAME} 404: the gate's shutdown date is unknown, the run goes on as before"
    )


def server_metrics(port: int) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {SERVER_KEY}"})
    answer = conn.getresponse()
    text = answer.read().decode()
    conn.close()
    if answer.status != 200:
        sys.exit(f"real-judge: the server's /metrics answered {answer.status}: {text[:300]}")
    figures: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition(" ")
            figures[name] = float(value)
    return figures


def start_server(python: Path, slots: int, ctx: int) -> tuple[subprocess.Popen[str], int]:
    """llama.cpp's server with the model loaded, or exit saying how to run it by hand."""
    port = free_port()
    cmd = [str(python), str(ROOT / "scripts" / "llama_server.py"), "--port", str(port)]
    cmd += ["--slots", str(slots), "--ctx", str(ctx)]
    env = {**os.environ, "LLAMA_API_KEY": SERVER_KEY}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    listening = threading.Event()

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("listening"):
                listening.set()

    threading.Thread(target=watch, daemon=True).start()
    if listening.wait(SERVER_START_S):
        return proc, port
    proc.kill()
    sys.exit(f"real-judge: llama.cpp's server did not start (exit {proc.wait()}); run it by hand: {' '.join(cmd)}")


def stop_server(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def policy_copy(workdir: Path, name: str, *, base_url: str, slots: int, response_format: str, subset: bool) -> Path:
    """The example policy, judged by the local model: its own directory, so nothing of the example
    changes. The rubric, sampling and prices stay the example's; the lanes are this harness's, the
    cases the example's (only SUBSET for the real-judge lane); concurrency matches the slots."""
    target = workdir / f"policy-{name}"
    shutil.copytree(EXAMPLE, target)
    path = target / "policy.yaml"
    policy = yaml.safe_load(path.read_text())
    policy["evaluator"].update(
        model=MODEL_NAME,
        base_url=base_url,
        max_concurrency=slots,
        timeout_s=REQUEST_TIMEOUT_S,
        max_output_tokens=MAX_OUTPUT_TOKENS,
    )
    if response_format != "json_object":  # the default, left unwritten as a team would
        policy["evaluator"]["response_format"] = response_format
    policy["lanes"] = LANES
    policy.pop("calibration", None)  # no lane here requires it
    for cases_file in (target / f for f in policy["cases"]) if subset else ():
        lines = cases_file.read_text().splitlines()
        cases_file.write_text(
            "".join(f"{line}\n" for line in lines if line.strip() and json.loads(line)["case_id"] in SUBSET)
        )
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


@dataclass(frozen=True)
class LaneRun:
    name: str
    exit_code: int
    state: str
    judgments: int
    labelled: int
    latencies_ms: tuple[float, ...]
    seconds: float
    http_attempts: int


def run_lane(policy: Path, lane: str, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [str(GATE), "run", "--policy", str(policy), "--lane", lane, "--out", str(out), "--no-cache"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)


Counters = Callable[[], tuple[int, tuple[float, float]]]


def read_records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]


def contract_failures(
    result: dict[str, Any], records: list[dict[str, Any]], sent: int, tokens: tuple[float, float]
) -> list[str]:
    """What must hold against any server: labels or errors, the bill against the server's counts,
    controls first."""
    failures: list[str] = []
    allowed = set(records[0]["allowed_values"]) if records else {"pass", "fail"}
    sent_records = [r for r in records if r["attempts"]]
    for r in sent_records:
        if r["status"] == "ok" and r["judge_label"] not in allowed:
            failures.append(f"{r['case_id']}: status ok with label {r['judge_label']!r}")
        if r["status"] != "ok" and (r["judge_label"] is not None or not r.get("error_kind")):
            failures.append(f"{r['case_id']}: status {r['status']} with label {r['judge_label']!r}, no error kind")
    if result["cost"]["http_attempts"] != sent:
        failures.append(f"http_attempts {result['cost']['http_attempts']} but the server got {sent} requests")
    metered = (float(result["cost"]["input_tokens"]), float(result["cost"]["output_tokens"]))
    if metered != tokens:
        failures.append(f"metered tokens (in, out) {metered} but the server counted {tokens}")
    answered = [a for r in sent_records for a in r["attempts"] if a.get("status_code") == 200]
    if answered and not (metered[0] > 0 and result["cost"]["total"] > 0):
        failures.append(
            f"{plural(len(answered), 'answered attempt')} but metered {metered}, cost {result['cost']['total']}"
        )
    roles = [r["control_role"] is not None for r in sent_records]
    if True in roles and False in roles and roles.index(False) < len(roles) - roles[::-1].index(True) - 1:
        failures.append("a case was judged before every control was")
    return failures


def decided_state(policy: Path, lane: str, out: Path, env: dict[str, str]) -> str:
    """`gate decide` on the run's records, with no provider environment at all."""
    decided = subprocess.run(
        [str(GATE), "decide", "--policy", str(policy), "--records", str(out), "--lane", lane, "--format", "json"],
        env={k: v for k, v in env.items() if not k.startswith("OPENAI")},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    return str(json.loads(decided.stdout)["state"]) if decided.stdout.strip().startswith("{") else "?"


def check_run(
    name: str, policy: Path, lane: str, out: Path, env: dict[str, str], counters: Counters, tally: Tally
) -> LaneRun:
    """Run the lane once; then the assertions that hold against any real server. `counters` gives,
    after the run, the requests the pass-through forwarded and the (prompt, generated) tokens the
    server counted during it; `tally` the models lookups it forwarded."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    asked = len(tally.lookups)
    proc = run_lane(policy, lane, out, env)
    seconds = time.monotonic() - started
    sent, tokens = counters()
    lookups = tally.lookups[asked:]
    if proc.returncode not in _EXIT_STATES or "Traceback" in proc.stderr:
        sys.exit(
            f"real-judge [{name}]: gate run exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    result = json.loads((out / "result.json").read_text())
    records = read_records(out)
    failures = contract_failures(result, records, sent, tokens)
    shutdown = {k for k in result.get("lineage", {}) if k.startswith("judge_shutdown")}
    if len(lookups) != 1 or "judge_retirement" in result or shutdown:
        failures.append(
            f"the shutdown-date lookups {lookups}: expected one, answered 404 (or 401) and read as unknown; "
            f"result.json has judge_retirement {result.get('judge_retirement')}, lineage {sorted(shutdown)}"
        )
    decided = decided_state(policy, lane, out, env)
    if decided != result["state"]:
        failures.append(f"gate decide says {decided}, the run said {result['state']}")
    if _EXIT_STATES[proc.returncode] != result["state"]:
        failures.append(f"gate run exited {proc.returncode} but result.json says {result['state']}")
    if failures:
        sys.exit(f"real-judge [{name}]: " + "; ".join(failures))
    sent_records = [r for r in records if r["attempts"]]
    for r in sent_records:
        print(f"  {judgment_line(r)}", flush=True)
    latencies = tuple(a["latency_ms"] for r in sent_records for a in r["attempts"] if a.get("latency_ms") is not None)
    labelled = sum(1 for r in sent_records if r["status"] == "ok")
    http = int(result["cost"]["http_attempts"])
    return LaneRun(name, proc.returncode, result["state"], len(sent_records), labelled, latencies, seconds, http)


def judgment_line(record: dict[str, Any]) -> str:
    latency = sum(a.get("latency_ms") or 0.0 for a in record["attempts"]) / 1000
    if record["status"] == "ok":
        outcome = f"{record['judge_label']} (people: {record['human_label']})"
    else:
        outcome = f"{record['error_kind']}: {(record.get('error_message') or '')[:110]}"
    return f"{record['case_id'][:36]:36} {latency:6.1f} s  {outcome}"


def describe(run: LaneRun) -> str:
    lat = sorted(run.latencies_ms)
    p50 = statistics.median(lat) / 1000 if lat else 0.0
    p90 = lat[math.ceil(0.9 * len(lat)) - 1] / 1000 if lat else 0.0  # nearest rank
    share = run.labelled / run.judgments if run.judgments else 0.0
    return (
        f"{run.name:12} {run.state:22} labelled {run.labelled}/{run.judgments} ({share:.0%})  "
        f"latency p50 {p50:.1f} s, p90 {p90:.1f} s  ({run.seconds:.0f} s in all)"
    )


def cpu_seconds(pid: int) -> float | None:
    """CPU time a process has used (Linux /proc; None elsewhere): what a judgment costs whatever
    else the machine is doing, unlike its latency."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_line(before: float | None, after: float | None, run: LaneRun) -> str:
    if before is None or after is None or not run.judgments:
        return ""
    return f"  server CPU {after - before:.0f} s, {(after - before) / run.judgments:.1f} s per judgment"


def since_now(port: int, tally: Tally) -> Counters:
    """Counters from this moment: requests forwarded and tokens the server counted since."""
    before, sent_before = server_metrics(port), tally.requests

    def counters() -> tuple[int, tuple[float, float]]:
        after = server_metrics(port)
        prompt, done = ("llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total")
        return tally.requests - sent_before, (after[prompt] - before[prompt], after[done] - before[done])

    return counters


def wrong_key_run(policy: Path, out: Path, env: dict[str, str], port: int, tally: Tally) -> LaneRun:
    """A key the server does not know: llama.cpp answers 401, each sent judgment is an `auth`
    error, and the lane stops at once (no more than the requests already in flight)."""
    run = check_run(
        "wrong-key",
        policy,
        "real-judge",
        out,
        {**env, "OPENAI_API_KEY": "sk-not-this-one"},
        since_now(port, tally),
        tally,
    )
    records = [r for r in read_records(out) if r["attempts"]]
    slots = int(yaml.safe_load(policy.read_text())["evaluator"]["max_concurrency"])
    kinds = {r["error_kind"] for r in records}
    if run.state != "evaluation_incomplete" or kinds != {"auth"} or not 1 <= run.http_attempts <= slots:
        sys.exit(
            f"real-judge [wrong-key]: state {run.state}, error kinds {sorted(map(str, kinds))}, {plural(run.http_attempts, 'request')}"
        )
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-python", type=Path, default=ROOT / ".venv-real" / "bin" / "python")
    parser.add_argument("--lane", choices=sorted(LANES), default="real-judge")
    parser.add_argument("--formats", default="json_object,json_schema")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=4096, help="shared by the slots; a judgment needs about 1,000")
    parser.add_argument("--out", type=Path, default=ROOT / "gate-out-real")
    parser.add_argument("--capture", type=Path, help="write every reply body the server sent here, as sent")
    args = parser.parse_args()

    started = time.monotonic()
    server, port = start_server(args.server_python, args.slots, args.ctx)
    tally = Tally(capture=args.capture)
    proxy = counting_proxy(port, tally)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    env.update(OPENAI_API_KEY=SERVER_KEY, RAGAS_DO_NOT_TRACK="true")
    base_url = f"http://127.0.0.1:{proxy.server_address[1]}/v1"
    print(f"real-judge: llama.cpp's server up in {time.monotonic() - started:.0f} s ({MODEL_NAME}, {args.slots} slots)")
    runs: list[LaneRun] = []
    try:
        print(f"real-judge: its models endpoints: {models_answer(port)}", flush=True)
        with tempfile.TemporaryDirectory(prefix="real-judge-") as tmp:
            for fmt in args.formats.split(","):
                policy = policy_copy(
                    Path(tmp),
                    fmt,
                    base_url=base_url,
                    slots=args.slots,
                    response_format=fmt,
                    subset=args.lane == "real-judge",
                )
                tally.tag = fmt
                print(f"{fmt}: gate run --lane {args.lane}", flush=True)
                cpu_before = cpu_seconds(server.pid)
                runs.append(check_run(fmt, policy, args.lane, args.out / fmt, env, since_now(port, tally), tally))
                print(f"{describe(runs[-1])}{cpu_line(cpu_before, cpu_seconds(server.pid), runs[-1])}", flush=True)
            if args.lane == "real-judge":
                policy = policy_copy(
                    Path(tmp),
                    "wrong-key",
                    base_url=base_url,
                    slots=args.slots,
                    response_format="json_object",
                    subset=True,
                )
                tally.tag = "wrong-key"
                print("wrong key: gate run --lane real-judge", flush=True)
                runs.append(wrong_key_run(policy, args.out / "wrong-key", env, port, tally))
    finally:
        proxy.shutdown()
        stop_server(server)
    for run in runs:
        print(describe(run))
    print(
        f"real-judge: every assertion held on {plural(len(runs), 'run')} against llama.cpp's server in {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
