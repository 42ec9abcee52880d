"""Where a product run's order seed comes from, fixed when the run starts and before any verdict.

The seed orders each slice's answers for judging and draws the audit plan (which answers people
label). Nobody may pick it after seeing the answers, so it is never derived from the inputs' bytes
(a free-form field of the answers file would let a team try seeds until one passes):
- in GitHub Actions it is the workflow run's: `github:<repository>:<run id>:<run attempt>`
  (GITHUB_REPOSITORY, GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT), the same in every matrix job of one
  run, so its shards share it; a re-run is a new attempt, and so a new seed anyone can see;
- elsewhere a fresh random draw, `drawn:<16 hex digits>`;
- a run continued from its records (`--resume`, `--batch collect`) keeps the seed they carry;
- `--order-seed S` replays a recorded run's seed; refused in GitHub Actions, where the seed is the
  workflow run's, and beside `--resume` when it is not the records' own.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from gate.model.errors import UsageError

# How the run came by its seed: the workflow run's, a fresh draw, `--order-seed`, the records of the
# run it continues (`--resume`, `gate decide`, `gate merge`), or the batch it collects.
SeedSource = Literal["workflow", "drawn", "given", "records", "batch"]


@dataclass(frozen=True)
class OrderSeed:
    value: str
    source: SeedSource


def workflow_seed(env: Mapping[str, str]) -> str | None:
    """The seed of the GitHub Actions workflow run this process is a step of, None outside one."""
    if env.get("GITHUB_ACTIONS") != "true" or not env.get("GITHUB_RUN_ID", "").strip():
        return None
    repository = env.get("GITHUB_REPOSITORY", "").strip() or "unknown-repository"
    attempt = env.get("GITHUB_RUN_ATTEMPT", "").strip() or "1"
    return f"github:{repository}:{env['GITHUB_RUN_ID'].strip()}:{attempt}"


def drawn_seed() -> str:
    return f"drawn:{secrets.token_hex(8)}"


def order_seed_for(
    env: Mapping[str, str], *, given: str | None = None, continued: OrderSeed | None = None
) -> OrderSeed:
    """The seed a run starts with. `given`: --order-seed; `continued`: the seed of the run this one
    continues (the records in --out on --resume, the batch a collect reads), which it keeps."""
    workflow = workflow_seed(env)
    if continued is not None:
        if given is not None and given != continued.value:
            what = (
                "batch this run collects was submitted"
                if continued.source == "batch"
                else "records this run resumes were judged"
            )
            raise UsageError(
                f"--order-seed {given}: the {what} in the order of seed {continued.value}, and a run it continues "
                "keeps that order (another would change which answers a stopped slice was decided on, and the audit "
                "plan); fix: drop --order-seed, or run into a new --out"
            )
        return continued
    if given is not None:
        if workflow is not None and given != workflow:
            raise UsageError(
                f"--order-seed {given}: in a GitHub Actions workflow the order and the audit plan are the workflow "
                f"run's ({workflow}), so that nobody picks them after seeing the answers; --order-seed only replays "
                "a recorded run's seed, outside the workflow; fix: drop --order-seed"
            )
        return OrderSeed(given, "given")
    if workflow is not None:
        return OrderSeed(workflow, "workflow")
    return OrderSeed(drawn_seed(), "drawn")


def replay_note(seed: str) -> str:
    """What a run given --order-seed says, so nobody takes its order and audit plan for a fresh one."""
    return (
        f"the order and the audit plan replay seed {seed}, given with --order-seed: a replay of a recorded run, "
        "not an order this run fixed when it started"
    )
