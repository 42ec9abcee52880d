"""One configuration fingerprint for the cache key, `--resume` and `gate decide`'s staleness check.

Real HTTP to the fake provider through the real CLI. The fake answers both `/v1/chat/completions`
and `/chat/completions`, so two base URLs on one host (a proxy path, another deployment) reach it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fake_openai import FakeOpenAI
from suite import gate, result, write_suite

from gate.model.fingerprint import config_fingerprint, normalize_base_url
from gate.model.policy import load_policy

KEY_ENV = "GATE_TEST_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-fingerprint")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def edit_policy(policy: Path, section: str, **values: Any) -> None:
    data = yaml.safe_load(policy.read_text())
    data[section] = {**data[section], **values}
    policy.write_text(yaml.safe_dump(data, sort_keys=False))


def test_the_cache_keeps_the_full_base_url(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    cache = tmp_path / "cache"
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    assert gate("run", "--policy", policy, "--out", tmp_path / "o1", "--cache-dir", cache) == 0
    first = fake_openai.count()
    assert gate("run", "--policy", policy, "--out", tmp_path / "o2", "--cache-dir", cache) == 0
    assert fake_openai.count() == first  # same endpoint: served from the cache
    # Same host and port, another path: another deployment, so another judge. Judged again.
    edit_policy(policy, "evaluator", base_url=fake_openai.url)
    assert gate("run", "--policy", policy, "--out", tmp_path / "o3", "--cache-dir", cache) == 0
    assert fake_openai.count() == 2 * first
    assert result(tmp_path / "o3")["counts"]["cached"] == 0


# What changes, and how the stale message names it (the first differing component, both values).
CHANGES: dict[str, tuple[str, dict[str, Any], str]] = {
    "temperature": ("evaluator", {"temperature": 0.5}, "temperature: 0.0 vs 0.5"),
    "seed": ("evaluator", {"seed": 8}, "seed: 7 vs 8"),
    "max_output_tokens": ("evaluator", {"max_output_tokens": 96}, "max_output_tokens: 64 vs 96"),
    "label_aliases": ("metric", {"label_aliases": {"PASS": "pass"}}, "label_aliases: "),
    "base_url path": ("evaluator", {"base_url": "BASE_WITHOUT_V1"}, "config_fingerprint: "),
}


def test_decide_treats_records_of_another_configuration_as_stale(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
    recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    fingerprints = {r["config_fingerprint"] for r in recs}
    assert len(fingerprints) == 1 and re.fullmatch(r"[0-9a-f]{64}", fingerprints.pop())
    original = policy.read_text()
    # What does not make the judge changes nothing: the records are still evidence.
    edit_policy(policy, "evaluator", timeout_s=9, max_concurrency=2)
    assert gate("decide", "--policy", policy, "--records", out / "records.jsonl") == 0
    for name, (section, values, named) in CHANGES.items():
        policy.write_text(original)
        if values.get("base_url") == "BASE_WITHOUT_V1":
            values = {"base_url": fake_openai.url}
        edit_policy(policy, section, **values)
        assert gate("decide", "--policy", policy, "--records", out / "records.jsonl") == 3, name
        decided = tmp_path / f"decided-{name.replace(' ', '-')}"
        gate("decide", "--policy", policy, "--records", out / "records.jsonl", "--out", decided)
        stale = next(b for b in result(decided)["blockers"] if b["kind"] == "stale_records")
        assert named in stale["message"], (name, stale["message"])


def test_resume_keeps_what_the_same_judge_made_and_only_that(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    policy = write_suite(tmp_path / "s", evaluator={"base_url": fake_openai.base_url})
    out = tmp_path / "out"
    assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 0
    judged = fake_openai.count()
    # A limit changes the policy file, not the judge: --resume reuses every judgment.
    edit_policy(policy, "limits", max_evaluator_errors=1)
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--resume") == 0
    assert fake_openai.count() == judged
    # Another endpoint is another judge: --resume judges everything again.
    edit_policy(policy, "evaluator", base_url=fake_openai.url)
    assert gate("run", "--policy", policy, "--out", out, "--no-cache", "--resume") == 0
    assert fake_openai.count() == 2 * judged


def test_fingerprint_parts(tmp_path: Path) -> None:
    loaded = load_policy(write_suite(tmp_path / "s"))
    base = config_fingerprint(loaded, "http://127.0.0.1:9/v1", "0.4.3")
    assert base == config_fingerprint(loaded, "HTTP://127.0.0.1:9/v1/", "0.4.3")
    assert base != config_fingerprint(loaded, "http://127.0.0.1:9/v2", "0.4.3")
    assert base != config_fingerprint(loaded, "http://127.0.0.1:9/v1", "0.4.4")
    assert normalize_base_url(" https://API.example.com:443/openai/ ") == "https://api.example.com:443/openai"
    for section, values in [
        ("metric", {"name": "other"}),
        ("metric", {"version": "2"}),
        ("metric", {"allowed_values": ["pass", "fail", "review_required"]}),
        ("evaluator", {"model": "gpt-4o"}),
    ]:
        policy = write_suite(tmp_path / f"s-{section}-{next(iter(values))}")
        edit_policy(policy, section, **values)
        assert config_fingerprint(load_policy(policy), "http://127.0.0.1:9/v1", "0.4.3") != base, values
    for values in [{"repeats": 3}, {"timeout_s": 1}, {"price": {"input_per_mtok": 9.0, "output_per_mtok": 9.0}}]:
        policy = write_suite(tmp_path / f"same-{next(iter(values))}")
        edit_policy(policy, "evaluator", **values)
        assert config_fingerprint(load_policy(policy), "http://127.0.0.1:9/v1", "0.4.3") == base, values
