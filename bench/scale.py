"""Benchmark: scale. Every figure is a ratio measured side by side in one run (issue 12).

1. throughput: at each N and concurrency C (latency 100 ms at the fake provider, a separate
   process), the bare `DiscreteMetric.ascore` loop, `gate run` in one process, and `gate run` on
   every core (worker processes, `GATE_WORKERS` = cores): wall, wall / ideal (N x latency / C),
   wall / bound (bound = max(ideal, N x bare CPU per judgment / cores): the best any number of
   processes can do), and CPU per judgment (this process and its workers) against the bare loop's.
   Targets: at C=128 wall <= 1.15x bound on every core; CPU per judgment at 20,000 cases <= 1.2x bare
   at C = 32 and C = 128 (issue 47).
2. cached: N judgments all in the cache (filled with the keys `gate run` computes): the wall of a
   fresh `gate run` process against the wall of a fresh process reading the records file it wrote
   (`gate.model.records.read_records`); checks every judgment was a hit and ragas was never imported.
   Target: 20,000 cached judgments < 10 s.
3. rss: peak RSS (`wait4`, the largest of the process and its workers) of a fresh `gate run` process
   at 1,000, 20,000 and 100,000 cases, on the cached path (every judgment in the cache: no ragas, no
   request) and on the live path (the fake provider at latency 0, C = 256, every core, a fresh
   cache), side by side, with the KB each added case costs. Targets: the live path under 1 GB at
   100,000 cases and under 5 KB per added case from 20,000 to 100,000 (issue 47: a judgment
   leaves memory once written); the cached path under 1.5 GB.
4. startup: `gate validate` on the example policy against a bare `python -c "import pydantic,
   yaml"` (fresh processes, alternating, the median of K each). Target: < 2x.

    .venv/bin/python bench/scale.py                     # everything, at the issue's sizes (~15 min)
    .venv/bin/python bench/scale.py --quick             # small sizes (~2 min)
    .venv/bin/python bench/scale.py --only cached,rss,startup
"""

from __future__ import annotations

import os

os.environ["RAGAS_DO_NOT_TRACK"] = "true"

import argparse
import compileall
import gc
import json
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import run as bench_run  # noqa: E402  (bench/run.py: the provider, the suites, both sides)

