"""A run's inputs: the policy, its dataset, the lane's plan and the validators' findings; the cache."""

from __future__ import annotations

from pathlib import Path

from gate.model.cases import Dataset, load_dataset
from gate.model.paths import from_working_directory
from gate.model.policy import LoadedPolicy, load_policy
from gate.model.states import Finding
from gate.plan.selection import Plan, make_plan
from gate.validate import run_validators

DEFAULT_CACHE_DIR = ".gate-cache"


def load_inputs(policy_path: str | Path, lane: str) -> tuple[LoadedPolicy, Dataset, Plan, list[Finding]]:
    loaded = load_policy(policy_path)
    dataset = load_dataset(loaded)
    plan = make_plan(loaded, dataset, lane)
    findings = run_validators(loaded, dataset, lane)
    return loaded, dataset, plan, findings


def cache_dir_for(loaded: LoadedPolicy, use_cache: bool, override: Path | None) -> Path | None:
    """The judgment cache: none with --no-cache, else --cache-dir, the policy's `cache_dir`, .gate-cache."""
    if not use_cache:
        return None
    if override is not None:
        return override
    if loaded.policy.cache_dir:
        return loaded.resolve(loaded.policy.cache_dir)
    return from_working_directory(DEFAULT_CACHE_DIR)
