"""Recorded judgments are decided anywhere (SPEC 14, issue 19 defect 7).

`gate decide`, `gate merge`, `gate compare` and `gate calibrate` make no call and read no provider
environment: a merge job or a laptop without the run's OPENAI_BASE_URL decides what the run did.
A record is stale only when the configuration it recorded differs from the policy's, or the
records disagree among themselves, and the message names the first differing component with
both values. The runs here go through the real CLI and real HTTP to the fake provider, which the
policy does not name: the judge is found through OPENAI_BASE_URL, as in a workflow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_openai import FakeOpenAI, reply
from suite import case, controls, gate, result, write_suite

from gate.measure.compare import compare_paths

KEY_ENV = "GATE_TEST_KEY"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-anywhere")
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")


def suite(root: Path) -> Path:
    cases = [*controls(), *(case(f"c-{i}", label="fail" if i % 3 == 0 else "pass") for i in range(9))]
    return write_suite(root, cases)  # no evaluator.base_url: OPENAI_BASE_URL names the judge


def decided(res: dict[str, object]) -> tuple[object, ...]:
    return res["state"], json.dumps(res["blockers"], sort_keys=True), json.dumps(res["counts"], sort_keys=True)


def run_shards(policy: Path, root: Path, monkeypatch: pytest.MonkeyPatch, *base_urls: str) -> list[Path]:
    outs = []
    for i, url in enumerate(base_urls, start=1):
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        out = root / f"shard-{i}"
        gate("run", "--policy", policy, "--out", out, "--shard", f"{i}/{len(base_urls)}", "--no-cache")
        outs.append(out)
    return outs


def test_decide_and_merge_without_the_runs_base_url_decide_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = suite(tmp_path / "s")
    with FakeOpenAI() as fake:
        fake.script("Answer for c-0:", reply("pass", "Close enough."))  # a false pass: quality_failed
        shards = run_shards(policy, tmp_path, monkeypatch, fake.base_url, fake.base_url)
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        assert gate("merge", "--policy", policy, *shards, "--out", tmp_path / "merged-in-ci") == 1
    in_ci = result(tmp_path / "merged-in-ci")
    assert in_ci["state"] == "quality_failed"
    records = [s / "records.jsonl" for s in shards]
    for env in (None, "https://api.openai.com/v1", "http://127.0.0.1:9/other"):  # a laptop, another shell
        if env is None:
            monkeypatch.delenv("OPENAI_BASE_URL")
        else:
            monkeypatch.setenv("OPENAI_BASE_URL", env)
        merged, by_decide = tmp_path / f"merged-{env is None}", tmp_path / f"decided-{env is None}"
        assert gate("merge", "--policy", policy, *shards, "--out", merged) == 1, env
        assert gate("decide", "--policy", policy, "--records", *records, "--out", by_decide) == 1, env
        for res in (result(merged), result(by_decide)):
            assert decided(res) == decided(in_ci), env
            assert "stale_records" not in json.dumps(res["blockers"])
            assert res["lineage"]["config_fingerprint"] == in_ci["lineage"]["config_fingerprint"]


def test_records_that_disagree_among_themselves_name_the_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs judged at two provider hosts are two judges: one's records are stale, and the
    message says which component differs and both values (`gate merge` refuses such shards)."""
    policy = suite(tmp_path / "s")
    with FakeOpenAI() as fake:
        other_host = fake.base_url.replace("127.0.0.1", "localhost")
        shards = run_shards(policy, tmp_path, monkeypatch, fake.base_url, other_host)
    monkeypatch.delenv("OPENAI_BASE_URL")
    records = [s / "records.jsonl" for s in shards]
    assert gate("decide", "--policy", policy, "--records", *records, "--out", tmp_path / "d") == 3
    (stale,) = [b for b in result(tmp_path / "d")["blockers"] if b["kind"] == "stale_records"]
    assert "base_url_host: localhost vs 127.0.0.1" in stale["message"] or (
        "base_url_host: 127.0.0.1 vs localhost" in stale["message"]
    ), stale["message"]


def test_a_policy_edit_names_the_component_and_both_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = suite(tmp_path / "s")
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        assert gate("run", "--policy", policy, "--out", tmp_path / "out", "--no-cache") == 0
    monkeypatch.delenv("OPENAI_BASE_URL")
    records = tmp_path / "out" / "records.jsonl"
    prompt = tmp_path / "s" / "prompt.txt"
    before = json.loads(records.read_text().splitlines()[0])["prompt_template_sha256"]
    prompt.write_text(prompt.read_text() + "Be strict.\n")
    assert gate("decide", "--policy", policy, "--records", records, "--out", tmp_path / "d") == 3
    (stale,) = [b for b in result(tmp_path / "d")["blockers"] if b["kind"] == "stale_records"]
    now = result(tmp_path / "d")["lineage"]["prompt_sha256"]
    assert f"prompt: {before[:12]}... vs {now[:12]}..." in stale["message"], stale["message"]


def test_compare_names_what_moved_when_only_the_base_url_did(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same host, another path (a proxy, another deployment): the fingerprints differ, so the
    judge did not move by itself; `first_divergence` is the provider settings, never `none`."""
    policy = suite(tmp_path / "s")
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        gate("run", "--policy", policy, "--out", tmp_path / "base", "--no-cache")
        fake.script("Answer for c-1:", reply("fail", "Not stated."))
        monkeypatch.setenv("OPENAI_BASE_URL", fake.url)  # the same server without /v1
        gate("run", "--policy", policy, "--out", tmp_path / "head", "--no-cache")
    monkeypatch.delenv("OPENAI_BASE_URL")
    comparison = compare_paths(tmp_path / "base", tmp_path / "head", None)
    lineages = comparison.lineage_changes()
    assert "config_fingerprint" in lineages
    (moved,) = comparison.transitions
    assert moved.case_id == "c-1" and moved.first_divergence == "provider_settings", moved
    assert "fingerprint" in (moved.base_value or "")


def test_calibrate_reads_the_configuration_from_the_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = suite(tmp_path / "s")
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        gate("run", "--policy", policy, "--out", tmp_path / "out", "--no-cache")
    recorded = result(tmp_path / "out")["lineage"]["config_fingerprint"]
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")  # another shell
    gate("calibrate", "--policy", policy, "--records", tmp_path / "out" / "records.jsonl", "--out", tmp_path / "cal")
    calibration = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert calibration["lineage"]["config_fingerprint"] == recorded


def test_a_record_is_billed_to_the_case_files_slice_not_the_one_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy = suite(tmp_path / "s")
    out = tmp_path / "run"
    with FakeOpenAI() as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        gate("run", "--policy", policy, "--out", out, "--no-cache")
    ran = result(out)["cost"]["by_slice"]
    # A record that names another slice (edited, or written by an older case file) is still the
    # case file's case: its cost stays in the case file's slice.
    lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    for r in lines:
        if r["case_id"] == "c-1":
            r["slice"] = "general"
    (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    monkeypatch.delenv("OPENAI_BASE_URL")
    decided_out = tmp_path / "decided"
    gate("decide", "--policy", policy, "--records", out / "records.jsonl", "--out", decided_out)
    assert result(decided_out)["cost"]["by_slice"] == ran and set(ran) == {"critical"}
