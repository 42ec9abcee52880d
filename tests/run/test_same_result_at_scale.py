"""A few thousand judgments decided now give the result.json and records the gate gave before its
records were streamed (issue 47: each judgment leaves memory once written, the decision reads the
records file): nothing a user reads moves.

`tests/fixtures/scale/expected.json.gz` was written by the code before that change (the commit
that added this file), from the same inputs this test builds:

- `decide`: 2,000 cases judged 3 times each, the records written out one by one in every shape a
  run, a resume or an edit leaves (agreeing, split majorities, evaluator errors, budget and
  cancelled skips, cache hits, stale records, resumed and conflicting duplicates, relabelled
  records, labels outside the contract or reviewed aliases, repeats out of range, cases outside
  the lane, violated pairs, answered 429s, missing usage), decided by `gate decide`;
- `cached`: a `gate run` of 2,000 cases whose judgments are all in the cache (the path that pays
  nothing and never imports ragas), some of them false passes and false fails: its result.json
  and the sha256 of its records.jsonl.

`tests/fixtures/scale/stopped.json.gz` was written by the code before a `stop_when_decided` lane
stopped holding its records (the stop asks a running decision, gate.decide.settled.Settling): a
cached `gate run` of 2,000 cases of such a lane that stops part way (its result.json, with
`stopped_early`, and the sha256 of its records.jsonl).

What varies with the installed versions (ragas, gate, the configuration fingerprint they make)
is replaced by a placeholder on both sides. Regenerate only for a change that means to move the
result:
`PYTHONPATH=tests .venv/bin/python tests/run/test_same_result_at_scale.py --write`.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from suite import case, controls, write_suite

from gate import __version__
from gate.judge import Judgment, instructor_version, ragas_version
from gate.judge.cache import JudgmentCache, key_parts
from gate.judge.render import render_case
from gate.model.cases import load_dataset
from gate.model.policy import load_policy
from gate.model.records import Attempt, Record, RecordWriter
from gate.run.lineage import JudgeSettings, make_lineage
from gate.run.recording import make_record

EXPECTED = Path(__file__).resolve().parent.parent / "fixtures" / "scale" / "expected.json.gz"
TODAY = dt.date(2026, 6, 1)
BASE_URL = "http://127.0.0.1:9/v1"  # never called: every judgment is written or cached
KEY_ENV = "GATE_TEST_KEY"
CASES = 2000


def suite_cases() -> list[dict[str, Any]]:
    """Controls, 2,000 sentinel cases in two slices (every 25th in an invariant pair with the next),
    and a few held-out cases (outside the lane decided)."""
    out: list[dict[str, Any]] = controls()
    for i in range(CASES):
        pair = {"id": f"p-{i // 25}", "kind": "invariant"} if i % 25 in (0, 1) else None
        out.append(
            case(
                f"c-{i:05d}",
                label=human_label(i),
                slice="general" if i % 4 == 3 else "critical",
                pair=pair,
            )
        )
    out += [case(f"h-{i}", partition="held_out") for i in range(3)]
    return out


def human_label(i: int) -> str:
    """Every third case fails; the second of a pair has its mate's label (an invariant pair agrees)."""
    return human_label(i - 1) if i % 25 == 1 else ("fail" if i % 3 == 2 else "pass")


def write_policy(root: Path, repeats: int) -> Path:
    policy: Path = write_suite(
        root,
        suite_cases(),
        evaluator={"base_url": BASE_URL, "api_key_env": KEY_ENV, "repeats": repeats, "max_concurrency": 8},
        metric={"label_aliases": {"yes": "pass"}},
        limits={"max_evaluator_errors": 400, "max_total_cost": 50.0},
        slices={
            "critical": {"max_false_passes": 30, "max_false_fails": 60, "priority": 0},
            "general": {"max_false_passes": 20, "priority": 1},
        },
    )
    return policy


