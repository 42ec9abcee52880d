"""The ragas import contract, pinned to the lock: what the gate relies on, checked before any call.

Run by `make migration-check` (stage 1) after any ragas, instructor or openai upgrade: a failure
here is an API migration defect, found before a remote call can disguise it as a judge that
suddenly got worse (seed guide, "Handle Ragas API Migration Safely").
"""

from __future__ import annotations

import ast
import asyncio
import importlib.metadata
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI, reply
from suite import PROMPT

from gate.judge.render import render_fields

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"
ALLOWED = ["pass", "fail", "review_required"]
FIELDS = {
    "user_input": "Can I get a refund after 10 days?",
    "reference": "Refunds are allowed within 7 days of purchase. {not a placeholder}",
    "response": "Yes, within 30 days.",
}

pytestmark = pytest.mark.usefixtures("no_tracking")


@pytest.fixture
def no_tracking(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def locked(name: str) -> str:
    m = re.search(rf"^{re.escape(name)}==([^\s\\]+)", LOCK.read_text(), re.MULTILINE)
    assert m, f"{name} is not pinned in requirements.lock"
    return m.group(1)


@pytest.mark.parametrize("dist", ["ragas", "instructor", "openai", "langchain-community", "pydantic"])
def test_installed_judge_stack_is_the_locked_one(dist: str) -> None:
    assert importlib.metadata.version(dist) == locked(dist)


def _ragas_imports() -> list[tuple[str, str, str]]:
    """(file, module, name) of every `from ragas... import name` in the gate package."""
    found: list[tuple[str, str, str]] = []
    for path in sorted((ROOT / "gate").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ragas":
                found += [(path.name, node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(path.name, a.name, "") for a in node.names if a.name.split(".")[0] == "ragas"]
    return found


def test_discrete_metric_comes_from_ragas_metrics_only() -> None:
    imports = _ragas_imports()
    metric_imports = [(f, m) for f, m, n in imports if n in ("DiscreteMetric", "discrete_metric", "MetricResult")]
    assert metric_imports, "the judge no longer imports DiscreteMetric: update this contract with it"
    assert all(m == "ragas.metrics" for _, m in metric_imports), metric_imports
    banned = [(f, m) for f, m, _ in imports if m.startswith("ragas.metrics.collections") or "experimental" in m]
    assert not banned, f"never import from ragas.metrics.collections or an experimental package: {banned}"


def test_constructor_arguments_and_label_set() -> None:
    from ragas.metrics import DiscreteMetric

    params = inspect.signature(DiscreteMetric).parameters
    assert {"name", "allowed_values", "prompt"} <= set(params)
    metric = DiscreteMetric(name="refund_contract", allowed_values=list(ALLOWED), prompt=PROMPT)
    assert metric.name == "refund_contract" and metric.allowed_values == ALLOWED
    assert callable(metric.ascore) and inspect.iscoroutinefunction(metric.ascore)
    with pytest.raises(AssertionError):
        DiscreteMetric(name="empty", allowed_values=[], prompt=PROMPT)


def test_placeholders_render_exactly_as_the_gate_hashes_them() -> None:
    from ragas.metrics import DiscreteMetric

    metric = DiscreteMetric(name="refund_contract", allowed_values=["pass", "fail"], prompt=PROMPT)
    assert metric.get_variables() == ["user_input", "reference", "response"]
    ours = render_fields(PROMPT, ["user_input", "reference", "response"], FIELDS)
    assert metric.prompt.format(**FIELDS) == ours.prompt  # the prompt_sha256 in records is what ragas sends
    with pytest.raises(KeyError):
        metric.prompt.format(user_input="q", response="r")  # a missing placeholder fails before any call


def test_metric_result_fields() -> None:
    from ragas.metrics import MetricResult

    result = MetricResult(value="pass", reason="matches the reference", traces={"input": "x"})
    assert (result.value, result.reason, result.traces) == ("pass", "matches the reference", {"input": "x"})
    assert result.to_dict() == {"result": "pass", "reason": "matches the reference"}


def test_labels_outside_the_allowed_values_are_rejected() -> None:
    from pydantic import ValidationError
    from ragas.metrics import DiscreteMetric

    metric = DiscreteMetric(name="refund_contract", allowed_values=["pass", "fail"], prompt=PROMPT)
    model = metric._response_model  # what instructor validates the reply against
    assert model(value="fail", reason="r").value == "fail"
    for label in ("PASS", "passed", "review_required", "maybe"):
        with pytest.raises(ValidationError):
            model(value=label, reason="r")
    assert metric.validate_result_value("pass") is None
    assert "expected one of" in (metric.validate_result_value("PASS") or "")


def test_saved_configuration_round_trips(tmp_path: Path) -> None:
    from ragas.metrics import DiscreteMetric

    metric = DiscreteMetric(name="refund_contract", allowed_values=list(ALLOWED), prompt=PROMPT)
    path = tmp_path / "metric.json"
    metric.save(str(path))
    saved: dict[str, Any] = json.loads(path.read_text())
    assert saved["format_version"] == "1.0" and saved["metric_type"] == "DiscreteMetric"
    assert saved["name"] == "refund_contract" and saved["config"]["allowed_values"] == ALLOWED
    assert saved["prompt"]["instruction"] == PROMPT
    loaded = DiscreteMetric.load(str(path))
    assert (loaded.name, loaded.allowed_values, loaded.get_variables()) == (
        "refund_contract",
        ALLOWED,
        ["user_input", "reference", "response"],
    )


def test_async_path_against_the_fake_provider(fake_openai: FakeOpenAI) -> None:
    import openai
    from ragas.llms import llm_factory
    from ragas.metrics import DiscreteMetric, MetricResult

    fake_openai.script("Yes, within 30 days.", reply("fail", "The window is 7 days, not 30."))

    async def judge() -> MetricResult:
        client = openai.AsyncOpenAI(api_key="sk-contract", base_url=fake_openai.base_url, max_retries=0)
        llm = llm_factory("gpt-4o-mini", client=client, temperature=0, seed=7, max_tokens=64, max_retries=0)
        metric = DiscreteMetric(name="refund_contract", allowed_values=["pass", "fail"], prompt=PROMPT)
        try:
            return await metric.ascore(llm=llm, **FIELDS)
        finally:
            await client.close()

    result = asyncio.run(judge())
    assert (result.value, result.reason) == ("fail", "The window is 7 days, not 30.")
    (request,) = fake_openai.requests
    body = request.body
    assert request.prompt == render_fields(PROMPT, list(FIELDS), FIELDS).prompt
    assert (body["temperature"], body["seed"], body["max_tokens"]) == (0, 7, 64)
    assert body["response_format"] == {"type": "json_object"}
