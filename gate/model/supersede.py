"""`supersedes`: corrected cases replace old ones by id; the old case stays, never eligible again.

History keeps pointing at the evidence used then: a record of the old case still names the old
case id and its hashes, while new runs judge the replacement.
"""

from __future__ import annotations

from collections.abc import Iterable

from gate.model.cases import Case


def superseded_ids(cases: Iterable[Case]) -> frozenset[str]:
    """Every case id some case declares it supersedes."""
    return frozenset(c.supersedes for c in cases if c.supersedes is not None)
