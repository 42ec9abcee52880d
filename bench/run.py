"""Benchmark: `gate run` against a bare loop of ragas `DiscreteMetric.ascore` calls.

Both sides judge the same N cases against the fake OpenAI-compatible provider
(`tests/fake_openai.py`, run as a separate process so it takes none of this process's CPU or GIL)
with a fixed latency per request, at the same concurrency, on an equally configured client:

- gate: `gate.commands.run.run(policy, RunOptions(lane=..., cache_dir=None))` on a generated suite whose
  lane has `controls: false` and whose cost boundary is far away; everything `gate run` does is
  timed (loading, validators, plan, judging with metering, retries and records, decision, outputs).
- bare: `asyncio.gather` of N `metric.ascore(llm=llm, **fields)` calls, each under one
  `asyncio.Semaphore(C)`, on `openai.AsyncOpenAI(max_retries=0, http_client=httpx2.AsyncClient(...))`
  with the same limits and timeouts as the judge's, and `llm_factory(model, client=...,
  temperature=0, seed=7, max_tokens=64, max_retries=0)`.

Printed per size: the wall time of each over the ideal (N x latency / C), the CPU time per
judgment (`time.process_time` delta / N), the CPU floor (N x bare CPU per judgment / cores) and
the gate/bare ratios against the targets (wall <= 1.1x, CPU per judgment <= 1.3x). ragas, openai,
instructor and httpx2 are imported before anything is timed (their import time is printed apart),
and both sides are warmed up once on a few cases. Each side must return N verdicts that agree with
the fake's `[[judge:...]]` oracle markers, or the benchmark fails.

    .venv/bin/python bench/run.py                       # 2,000 and 20,000 cases, C=32, 100 ms
    .venv/bin/python bench/run.py --quick               # 200 and 500
    .venv/bin/python bench/run.py --sizes 2000 --profile cprofile   # + CPU by package, both sides

`--profile cprofile` runs each side once more under cProfile on the smallest size (not timed) and
prints self CPU time per judgment grouped by package (built-in calls charged to their caller's
package), gate minus bare, and the top functions of ours. `--profile pyinstrument` writes an HTML
profile of the gate side when pyinstrument is importable (it is not a dependency).
"""

from __future__ import annotations

import os

# Before ragas is imported: its telemetry posts synchronously on the event loop otherwise.
os.environ["RAGAS_DO_NOT_TRACK"] = "true"
# The gate side runs in one process, as the bare loop does (bench/scale.py compares every core).
os.environ.setdefault("GATE_WORKERS", "1")

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import json
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.suite import PROMPT, case, write_suite  # noqa: E402

KEY_ENV = "GATE_BENCH_KEY"
KEY = "sk-bench-not-a-secret"
LANE = "nocontrols"  # tests/suite.py: partitions [sentinel], controls: false
MODEL = "gpt-4o-mini"
TEMPERATURE = 0
SEED = 7
MAX_TOKENS = 64
TIMEOUT_S = 60.0
WARMUP = 64
PLACEHOLDERS = ("user_input", "reference", "response")
WALL_TARGET = 1.1
CPU_TARGET = 1.3


# -- the fake provider, in its own process ------------------------------------------------------
class FakeProvider:
    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.summary = ""

    def __enter__(self) -> FakeProvider:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fake_openai", "--port", "0", "--latency", str(self.latency)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http://"):
            self.proc.kill()
            raise SystemExit(f"bench: the fake provider did not start: {line!r} {self.proc.stderr.read()}")  # type: ignore[union-attr]
        self.base_url = line
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            _out, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _out, err = self.proc.communicate()
        self.summary = err.strip().splitlines()[-1] if err.strip() else ""


# -- inputs ---------------------------------------------------------------------------------------
def make_cases(n: int, prefix: str = "c") -> list[dict[str, Any]]:
    """N cases, every third one labelled fail; each response carries the fake's oracle marker."""
    return [case(f"{prefix}-{i:06d}", label="fail" if i % 3 == 2 else "pass") for i in range(n)]


