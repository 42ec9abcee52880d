"""The one seeded random order an audit draws from: shared by the review queue and the product gate.

An item's place depends on the seed, its slice, its stratum and its case id alone, so a larger
sample extends a smaller one (its first N are the smaller sample) and anyone with the seed can
rebuild the draw from the run's answers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

# An audit's two strata per slice: the answers the judge failed, and those it passed.
JUDGED_FAIL, JUDGED_PASS = "judged_fail", "judged_pass"
STRATA = (JUDGED_FAIL, JUDGED_PASS)


def draw_key(seed: str, slice: str, stratum: str, case_id: str) -> str:
    """The sort key of one case in its stratum's draw: sha256 of the seed, slice, stratum and case id."""
    return hashlib.sha256(f"{seed}\0{slice}\0{stratum}\0{case_id}".encode()).hexdigest()


def draw_order(seed: str, slice: str, stratum: str, case_ids: Sequence[str]) -> list[str]:
    """`case_ids` in the stratum's seeded random order (ties, which sha256 never makes, by id)."""
    return sorted(set(case_ids), key=lambda case_id: (draw_key(seed, slice, stratum, case_id), case_id))
