"""Benchmark: `gate validate`'s deterministic work on 100,000 synthetic cases.

1. Generates N cases (default 100,000) with realistic lengths (question ~15-60 words, reference
   ~20-60, answer ~50-180, Zipf-distributed vocabulary), spread over four partitions and three
   slices, every control role, flip/invariant pairs, paraphrase groups, and planted defects: group
   leaks (a group_id in two partitions) and near-duplicate answers copied into another partition
   with a few words edited (some above the 0.8 Jaccard threshold, some below). Writes them as a real
   policy + prompt + evidence + JSONL suite in a temporary directory.
2. In a fresh process (so generation does not count), times `load_policy` + `load_dataset` +
   `run_validators` end to end and prints cases/s and the peak RSS (`resource.getrusage`);
   checks that exactly the planted leaks are found.
3. On the first 5,000 cases, times the MinHash/LSH near-duplicate search against the naive
   all-pairs exact-Jaccard search, prints the ratio, and checks both find the same pairs.

Targets: >= 20,000 cases/s and < 1 GB peak RSS at 100k on a 2-core machine.

`--copies` instead: one case copied N times into each of two partitions (a file a script
duplicated). Every copy leaks into the other partition; the leakage search compares each text once
per partition and counts the copies' pairs, where comparing every copy with every other costs the
square of N. Prints both, side by side, for growing N, then the search alone at 200,000 copies.

    .venv/bin/python bench/validate.py                # 100,000 cases, 5,000 for the comparison
    .venv/bin/python bench/validate.py --cases 20000 --compare 2000
    .venv/bin/python bench/validate.py --copies 250,500,1000
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.validate.minhash import jaccard, near_duplicates, near_duplicates_naive, shingle_set  # noqa: E402

ROLES = ("positive", "negative", "boundary", "persuasion", "injection", "missing_evidence")
PARTITIONS = (("dev", 0.4), ("calibration", 0.2), ("held_out", 0.3), ("sentinel", 0.1))
SLICES = ("billing-policy-critical", "account-security", "shipping-general")
THRESHOLD = 0.8
PROMPT = """You grade a customer-support answer against the reviewed policy excerpt.
Question: {user_input}
Policy excerpt: {reference}
Answer: {response}
Reply pass if the answer is correct and complete under the excerpt, else fail.
"""


class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        syllables = ["ba", "ce", "di", "fo", "gu", "ha", "je", "ki", "lo", "mu", "na", "pe", "ri", "so", "tu", "ve"]
        vocab = sorted(
            {"".join(self.rng.choice(syllables) for _ in range(self.rng.randint(1, 4))) for _ in range(12000)}
        )
        self.vocab = vocab
        self.cum_weights = list(itertools.accumulate(1.0 / (i + 1) ** 0.9 for i in range(len(vocab))))
        self.punct = ["", "", "", "", "", ",", ".", "?", "!", ";"]

    def text(self, low: int, high: int) -> str:
        n = self.rng.randint(low, high)
        words = self.rng.choices(self.vocab, cum_weights=self.cum_weights, k=n)
        out = " ".join(w + self.rng.choice(self.punct) for w in words)
        return out[:1].upper() + out[1:] + "."

    def edit(self, text: str, edits: int) -> str:
        words = text.split()
        for _ in range(edits):
            words[self.rng.randrange(len(words))] = self.rng.choice(self.vocab)
        return " ".join(words)


def generate(n: int, compare: int, seed: int = 11) -> tuple[list[dict[str, Any]], set[tuple[str, str]], set[str]]:
    """Cases, the planted near-duplicate leak pairs (J >= threshold), the planted leaked groups."""
    g = Generator(seed)
    rng = g.rng
    names = [p for p, _ in PARTITIONS]
    weights = [w for _, w in PARTITIONS]
    cases: list[dict[str, Any]] = []
    for i in range(n):
        response = g.text(50, 180)
        case: dict[str, Any] = {
            "case_id": f"case-{i:06d}",
            "partition": rng.choices(names, weights)[0],
            "slice": SLICES[i % 3],
            "rubric_version": "support-reviewed-v1",
            "user_input": g.text(15, 60),
            "reference": g.text(20, 60),
            "response": response,
            "human_adjudication": {
                "label": rng.choice(["pass", "fail"]),
                "reason": "reviewed by support lead",
                "evidence": [f"policy-{i % 50}@2"],
            },
        }
        if i % 4 == 0:
            case["response_sha256"] = hashlib.sha256(response.encode("utf-8")).hexdigest()
        if i % 10 == 0:
            case["group_id"] = f"family-{i}"
        cases.append(case)
    for k, role in enumerate(ROLES):
        c = cases[100 + k]
        c["expected_control_role"] = role
        if role == "missing_evidence":
            c["reference"] = ""
            c["human_adjudication"]["label"] = "fail"
    # Pairs within one partition (flip: labels differ; invariant: labels match).
    for k in range(200, 260, 2):
        a, b = cases[k], cases[k + 1]
        b["partition"] = a["partition"]
        kind = "flip" if k % 4 == 0 else "invariant"
        b["human_adjudication"]["label"] = (
            ("fail" if a["human_adjudication"]["label"] == "pass" else "pass")
            if kind == "flip"
            else a["human_adjudication"]["label"]
        )
        a["pair"] = b["pair"] = {"id": f"pair-{k}", "kind": kind}
    # Planted near-duplicates: some inside the first `compare` cases so the comparison sees them.
    planted: set[tuple[str, str]] = set()
    sources = [rng.randrange(300, compare) for _ in range(12)] + [rng.randrange(compare, n) for _ in range(12)]
    for s, src_index in enumerate(sources):
        dst_index = src_index + 7
        src, dst = cases[src_index], cases[dst_index]
        dst.pop("group_id", None)
        src.pop("group_id", None)
        dst.pop("response_sha256", None)
        dst["partition"] = "held_out" if src["partition"] != "held_out" else "dev"
        dst["user_input"] = src["user_input"]
        dst["response"] = g.edit(src["response"], edits=1 + s % 2 if s % 3 else 25)
        text_a = f"{src['user_input']}\n{src['response']}"
        text_b = f"{dst['user_input']}\n{dst['response']}"
        if jaccard(shingle_set(text_a, 3), shingle_set(text_b, 3)) >= THRESHOLD:
            first, second = sorted((src["case_id"], dst["case_id"]))
            planted.add((first, second))
    # Planted group leaks: one paraphrase family in two partitions.
    leaked_groups: set[str] = set()
    for k in range(5):
        a, b = cases[1000 + 20 * k], cases[1001 + 20 * k]
        a["group_id"] = b["group_id"] = f"leaky-{k}"
        a["partition"], b["partition"] = "dev", "held_out"
        leaked_groups.add(f"leaky-{k}")
    return cases, planted, leaked_groups


def write_suite(root: Path, cases: list[dict[str, Any]]) -> Path:
    import yaml

    policy = {
        "version": 1,
        "policy_id": "bench",
        "policy_version": "1",
        "metric": {
            "name": "support",
            "version": "1",
            "allowed_values": ["pass", "fail"],
            "prompt_file": "prompt.txt",
        },
        "evaluator": {"model": "gpt-4o-mini", "price": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}},
        "cases": ["cases/a.jsonl", "cases/b.jsonl"],
        "evidence": "evidence.yaml",
        "rubrics": ["support-reviewed-v1"],
        "slices": {s: {"max_false_passes": 0} for s in SLICES},
        "limits": {"max_total_cost": 10.0},
        "lanes": {"pr": {"partitions": ["sentinel"], "controls": True}},
        "leakage": {"jaccard_threshold": THRESHOLD, "shingle_words": 3},
    }
    (root / "cases").mkdir(parents=True, exist_ok=True)
    (root / "policy.yaml").write_text(yaml.safe_dump(policy, sort_keys=False), encoding="utf-8")
    (root / "prompt.txt").write_text(PROMPT, encoding="utf-8")
    evidence = {f"policy-{i}": {"version": "2", "text": f"Policy paragraph {i}."} for i in range(50)}
    (root / "evidence.yaml").write_text(yaml.safe_dump(evidence), encoding="utf-8")
    half = len(cases) // 2
    for name, part in (("a", cases[:half]), ("b", cases[half:])):
        with (root / "cases" / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
            for c in part:
                fh.write(json.dumps(c) + "\n")
    return root / "policy.yaml"


def measure(policy_path: str) -> None:
    """Child process: load + validate, print one JSON line of figures and findings."""
    from gate.model.cases import load_dataset
    from gate.model.policy import load_policy
    from gate.validate import run_validators

    start = time.perf_counter()
    loaded = load_policy(policy_path)
    dataset = load_dataset(loaded)
    loaded_at = time.perf_counter()
    findings = run_validators(loaded, dataset)
    end = time.perf_counter()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    leak_pairs = [list(f.case_ids) for f in findings if f.kind == "partition_leak" and "near-duplicates" in f.message]
    groups = [f.message.split("group_id '")[1].split("'")[0] for f in findings if "group_id '" in f.message]
    print(
        json.dumps(
            {
                "cases": len(dataset.cases),
                "load_s": loaded_at - start,
                "validate_s": end - loaded_at,
                "total_s": end - start,
                "rss_mb": rss_mb,
                "kinds": sorted({f.kind for f in findings}),
                "findings": len(findings),
                "leak_pairs": leak_pairs,
                "leaked_groups": groups,
                "other": [f.message for f in findings if f.kind != "partition_leak"][:5],
            }
        )
    )


def copies_suite(root: Path, per_side: int) -> tuple[Any, Any]:
    """The policy and dataset of one case copied `per_side` times into dev and into held_out."""
    from gate.model.cases import load_dataset
    from gate.model.policy import load_policy

    one = generate(1_500, 1_000)[0][1]  # a case without a group_id: its copies are not one family
    cases = [
        {**one, "case_id": f"{partition}-{i:06d}", "partition": partition}
        for partition in ("dev", "held_out")
        for i in range(per_side)
    ]
    loaded = load_policy(write_suite(root, cases))
    return loaded, load_dataset(loaded)


def copies(sizes: list[int], large: int = 200_000) -> int:
    """Copies of one case in two partitions: every copy compared with every other (how the leakage
    search ran) against the search now, side by side."""
    from gate.validate.context import Context
    from gate.validate.leakage import text_leaks

    print(f"{'copies per side':>15}  {'every copy compared':>20}  {'now':>8}  {'ratio':>8}  leaking pairs")
    ok = True
    for n in [*sizes, large]:
        with tempfile.TemporaryDirectory(prefix="gate-bench-") as tmp:
            loaded, dataset = copies_suite(Path(tmp), n)
        ctx = Context(loaded=loaded, dataset=dataset)
        t0 = time.perf_counter()
        found = text_leaks(ctx)
        now_s = time.perf_counter() - t0
        counted = int(found[-1].message.split()[0]) + 20 if len(found) > 20 else len(found)
        ok &= counted == n * n
        if n == large:
            print(
                f"{n:>15,}  {'(not run: ' + format(n * n, ',') + ' pairs)':>20}  {now_s:>7.2f}s  {'':>8}  {counted:,}"
            )
            continue
        texts = [f"{c.user_input}\n{c.response}" for c in dataset.cases]
        groups = [0 if c.partition == "dev" else 1 for c in dataset.cases]
        t0 = time.perf_counter()
        pairs = near_duplicates(texts, groups, THRESHOLD, 3)
        old_s = time.perf_counter() - t0
        ok &= len(pairs) == counted
        print(f"{n:>15,}  {old_s:>19.2f}s  {now_s:>7.3f}s  {old_s / now_s:>7,.0f}x  {counted:,}")
    ok &= copies_load(large)
    print("\nOK" if ok else "\nFAILED")
    return 0 if ok else 1


def copies_load(n: int) -> bool:
    """Reading a case file of `n` copies in a row: every line parsed (how the loader read it) against
    the loader now, which takes a line equal to one of the last few case lines as that case again."""
    from gate.model.cases import Case, load_dataset
    from gate.model.policy import load_policy

    with tempfile.TemporaryDirectory(prefix="gate-bench-") as tmp:
        one = generate(1_500, 1_000)[0][1]
        loaded = load_policy(write_suite(Path(tmp), [{**one, "partition": "dev"}] * n))
        lines = [line for p in sorted((Path(tmp) / "cases").glob("*.jsonl")) for line in p.read_bytes().splitlines()]
        t0 = time.perf_counter()
        for line in lines:
            Case.model_validate_json(line)
        every_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        dataset = load_dataset(loaded)
        now_s = time.perf_counter() - t0
    print(
        f"\nreading {n:,} copies in a row: every line parsed {every_s:.2f}s, the loader now {now_s:.2f}s "
        f"({every_s / now_s:.1f}x), {len(dataset.cases):,} cases"
    )
    return len(dataset.cases) == n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--compare", type=int, default=5_000)
    parser.add_argument("--copies", help="comma-separated copies per side: the copied-case comparison instead")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure)
        return 0
    if args.copies:
        return copies([int(n) for n in args.copies.split(",")])

    ok = True
    t0 = time.perf_counter()
    cases, planted, leaked_groups = generate(args.cases, args.compare)
    print(
        f"generated {len(cases):,} cases in {time.perf_counter() - t0:.1f}s; planted {len(planted)} near-duplicate "
        f"leaks (J >= {THRESHOLD}) and {len(leaked_groups)} group leaks"
    )
    chars = sum(len(c["user_input"]) + len(c["reference"]) + len(c["response"]) for c in cases) / len(cases)
    print(f"mean text per case: {chars:.0f} characters (question + reference + answer)")
    with tempfile.TemporaryDirectory(prefix="gate-bench-") as tmp:
        policy_path = write_suite(Path(tmp), cases)
        size = sum(p.stat().st_size for p in Path(tmp).rglob("*.jsonl")) / 1e6
        print(f"wrote {size:.0f} MB of JSONL to {tmp}")
        out = subprocess.run(
            [sys.executable, __file__, "--measure", str(policy_path)], capture_output=True, text=True, check=True
        )
    r = json.loads(out.stdout)
    rate = r["cases"] / r["total_s"]
    print(
        f"\nload_policy + load_dataset: {r['load_s']:.2f}s   run_validators: {r['validate_s']:.2f}s   "
        f"total: {r['total_s']:.2f}s"
    )
    print(f"throughput: {rate:,.0f} cases/s (target >= 20,000)   peak RSS: {r['rss_mb']:.0f} MB (target < 1024)")
    found_pairs = {(min(p), max(p)) for p in r["leak_pairs"]}
    print(f"findings: {r['findings']} of kinds {r['kinds']}")
    if found_pairs != planted:
        ok = False
        print(f"MISMATCH near-duplicate leaks: missed {planted - found_pairs}, unexpected {found_pairs - planted}")
    else:
        print(f"near-duplicate leaks: all {len(planted)} planted found, nothing else")
    if set(r["leaked_groups"]) != leaked_groups:
        ok = False
        print(f"MISMATCH group leaks: {r['leaked_groups']}")
    if r["other"]:
        ok = False
        print(f"unexpected findings: {r['other']}")
    ok &= rate >= 20_000 and r["rss_mb"] < 1024

    subset = cases[: args.compare]
    texts = [f"{c['user_input']}\n{c['response']}" for c in subset]
    codes: dict[str, int] = {}
    groups = [codes.setdefault(c["partition"], len(codes)) for c in subset]
    t0 = time.perf_counter()
    fast = near_duplicates(texts, groups, THRESHOLD, 3)
    fast_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    naive = near_duplicates_naive(texts, groups, THRESHOLD, 3)
    naive_s = time.perf_counter() - t0
    same = [(h.first, h.second) for h in fast] == [(h.first, h.second) for h in naive]
    print(
        f"\nleakage on the first {len(subset):,} cases: MinHash/LSH {fast_s:.3f}s vs naive all-pairs exact "
        f"{naive_s:.1f}s -> {naive_s / fast_s:,.0f}x faster; pairs found {len(fast)} vs {len(naive)}, "
        f"{'identical' if same else 'DIFFERENT'}"
    )
    ok &= same
    print("\nOK" if ok else "\nFAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