def bare_inputs(cases: Sequence[dict[str, Any]]) -> list[tuple[dict[str, str], str]]:
    """(the DiscreteMetric fields, the label the oracle will answer) per case."""
    return [({k: c[k] for k in PLACEHOLDERS}, c["human_adjudication"]["label"]) for c in cases]


def write_bench_suite(root: Path, cases: list[dict[str, Any]], base_url: str, concurrency: int) -> Path:
    return write_suite(
        root,
        cases,
        evaluator={
            "model": MODEL,
            "base_url": base_url,
            "api_key_env": KEY_ENV,
            "temperature": TEMPERATURE,
            "seed": SEED,
            "max_output_tokens": MAX_TOKENS,
            "timeout_s": TIMEOUT_S,
            "max_concurrency": concurrency,
        },
        limits={"max_evaluator_errors": 0, "max_total_cost": 1e9},
    )


# -- measurements ---------------------------------------------------------------------------------
@dataclass
class Side:
    wall_s: float = 0.0
    cpu_s: float = 0.0
    ok: int = 0
    wrong: int = 0
    errors: int = 0
    phases: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (wall, cpu)
    first_error: str = ""
    gc_s: float = 0.0  # time inside the cyclic garbage collector (all generations)
    gc_full: int = 0  # generation-2 collections