def _attempts(i: int, repeat: int) -> list[Attempt]:
    """One answered attempt, or a shape a metered run records: a 429 then an answer, an answer
    without usage (its reservation held), an answer over its reservation."""
    ok = Attempt(
        status_code=200, latency_ms=12.5, input_tokens=300 + i % 7, output_tokens=14, attempt_id=f"a{i}-{repeat}"
    )
    if i % 41 == 0:
        limited = Attempt(status_code=429, latency_ms=3.0, error_kind="rate_limit", attempt_id=f"r{i}-{repeat}")
        return [limited, ok]
    if i % 43 == 0:
        return [ok.model_copy(update={"usage_missing": True, "held": 0.00042, "input_tokens": 0, "output_tokens": 0})]
    if i % 47 == 0:
        return [ok.model_copy(update={"over_reservation": True})]
    return [ok]


def _answer(i: int, repeat: int, label: str, reason: str = "the response states the window") -> Judgment:
    attempts = _attempts(i, repeat)
    tokens_in = sum(a.input_tokens for a in attempts)
    tokens_out = sum(a.output_tokens for a in attempts)
    return Judgment(
        status="ok",
        label=label,
        reason=reason,
        attempts=attempts,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        cost=(tokens_in * 1.0 + tokens_out * 2.0) / 1e6,
    )


def _error(i: int, repeat: int, kind: str, *, sent: bool = True) -> Judgment:
    attempts = [
        Attempt(status_code=None, latency_ms=60000.0, error_kind=kind, held=0.0003, attempt_id=f"e{i}-{repeat}")
    ]
    status = "error" if sent else "skipped"
    return Judgment(
        status=status,  # type: ignore[arg-type]
        error_kind=kind,  # type: ignore[arg-type]
        error_message=f"{kind} on attempt 1" if sent else "budget boundary reached: no room",
        attempts=attempts if sent else [],
    )


