"""The cost boundary spends the budget it is given (issue 28, defect 7). A reservation is an upper
bound (request bytes x the input price plus `max_output_tokens` x the output price), several times
what an attempt really costs. Counting the reservations of attempts in flight as if spent stopped a
run with most of the budget unspent: with `max_total_cost: 0.004` and 8 in flight, 2 judgments
and 0.00064 spent, every later control unrun. A refused attempt now waits for the attempts in
flight to settle and asks again; the run stops only when, with nothing in flight, the next
reservation does not fit. Through the real CLI, ragas and HTTP to the fake provider."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fake_openai import FakeOpenAI
from suite import case, controls, gate, result, write_suite

from gate.judge.budget import Budget, BudgetBusy, BudgetExhausted

REFUSED = re.compile(r"the next attempt may cost up to ([0-9.]+)")


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line]


def _largest_refused(out: Path) -> float:
    """The largest reservation the run was refused, as its budget-skipped records say it."""
    said = [REFUSED.search(r.get("error_message") or "") for r in _records(out) if r.get("error_kind") == "budget"]
    amounts = [float(m.group(1)) for m in said if m is not None]
    assert amounts, "the run was never refused a reservation"
    return max(amounts)


@pytest.mark.parametrize("limit", [0.0018, 0.004])
def test_a_boundary_stop_leaves_at_most_one_refused_reservation_unspent(
    tmp_path: Path, limit: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-budget-boundary")
    with FakeOpenAI() as fake:
        cases = [*controls(), *(case(f"crit-{i:02d}") for i in range(10))]
        policy = write_suite(
            tmp_path / "s",
            cases,
            evaluator={"base_url": fake.base_url, "max_concurrency": 8},
            limits={"max_evaluator_errors": 0, "max_total_cost": limit},
        )
        out = tmp_path / "out"
        assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 3
        sent = fake.count()
    res = result(out)
    assert "budget_exhausted" in {b["kind"] for b in res["blockers"]}
    spent = res["cost"]["budget_spent"]
    assert spent <= limit  # the hard cap still holds
    # Stopped by the boundary: what is left is less than the reservation it was refused.
    assert spent >= limit - _largest_refused(out), (spent, limit, _largest_refused(out))
    assert res["cost"]["http_attempts"] == sent == res["counts"]["completed"]


def test_controls_are_not_left_unrun_while_the_budget_has_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seven controls' worth of budget (0.004 / ~0.0003 each), eight in flight: every control is judged."""
    monkeypatch.setenv("GATE_TEST_KEY", "sk-test-budget-boundary")
    with FakeOpenAI() as fake:
        cases = [*controls(), *(case(f"crit-{i:02d}") for i in range(10))]
        policy = write_suite(
            tmp_path / "s",
            cases,
            evaluator={"base_url": fake.base_url, "max_concurrency": 8},
            limits={"max_evaluator_errors": 0, "max_total_cost": 0.004},
        )
        out = tmp_path / "out"
        assert gate("run", "--policy", policy, "--out", out, "--no-cache") == 3
    res = result(out)
    assert not [c for c in res["unrun_case_ids"] if c.startswith("ctl-")]
    assert "control_error" not in {b["kind"] for b in res["blockers"]}


def test_a_refusal_while_others_are_in_flight_waits_for_one_to_settle() -> None:
    budget = Budget(1.0)
    first = budget.reserve(0.6)
    with pytest.raises(BudgetBusy) as busy:
        budget.reserve(0.6)  # does not fit now; the first may settle for less
    assert not budget.exhausted

    async def go() -> bool:
        waiter = asyncio.create_task(budget.settled_since(busy.value.settles, 60.0))
        await asyncio.sleep(0)
        assert not waiter.done()
        budget.settle(first, 0.1)
        return await waiter

    assert asyncio.run(go()) is True
    second = budget.reserve(0.6)  # 0.1 spent: it fits now
    with pytest.raises(BudgetBusy):
        budget.reserve(0.6)
    budget.settle(second, 0.6)
    with pytest.raises(BudgetExhausted) as stop:  # nothing in flight, and it still does not fit
        budget.reserve(0.6)
    assert not isinstance(stop.value, BudgetBusy) and budget.exhausted
    assert budget.spent == pytest.approx(0.7) and budget.in_flight == 0


def test_a_reservation_that_never_settles_does_not_hang_the_waiter() -> None:
    budget = Budget(1.0)
    budget.reserve(0.9)
    with pytest.raises(BudgetBusy) as busy:
        budget.reserve(0.5)
    assert asyncio.run(budget.settled_since(busy.value.settles, 0.0)) is False
