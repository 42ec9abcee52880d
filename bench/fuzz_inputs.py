"""The hostile-input corpus at size: many random inputs through the real CLI, counted by outcome.

    .venv/bin/python bench/fuzz_inputs.py                      # 2,000 inputs, random seed
    .venv/bin/python bench/fuzz_inputs.py --examples 300 --seed 1 --json /tmp/fuzz.json

Each input is a clean suite with one file changed (tests/hostile_corpus.py lists the families).
It prints, per target file, how many inputs ended in exit 2 (a message), in findings (exit 1),
clean (exit 0) or in a state (decide/run: 3, 4), how many broke the property (tracebacks, internal
errors, injected log lines, bad XML, over the time bound), and the slowest command. Exit status 1
if any input broke the property; the first failures are printed with the input that caused them.
Memory: the whole process runs under RLIMIT_AS (default 2 GiB), so a reader that slurps a device
fails the run instead of the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from hostile_corpus import Mutation, check, exercise, mutations  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=2000, help="inputs to generate (default 2000)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    parser.add_argument("--memory-gib", type=float, default=2.0, help="RLIMIT_AS for the process (default 2)")
    parser.add_argument("--json", type=Path, default=None, help="also write the counts here")
    args = parser.parse_args(argv)

    limit = int(args.memory_gib * 1024**3)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    os.environ.pop("GATE_TEST_KEY", None)
    os.environ["RAGAS_DO_NOT_TRACK"] = "true"
    run_seed = args.seed if args.seed is not None else random.randrange(2**32)

    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    families: Counter[str] = Counter()
    failures: list[str] = []
    slowest = (0.0, "")
    started = time.perf_counter()

    @seed(run_seed)
    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=True,
    )
    @given(mutation=mutations())
    def one(mutation: Mutation) -> None:
        nonlocal slowest
        families[f"{mutation.target}/{mutation.family}"] += 1
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            try:
                results = exercise(root, mutation)
                check(root, mutation, results)
            except BaseException as exc:  # every failure is counted and shown, not only the first
                outcomes[mutation.target]["BROKEN"] += 1
                if len(failures) < 20:
                    failures.append(f"{mutation}: {type(exc).__name__}: {str(exc)[:1500]}")
                return
        for o in results:
            outcomes[mutation.target][f"{o.command}:exit{o.code}"] += 1
            if o.seconds > slowest[0]:
                slowest = (o.seconds, f"{mutation.target}/{mutation.family} {o.command}")

    one()
    wall = time.perf_counter() - started
    total = sum(families.values())
    broken = sum(c["BROKEN"] for c in outcomes.values())
    print(f"hostile-input corpus: {total} inputs, seed {run_seed}, {wall:.0f} s, RLIMIT_AS {args.memory_gib:g} GiB")
    print(f"broken (traceback, internal error, injected log line, bad XML, over the time bound): {broken}")
    print(f"slowest command: {slowest[0]:.2f} s ({slowest[1]})")
    for target in sorted(outcomes):
        counts = outcomes[target]
        print(f"  {target:9s} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"families: {len(families)} distinct; " + ", ".join(f"{k} {v}" for k, v in families.most_common(8)) + " ...")
    for failure in failures:
        print("\nFAILED " + failure)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "inputs": total,
                    "seed": run_seed,
                    "seconds": wall,
                    "broken": broken,
                    "slowest_seconds": slowest[0],
                    "outcomes": {t: dict(c) for t, c in outcomes.items()},
                    "families": dict(families),
                },
                indent=2,
            )
        )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
