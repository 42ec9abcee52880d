"""Benchmark: pacing to a provider's rate limit, and stopping once the verdict is decided (issue 20).

1. pace: against a fake provider (tests/fake_openai.py in its own process, tests/fake_limits.py's
   token buckets, OpenAI's x-ratelimit-* headers on every answer) enforcing a request limit, and
   separately a token limit that binds first, N cases (default 900: 1.5 windows, so the limit binds
   once the first full bucket is spent) at concurrency C (default 32), side by side:
   - gate: `gate run` (one process) with the run's pacer;
   - today: the same `gate run` without a pacer (each 429 retried on its own, as before issue 20);
   - bare ragas: `DiscreteMetric.ascore` under an unbounded `asyncio.gather`, on a default
     `AsyncOpenAI` client (its own 2 retries honour Retry-After per request).
   Each side gets a fresh provider (a full bucket). Printed per side: requests the provider saw,
   the share answered 429, the rate attempted and admitted as % of the limit (requests or tokens
   over what the limit allows from the first request to the last one admitted: the bucket plus
   its refill), cases judged (a verdict), and `http_attempts` (result.json) against the requests
   the provider saw. Targets for the gate: admitted >= 90% of the limit, <= 1% answered 429, every
   case judged, `http_attempts` = requests seen.
   `--period-s` (default 60, a real minute) compresses the minute: the bucket refills its limit
   every period and the gate's pacer is given the same period, the same scaling for every side.
   A compressed minute asks proportionally more requests a second of every side: on a loaded
   2-core machine the sides then become CPU-bound below the limit, so the figures use 60.
2. stop: a `stop_when_decided` PR lane of 200 cases whose first critical case is a false pass,
   against the same lane judged whole: judgments paid, state and first blocker of each. Target:
   <= 25% of the judgments paid, the same `quality_failed` and the same first blocker.

    .venv/bin/python bench/pace.py                  # everything, at the issue's sizes (~7 min)
    .venv/bin/python bench/pace.py --only stop
    .venv/bin/python bench/pace.py --cases 300 --rpm 200
"""

from __future__ import annotations

import os

os.environ["RAGAS_DO_NOT_TRACK"] = "true"
os.environ["GATE_WORKERS"] = "1"  # one process per side; the pacer's windows are shared across workers anyway

import argparse
import asyncio
import io
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from tests.suite import PROMPT, case, controls, write_suite  # noqa: E402

KEY_ENV = "GATE_BENCH_KEY"
KEY = "sk-bench-not-a-secret"
MAX_TOKENS = 64


