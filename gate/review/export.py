"""The cases of a new dataset version, made from final labels, with their full provenance.

One case per item whose final label is unanimous among its K independent labels or adjudicated; a
final `abstain` is listed, never exported. A case the label corrects (the item came from a case
with another label) gets a new id that `supersedes` the case as it stands now; a case people confirm
is listed and left as it is, and so is an item an earlier export made a case of (a `--partial` export,
or the same labels exported again): nothing is written twice. Every case says where it came from: the queue, the reviewers, the adjudicator, whether
everyone was blind, the slice's alpha and the sha256 of every ledger line it rests on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gate.model.cases import Case
from gate.review.ledger import FinalLabel, LedgerLine
from gate.review.queue import Queue, QueueItem

CONFIRMED = "confirmed"  # the case already holds this label: nothing to add


@dataclass(frozen=True)
class Exported:
    cases: tuple[dict[str, Any], ...]
    abstained: tuple[str, ...]  # item ids (or case ids) whose final label is `abstain`: listed, not exported
    confirmed: tuple[str, ...]  # case ids people confirmed as labelled: left as they are
    not_final: int  # items still pending or awaiting adjudication
    reviewers: tuple[str, ...]
    adjudicators: tuple[str, ...]
    window: tuple[str, str] | None  # the first and last `at` of the lines used
    counts: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (slice, label) -> cases


def _new_id(base: str, taken: set[str], tag: str) -> str:
    candidate = f"{base}-{tag}"
    n = 2
    while candidate in taken:
        candidate = f"{base}-{tag}{n}"
        n += 1
    taken.add(candidate)
    return candidate


def _reason(final: FinalLabel, used: Sequence[LedgerLine]) -> str:
    if final.adjudicator is not None:
        return next(line.reason for line in used if line.kind == "adjudication")
    return "; ".join(f"{line.reviewer}: {line.reason}" for line in used)


def _evidence(item: QueueItem, used: Sequence[LedgerLine]) -> list[str]:
    cited = [e for line in used for e in line.evidence]
    return list(dict.fromkeys(cited or item.evidence))


@dataclass(frozen=True)
class _Standing:
    """The dataset's cases as they stand: a superseded case is read as the case that replaced it."""

    cases: Mapping[str, Case]
    successor: Mapping[str, str]  # case id -> the id of the case that supersedes it
    exported: Mapping[tuple[str, str], str]  # (item id, rubric) -> a case an earlier export made of the item

    @classmethod
    def of(cls, existing: Sequence[Case]) -> _Standing:
        exported: dict[tuple[str, str], str] = {}
        for c in existing:
            item = c.provenance.get("item_id")
            if isinstance(item, str) and c.labelled:
                exported.setdefault((item, c.rubric_version), c.case_id)
        return cls(
            {c.case_id: c for c in existing}, {c.supersedes: c.case_id for c in existing if c.supersedes}, exported
        )

    def now(self, case_id: str) -> Case | None:
        """The case that stands for `case_id`: itself, or the last of the cases that superseded it."""
        seen = {case_id}
        while (later := self.successor.get(case_id)) is not None and later not in seen:
            seen.add(later)
            case_id = later
        return self.cases.get(case_id)


def _case_id(
    item: QueueItem, label: str, rubric: str, standing: _Standing, taken: set[str]
) -> tuple[str | None, str | None]:
    """(the new case's id, the id it supersedes); (None, the id of the case that holds the label already)
    when the dataset has it as people labelled it: the case it came from, or the case an earlier export
    (a `--partial` one, or the same labels exported twice) made of this item, as each stands now."""
    earlier = standing.exported.get((item.item_id, rubric))
    if earlier is not None and (done := standing.now(earlier)) is not None:
        if done.human_label == label:
            return None, done.case_id
        return _new_id(earlier, taken, "r"), done.case_id  # people's final label changed since that export
    if item.case_id is None:
        return _new_id("review", taken, item.item_id[:12]), None
    old = standing.now(item.case_id)
    if old is None and item.case_id not in taken:
        taken.add(item.case_id)
        return item.case_id, None
    if old is not None and old.human_label is not None and old.response == item.response:
        if old.human_label == label:
            return None, old.case_id
        return _new_id(item.case_id, taken, "r"), old.case_id  # people correct the case's label (as it stands)
    # a product case (no label; its answer came from the run) or another answer of the case: a new case
    return _new_id(item.case_id, taken, item.response_sha256[:8]), None


