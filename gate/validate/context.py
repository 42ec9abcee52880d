"""What every validator sees, and the helpers that keep their messages uniform."""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from gate.model.cases import Case, Dataset
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy, Policy
from gate.model.states import Finding, State

# A message lists at most this many file:line locations; `case_ids` always lists every case.
MAX_LOCATIONS_SHOWN = 5
# At most this many findings of one repetitive kind (e.g. one per leaked pair); the rest are
# folded into one summary finding that still lists every case id.
MAX_FINDINGS_PER_KIND = 20


@dataclass
class Context:
    """The inputs of one validation: the policy, the dataset and (optionally) the lane."""

    loaded: LoadedPolicy
    dataset: Dataset
    lane: str | None = None
    # `gate validate` runs the team's checks on every case; a command that runs them itself does not.
    run_checks: bool = True

    @property
    def policy(self) -> Policy:
        return self.loaded.policy

    @property
    def cases(self) -> list[Case]:
        return self.dataset.cases

    @property
    def policy_file(self) -> str:
        return shown_path(self.loaded.path)

    @cached_property
    def locations(self) -> list[str]:
        """The "file:line" of every case, parallel to `cases`."""
        if len(self.dataset.case_locations) == len(self.dataset.cases):
            return self.dataset.case_locations
        fallback = self.dataset.locations
        return [fallback.get(c.case_id, "(cases)") for c in self.dataset.cases]

    def where(self, index: int) -> str:
        return self.locations[index]

    def policy_key(self, key: str) -> str:
        """A policy key as shown in messages: `policy.yaml: \\`lanes.pr.controls\\``."""
        return f"{self.policy_file}: `{key}`"


def describe_locations(locations: Sequence[str]) -> str:
    """ "a.jsonl:3, a.jsonl:9 and 12 more" (in input order); case ids the same way."""
    shown = ", ".join(locations[:MAX_LOCATIONS_SHOWN])
    more = len(locations) - MAX_LOCATIONS_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def grouped(
    ctx: Context,
    indices: Iterable[int],
    *,
    state: State,
    kind: str,
    what: str,
    fix: str,
    slice_name: str | None = None,
) -> Finding:
    """One finding for many cases sharing one defect: locations, what is wrong, the fix."""
    idx = list(indices)
    locations = [ctx.where(i) for i in idx]
    ids = tuple(dict.fromkeys(ctx.cases[i].case_id for i in idx))
    if len(ids) == 1:
        count = f"case {ids[0]}"
        verb, _, rest = what.partition(" ")
        what = f"{_SINGULAR.get(verb, verb)} {rest}" if rest else what
        fix = re.sub(r"\bthem\b", "it", re.sub(r"\btheir\b", "its", fix))  # "label them" of one case: "label it"
    else:
        count = f"{len(ids)} cases"
    message = f"{describe_locations(locations)}: {count} {what}; fix: {fix}"
    return Finding(state, kind, message, case_ids=ids, slice=slice_name, location=locations[0] if locations else None)


# `what` is written for many cases ("have no reference"); one case reads "has no reference".
_SINGULAR = {
    "have": "has",
    "are": "is",
    "do": "does",
    "cite": "cites",
    "share": "shares",
    "use": "uses",
    "name": "names",
    "belong": "belongs",
    "lack": "lacks",
}


def contract(ctx: Context, indices: Iterable[int], what: str, fix: str, slice_name: str | None = None) -> Finding:
    """An `input_contract` finding (quality_failed): the dataset breaks the input contract."""
    return grouped(
        ctx, indices, state=State.QUALITY_FAILED, kind="input_contract", what=what, fix=fix, slice_name=slice_name
    )


def undeclared(ctx: Context, value_of: Callable[[Case], str | None], declared: Container[str]) -> dict[str, list[int]]:
    """The cases whose value (their slice, rubric version, ...) is set, not blank and not in `declared`:
    their indices by value, values in the order the dataset first uses them."""
    found: dict[str, list[int]] = {}
    for i, case in enumerate(ctx.cases):
        value = value_of(case)
        if value is not None and value.strip() and value not in declared:
            found.setdefault(value, []).append(i)
    return found


def capped(findings: list[Finding], summary: Finding | None) -> list[Finding]:
    """The first MAX_FINDINGS_PER_KIND findings, then the summary (when there are more)."""
    if len(findings) <= MAX_FINDINGS_PER_KIND or summary is None:
        return findings
    return [*findings[:MAX_FINDINGS_PER_KIND], summary]