@dataclass
class Provider:
    """tests/fake_openai.py as a separate process, with a rate limit; its counts once stopped."""

    latency: float
    rpm: float | None
    tpm: float | None
    period_s: float
    workdir: Path
    base_url: str = ""
    stats: dict[str, Any] | None = None
    proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> Provider:
        self.stats_file = self.workdir / f"stats-{time.monotonic_ns()}.json"
        cmd = [sys.executable, "-m", "tests.fake_openai", "--port", "0", "--latency", str(self.latency)]
        cmd += ["--period-s", str(self.period_s), "--stats-file", str(self.stats_file)]
        if self.rpm:
            cmd += ["--requests-per-minute", str(self.rpm)]
        if self.tpm:
            cmd += ["--tokens-per-minute", str(self.tpm)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http://"):
            raise SystemExit(f"bench: the fake provider did not start: {line!r}")
        self.base_url = line
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.communicate(timeout=60)
        self.stats = json.loads(self.stats_file.read_text())


@dataclass
class Side:
    name: str
    requests: int = 0
    refused: int = 0
    judged: int = 0
    http_attempts: int | None = None
    attempted_pct: float = 0.0
    admitted_pct: float = 0.0
    wall_s: float = 0.0
    state: str = ""


def allowance(stats: dict[str, Any], limit: float, period_s: float) -> float:
    """What the limit allows from the first request to the last one admitted: the bucket plus its refill."""
    accepted = stats["accepted"]
    if not accepted:
        return limit
    span = max(accepted) - stats["first_arrival"]
    return limit + limit / period_s * max(0.0, span)


def measure(name: str, stats: dict[str, Any], args: argparse.Namespace, tokens: bool, per_request: float) -> Side:
    limit = args.tpm if tokens else args.rpm
    allowed = allowance(stats, limit, args.period_s)
    sent_units = stats["requests"] * (per_request if tokens else 1)
    admitted_units = stats["accepted_tokens"] if tokens else len(stats["accepted"])
    return Side(
        name,
        requests=stats["requests"],
        refused=stats["refused"],
        attempted_pct=100 * sent_units / allowed,
        admitted_pct=100 * admitted_units / allowed,
    )


# -- the three sides -------------------------------------------------------------------------------
def bench_suite(root: Path, base_url: str, cases: list[dict[str, Any]], concurrency: int, lanes: Any = None) -> Path:
    extra = {"lanes": lanes} if lanes is not None else {}
    return write_suite(
        root,
        cases,
        evaluator={
            "base_url": base_url,
            "api_key_env": KEY_ENV,
            "max_output_tokens": MAX_TOKENS,
            "timeout_s": 60,
            "max_concurrency": concurrency,
            "retries": {"max_attempts": 3, "retry_on": ["rate_limit", "server_error", "timeout", "connection"]},
        },
        limits={"max_evaluator_errors": 0, "max_total_cost": 1e9},
        **extra,
    )


def run_gate(policy: Path, out: Path, lane: str, paced: bool, period_s: float) -> tuple[Any, float]:
    import gate.commands.run as gate_run
    from gate.judge.pacing import Pacer

    opts = gate_run.RunOptions(lane=lane, out_dir=out, use_cache=False, progress=io.StringIO())
    original = gate_run.pacer_for
    if paced:
        opts.pacer = Pacer(period_s=period_s)  # the windows come from the provider's headers
    else:
        gate_run.pacer_for = lambda *_a, **_k: None  # type: ignore[assignment]  # today: no pacer at all
    try:
        t0 = time.perf_counter()
        decision = gate_run.run(policy, opts, env={KEY_ENV: KEY})
        return decision.result, time.perf_counter() - t0
    finally:
        gate_run.pacer_for = original


BARE_ERRORS: dict[str, int] = {}  # the bare side's exceptions by type (it has no records to say why)


async def bare_ragas(base_url: str, cases: Sequence[dict[str, Any]]) -> int:
    import openai
    from ragas.llms import llm_factory
    from ragas.metrics import DiscreteMetric

    client = openai.AsyncOpenAI(api_key=KEY, base_url=base_url)  # default: 2 retries, Retry-After honoured
    llm = llm_factory("gpt-4o-mini", client=client, temperature=0, seed=7, max_tokens=MAX_TOKENS)
    metric = DiscreteMetric(name="refund_contract", allowed_values=["pass", "fail"], prompt=PROMPT)

    async def one(c: dict[str, Any]) -> bool:
        try:
            got = await metric.ascore(
                llm=llm, user_input=c["user_input"], reference=c["reference"], response=c["response"]
            )
        except Exception as exc:
            name = type(exc).__name__
            BARE_ERRORS[name] = BARE_ERRORS.get(name, 0) + 1
            return False
        return bool(got.value == c["human_adjudication"]["label"])

    try:
        return sum(await asyncio.gather(*(one(c) for c in cases)))  # unbounded, as ragas users write it
    finally:
        await client.close()


def request_tokens(base_url: str, work: Path) -> float:
    """One request's tokens as the provider counts them (its reported prompt tokens + max_tokens)."""
    cases = [case("c-000000")]
    policy = bench_suite(work / "probe", base_url, cases, 1)
    out = work / "probe-out"
    run_gate(policy, out, "nocontrols", True, 60.0)
    rec = json.loads((out / "records.jsonl").read_text().splitlines()[0])
    return float(rec["input_tokens"] + MAX_TOKENS)


def pace(args: argparse.Namespace, work: Path, tokens: bool) -> list[Side]:
    cases = [case(f"c-{i:06d}", label="fail" if i % 3 == 2 else "pass") for i in range(args.cases)]
    rpm, tpm = (args.rpm * 10, args.tpm) if tokens else (args.rpm, None)
    per_request = 1.0
    if tokens:
        with Provider(args.latency, None, None, args.period_s, work) as probe:
            per_request = request_tokens(probe.base_url, work)
    sides: list[Side] = []
    for name in ("gate", "today", "bare ragas"):
        with Provider(args.latency, rpm, tpm, args.period_s, work) as provider:
            t0 = time.perf_counter()
            if name == "bare ragas":
                judged, http_attempts, state = asyncio.run(bare_ragas(provider.base_url, cases)), None, ""
            else:
                policy = bench_suite(work / f"{name}-{tokens}", provider.base_url, cases, args.concurrency)
                result, _ = run_gate(policy, work / f"{name}-{tokens}-out", "nocontrols", name == "gate", args.period_s)
                judged, http_attempts, state = result.counts.completed, result.cost.http_attempts, result.state
            wall = time.perf_counter() - t0
        assert provider.stats is not None
        side = measure(name, provider.stats, args, tokens, per_request)
        side.judged, side.http_attempts, side.wall_s, side.state = judged, http_attempts, wall, state
        sides.append(side)
    return sides


def print_pace(title: str, sides: Sequence[Side], n: int) -> bool:
    print(f"\n{title}")
    print(
        "| side | requests seen | answered 429 | attempted % of limit | admitted % of limit | cases judged | http_attempts | state | wall s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for s in sides:
        share = 100 * s.refused / s.requests if s.requests else 0.0
        attempts = "n/a" if s.http_attempts is None else str(s.http_attempts)
        print(
            f"| {s.name} | {s.requests} | {s.refused} ({share:.1f}%) | {s.attempted_pct:.0f}% | {s.admitted_pct:.0f}% | "
            f"{s.judged}/{n} | {attempts} | {s.state or '-'} | {s.wall_s:.1f} |"
        )
    if BARE_ERRORS:
        print("bare ragas' failures: " + ", ".join(f"{k} x{v}" for k, v in sorted(BARE_ERRORS.items())))
        BARE_ERRORS.clear()
    g = sides[0]
    ok = g.admitted_pct >= 90 and g.refused <= 0.01 * g.requests and g.judged == n and g.http_attempts == g.requests
    print(
        f"gate targets (admitted >= 90%, <= 1% 429, {n}/{n} judged, http_attempts = requests seen): {'met' if ok else 'NOT met'}"
    )
    return ok


# -- stop when decided ----------------------------------------------------------------------------
def stop(args: argparse.Namespace, work: Path) -> bool:
    n = 200
    critical = [case(f"c-{i:04d}") for i in range(40)]
    critical[0] = case("c-0000", label="fail", response="Answer for c-0000: refunds any time. [[judge:pass]]")
    cases = [*controls(), *critical, *[case(f"g-{i:04d}", slice="general") for i in range(n - 40)]]
    lanes = {
        "pr": {"partitions": ["sentinel"], "controls": True, "stop_when_decided": True},
        "full": {"partitions": ["sentinel"], "controls": True},
    }
    rows = []
    for lane in ("pr", "full"):
        with Provider(args.latency, None, None, 60.0, work) as provider:
            policy = bench_suite(work / f"stop-{lane}", provider.base_url, cases, args.stop_concurrency, lanes)
            result, wall = run_gate(policy, work / f"stop-{lane}-out", lane, True, 60.0)
        assert provider.stats is not None
        first = result.blockers[0]
        rows.append((lane, provider.stats["requests"], result.state, f"{first.kind} {list(first.case_ids)}", wall))
    total = 5 + n  # the missing-evidence control is never sent
    print(
        f"\nstop_when_decided: {n} cases + 6 controls, the first critical case a false pass, concurrency {args.stop_concurrency}"
    )
    print("| lane | judgments paid | share of the full lane's | state | first blocker | wall s |")
    print("|---|---:|---:|---|---|---:|")
    for lane, paid, state, first, wall in rows:
        print(f"| {lane} | {paid} | {100 * paid / total:.1f}% | {state} | {first} | {wall:.1f} |")
    ok = rows[0][1] <= 0.25 * total and rows[0][2] == rows[1][2] == "quality_failed" and rows[0][3] == rows[1][3]
    print(f"targets (<= 25% paid, same quality_failed, same first blocker): {'met' if ok else 'NOT met'}")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=900)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rpm", type=float, default=600, help="the request limit (per compressed minute)")
    ap.add_argument("--tpm", type=float, default=0, help="the token limit (default: half the requests' tokens)")
    ap.add_argument(
        "--period-s", type=float, default=60.0, help="the provider's minute (smaller: compressed, every side)"
    )
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--stop-concurrency", type=int, default=8)
    ap.add_argument("--only", choices=("pace", "requests", "tokens", "stop"), default=None)
    args = ap.parse_args(argv)
    os.environ[KEY_ENV] = KEY
    ok = True
    with tempfile.TemporaryDirectory(prefix="gate-pace-") as tmp:
        work = Path(tmp)
        n = args.cases
        if args.only in (None, "pace", "requests"):
            title = f"requests: {n} cases, concurrency {args.concurrency}, {args.rpm:g} requests/minute (a {args.period_s:g} s minute)"
            ok &= print_pace(title, pace(args, work, tokens=False), n)
        if args.only in (None, "pace", "tokens"):
            if not args.tpm:
                with Provider(args.latency, None, None, args.period_s, work) as probe:
                    per = request_tokens(probe.base_url, work)
                args.tpm = round(per * args.rpm / 2)
            title = f"tokens: {n} cases, concurrency {args.concurrency}, {args.tpm:g} tokens/minute (binds first), requests {args.rpm * 10:g}/minute"
            ok &= print_pace(title, pace(args, work, tokens=True), n)
        if args.only in (None, "stop"):
            ok &= stop(args, work)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
