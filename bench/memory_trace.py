"""Benchmark: where a live `gate run`'s memory per case lives, by source line (tracemalloc).

One live `gate run --lane release` in this process (`GATE_WORKERS=1`: every allocation is in the
one process tracemalloc sees) against the fake OpenAI-compatible provider (`tests/fake_openai.py`,
a separate process, latency 0), C = 256, on N cases. A thread takes a tracemalloc snapshot when
records.jsonl holds each of the `--at` counts (1,000 / 10,000 / 20,000 by default), then near the
peak of what comes after the judging (the decision and the outputs: a snapshot each time the memory
traced passes the last one's by 5%), and one after the run returned; printed: the memory traced at
each, and the lines that grew most between snapshots, in bytes per case added (what a judgment
leaves behind), with tracemalloc's peak.

    .venv/bin/python bench/memory_trace.py                          # 20,000 cases, snapshots at 1k/10k/20k
    .venv/bin/python bench/memory_trace.py --tree /tmp/gate-before  # the same, importing gate from another checkout
    .venv/bin/python bench/memory_trace.py --cached                 # the cached path (no provider, no ragas)
    .venv/bin/python bench/memory_trace.py --frames 12             # each line with the line of gate that led to it
    .venv/bin/python bench/memory_trace.py --workers 2              # the parent of 2 workers: the fold and the decision

`--tree DIR` imports `gate` from DIR (a `git archive` of an earlier commit) instead of this checkout:
the suite, the fake provider and this script stay the same, so before and after are comparable.
tracemalloc slows the run several times (more with `--frames`); read bytes per case, not seconds.
A block freed to one of Python's free lists and taken again by a later object keeps its first
line: a line that only made something short-lived (a parse's dict) can show as held per case.
"""

from __future__ import annotations

import os

os.environ["RAGAS_DO_NOT_TRACK"] = "true"
os.environ["GATE_WORKERS"] = "1"

import argparse
import io
import itertools
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import run as bench_run  # noqa: E402  (bench/run.py: the provider and the suites)
import scale as bench_scale  # noqa: E402  (bench/scale.py: the release-lane suite)


def count_lines(path: Path, state: dict[str, int]) -> int:
    """Lines in records.jsonl so far, reading only what was appended since the last call."""
    if not path.exists():
        return 0
    with path.open("rb") as f:
        f.seek(state.get("pos", 0))
        chunk = f.read()
    state["pos"] = state.get("pos", 0) + len(chunk)
    state["lines"] = state.get("lines", 0) + chunk.count(b"\n")
    return state["lines"]


def watch(
    records: Path,
    marks: Sequence[int],
    shots: list[tuple[str, int, tracemalloc.Snapshot]],
    highest: list[tracemalloc.Snapshot],
    done: threading.Event,
    say: TextIO,
) -> None:
    """A snapshot at each mark; after the last, until the run returns, a snapshot each time the
    memory traced passes the highest snapshot's by 5% (`highest` keeps the last: the decision and
    the outputs near their peak, which the judging's snapshots never see)."""
    state: dict[str, int] = {}
    pending = list(marks)
    while pending and not done.is_set():
        n = count_lines(records, state)
        if n >= pending[0]:
            shots.append((f"{n:,} records", n, tracemalloc.take_snapshot()))
            traced = tracemalloc.get_traced_memory()[0] / 2**20
            print(f"... snapshot at {n:,} records, traced {traced:.1f} MB", file=say, flush=True)
            while pending and n >= pending[0]:
                pending.pop(0)
        time.sleep(0.05)
    top = tracemalloc.get_traced_memory()[0]
    while not done.is_set():
        current = tracemalloc.get_traced_memory()[0]
        if current > top * 1.05:
            highest[:] = [tracemalloc.take_snapshot()]
            top = max(current, tracemalloc.get_traced_memory()[0])
            print(f"... snapshot after judging, traced {top / 2**20:.1f} MB", file=say, flush=True)
        time.sleep(0.1)


def shown(frame: tracemalloc.Frame) -> str:
    return f"{frame.filename.replace(str(ROOT) + '/', '').split('site-packages/')[-1]}:{frame.lineno}"