class GCClock:
    """Time spent in the cyclic GC while measuring (a pause blocks the event loop)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.full = 0
        self._t = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._t
            self.full += info.get("generation") == 2

    def __enter__(self) -> GCClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


async def bare_loop(
    base_url: str, items: Sequence[tuple[dict[str, str], str]], concurrency: int
) -> list[tuple[Any, str]]:
    import httpx2
    import openai
    from ragas.llms import llm_factory
    from ragas.metrics import DiscreteMetric

    timeout = httpx2.Timeout(TIMEOUT_S, connect=min(TIMEOUT_S, 10.0))
    http = httpx2.AsyncClient(
        timeout=timeout,
        limits=httpx2.Limits(max_connections=concurrency + 4, max_keepalive_connections=concurrency),
    )
    client = openai.AsyncOpenAI(api_key=KEY, base_url=base_url, max_retries=0, timeout=timeout, http_client=http)
    llm = llm_factory(MODEL, client=client, temperature=TEMPERATURE, seed=SEED, max_tokens=MAX_TOKENS, max_retries=0)
    metric = DiscreteMetric(name="refund_contract", allowed_values=["pass", "fail"], prompt=PROMPT)
    sem = asyncio.Semaphore(concurrency)

    async def one(fields: dict[str, str]) -> Any:
        async with sem:
            try:
                return (await metric.ascore(llm=llm, **fields)).value
            except Exception as exc:
                return exc

    try:
        values = await asyncio.gather(*(one(f) for f, _ in items))
    finally:
        await client.close()
        await http.aclose()
    return [(v, expected) for v, (_, expected) in zip(values, items, strict=True)]


def median_side(runs: Sequence[Side]) -> Side:
    """The run with the median wall time (every run must be sane for the row to be)."""
    chosen = sorted(runs, key=lambda s: s.wall_s)[len(runs) // 2]
    worst = max(runs, key=lambda s: (s.errors + s.wrong, -s.ok))
    return chosen if worst.errors + worst.wrong == 0 and worst.ok == chosen.ok else worst


def run_bare(base_url: str, items: Sequence[tuple[dict[str, str], str]], concurrency: int) -> Side:
    gc.collect()
    with GCClock() as gcc:
        w0, c0 = time.perf_counter(), time.process_time()
        results = asyncio.run(bare_loop(base_url, items, concurrency))
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    side = Side(wall_s=wall, cpu_s=cpu, gc_s=gcc.total, gc_full=gcc.full)
    for value, expected in results:
        if isinstance(value, BaseException):
            side.errors += 1
            side.first_error = side.first_error or f"{type(value).__name__}: {value}"
        elif value == expected:
            side.ok += 1
        else:
            side.wrong += 1
    return side


def run_gate(policy: Path, out_dir: Path) -> Side:
    import gate.commands.run as gate_run

    phases: dict[str, tuple[float, float]] = {}
    # The name gate.commands.run calls (older versions defined `_judge_all` in gate.commands.run itself).
    hook = "judge_all" if hasattr(gate_run, "judge_all") else "_judge_all"
    original = getattr(gate_run, hook)
    marks: dict[str, tuple[float, float]] = {}

    async def timed_judge_all(runner: Any) -> None:
        marks["judge_start"] = (time.perf_counter(), time.process_time())
        try:
            await original(runner)
        finally:
            marks["judge_end"] = (time.perf_counter(), time.process_time())

    setattr(gate_run, hook, timed_judge_all)
    try:
        # `gate run --no-cache`: no cache read or written (older RunOptions had only cache_dir=None).
        no_cache = {"use_cache": False} if "use_cache" in gate_run.RunOptions.__dataclass_fields__ else {}
        opts = gate_run.RunOptions(lane=LANE, out_dir=out_dir, cache_dir=None, progress=io.StringIO(), **no_cache)
        gc.collect()
        with GCClock() as gcc:
            w0, c0 = time.perf_counter(), time.process_time()
            decision = gate_run.run(policy, opts, env={KEY_ENV: KEY})
            w1, c1 = time.perf_counter(), time.process_time()
    finally:
        setattr(gate_run, hook, original)
    wall, cpu = w1 - w0, c1 - c0
    if "judge_start" in marks:
        (js_w, js_c), (je_w, je_c) = marks["judge_start"], marks["judge_end"]
        phases = {
            "load+validate+plan": (js_w - w0, js_c - c0),
            "judging": (je_w - js_w, je_c - js_c),
            "decide+outputs": (w1 - je_w, c1 - je_c),
        }
    side = Side(wall_s=wall, cpu_s=cpu, phases=phases, gc_s=gcc.total, gc_full=gcc.full)
    for line in (out_dir / "records.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("cache") == "hit":
            side.errors += 1
            side.first_error = (
                side.first_error or "a judgment came from the cache: the benchmark must call the provider"
            )
        elif rec["status"] != "ok":
            side.errors += 1
            side.first_error = side.first_error or f"{rec['error_kind']}: {rec['error_message']}"
        elif rec["judge_label"] == rec["human_label"]:
            side.ok += 1
        else:
            side.wrong += 1
    result = decision.result
    if result.counts.completed != side.ok + side.wrong and not side.first_error:
        side.first_error = f"result.json counts {result.counts} disagree with records.jsonl"
    if not side.ok and not side.first_error:
        blockers = [f"{b.kind}: {b.message[:200]}" for b in result.blockers]
        side.first_error = f"no judgment ran; state {result.state}; blockers {blockers}"
    return side


@dataclass
class Row:
    n: int
    concurrency: int
    latency_s: float
    cores: int
    bare: Side
    gate: Side

    @property
    def ideal_s(self) -> float:
        return self.n * self.latency_s / self.concurrency

    def cpu_ms(self, side: Side) -> float:
        return side.cpu_s / self.n * 1000.0

    @property
    def wall_ratio(self) -> float:
        return self.gate.wall_s / self.bare.wall_s

    @property
    def cpu_ratio(self) -> float:
        return self.gate.cpu_s / self.bare.cpu_s

    @property
    def cpu_floor_s(self) -> float:
        return self.n * (self.bare.cpu_s / self.n) / self.cores

    def sane(self) -> bool:
        return all(s.ok == self.n and not s.errors and not s.wrong for s in (self.bare, self.gate))


def verdicts(side: Side, n: int) -> str:
    extra = f" ({side.errors} errors, {side.wrong} wrong: {side.first_error})" if side.ok != n else ""
    return f"{side.ok}/{n}{extra}"


def print_row(r: Row, out: Any = sys.stdout) -> None:
    p = lambda s="": print(s, file=out)  # noqa: E731
    p(
        f"N={r.n:,} cases, concurrency {r.concurrency}, latency {r.latency_s * 1000:g} ms, {r.cores} cores: "
        f"ideal N x latency / C = {r.ideal_s:.2f} s"
    )
    p(f"  {'':34}{'bare ragas':>14}{'gate run':>14}{'gate/bare':>12}")
    p(f"  {'wall (s)':34}{r.bare.wall_s:14.2f}{r.gate.wall_s:14.2f}{r.wall_ratio:11.2f}x  (target <= {WALL_TARGET}x)")
    p(f"  {'wall / ideal':34}{r.bare.wall_s / r.ideal_s:13.2f}x{r.gate.wall_s / r.ideal_s:13.2f}x")
    p(f"  {'judgments/s':34}{r.n / r.bare.wall_s:14.0f}{r.n / r.gate.wall_s:14.0f}")
    p(
        f"  {'CPU per judgment (ms)':34}{r.cpu_ms(r.bare):14.2f}{r.cpu_ms(r.gate):14.2f}{r.cpu_ratio:11.2f}x"
        f"  (target <= {CPU_TARGET}x)"
    )
    p(f"  {'CPU floor N x bare cpu / cores (s)':34}{r.cpu_floor_s:14.2f}")
    p(f"  {'one-core floor N x cpu (s)':34}{r.bare.cpu_s:14.2f}{r.gate.cpu_s:14.2f}")
    p(
        f"  {'GC pauses (s), full collections':34}{f'{r.bare.gc_s:.2f}, {r.bare.gc_full}':>14}"
        f"{f'{r.gate.gc_s:.2f}, {r.gate.gc_full}':>14}"
    )
    p(f"  {'verdicts agreeing with the oracle':34}{verdicts(r.bare, r.n):>14}{verdicts(r.gate, r.n):>14}")
    if r.gate.phases:
        parts = ", ".join(
            f"{k} {w:.2f} s wall / {c / r.n * 1000:.2f} ms cpu per judgment" for k, (w, c) in r.gate.phases.items()
        )
        p(f"  gate phases: {parts}")


def print_summary(rows: Sequence[Row]) -> None:
    head = (
        f"{'N':>7} {'C':>3} {'ideal s':>8} {'bare s':>8} {'gate s':>8} {'bare/id':>8} {'gate/id':>8} "
        f"{'wall g/b':>9} {'bare ms':>8} {'gate ms':>8} {'cpu g/b':>8} {'floor s':>8}  ok"
    )
    print(head)
    for r in rows:
        print(
            f"{r.n:>7} {r.concurrency:>3} {r.ideal_s:8.2f} {r.bare.wall_s:8.2f} {r.gate.wall_s:8.2f} "
            f"{r.bare.wall_s / r.ideal_s:7.2f}x {r.gate.wall_s / r.ideal_s:7.2f}x {r.wall_ratio:8.2f}x "
            f"{r.cpu_ms(r.bare):8.2f} {r.cpu_ms(r.gate):8.2f} {r.cpu_ratio:7.2f}x {r.cpu_floor_s:8.2f}  "
            f"{'yes' if r.sane() else 'NO'}"
        )
    print(
        f"targets: wall gate/bare <= {WALL_TARGET}x, CPU per judgment gate/bare <= {CPU_TARGET}x; "
        "bare/id and gate/id are wall over the ideal N x latency / C; floor = N x bare CPU per judgment / cores"
    )


# -- profiles -------------------------------------------------------------------------------------
_SITE = re.compile(r"/site-packages/([^/]+)")
_STDLIB = re.compile(r"/lib/python3\.\d+/([^/]+)")


def package_of(filename: str) -> str:
    if filename == "~":
        return "~"
    path = filename.replace("\\", "/")
    if f"{ROOT.as_posix()}/gate/" in path:
        return "gate (ours)"
    if f"{ROOT.as_posix()}/bench/" in path:
        return "bench"
    m = _SITE.search(path)
    if m:
        name = m.group(1).split(".")[0]
        return {"pydantic_core": "pydantic", "typing_extensions": "stdlib"}.get(name, name)
    m = _STDLIB.search(path)
    if m:
        mod = m.group(1).removesuffix(".py")
        return f"stdlib:{mod}" if mod in {"asyncio", "json", "ssl", "selectors", "typing", "contextvars"} else "stdlib"
    return "other"


def self_time_by_package(stats: pstats.Stats) -> dict[str, float]:
    """Self time per package; a built-in's time goes to the package of the function that called it."""
    out: dict[str, float] = defaultdict(float)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for (filename, _line, _name), (_cc, _nc, tt, _ct, callers) in raw.items():
        pkg = package_of(filename)
        if pkg != "~":
            out[pkg] += tt
            continue
        edges = [(package_of(cf), edge[2]) for (cf, _cl, _cn), edge in callers.items()]
        total = sum(t for _, t in edges)
        for cpkg, t in edges:
            out[cpkg if cpkg != "~" else "builtins"] += t
        if total < tt:  # called from nothing we saw (the event loop's C callbacks)
            out["builtins"] += tt - total
    return dict(out)


