"""Which cases a lane judges, in which order. Pure: no I/O.

Order: controls first (they must separate before any other verdict counts), then cases by slice
priority (critical slices first, so a budget stop leaves the cheap volume unrun, not the risk),
then case id for a stable order.
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.model.cases import Case, Dataset
from gate.model.errors import UsageError
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy
from gate.model.supersede import superseded_ids

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


def make_plan(loaded: LoadedPolicy, dataset: Dataset, lane: str) -> Plan:
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

    def key(c: Case) -> tuple[int, str]:
        limit = policy.slices.get(c.slice)
        return (limit.priority if limit else UNKNOWN_SLICE_PRIORITY, c.case_id)

    eligible = tuple(sorted(controls, key=key) + sorted(others, key=key))
    withheld = tuple(c for c in eligible if is_withheld(c))
    return Plan(lane=lane, eligible=eligible, withheld=withheld, repeats=policy.evaluator.repeats)