@dataclass(frozen=True)
class ExportRequest:
    partition: str
    alphas: Mapping[str | None, float | None]  # per slice
    # The slices exported with --accept-low-agreement (their alpha below review.min_alpha): their cases record it.
    low_agreement_accepted: frozenset[str | None] = frozenset()


def export_cases(
    queue: Queue,
    finals: Mapping[str, FinalLabel],
    lines: Sequence[LedgerLine],
    existing: Sequence[Case],
    req: ExportRequest,
) -> Exported:
    """The cases to append, and what was left out and why (pure)."""
    by_sha = {line.line_sha256: line for line in lines}
    standing = _Standing.of(existing)
    known = standing.cases
    taken = set(known)
    cases: list[dict[str, Any]] = []
    abstained: list[str] = []
    confirmed: list[str] = []
    used_at: list[str] = []
    reviewers: set[str] = set()
    adjudicators: set[str] = set()
    counts: dict[tuple[str, str], int] = {}
    for item in queue.items:
        final = finals[item.item_id]
        if final.status == "abstain":
            abstained.append(item.case_id or item.item_id)
            continue
        if not final.final or final.label is None:
            continue
        new_id, supersedes = _case_id(item, final.label, queue.header.rubric_version, standing, taken)
        if new_id is None:
            confirmed.append(supersedes or item.item_id)
            continue
        used = [by_sha[s] for s in final.lines if s in by_sha]
        used_at += [line.at for line in used]
        reviewers.update(final.reviewers)
        if final.adjudicator is not None:
            adjudicators.add(final.adjudicator)
        counts[(item.slice or "", final.label)] = counts.get((item.slice or "", final.label), 0) + 1
        cases.append(_case(item, final, used, new_id, supersedes, known, queue, req))
    return Exported(
        cases=tuple(cases),
        abstained=tuple(abstained),
        confirmed=tuple(confirmed),
        not_final=sum(1 for f in finals.values() if f.status in ("pending", "disagreement")),
        reviewers=tuple(sorted(reviewers)),
        adjudicators=tuple(sorted(adjudicators)),
        window=(min(used_at), max(used_at)) if used_at else None,
        counts=counts,
    )


def _case(
    item: QueueItem,
    final: FinalLabel,
    used: Sequence[LedgerLine],
    case_id: str,
    supersedes: str | None,
    known: Mapping[str, Case],
    queue: Queue,
    req: ExportRequest,
) -> dict[str, Any]:
    old = known.get(item.case_id or "")
    provenance: dict[str, Any] = {
        "source": item.source,
        "reviewers": list(final.reviewers),
        "adjudicator": final.adjudicator,
        "blind": final.blind,
        "alpha": req.alphas.get(item.slice),
        "ledger_lines": list(final.lines),
        "queue_sha256": queue.sha256,
        "item_id": item.item_id,
    }
    if item.slice in req.low_agreement_accepted:
        provenance["accept_low_agreement"] = True
    case: dict[str, Any] = {
        "case_id": case_id,
        "partition": req.partition,
        "slice": item.slice,
        "rubric_version": queue.header.rubric_version,
        "user_input": item.user_input,
        "reference": item.reference,
        "response": item.response,
        "response_sha256": item.response_sha256,
        "human_adjudication": {"label": final.label, "reason": _reason(final, used), "evidence": _evidence(item, used)},
    }
    if old is not None and old.group_id is not None:
        case["group_id"] = old.group_id
    if supersedes is not None:
        case["supersedes"] = supersedes
    case["provenance"] = provenance
    return case