def profile_side(fn: Callable[[], Any]) -> pstats.Stats:
    prof = cProfile.Profile()
    prof.enable()
    try:
        fn()
    finally:
        prof.disable()
    return pstats.Stats(prof)


def print_profiles(n: int, bare: pstats.Stats, gate: pstats.Stats, dump_dir: Path | None) -> None:
    b, g = self_time_by_package(bare), self_time_by_package(gate)
    print(f"\ncProfile, N={n:,}: self CPU per judgment by package (ms; cProfile inflates every figure alike)")
    print(f"  {'package':22}{'bare':>9}{'gate':>9}{'gate-bare':>11}")
    for pkg in sorted(set(b) | set(g), key=lambda k: -(g.get(k, 0.0) + b.get(k, 0.0))):
        bv, gv = b.get(pkg, 0.0) / n * 1000, g.get(pkg, 0.0) / n * 1000
        if max(bv, gv) >= 0.005:
            print(f"  {pkg:22}{bv:9.3f}{gv:9.3f}{gv - bv:+11.3f}")
    bt, gt = sum(b.values()) / n * 1000, sum(g.values()) / n * 1000
    print(f"  {'total':22}{bt:9.3f}{gt:9.3f}{gt - bt:+11.3f}")

    raw: dict[Any, Any] = gate.stats  # type: ignore[attr-defined]
    ours = [
        (ct, tt, nc, f"{Path(fn).relative_to(ROOT)}:{line} {name}")
        for (fn, line, name), (_cc, nc, tt, ct, _callers) in raw.items()
        if package_of(fn) == "gate (ours)"
    ]
    print(
        f"\n  gate functions by cumulative time per judgment (ms; coroutines: CPU while running, not waiting), N={n:,}"
    )
    print(f"  {'cum':>8}{'self':>8}{'calls/j':>9}  function")
    for ct, tt, nc, label in sorted(ours, reverse=True)[:30]:
        print(f"  {ct / n * 1000:8.3f}{tt / n * 1000:8.3f}{nc / n:9.2f}  {label}")
    if dump_dir is not None:
        bare.dump_stats(str(dump_dir / f"bare-{n}.pstats"))
        gate.dump_stats(str(dump_dir / f"gate-{n}.pstats"))
        print(f"  pstats written to {dump_dir}/bare-{n}.pstats and gate-{n}.pstats")


