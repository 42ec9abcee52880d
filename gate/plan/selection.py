"""Which cases a lane judges, in which order. Pure: no I/O.

Order: controls first (they must separate before any other verdict counts), then cases by slice
priority (critical slices first, so a budget stop leaves the cheap volume unrun, not the risk),
then case id for a stable order. A product lane orders each slice by a seeded shuffle instead of
by case id: case ids group topics (a wrong topic would sort last), and its interval may be read
after every answer (`stop_when_decided`), which is only valid over an order unrelated to the
answers. The seed is `order_seed`, which the run fixes when it starts (gate/run/order_seed.py: the
workflow run's in GitHub Actions, else a fresh draw; never the inputs' bytes) and records on every
answer, so `gate decide` orders the records as the run did.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gate.model.cases import Case, Dataset
from gate.model.errors import UsageError
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy
from gate.model.supersede import superseded_ids

if TYPE_CHECKING:  # validate plans too, and must not load the records model
    from gate.model.records import AuditSizing, Record

UNKNOWN_SLICE_PRIORITY = 10**9


@dataclass(frozen=True)
class Plan:
    lane: str
    eligible: tuple[Case, ...]
    # Eligible cases never sent to the judge: missing evidence (and missing-evidence controls).
    withheld: tuple[Case, ...]
    repeats: int
    # A product lane's cases its --responses left unanswered: never sent, unrun (`missing_response`).
    unanswered: frozenset[str] = frozenset()
    # A product lane's shuffle seed (None on other lanes, which judge in case-id order, and on a product
    # lane whose records carry none).
    order_seed: str | None = None
    # A product run's: per slice, what sizes its audit plan besides the answers, fixed when the run starts
    # and written on every answer's record (gate/decide/product/seal.py). Empty when nothing is recorded.
    audit_sizing: Mapping[str, AuditSizing] = field(default_factory=dict)

    @property
    def scheduled(self) -> tuple[Case, ...]:
        held = {c.case_id for c in self.withheld} | self.unanswered
        return tuple(c for c in self.eligible if c.case_id not in held)

    @property
    def eligible_ids(self) -> tuple[str, ...]:
        return tuple(c.case_id for c in self.eligible)


class LaneError(UsageError):
    """The lane asked for is not in the policy: a usage error (exit 2)."""


def is_withheld(case: Case) -> bool:
    """A case with no reference is never judged: the model must not invent evidence."""
    return not (case.reference or "").strip()


def shuffled_rank(seed: str, case_id: str) -> str:
    """A case's place in the seeded order: depends on the seed and the case id alone."""
    return hashlib.sha256(f"{seed}\0{case_id}".encode()).hexdigest()


def recorded_order_seeds(records: Iterable[Record]) -> list[str]:
    """The order seeds a product lane's records carry, most carried first: one for the records of
    one run (its shards and resumes share it)."""
    seeds = Counter(r.order_seed for r in records if r.order_seed)
    return sorted(seeds, key=lambda s: (-seeds[s], s))


def recorded_order_seed(records: Iterable[Record]) -> str | None:
    """The order seed a product lane's records say they were judged under (the one most of them
    carry); None when no record carries one."""
    seeds = recorded_order_seeds(records)
    return seeds[0] if seeds else None


def make_plan(loaded: LoadedPolicy, dataset: Dataset, lane: str, order_seed: str | None = None) -> Plan:
    """The lane's plan. On a product lane the non-control cases of each slice come in the order
    `order_seed` shuffles them into (without one, a fixed order that no audit plan is drawn from)."""
    policy = loaded.policy
    if lane not in policy.lanes:
        raise LaneError(
            f"{shown_path(loaded.path)}: lane {lane!r} is not defined under `lanes:` (defined: {', '.join(sorted(policy.lanes))}); "
            f"fix: pass --lane with one of those, or add `lanes.{lane}` to the policy"
        )
    spec = policy.lanes[lane]
    partitions = set(spec.partitions)
    seen: set[str] = set()
    controls: list[Case] = []
    others: list[Case] = []
    superseded = superseded_ids(dataset.cases)
    for case in dataset.cases:
        if case.case_id in seen:  # duplicates are an input_contract finding; judge the first only
            continue
        if case.case_id in superseded:  # kept for history, never judged again
            continue
        if case.is_control:
            if spec.controls:
                controls.append(case)
                seen.add(case.case_id)
        elif case.partition in partitions:
            others.append(case)
            seen.add(case.case_id)

    seed = order_seed if spec.product else None

    def key(c: Case) -> tuple[int, str]:
        limit = policy.slices.get(c.slice)
        return (limit.priority if limit else UNKNOWN_SLICE_PRIORITY, c.case_id)

    def shuffled(c: Case) -> tuple[int, str, str]:
        return (key(c)[0], shuffled_rank(seed or "", c.case_id), c.case_id)

    ordered = sorted(others, key=shuffled if spec.product else key)
    eligible = tuple(sorted(controls, key=key) + ordered)
    withheld = tuple(c for c in eligible if is_withheld(c))
    return Plan(lane=lane, eligible=eligible, withheld=withheld, repeats=policy.evaluator.repeats, order_seed=seed)
