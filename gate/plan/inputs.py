"""A run's inputs: the policy, its dataset, the lane's plan and the validators' findings; the cache.

A product lane's inputs include the application's answers (`--responses`, gate/plan/responses.py):
they are put into the lane's cases before the plan and the validators see them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from gate.model.cases import Dataset, load_dataset
from gate.model.errors import PolicyError, UsageError
from gate.model.paths import from_working_directory, shown_path
from gate.model.policy import LoadedPolicy, load_policy
from gate.model.states import Finding
from gate.plan.responses import (
    Responses,
    answer_cases,
    missing_response_finding,
    outside_note,
    read_responses,
    unanswered_limits,
)
from gate.plan.selection import Plan, make_plan
from gate.validate import run_validators

DEFAULT_CACHE_DIR = ".gate-cache"


@dataclass(frozen=True)
class ProductInputs:
    """A product lane's answers as this run read them (None fields: no --responses given)."""

    responses: Responses | None = None
    notes: tuple[str, ...] = ()


def load_inputs(
    policy_path: str | Path, lane: str, responses: Path | None = None, *, need_responses: bool = False
) -> tuple[LoadedPolicy, Dataset, Plan, list[Finding]]:
    """The policy, its dataset, the lane's plan and the validators' findings. On a product lane the
    answers of `responses` are put into the lane's cases (`need_responses`: a run, which cannot judge
    without them, refuses to start; `gate decide` decides the records it is given either way)."""
    loaded, dataset, plan, findings, _product = load_product_inputs(
        policy_path, lane, responses, need_responses=need_responses
    )
    return loaded, dataset, plan, findings


def load_product_inputs(
    policy_path: str | Path,
    lane: str,
    responses: Path | None = None,
    *,
    need_responses: bool = False,
    order_seed: str | None = None,
    order_seed_from: str | None = None,
) -> tuple[LoadedPolicy, Dataset, Plan, list[Finding], ProductInputs]:
    """`load_inputs`, with what the product lane's answers add (the responses read, their notes);
    `order_seed` shuffles a product lane's answers (gate/run/order_seed.py says where the run got it,
    `order_seed_from`; "given" is `--order-seed`, refused on another lane)."""
    loaded = load_policy(policy_path)
    dataset = load_dataset(loaded)
    spec = loaded.policy.lanes.get(lane)
    product = spec is not None and spec.product
    if responses is not None and spec is not None and not product:
        raise UsageError(
            f"--responses {shown_path(responses)}: lane {lane} of {shown_path(loaded.path)} is not a product lane, "
            f"so it judges the responses its cases hold; fix: drop --responses, or pass a lane with `product: true`"
        )
    if product and responses is None and need_responses:
        raise UsageError(
            f"lane {lane} of {shown_path(loaded.path)} is a product lane: it judges the application's answers, "
            "which no case file holds; fix: pass --responses FILE (one JSON line per case: case_id, response, "
            "generation), the same file again on --resume and --batch collect"
        )
    if order_seed_from == "given" and spec is not None and not product:
        raise UsageError(
            f"--order-seed: lane {lane} of {shown_path(loaded.path)} is not a product lane, and only a product "
            "lane judges its answers in a seeded order; fix: drop --order-seed, or pass a lane with `product: true`"
        )
    read = ProductInputs()
    missing: tuple[str, ...] = ()
    if product and responses is not None:
        answers = read_responses(responses)
        answered = answer_cases(loaded, dataset, lane, answers)
        dataset, missing = answered.dataset, answered.missing
        notes = (outside_note(answered.outside, answers, lane),) if answered.outside else ()
        read = ProductInputs(answers, notes)
    plan = make_plan(loaded, dataset, lane, order_seed)
    if product:
        problems = unanswered_limits(loaded, plan.eligible, lane)
        if problems:
            raise PolicyError(str(loaded.path), problems)
        plan = dataclasses.replace(plan, unanswered=frozenset(missing))
    # Every command reading a lane's inputs runs the team's checks on the lane's cases itself (their
    # blockers come with those results, gate/commands/assemble.py): the validators only read them.
    findings = run_validators(loaded, dataset, lane, run_checks=False)
    if missing and read.responses is not None:
        findings.append(missing_response_finding(missing, read.responses, lane))
    return loaded, dataset, plan, findings, read


def cache_dir_for(loaded: LoadedPolicy, use_cache: bool, override: Path | None) -> Path | None:
    """The judgment cache: none with --no-cache, else --cache-dir, the policy's `cache_dir`, .gate-cache."""
    if not use_cache:
        return None
    if override is not None:
        return override
    if loaded.policy.cache_dir:
        return loaded.resolve(loaded.policy.cache_dir)
    return from_working_directory(DEFAULT_CACHE_DIR)