def top_growth(a: tracemalloc.Snapshot, b: tracemalloc.Snapshot, cases: int, top: int, frames: int = 1) -> list[str]:
    """The lines that grew most from `a` to `b`, per case added; with more than one frame traced
    (`--frames`), each with the innermost line of gate that led to it."""
    ignore = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
    ]
    stats = b.filter_traces(ignore).compare_to(a.filter_traces(ignore), "traceback" if frames > 1 else "lineno")
    total = sum(s.size_diff for s in stats)
    lines = [
        f"  all lines: {total / max(cases, 1):,.0f} B per added case ({total / 2**20:+.1f} MB over {cases:,} cases)"
    ]
    for s in stats[:top]:
        where = shown(s.traceback[-1])  # the most recent frame: the line that allocated
        ours = next((shown(f) for f in reversed(s.traceback) if "/gate/" in f.filename), None)
        via = f"  (from {ours})" if ours is not None and ours != where else ""
        lines.append(
            f"  {s.size_diff / max(cases, 1):8,.0f} B/case {s.count_diff / max(cases, 1):6.2f} objects/case  {where}{via}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=20_000)
    ap.add_argument("--at", default="1000,10000,20000", help="records counts to snapshot at")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--tree", type=Path, default=None, help="import gate from this checkout")
    ap.add_argument("--frames", type=int, default=1, help="frames traced per allocation (more: slower)")
    ap.add_argument(
        "--workers", type=int, default=1, help="worker processes (more than 1: the snapshots see this process only)"
    )
    ap.add_argument("--cached", action="store_true", help="the cached path: every judgment in the cache, no provider")
    args = ap.parse_args(argv)
    os.environ["GATE_WORKERS"] = str(args.workers)
    if args.tree is not None:
        sys.path.insert(0, str(args.tree.resolve()))
    from gate.cli import main as gate_main

    print(f"gate from {Path(sys.modules['gate.cli'].__file__ or '').parent}, load average {os.getloadavg()[0]:.2f}")
    marks = [int(s) for s in args.at.split(",")]
    with tempfile.TemporaryDirectory(prefix="gate-trace-") as tmp, bench_run.FakeProvider(0.0) as fake:
        work = Path(tmp)
        os.environ["XDG_DATA_HOME"] = str(work / "xdg")
        os.environ[bench_run.KEY_ENV] = bench_run.KEY
        if args.cached:
            policy, cache = bench_scale.cached_suite(work / "suite", args.cases)
            lane = bench_run.LANE
        else:
            policy, cache, lane = (
                bench_scale.release_suite(work / "suite", args.cases, fake.base_url),
                work / "cache",
                "release",
            )
        out = work / "out"
        argv_run = ["run", "--policy", str(policy), "--lane", lane, "--cache-dir", str(cache), "--out", str(out)]
        shots: list[tuple[str, int, tracemalloc.Snapshot]] = []
        highest: list[tracemalloc.Snapshot] = []
        done = threading.Event()
        tracemalloc.start(args.frames)
        base = tracemalloc.take_snapshot()
        shots.append(("start", 0, base))
        watcher = threading.Thread(
            target=watch, args=(out / "records.jsonl", marks, shots, highest, done, sys.stdout), daemon=True
        )
        watcher.start()
        shown, sys.stdout, sys.stderr = (sys.stdout, sys.stderr), io.StringIO(), io.StringIO()
        try:
            code = gate_main(argv_run)
        finally:
            said = sys.stderr.getvalue()
            sys.stdout, sys.stderr = shown
        if code != 0:
            print(said[-2000:])
        done.set()
        watcher.join()
        shots.append(("after the run", args.cases, tracemalloc.take_snapshot()))
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    print(f"gate run exit {code}; traced now {current / 2**20:.1f} MB, peak {peak / 2**20:.1f} MB")
    for (name_a, n_a, a), (name_b, n_b, b) in itertools.pairwise(shots[1:]):
        if n_b <= n_a:
            continue
        print(f"growth from {name_a} to {name_b}:")
        print("\n".join(top_growth(a, b, n_b - n_a, args.top, args.frames)))
    if highest:
        for name_a, n_a, a in shots[:2]:
            print(f"growth from {name_a} to the highest snapshot after judging (the decision and the outputs):")
            print("\n".join(top_growth(a, highest[0], args.cases - n_a, args.top, args.frames)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