def judgments_of(i: int, human: str) -> list[tuple[int, Judgment, dict[str, Any]]]:
    """The records of case i: (repeat, judgment, fields edited on the record), in file order."""
    other = "fail" if human == "pass" else "pass"
    agree: list[tuple[int, Judgment, dict[str, Any]]] = [(r, _answer(i, r, human), {}) for r in range(3)]
    shape = i % 20
    if shape == 6:  # a split majority that agrees
        return [*agree[:2], (2, _answer(i, 2, other), {})]
    if shape == 7:  # a split majority that disagrees: a false pass or a false fail
        return [(0, _answer(i, 0, other), {}), (1, _answer(i, 1, human), {}), (2, _answer(i, 2, other), {})]
    if shape == 8:
        return [*agree[:2], (2, _error(i, 2, "timeout"), {})]
    if shape == 9:
        return [(0, _error(i, 0, "parse_error"), {}), *agree[1:]]
    if shape == 10:
        return [*agree[:2], (2, _error(i, 2, "budget", sent=False), {})]
    if shape == 11:
        return [*agree[:1], (1, _error(i, 1, "cancelled", sent=False), {}), agree[2]]
    if shape == 12:  # served from the cache
        hit = Judgment(status="ok", label=human, reason="cached verdict", cache="hit")
        return [(r, hit, {}) for r in range(3)]
    if shape == 13 and i % 40 == 13:  # judged under another configuration only
        return [(r, j, {"config_fingerprint": "0" * 64}) for r, j, _ in agree]
    if shape == 14:  # resumed: an interrupted attempt, then the judgment
        return [(0, _error(i, 0, "cancelled"), {}), *agree]
    if shape == 15 and i % 60 == 15:  # two runs mixed: the same judgment, two verdicts
        return [*agree, (0, _answer(i, 0, other), {})]
    if shape == 16:  # a record whose copy of the human label was edited
        return [(r, j, {"human_label": other}) for r, j, _ in agree]
    if shape == 17:  # a label outside the contract
        return [(0, _answer(i, 0, human.upper()), {}), *agree[1:]]
    if shape == 18 and human == "pass":  # a reviewed alias
        return [(0, _answer(i, 0, "yes"), {}), *agree[1:]]
    if shape == 19:  # a repeat the policy does not make
        return [*agree, (3, _answer(i, 3, human), {})]
    if i % 25 == 1 and (i // 25) % 3 == 0:  # the second of a pair disagrees with the first
        return [(r, _answer(i, r, other), {}) for r in range(3)]
    return agree


def write_mixed_records(policy: Path, path: Path) -> None:
    """The records of every case of the suite, in the shapes `judgments_of` lists, as `make_record`
    writes them (the lineage and judge settings of a run of this policy)."""
    loaded = load_policy(policy)
    dataset = load_dataset(loaded)
    lineage = make_lineage(loaded, dataset, [], BASE_URL)
    judge = JudgeSettings.of(loaded, BASE_URL)
    with RecordWriter(path) as writer:
        for index, c in enumerate(dataset.cases):
            if c.expected_control_role == "missing_evidence":
                continue  # withheld: never sent, never recorded
            rendered = render_case(loaded.prompt_text, loaded.placeholders, c)
            plan: list[tuple[int, Judgment, dict[str, Any]]]
            if c.is_control:
                plan = [(r, _answer(index, r, c.human_label or "pass"), {}) for r in range(3)]
            elif c.partition == "held_out":
                plan = [(0, _answer(index, 0, "pass"), {})]  # a case outside the lane: billed, never a verdict
            else:
                plan = judgments_of(int(c.case_id[2:]), c.human_label or "pass")
            for repeat, j, edits in plan:
                j.prompt_sha256, j.input_sha256 = rendered.prompt_sha256, rendered.input_sha256
                record: Record = make_record(c, repeat, j, loaded, lineage, "pr", lineage.ragas_version, judge)
                writer.write(record.model_copy(update=edits) if edits else record)


def fill_cache(policy: Path, cache: Path) -> None:
    """Every judgment of the lane in the cache, with the key `gate run` computes; every tenth case's
    verdict is the opposite of its label (a false pass or a false fail)."""
    loaded = load_policy(policy)
    versions = (ragas_version(), instructor_version())
    rows = []
    for c in load_dataset(loaded).cases:
        if c.partition != "sentinel" or c.expected_control_role == "missing_evidence":
            continue
        rendered = render_case(loaded.prompt_text, loaded.placeholders, c)
        label = c.human_label or "pass"
        if not c.is_control and int(c.case_id[2:]) % 10 == 9:
            label = "fail" if label == "pass" else "pass"
        parts = key_parts(loaded, BASE_URL, *versions, rendered, 0)
        rows.append((parts.key(), label, f"cached {label}", 0.0, "{}"))
    JudgmentCache(cache).close()  # the schema
    with sqlite3.connect(cache / "judgments.sqlite3") as db:
        db.executemany("INSERT INTO judgments VALUES (?, ?, ?, ?, ?)", rows)


def normalized(text: str, fingerprint: str) -> str:
    """What the installed versions make, as placeholders."""
    return (
        text.replace(fingerprint, "<config_fingerprint>")
        .replace(f'"{ragas_version()}"', '"<ragas_version>"')
        .replace(f'"{__version__}"', '"<gate_version>"')
    )


def produce(root: Path) -> dict[str, Any]:
    """Both decisions, written as the CLI writes them, normalized."""
    import gate.commands.run as gate_run
    from gate.commands.decide import decide_from_records

    mixed = write_policy(root / "mixed", repeats=3)
    records = root / "mixed" / "records.jsonl"
    write_mixed_records(mixed, records)
    decide_from_records(mixed, [records], "pr", clock=lambda: TODAY, out_dir=root / "decided")
    decided = json.loads((root / "decided" / "result.json").read_text(encoding="utf-8"))

    cached = write_policy(root / "cached", repeats=1)
    fill_cache(cached, root / "cache")
    opts = gate_run.RunOptions(lane="pr", out_dir=root / "run", cache_dir=root / "cache", progress=io.StringIO())
    gate_run.run(cached, opts, env={KEY_ENV: "sk-test-scale"}, clock=lambda: TODAY)
    run_result = json.loads((root / "run" / "result.json").read_text(encoding="utf-8"))
    run_records = (root / "run" / "records.jsonl").read_text(encoding="utf-8")

    fingerprints = {decided["lineage"]["config_fingerprint"], run_result["lineage"]["config_fingerprint"]}
    assert len(fingerprints) == 1, fingerprints
    fingerprint = fingerprints.pop()
    records_text = normalized(run_records, fingerprint)
    return {
        "decide": json.loads(normalized(json.dumps(decided, sort_keys=True), fingerprint)),
        "cached_run": json.loads(normalized(json.dumps(run_result, sort_keys=True), fingerprint)),
        "cached_records_sha256": hashlib.sha256(records_text.encode("utf-8")).hexdigest(),
        "cached_records_lines": records_text.count("\n"),
        "cached_first_record": json.loads(records_text.splitlines()[0]),
        "decide_junit_sha256": junit_sha256(root / "decided"),
        "cached_junit_sha256": junit_sha256(root / "run"),
    }


def junit_sha256(out: Path) -> str:
    return hashlib.sha256((out / "junit.xml").read_bytes()).hexdigest()


STOP_CASES = 2000
STOPPED = EXPECTED.parent / "stopped.json.gz"


def write_stop_policy(root: Path) -> Path:
    """A `stop_when_decided` lane of 2,000 cases (every 50th in an invariant pair with the next)."""
    cases = controls()
    for i in range(STOP_CASES):
        pair = {"id": f"p-{i // 50}", "kind": "invariant"} if i % 50 in (0, 1) else None
        label = "fail" if (i - (i % 50 == 1)) % 3 == 2 else "pass"  # a pair's second has its mate's label
        cases.append(case(f"s-{i:05d}", label=label, slice="general" if i % 4 == 3 else "critical", pair=pair))
    lanes = {"pr": {"partitions": ["sentinel"], "controls": True, "stop_when_decided": True}}
    policy: Path = write_suite(
        root,
        cases,
        evaluator={"base_url": BASE_URL, "api_key_env": KEY_ENV, "max_concurrency": 8},
        limits={"max_evaluator_errors": 0, "max_total_cost": 50.0},
        slices={
            "critical": {"max_false_passes": 6, "max_false_fails": 40, "priority": 0},
            "general": {"max_false_passes": 8, "priority": 1},
        },
        lanes=lanes,
    )
    return policy


def fill_stop_cache(policy: Path, cache: Path) -> None:
    """Every judgment of the lane in the cache; case i % 90 == 77 (people failed it) is judged pass, a
    false pass (the critical slice's seventh, case 1,157, decides `quality_failed`), and i % 90 == 33
    (people passed it) judged fail, a false fail; no pair is violated."""
    loaded = load_policy(policy)
    versions = (ragas_version(), instructor_version())
    rows = []
    for c in load_dataset(loaded).cases:
        if c.expected_control_role == "missing_evidence":
            continue
        label = c.human_label or "pass"
        if not c.is_control and int(c.case_id[2:]) % 90 in (33, 77):
            label = "fail" if label == "pass" else "pass"
        parts = key_parts(loaded, BASE_URL, *versions, render_case(loaded.prompt_text, loaded.placeholders, c), 0)
        rows.append((parts.key(), label, f"cached {label}", 0.0, "{}"))
    JudgmentCache(cache).close()  # the schema
    with sqlite3.connect(cache / "judgments.sqlite3") as db:
        db.executemany("INSERT INTO judgments VALUES (?, ?, ?, ?, ?)", rows)


def produce_stopped(root: Path) -> dict[str, Any]:
    """A cached `gate run` of the stop lane: it stops once the verdict is decided."""
    import gate.commands.run as gate_run

    policy = write_stop_policy(root / "stop")
    fill_stop_cache(policy, root / "stop-cache")
    out = root / "stop-run"
    opts = gate_run.RunOptions(lane="pr", out_dir=out, cache_dir=root / "stop-cache", progress=io.StringIO())
    gate_run.run(policy, opts, env={KEY_ENV: "sk-test-scale"}, clock=lambda: TODAY)
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    fingerprint = result["lineage"]["config_fingerprint"]
    records_text = normalized((out / "records.jsonl").read_text(encoding="utf-8"), fingerprint)
    return {
        "result": json.loads(normalized(json.dumps(result, sort_keys=True), fingerprint)),
        "records_sha256": hashlib.sha256(records_text.encode("utf-8")).hexdigest(),
        "records_lines": records_text.count("\n"),
        "first_record": json.loads(records_text.splitlines()[0]),
        "junit_sha256": junit_sha256(out),
    }


def _first_difference(path: str, got: Any, want: Any) -> str | None:
    if type(got) is not type(want):
        return f"{path}: {got!r:.200} != {want!r:.200}"
    if isinstance(got, dict):
        for key in sorted(set(got) | set(want)):
            if key not in got or key not in want:
                return f"{path}.{key}: only in {'the expected' if key in want else 'this run'}"
            found = _first_difference(f"{path}.{key}", got[key], want[key])
            if found:
                return found
        return None
    if isinstance(got, list):
        if len(got) != len(want):
            return f"{path}: {len(got)} items != {len(want)}"
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            found = _first_difference(f"{path}[{i}]", a, b)
            if found:
                return found
        return None
    return None if got == want else f"{path}: {got!r:.200} != {want!r:.200}"


def test_a_few_thousand_judgments_give_the_result_and_records_they_gave_before_streaming(tmp_path: Path) -> None:
    got = produce(tmp_path)
    want = json.loads(gzip.decompress(EXPECTED.read_bytes()))
    # The expected decisions are not trivial: each path meets the shapes it was built to.
    assert want["decide"]["counts"]["errored"] > 0 and want["decide"]["counts"]["unrun"] > 0
    assert {b["kind"] for b in want["decide"]["blockers"]} >= {"pair_violated", "stale_records"}
    assert want["cached_run"]["counts"]["cached"] == CASES + len(controls()) - 1  # the withheld control
    assert want["cached_run"]["state"] == "quality_failed"
    assert _first_difference("decide", got["decide"], want["decide"]) is None, _first_difference(
        "decide", got["decide"], want["decide"]
    )
    assert _first_difference("cached_run", got["cached_run"], want["cached_run"]) is None, _first_difference(
        "cached_run", got["cached_run"], want["cached_run"]
    )
    assert got["cached_first_record"] == want["cached_first_record"]
    assert got["cached_records_lines"] == want["cached_records_lines"]
    assert got["cached_records_sha256"] == want["cached_records_sha256"]
    assert got["decide_junit_sha256"] == want["decide_junit_sha256"]
    assert got["cached_junit_sha256"] == want["cached_junit_sha256"]


def test_a_lane_that_stops_when_decided_stops_where_it_stopped_before_streaming(tmp_path: Path) -> None:
    got = produce_stopped(tmp_path)
    want = json.loads(gzip.decompress(STOPPED.read_bytes()))
    # The stop is met: the verdict was decided part way, the rest is not needed.
    assert want["result"]["state"] == "quality_failed"
    assert 0 < len(want["result"]["stopped_early"]["not_needed"]) < STOP_CASES
    found = _first_difference("stopped", got["result"], want["result"])
    assert found is None, found
    assert got["first_record"] == want["first_record"]
    assert got["records_lines"] == want["records_lines"]
    assert got["records_sha256"] == want["records_sha256"]
    assert got["junit_sha256"] == want["junit_sha256"]


if __name__ == "__main__" and "--write" in sys.argv:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        produced = produce(Path(tmp))
        EXPECTED.parent.mkdir(parents=True, exist_ok=True)
        EXPECTED.write_bytes(gzip.compress(json.dumps(produced, sort_keys=True).encode("utf-8"), mtime=0))
        print(f"wrote {EXPECTED} ({EXPECTED.stat().st_size:,} bytes) in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        stopped = produce_stopped(Path(tmp))
        STOPPED.write_bytes(gzip.compress(json.dumps(stopped, sort_keys=True).encode("utf-8"), mtime=0))
        print(f"wrote {STOPPED} ({STOPPED.stat().st_size:,} bytes) in {time.perf_counter() - t0:.1f} s")
