"""Benchmark: what the product lane's stop_when_decided costs in CPU, against the run's own CPU.

A product lane with `stop_when_decided` asks after every answer judged whether every slice is
decided. This bench measures that question's CPU at N answers (default 1,000 and 10,000) and
puts it beside the CPU of the whole run, in one process, against tests/fake_openai.py started as a
separate process (its CPU is not the run's). Target: the stop's checks at most 10% of the run's CPU.

Per N, one slice of N answers whose failing share sits at the limit (5%: every 20th answer is
judged fail), so no look decides it and the lane judges every answer: the stop is asked N times,
its worst case. Three figures:

- **run**: `gate run` of the product lane without the stop (process CPU, `time.process_time`);
- **stop lane**: the same lane with `stop_when_decided: true` (process CPU), and inside it the CPU
  spent in the stop's per-answer hook (`StopWhenDecided.after`, `time.thread_time` around each call:
  the hook runs on the event loop's thread);
- **rebuild per answer**: what the stop cost when it rebuilt the whole decision after every answer:
  the rules and the product decision over the records so far (`gate.decide.settled.hopeless`, the
  function the stop once called per answer), replayed over the stop run's own records, prefix by
  prefix. Up to `--rebuild-full` answers every prefix is replayed; above it `--rebuild-looks`
  prefixes spread over the run are, and the sum over every look is estimated from them (the
  trapezoid rule: the cost per look grows smoothly, about linearly, with the answers so far).

    .venv/bin/python bench/stop_profile.py                      # 1,000 and 10,000 answers (~5 min here)
    .venv/bin/python bench/stop_profile.py --sizes 1000         # ~1 min
    .venv/bin/python bench/stop_profile.py --sizes 2000 --concurrency 8 --latency 0.01
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import gc
import io
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for entry in (ROOT, ROOT / "tests"):
    if str(entry) not in sys.path:
        sys.path.insert(0, str(entry))

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ["GATE_WORKERS"] = "1"  # one process: the stop's hook and the run share its CPU clock

from differential import write_product_calibration  # noqa: E402

from bench.run import KEY, KEY_ENV, MODEL, FakeProvider  # noqa: E402
from tests.suite import case, write_suite  # noqa: E402

SLICE = "answers"
LIMIT = 0.05
FAIL_EVERY = 20  # every 20th answer judged fail: the share sits at the limit, so no look decides it
TARGET = 0.10


def write_product_suite(root: Path, n: int, base_url: str, concurrency: int) -> tuple[Path, Path]:
    """A product suite of n answers in one slice, lanes `full` and `stop`; (policy, responses.jsonl)."""
    ids = [f"a-{i:06d}" for i in range(n)]
    cases = []
    for cid in ids:
        c = case(cid, slice=SLICE, partition="product")
        cases.append({k: v for k, v in c.items() if k not in ("response", "response_sha256", "human_adjudication")})
    lines = [
        {"case_id": cid, "response": f"Answer for {cid}: [[judge:{'fail' if i % FAIL_EVERY == 0 else 'pass'}]]"}
        for i, cid in enumerate(ids)
    ]
    responses = root / "responses.jsonl"

    def lane(**more: Any) -> dict[str, Any]:  # each its own objects: YAML would write shared ones as aliases
        return {"partitions": ["product"], "controls": False, "product": True, **more}

    policy = write_suite(
        root,
        cases,
        evaluator={"model": MODEL, "base_url": base_url, "api_key_env": KEY_ENV, "max_concurrency": concurrency},
        slices={SLICE: {"max_false_passes": 0, "max_failure_rate": LIMIT}},
        lanes={"full": lane(), "stop": lane(stop_when_decided=True)},
        partitions=["product"],
        calibration={"file": "calibration.json", "min_kappa": 0.0},
        limits={"max_evaluator_errors": 0, "max_total_cost": 1e9},
    )
    responses.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    write_product_calibration(policy, [SLICE])
    return policy, responses


@dataclass
class Side:
    cpu_s: float
    wall_s: float
    judged: int
    state: str
    hook_s: float = 0.0  # CPU inside the stop's per-answer hook
    hook_calls: int = 0


class HookClock:
    """CPU spent inside `StopWhenDecided.after` while the block runs (thread CPU around each call)."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.calls = 0
        self.question: Callable[[Sequence[Any]], bool] | None = None  # what `gate run` bound the stop to

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        from gate.run.stop import StopWhenDecided

        original = StopWhenDecided.after
        made = StopWhenDecided.of.__func__  # type: ignore[attr-defined]

        def of(cls: type[StopWhenDecided], question: Any, **kwargs: Any) -> StopWhenDecided:
            self.question = question
            rule: StopWhenDecided = made(cls, question, **kwargs)
            return rule

        @functools.wraps(original)
        def timed(rule: StopWhenDecided, record: Any) -> bool:
            t0 = time.thread_time()
            try:
                return original(rule, record)
            finally:
                self.cpu += time.thread_time() - t0
                self.calls += 1

        StopWhenDecided.after = timed  # type: ignore[method-assign]
        StopWhenDecided.of = classmethod(of)  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            StopWhenDecided.after = original  # type: ignore[method-assign]
            StopWhenDecided.of = classmethod(made)  # type: ignore[method-assign,assignment]