# -- main -----------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="2000,20000", help="comma-separated numbers of cases (default 2000,20000)")
    ap.add_argument("--quick", action="store_true", help="sizes 200,500")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.1, help="the fake provider's seconds per request")
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs per side and size, order alternating; the median wall is kept"
    )
    ap.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after imports and warm-up (both sides)")
    ap.add_argument("--order", choices=("bare-first", "gate-first"), default="bare-first")
    ap.add_argument("--profile", choices=("none", "cprofile", "pyinstrument"), default="none")
    ap.add_argument("--profile-size", type=int, default=None, help="default: the smallest size")
    ap.add_argument("--workdir", type=Path, default=None, help="keep suites, outputs and profiles here")
    ap.add_argument("--json", type=Path, default=None, help="write the measurements here")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [200, 500] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    cores = os.cpu_count() or 1
    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gate-bench-")))
        else:
            work = args.workdir
            work.mkdir(parents=True, exist_ok=True)
        os.environ["XDG_DATA_HOME"] = str(work / "xdg")  # ragas writes ragas/uuid.json there

        t0 = time.perf_counter()
        import httpx2  # noqa: F401
        import instructor
        import openai
        import ragas.llms
        import ragas.metrics

        import_ragas_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        import gate.commands.run  # noqa: F401

        import_gate_s = time.perf_counter() - t0
        print(
            f"imports (not timed below): ragas+instructor+openai+httpx2 {import_ragas_s:.2f} s, "
            f"gate.commands.run {import_gate_s:.2f} s; python {sys.version.split()[0]}, ragas {ragas.__version__}, "
            f"openai {openai.__version__}, instructor {instructor.__version__}, cores {cores}",
            flush=True,
        )

        fake = stack.enter_context(FakeProvider(args.latency))
        url = fake.base_url
        print(f"fake provider: {url} (separate process, {args.latency * 1000:g} ms per request)", flush=True)

        # Warm-up, not timed: first-call costs (pydantic schemas, instructor patching, connections).
        warm = make_cases(WARMUP, prefix="warm")
        run_bare(url, bare_inputs(warm), args.concurrency)
        run_gate(write_bench_suite(work / "warm", warm, url, args.concurrency), work / "warm" / "out")

        if args.gc_freeze:  # what `gc.freeze()` after the imports would buy either side
            gc.collect()
            gc.freeze()
            print(f"gc.freeze(): {gc.get_freeze_count():,} objects moved out of the collector's reach", flush=True)

        rows: list[Row] = []
        for n in sizes:
            cases = make_cases(n)
            items = bare_inputs(cases)
            policy = write_bench_suite(work / f"n{n}", cases, url, args.concurrency)
            out_dir = work / f"n{n}" / "out"
            runs: dict[str, list[Side]] = {"bare": [], "gate": []}
            order = ["bare", "gate"] if args.order == "bare-first" else ["gate", "bare"]
            for k in range(args.repeat):
                for name in order if k % 2 == 0 else order[::-1]:  # alternate who goes first
                    print(f"... N={n:,}: {name} ({k + 1}/{args.repeat})", flush=True)
                    side = run_bare(url, items, args.concurrency) if name == "bare" else run_gate(policy, out_dir)
                    runs[name].append(side)
            sides = {name: median_side(r) for name, r in runs.items()}
            row = Row(n, args.concurrency, args.latency, cores, sides["bare"], sides["gate"])
            rows.append(row)
            print_row(row)
            print(flush=True)

        if args.profile != "none":
            n = args.profile_size or min(sizes)
            cases = make_cases(n, prefix="p")
            policy = write_bench_suite(work / f"prof{n}", cases, url, args.concurrency)
            dump = work if args.workdir is not None else None
            if args.profile == "cprofile":
                bare_stats = profile_side(lambda: run_bare(url, bare_inputs(cases), args.concurrency))
                gate_stats = profile_side(lambda: run_gate(policy, work / f"prof{n}" / "out"))
                print_profiles(n, bare_stats, gate_stats, dump)
            else:
                try:
                    from pyinstrument import Profiler  # type: ignore[import-not-found]
                except ImportError:
                    print(
                        "pyinstrument is not importable: install it outside the lock (e.g. pip --target) "
                        "and put it on PYTHONPATH"
                    )
                    return 2
                profiler = Profiler(async_mode="disabled")
                profiler.start()
                run_gate(policy, work / f"prof{n}" / "out")
                profiler.stop()
                html = (args.workdir or Path.cwd()) / f"gate-{n}.pyinstrument.html"
                html.write_text(profiler.output_html(), encoding="utf-8")
                print(profiler.output_text(show_all=False, color=False)[:20000])
                print(f"pyinstrument HTML written to {html}")

    print("\nsummary")
    print_summary(rows)
    if fake.summary:
        print(fake.summary)
    if args.json is not None:
        args.json.write_text(
            json.dumps([{**asdict(r), "ideal_s": r.ideal_s, "cores": r.cores} for r in rows], indent=2) + "\n",
            encoding="utf-8",
        )
    if not all(r.sane() for r in rows):
        print("bench: FAILED: a side did not return N verdicts agreeing with the oracle", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