KEY_ENV = bench_run.KEY_ENV
WALL_TARGET = 1.15
CPU_TARGET = 1.2
CACHED_TARGET_S = 10.0
RSS_TARGET_MB = 1500.0  # the cached path at 100,000 cases
LIVE_RSS_TARGET_MB = 1000.0  # the live path at 100,000 cases
PER_CASE_TARGET_KB = 5.0  # either path, per case added from the second size to the largest
LIVE_CONCURRENCY = 256
STARTUP_TARGET = 2.0


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def cpu_now() -> float:
    """CPU seconds of this process and of its children that have ended (the gate's workers)."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


# -- 1. throughput ---------------------------------------------------------------------------------
@dataclass
class Measured:
    wall_s: float
    cpu_s: float
    ok: int
    problem: str = ""


def gate_side(policy: Path, out: Path, workers: int, n: int) -> Measured:
    os.environ["GATE_WORKERS"] = str(workers)
    try:
        c0 = cpu_now()
        side = bench_run.run_gate(policy, out)
        cpu = cpu_now() - c0
    finally:
        os.environ.pop("GATE_WORKERS", None)
    problem = "" if side.ok == n and not side.errors and not side.wrong else side.first_error or "wrong verdicts"
    return Measured(side.wall_s, cpu, side.ok, problem)


def bare_side(url: str, cases: list[dict[str, Any]], concurrency: int) -> Measured:
    side = bench_run.run_bare(url, bench_run.bare_inputs(cases), concurrency)
    n = len(cases)
    problem = "" if side.ok == n else side.first_error or "wrong verdicts"
    return Measured(side.wall_s, side.cpu_s, side.ok, problem)


def throughput(sizes: Sequence[int], concurrencies: Sequence[int], latency: float, work: Path) -> list[dict[str, Any]]:
    import gate.commands.run  # noqa: F401  (ragas and gate imported before anything is timed)

    k = cores()
    rows: list[dict[str, Any]] = []
    with bench_run.FakeProvider(latency) as fake:
        url = fake.base_url
        warm = bench_run.make_cases(bench_run.WARMUP, prefix="warm")
        bench_run.run_bare(url, bench_run.bare_inputs(warm), 32)
        bench_run.run_gate(bench_run.write_bench_suite(work / "warm", warm, url, 32), work / "warm" / "out")
        for n in sizes:
            cases = bench_run.make_cases(n)
            for c in concurrencies:
                policy = bench_run.write_bench_suite(work / f"t{n}-{c}", cases, url, c)
                print(f"... N={n:,} C={c}: bare, gate x1, gate x{k}", flush=True)
                bare = bare_side(url, cases, c)
                one = gate_side(policy, work / f"t{n}-{c}" / "out1", 1, n)
                every = gate_side(policy, work / f"t{n}-{c}" / "outk", k, n)
                ideal = n * latency / c
                bound = max(ideal, n * (bare.cpu_s / n) / k)
                row = {"n": n, "c": c, "cores": k, "ideal_s": ideal, "bound_s": bound}
                for name, m in (("bare", bare), ("gate_x1", one), (f"gate_x{k}", every)):
                    row[name] = asdict(m)
                rows.append(row)
                print_throughput_row(row, flush=True)
    return rows


def print_throughput_row(row: dict[str, Any], flush: bool = False) -> None:
    n, bare = row["n"], row["bare"]
    print(f"N={n:,} C={row['c']}: ideal {row['ideal_s']:.2f} s, bound {row['bound_s']:.2f} s ({row['cores']} cores)")
    print(f"  {'side':10}{'wall s':>9}{'/ideal':>8}{'/bound':>8}{'vs bare':>9}{'CPU ms/j':>10}{'CPU/bare':>10}  ok")
    for name in ("bare", "gate_x1", f"gate_x{row['cores']}"):
        m = row[name]
        print(
            f"  {name:10}{m['wall_s']:9.2f}{m['wall_s'] / row['ideal_s']:7.2f}x{m['wall_s'] / row['bound_s']:7.2f}x"
            f"{m['wall_s'] / bare['wall_s']:8.2f}x{m['cpu_s'] / n * 1000:10.2f}{m['cpu_s'] / bare['cpu_s']:9.2f}x"
            f"  {m['ok']}/{n}{' ' + m['problem'][:80] if m['problem'] else ''}"
        )
    ratios = [(name, row[name]["cpu_s"] / bare["cpu_s"]) for name in ("gate_x1", f"gate_x{row['cores']}")]
    verdicts = ", ".join(f"{name} {r:.2f}x ({'met' if r <= CPU_TARGET else 'NOT met'})" for name, r in ratios)
    print(f"  CPU per judgment against the bare loop's (target <= {CPU_TARGET:g}x): {verdicts}")
    print(flush=flush)


# -- 2 and 3. the cached path and peak RSS ----------------------------------------------------------
def cached_suite(root: Path, n: int) -> tuple[Path, Path]:
    """A suite of n cases and a cache holding every one of their judgments (keys as `gate run`'s)."""
    from gate.judge import instructor_version, ragas_version, resolve_base_url
    from gate.judge.cache import JudgmentCache, key_parts
    from gate.judge.render import render_case
    from gate.model.cases import load_dataset
    from gate.model.policy import load_policy

    cases = bench_run.make_cases(n)
    policy = bench_run.write_bench_suite(root, cases, "http://127.0.0.1:9/v1", 32)
    loaded = load_policy(policy)
    base_url = resolve_base_url(loaded.policy.evaluator.base_url)
    versions = (ragas_version(), instructor_version())
    rows = []
    for case in load_dataset(loaded).cases:
        parts = key_parts(loaded, base_url, *versions, render_case(loaded.prompt_text, loaded.placeholders, case), 0)
        rows.append((parts.key(), case.human_label, "cached", time.time(), "{}"))
    cache = root / "cache"
    JudgmentCache(cache).close()  # the schema
    with sqlite3.connect(cache / "judgments.sqlite3") as db:
        db.executemany("INSERT OR IGNORE INTO judgments VALUES (?, ?, ?, ?, ?)", rows)
    return policy, cache


PROBE = """
import json, sys, time
t0 = time.perf_counter()
from gate.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "ragas": "ragas" in sys.modules, "wall": time.perf_counter() - t0}))
"""


# A child's peak RSS counts the pages of the process it was forked from until it execs (Linux
# keeps the larger of the two in ru_maxrss), so a child started by this process, which holds the
# suites it wrote (~450 MB after the cached path's 100,000 cases), reads at least that much. Each
# measured process is started by this small launcher instead, and its peak is the launcher's wait4.
LAUNCH = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_pid, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"code": os.waitstatus_to_exitcode(status), "maxrss_kib": usage.ru_maxrss}, f)
"""


def timed_process(args: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) and stdout of a fresh process (its stderr's tail if it printed nothing)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err, tempfile.TemporaryDirectory() as tmp:
        said = Path(tmp) / "wait4.json"
        launched = [sys.executable, "-c", LAUNCH, str(said), *args]
        proc = subprocess.Popen(launched, stdout=subprocess.PIPE, stderr=err, env=env or os.environ.copy(), text=True)
        out, _ = proc.communicate()
        wall = time.perf_counter() - t0
        if not out.strip() or not said.exists():
            err.seek(0)
            raise SystemExit(
                f"bench: {' '.join(args[3:6])} ... printed nothing (exit {proc.returncode}): {err.read()[-1500:]}"
            )
        peak = int(json.loads(said.read_text())["maxrss_kib"])
    return wall, peak, out


def cached_run(root: Path, n: int) -> dict[str, Any]:
    policy, cache = cached_suite(root, n)
    out = root / "out"
    env = {**os.environ, KEY_ENV: bench_run.KEY}
    args = [sys.executable, "-c", PROBE, "run", "--policy", str(policy), "--lane", bench_run.LANE]
    wall, rss, stdout = timed_process([*args, "--cache-dir", str(cache), "--out", str(out)], env)
    probe = json.loads(stdout.strip().splitlines()[-1])
    result = json.loads((out / "result.json").read_text())
    read_wall, _rss, _ = timed_process(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from gate.model.records import read_records; "
            "print(len(read_records(Path(sys.argv[1]))))",
            str(out / "records.jsonl"),
        ]
    )
    return {
        "n": n,
        "wall_s": wall,
        "rss_mb": rss / 1024,
        "read_records_s": read_wall,
        "cached": result["counts"]["cached"],
        "state": result["state"],
        "ragas_imported": probe["ragas"],
    }


def cached(n: int, work: Path) -> dict[str, Any]:
    row = cached_run(work / f"cached{n}", n)
    ok = row["cached"] == n and row["state"] == "passed" and not row["ragas_imported"]
    print(
        f"cached path, N={n:,}: gate run {row['wall_s']:.2f} s (target < {CACHED_TARGET_S:g} s), reading its "
        f"records.jsonl {row['read_records_s']:.2f} s, ratio {row['wall_s'] / row['read_records_s']:.2f}x; "
        f"{row['cached']:,} hits, ragas imported: {row['ragas_imported']}{'' if ok else '  FAILED'}",
        flush=True,
    )
    return row


def release_suite(root: Path, n: int, base_url: str) -> Path:
    """A suite whose release lane (controls first, partition held_out) holds the six controls and n
    cases, C = 256."""
    from tests.suite import case, controls

    cases = [case(f"c-{i:06d}", label="fail" if i % 3 == 2 else "pass", partition="held_out") for i in range(n)]
    return bench_run.write_bench_suite(root, [*controls(), *cases], base_url, LIVE_CONCURRENCY)


def live_run(root: Path, n: int, base_url: str) -> dict[str, Any]:
    """A fresh `gate run --lane release` of n cases (and the six controls) against the fake provider
    (latency 0, C = 256), every core, a fresh cache."""
    policy = release_suite(root, n, base_url)
    out = root / "out"
    env = {**os.environ, KEY_ENV: bench_run.KEY}
    env.pop("GATE_WORKERS", None)  # the gate's own choice: every core at this concurrency
    args = [sys.executable, "-c", PROBE, "run", "--policy", str(policy), "--lane", "release"]
    wall, rss_kib, stdout = timed_process([*args, "--cache-dir", str(root / "cache"), "--out", str(out)], env)
    probe = json.loads(stdout.strip().splitlines()[-1])
    result = json.loads((out / "result.json").read_text())
    return {
        "n": n,
        "wall_s": wall,
        "rss_mb": rss_kib / 1024,
        "completed": result["counts"]["completed"],
        "state": result["state"],
        "code": probe["code"],
    }


def rss(sizes: Sequence[int], work: Path, paths: Sequence[str] = ("cached", "live")) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    if "cached" in paths:
        rows["cached"] = [said(cached_run(work / f"rss{n}", n), "cached") for n in sizes]
    if "live" in paths:
        with bench_run.FakeProvider(0.0) as fake:
            rows["live"] = [said(live_run(work / f"live{n}", n, fake.base_url), "live") for n in sizes]
    print_rss(sizes, rows)
    return rows


def said(row: dict[str, Any], path: str) -> dict[str, Any]:
    """A row as it is measured (the table comes once every size is)."""
    print(f"... {path} N={row['n']:,}: {row['rss_mb']:.1f} MB peak, {row['wall_s']:.1f} s, {row['state']}", flush=True)
    return row


def added_kb(rows: Sequence[dict[str, Any]], i: int) -> float:
    """KB of peak RSS per case added from the size before (i >= 1)."""
    a, b = rows[i - 1], rows[i]
    return (b["rss_mb"] - a["rss_mb"]) / (b["n"] - a["n"]) * 1024


def print_rss(sizes: Sequence[int], rows: dict[str, list[dict[str, Any]]]) -> None:
    print("peak RSS of a fresh `gate run` (wait4: the process or its largest worker), side by side:")
    print(f"  {'cases':>8}" + "".join(f"{name + ' MB':>14}{'KB/added case':>15}{'s':>8}" for name in rows))
    for i, n in enumerate(sizes):
        line = f"  {n:>8,}"
        for path_rows in rows.values():
            r = path_rows[i]
            added = f"{added_kb(path_rows, i):.1f}" if i else "-"
            problem = "" if r["state"] == "passed" else f" ({r['state']})"
            line += f"{r['rss_mb']:14.1f}{added:>15}{r['wall_s']:8.1f}{problem}"
        print(line)
    largest = sizes[-1]
    targets = [f"cached < {RSS_TARGET_MB:g} MB", f"live < {LIVE_RSS_TARGET_MB:g} MB"]
    print(
        f"  targets at {largest:,} cases: {', '.join(targets)}; under {PER_CASE_TARGET_KB:g} KB per case added "
        f"between the two largest sizes (live: C = {LIVE_CONCURRENCY}, fake provider at latency 0)"
    )
    for name, path_rows in rows.items():
        if len(path_rows) >= 2:
            verdict = "met" if added_kb(path_rows, len(path_rows) - 1) < PER_CASE_TARGET_KB else "NOT met"
            print(f"  {name}: {added_kb(path_rows, len(path_rows) - 1):.1f} KB per added case ({verdict})")
    print(flush=True)


# -- 4. startup ---------------------------------------------------------------------------------------
def startup(repeat: int) -> dict[str, Any]:
    example = ROOT / "policies" / "example" / "policy.yaml"
    gate_bin = str(Path(sys.executable).parent / "gate")
    # Byte-compile what `gate validate` imports, as an installed gate is (pip compiles a wheel, the
    # image runs compileall): the bare side's pydantic and yaml come compiled, and with
    # PYTHONDONTWRITEBYTECODE set (as on the project machine) an editable checkout would otherwise
    # recompile every gate module on every start (~40 ms), a cost no user's install pays.
    compileall.compile_dir(ROOT / "gate", quiet=1)
    compileall.compile_file(example.parent / "checks.py", quiet=1)
    sides = {
        "bare": [sys.executable, "-c", "import pydantic, yaml"],
        "validate": [gate_bin, "validate", "--policy", str(example)],
    }
    wall: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(repeat):
        for side, args in sides.items():
            t0 = time.perf_counter()
            proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert proc.stdout is not None
            out = proc.stdout.read()
            _pid, status, usage = os.wait4(proc.pid, 0)
            wall[side].append(time.perf_counter() - t0)
            cpu[side].append(usage.ru_utime + usage.ru_stime)
            if side == "validate" and (os.waitstatus_to_exitcode(status) != 0 or "No findings" not in out):
                raise SystemExit(f"gate validate on the example did not pass: {out}")
    b, v = statistics.median(wall["bare"]), statistics.median(wall["validate"])
    bc, vc = statistics.median(cpu["bare"]), statistics.median(cpu["validate"])
    print(
        f"startup (median of {repeat}, alternating): bare `import pydantic, yaml` {b * 1000:.0f} ms, "
        f"`gate validate` on the example {v * 1000:.0f} ms: {v / b:.2f}x (target < {STARTUP_TARGET:g}x); "
        f"CPU {bc * 1000:.0f} ms vs {vc * 1000:.0f} ms: {vc / bc:.2f}x",
        flush=True,
    )
    return {"bare_s": b, "validate_s": v, "ratio": v / b, "bare_cpu_s": bc, "validate_cpu_s": vc, "repeat": repeat}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="throughput,cached,rss,startup")
    ap.add_argument("--sizes", default="2000,20000", help="throughput sizes")
    ap.add_argument("--concurrency", default="32,128")
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--cached", type=int, default=20_000, help="judgments in the cached-path run")
    ap.add_argument("--rss-sizes", default="1000,20000,100000")
    ap.add_argument("--rss-paths", default="cached,live", help="which paths the rss figure measures")
    ap.add_argument("--startup-repeat", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="throughput 500 at C=32,128; cached 5,000; rss 1,000,5,000")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.cached, args.rss_sizes, args.startup_repeat = "500", 5000, "1000,5000", 7
    only = set(args.only.split(","))
    figures: dict[str, Any] = {"cores": cores(), "python": sys.version.split()[0], "load": os.getloadavg()}
    print(f"cores {cores()}, python {figures['python']}, load average {figures['load'][0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="gate-scale-") as tmp:
        work = args.workdir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        os.environ["XDG_DATA_HOME"] = str(work / "xdg")
        if "startup" in only:
            figures["startup"] = startup(args.startup_repeat)
        if "cached" in only:
            figures["cached"] = cached(args.cached, work)
        if "rss" in only:
            figures["rss"] = rss([int(s) for s in args.rss_sizes.split(",")], work, args.rss_paths.split(","))
        if "throughput" in only:
            gc.collect()
            figures["throughput"] = throughput(
                [int(s) for s in args.sizes.split(",")],
                [int(c) for c in args.concurrency.split(",")],
                args.latency,
                work,
            )
    figures["load_after"] = os.getloadavg()
    print(f"load average after: {figures['load_after'][0]:.2f} (a shared machine: read the ratios, not the seconds)")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
