"""Shards: which share of a lane's cases one `gate run --shard I/N` judges. Pure.

Case `c` belongs to shard `I` (1-based) of `N` when `int(sha256(c)[:16], 16) % N == I - 1`: the
share is stable (it depends on the case id only, not on the dataset's order or size), so a
matrix job always judges the same cases and `gate merge` can tell which cases a missing shard
owned. Controls run in every shard: each shard's verdicts need their own evaluator check.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace

from gate.model.errors import UsageError
from gate.plan.selection import Plan

MAX_SHARDS = 1_000
_SPEC = re.compile(r"\s*(\d{1,4})\s*/\s*(\d{1,4})\s*")


class ShardError(UsageError):
    """A `--shard` value that is not `I/N` with 1 <= I <= N (a usage error, exit 2)."""


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int
    # The lane's non-control cases across every shard, once known (`select`): the report says
    # "shard I/N: n of M cases" so half a lane never reads as the whole of it.
    lane_cases: int | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, int]:
        return {"index": self.index, "count": self.count}

    def share_of(self, plan: Plan) -> dict[str, int]:
        """result.json's `shard`: which one, and (once known) how many of the lane's cases it holds."""
        out = self.to_dict()
        if self.lane_cases is not None:
            out |= {"cases": lane_cases(plan), "lane_cases": self.lane_cases}
        return out

    def owns(self, case_id: str) -> bool:
        return shard_of(case_id, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_of(case_id: str, count: int) -> int:
    """The 1-based shard of `count` that owns `case_id`."""
    digest = hashlib.sha256(case_id.encode("utf-8")).hexdigest()
    return int(digest[:16], 16) % count + 1


def parse_shard(text: str, where: str = "--shard") -> Shard:
    m = _SPEC.fullmatch(text)
    if m is None:
        raise ShardError(
            f"{where} {text!r} is not of the form I/N; fix: pass the shard index and the shard count, e.g. 2/4"
        )
    index, count = int(m.group(1)), int(m.group(2))
    if not 1 <= count <= MAX_SHARDS or not 1 <= index <= count:
        raise ShardError(
            f"{where} {text!r}: the index must be between 1 and the count, and the count between 1 and "
            f"{MAX_SHARDS}; fix: with a matrix of N jobs pass 1/N ... N/N"
        )
    return Shard(index, count)


def select(plan: Plan, shard: Shard) -> Plan:
    """The shard's plan: every control, and the other cases whose id hashes to this shard."""
    eligible = tuple(c for c in plan.eligible if c.is_control or shard.owns(c.case_id))
    kept = {c.case_id for c in eligible}
    return replace(plan, eligible=eligible, withheld=tuple(c for c in plan.withheld if c.case_id in kept))


def owned_by(plan: Plan, count: int) -> dict[int, list[str]]:
    """Shard index -> the ids of the non-control eligible cases it owns (controls are everyone's)."""
    out: dict[int, list[str]] = {i: [] for i in range(1, count + 1)}
    for c in plan.eligible:
        if not c.is_control:
            out[shard_of(c.case_id, count)].append(c.case_id)
    return out


def lane_cases(plan: Plan) -> int:
    """The non-control cases a plan makes eligible (what a shard takes a share of)."""
    return sum(1 for c in plan.eligible if not c.is_control)
