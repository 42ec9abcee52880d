"""An OpenAI-compatible provider mounted under a path (Azure OpenAI's v1 endpoint,
`https://RESOURCE.openai.azure.com/openai/v1/`, or a proxy under a prefix): the real gate, ragas and
openai client over real HTTP to the fake served only under `/openai/v1`. Metering, the cache and
`--resume` work there as they do at `/v1`, and a reply without `usage` keeps its reservation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_openai import FakeOpenAI, reply, server_error
from suite import write_suite

from gate.cli import main

KEY_ENV = "AZURE_OPENAI_API_KEY"
PREFIX = "/openai/v1"


@pytest.fixture()
def azure(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, "azure-test-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with FakeOpenAI(prefix=PREFIX) as server:
        yield server


def _suite(root: Path, fake: FakeOpenAI) -> Path:
    # The base URL carries the path, with the trailing slash Azure's portal shows.
    return write_suite(root, evaluator={"base_url": fake.base_url + "/", "api_key_env": KEY_ENV})


def _result(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "result.json").read_text())
    return data


def _run(policy: Path, out: Path, *extra: str) -> int:
    return main(["run", "--policy", str(policy), "--out", str(out), *extra])


def test_the_fake_answers_only_under_its_prefix(azure: FakeOpenAI) -> None:
    assert azure.base_url.endswith(PREFIX)
    wrong = httpx.post(azure.url + "/v1/chat/completions", json={"model": "m", "messages": []}, timeout=5)
    assert wrong.status_code == 404  # so a client that dropped the path could not pass these tests


def test_metering_and_cache_under_a_path_prefix(tmp_path: Path, azure: FakeOpenAI) -> None:
    policy = _suite(tmp_path / "s", azure)
    out, cache = tmp_path / "out", tmp_path / "cache"
    assert _run(policy, out, "--cache-dir", str(cache)) == 0
    sent = azure.requests
    assert sent and {r.path for r in sent} == {PREFIX + "/chat/completions"}
    cost = _result(out)["cost"]
    prompt, completion = azure.usage_totals()
    assert (cost["input_tokens"], cost["output_tokens"]) == (prompt, completion)
    assert cost["total"] == pytest.approx(prompt * 1.0 / 1e6 + completion * 2.0 / 1e6)
    # The same run again is served from the cache: nothing is sent, nothing is paid.
    again = tmp_path / "again"
    assert _run(policy, again, "--cache-dir", str(cache)) == 0
    assert azure.count() == len(sent)
    assert _result(again)["cost"]["total"] == 0 and _result(again)["cost"]["cached_calls"] == len(sent)


def test_resume_under_a_path_prefix_judges_only_what_is_missing(tmp_path: Path, azure: FakeOpenAI) -> None:
    azure.script("g-1", server_error(), server_error())
    policy = _suite(tmp_path / "s", azure)
    out = tmp_path / "out"
    assert _run(policy, out, "--no-cache") == 3  # g-1 errored: evaluation_incomplete
    azure.reset()  # g-1 now answers
    assert _run(policy, out, "--no-cache", "--resume") == 0
    resumed = azure.requests
    assert len(resumed) == 1 and "g-1" in resumed[0].prompt and resumed[0].path == PREFIX + "/chat/completions"


def test_a_reply_without_usage_keeps_its_reservation(tmp_path: Path, azure: FakeOpenAI) -> None:
    azure.script("c-1", reply("pass", usage=False))  # some local servers report no usage
    policy = _suite(tmp_path / "s", azure)
    out = tmp_path / "out"
    assert _run(policy, out, "--no-cache") == 0
    cost = _result(out)["cost"]
    assert cost["usage_missing"] == 1 and cost["budget_spent"] > cost["total"]