def run_lane(policy: Path, responses: Path, lane: str, out: Path, hook: HookClock | None = None) -> Side:
    import gate.commands.run as gate_run

    opts = gate_run.RunOptions(
        lane=lane, out_dir=out, cache_dir=None, use_cache=False, progress=io.StringIO(), responses=responses
    )
    gc.collect()
    with hook.watching() if hook is not None else contextlib.nullcontext():
        w0, c0 = time.perf_counter(), time.process_time()
        decision = gate_run.run(policy, opts, env={KEY_ENV: KEY})
        w1, c1 = time.perf_counter(), time.process_time()
    result = decision.result
    side = Side(c1 - c0, w1 - w0, result.counts.completed, str(result.state))
    if hook is not None:
        side.hook_s, side.hook_calls = hook.cpu, hook.calls
    return side


@dataclass
class Rebuild:
    cpu_s: float  # over every look (measured, or estimated from the sampled looks)
    looks: int  # looks replayed
    of: int  # looks in the run


def rebuild_cost(hook: HookClock, out: Path, full_up_to: int, sampled: int) -> Rebuild | None:
    """The per-answer rebuild (`settled.hopeless` over the records so far, bound as `gate run` bound it
    for the stop run) replayed on the stop run's records; None where the stop no longer asks it."""
    from gate.decide import settled

    hopeless = hook.question
    if not sampled or not (isinstance(hopeless, functools.partial) and hopeless.func is settled.hopeless):
        return None
    from gate.model.records import read_records

    records = [r for r in read_records(out / "records.jsonl") if r.status == "ok"]
    n = len(records)
    looks = (
        list(range(1, n + 1))
        if n <= full_up_to
        else sorted({1, n, *(round(1 + i * (n - 1) / (sampled - 1)) for i in range(sampled))})
    )
    cost = {}
    for t in looks:
        c0 = time.thread_time()
        hopeless(records[:t])
        cost[t] = time.thread_time() - c0
    if n <= full_up_to:
        return Rebuild(sum(cost.values()), n, n)
    total = sum((cost[a] + cost[b]) / 2 * (b - a) for a, b in itertools.pairwise(looks)) + cost[looks[0]]
    return Rebuild(total, len(looks), n)


def measure(n: int, concurrency: int, latency: float, work: Path, full_up_to: int, sampled: int) -> dict[str, Any]:
    with FakeProvider(latency) as fake:
        policy, responses = write_product_suite(work / f"suite-{n}", n, fake.base_url, concurrency)
        full = run_lane(policy, responses, "full", work / f"full-{n}")
        hook = HookClock()
        stop = run_lane(policy, responses, "stop", work / f"stop-{n}", hook)
        rebuild = rebuild_cost(hook, work / f"stop-{n}", full_up_to, sampled)
    return {"n": n, "full": full, "stop": stop, "rebuild": rebuild}


def report(rows: Sequence[dict[str, Any]]) -> None:
    print(
        f"\n{'answers':>8} | {'run CPU s':>9} {'state':>14} | {'stop lane CPU s':>15} {'judged':>7} "
        f"{'stop checks CPU s':>17} {'share':>6} | {'rebuild per answer CPU s':>24} {'share':>7}"
    )
    for row in rows:
        full, stop, rebuild = row["full"], row["stop"], row["rebuild"]
        share = stop.hook_s / full.cpu_s
        if rebuild is None:
            rb = f"{'(not replayed)':>24} {'':>7}"
        else:
            est = "" if rebuild.looks == rebuild.of else f" (est. {rebuild.looks} looks)"
            rb = f"{rebuild.cpu_s:>8.1f}{est:>16} {100 * rebuild.cpu_s / full.cpu_s:6.0f}%"
        print(
            f"{row['n']:>8,} | {full.cpu_s:9.1f} {full.state:>14} | {stop.cpu_s:15.1f} {stop.judged:7,} "
            f"{stop.hook_s:17.2f} {100 * share:5.1f}% | {rb}"
        )
    worst = max(r["stop"].hook_s / r["full"].cpu_s for r in rows)
    verdict = "met" if worst <= TARGET else "NOT met"
    print(
        f"\nTarget: the stop's checks at most {100 * TARGET:.0f}% of the run's CPU: {verdict} (worst {100 * worst:.1f}%)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000", help="answers per run, comma-separated (default 1000,10000)")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds per request at the fake provider")
    ap.add_argument("--rebuild-full", type=int, default=1000, help="replay every look of the rebuild up to this many")
    ap.add_argument("--rebuild-looks", type=int, default=12, help="looks of the rebuild sampled above it")
    ap.add_argument("--no-rebuild", action="store_true", help="leave out the replay of the per-answer rebuild")
    ap.add_argument("--workdir", type=Path, help="keep the suites and outputs here")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, cpus {os.cpu_count()}, concurrency {args.concurrency}, "
          f"latency {args.latency} s, Python {sys.version.split()[0]}")  # fmt: skip
    import ragas.metrics  # noqa: F401  (imported before anything is timed, as `gate run` would at its first call)

    with contextlib.ExitStack() as stack:
        work = args.workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gate-stop-")))
        rows = []
        for n in sizes:
            looks = 0 if args.no_rebuild else args.rebuild_looks
            row = measure(n, args.concurrency, args.latency, work, args.rebuild_full, looks)
            full, stop = row["full"], row["stop"]
            print(
                f"  {n:,} answers: run {full.cpu_s:.1f} CPU-s ({full.wall_s:.1f} s wall), stop lane {stop.cpu_s:.1f} "
                f"CPU-s, its checks {stop.hook_s:.2f} CPU-s over {stop.hook_calls:,} answers",
                flush=True,
            )
            rows.append(row)
        report(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
