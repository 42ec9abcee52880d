"""How far the labelling of a queue has come, and whether people agree, per slice.

Per slice: the items, those with K independent labels, the share of those that are unanimous,
Krippendorff's alpha over every reviewer's labels (nominal; an abstention is no value) with a
bootstrap 95% interval, Cohen's kappa when exactly two reviewers labelled every item, the
abstentions, and the disagreements awaiting adjudication. Alpha below the policy's
`review.min_alpha` means people do not agree on the boundary: the rubric needs fixing before any
judge is measured on these labels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.model.wording import plural
from gate.review.agreement import alpha, alpha_interval, cohen_kappa
from gate.review.ledger import FinalLabel, LedgerLine, active_lines, final_labels
from gate.review.queue import ABSTAIN, Queue

LOW_AGREEMENT = "people do not agree on this boundary: fix the rubric before any judge is measured on these labels"
# Below this many items with two labels or more, the bootstrap interval is too narrow (it held the
# true alpha in 47-93% of samples of 20 items instead of 95%; from 50 items on, 85-97%).
FEW_ITEMS = 50
FEW_ITEMS_NOTE = f"fewer than {FEW_ITEMS} items labelled twice: the interval is too narrow, read it as optimistic"
NO_SLICE = "(no slice)"


@dataclass(frozen=True)
class SliceStatus:
    slice: str
    items: int
    done: int  # items with K independent labels (or settled by an adjudicator)
    unanimous: int
    adjudicated: int
    abstained: int  # items whose final label is `abstain`
    abstentions: int  # `abstain` labels given
    awaiting_adjudication: int
    reviewers: tuple[str, ...]
    alpha: float | None
    interval: tuple[float, float] | None
    kappa: float | None
    min_alpha: float
    pairable: int = 0  # items with two or more labels that are not abstentions: what alpha rests on
    beyond_k: int = 0  # items with more than K independent labels (labelled apart, or imported): all count

    @property
    def unanimous_share(self) -> float | None:
        labelled = self.unanimous + self.awaiting_adjudication + self.adjudicated + self.abstained
        return self.unanimous / labelled if labelled else None

    @property
    def low_agreement(self) -> bool:
        """Alpha known and below the policy's least: the slice's labels are not used."""
        return self.alpha is not None and self.alpha < self.min_alpha

    def to_dict(self) -> dict[str, Any]:
        return {
            "slice": self.slice,
            "items": self.items,
            "done": self.done,
            "unanimous": self.unanimous,
            "unanimous_share": self.unanimous_share,
            "adjudicated": self.adjudicated,
            "abstained": self.abstained,
            "abstentions": self.abstentions,
            "awaiting_adjudication": self.awaiting_adjudication,
            "beyond_k": self.beyond_k,
            "reviewers": list(self.reviewers),
            "alpha": self.alpha,
            "alpha_interval": list(self.interval) if self.interval is not None else None,
            "alpha_items": self.pairable,
            "alpha_interval_reliable": self.pairable >= FEW_ITEMS,
            "cohen_kappa": self.kappa,
            "min_alpha": self.min_alpha,
            "low_agreement": self.low_agreement,
            "message": LOW_AGREEMENT if self.low_agreement else None,
        }


def independent_labels(lines: Iterable[LedgerLine]) -> dict[str, dict[str, str]]:
    """item -> reviewer -> label: each reviewer's latest label no retraction withdrew (no adjudication)."""
    out: dict[str, dict[str, str]] = {}
    for line in active_lines(lines):
        if line.kind == "label":
            out.setdefault(line.item_id, {})[line.reviewer] = line.label
    return out


def _kappa(units: Mapping[str, Mapping[str, str]], item_ids: Sequence[str]) -> float | None:
    reviewers = {r for i in item_ids for r in units.get(i, {})}
    if len(reviewers) != 2 or not all(set(units.get(i, {})) == reviewers for i in item_ids):
        return None
    a, b = sorted(reviewers)
    pairs = [(units[i][a], units[i][b]) for i in item_ids if ABSTAIN not in (units[i][a], units[i][b])]
    return cohen_kappa(pairs)


def slice_status(
    queue: Queue, lines: Sequence[LedgerLine], k: int, min_alpha: float, finals: Mapping[str, FinalLabel] | None = None
) -> list[SliceStatus]:
    """Each slice's figures, in the order the queue names its slices."""
    finals = finals if finals is not None else final_labels(lines, queue, k)
    units = independent_labels(lines)
    out: list[SliceStatus] = []
    for name in queue.slices():
        ids = [i.item_id for i in queue.items if i.slice == name]
        statuses = [finals[i].status for i in ids]
        boundary = {i: {r: v for r, v in units.get(i, {}).items() if v != ABSTAIN} for i in ids}
        a = alpha(boundary)
        out.append(
            SliceStatus(
                slice=name or NO_SLICE,
                items=len(ids),
                done=sum(1 for s in statuses if s != "pending"),
                unanimous=statuses.count("unanimous"),
                adjudicated=statuses.count("adjudicated"),
                abstained=statuses.count("abstain"),
                abstentions=sum(1 for i in ids for v in units.get(i, {}).values() if v == ABSTAIN),
                awaiting_adjudication=statuses.count("disagreement"),
                reviewers=tuple(sorted({r for i in ids for r in units.get(i, {})})),
                alpha=a,
                interval=alpha_interval(boundary) if a is not None else None,
                kappa=_kappa(units, ids),
                min_alpha=min_alpha,
                pairable=sum(1 for labels in boundary.values() if len(labels) >= 2),
                beyond_k=sum(1 for i in ids if len(units.get(i, {})) > k),
            )
        )
    return out


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _alpha_note(row: SliceStatus) -> str:
    if row.alpha is not None:
        return "bootstrap 95%"
    return "no item has two labels yet" if row.pairable == 0 else "every label given is the same"


def status_text(rows: Sequence[SliceStatus], k: int) -> list[str]:
    """The figures for a person, one block per slice (names are queue text: the caller escapes lines)."""
    lines: list[str] = []
    for row in rows:
        share = row.unanimous_share
        interval = f" [{row.interval[0]:.3f}, {row.interval[1]:.3f}]" if row.interval is not None else ""
        lines += [
            f"slice {row.slice}: {plural(row.items, 'item')}, {row.done} with {plural(k, 'label')} or settled "
            f"({plural(len(row.reviewers), 'reviewer')})",
            f"  unanimous {row.unanimous}"
            + (f" ({share:.0%} of those labelled)" if share is not None else "")
            + f", adjudicated {row.adjudicated}, awaiting adjudication {row.awaiting_adjudication}, "
            f"final abstain {row.abstained} ({plural(row.abstentions, 'abstention')} given)",
            f"  Krippendorff's alpha {_figure(row.alpha)}{interval} ({_alpha_note(row)}), least {row.min_alpha:g}"
            + (f"; Cohen's kappa {_figure(row.kappa)}" if row.kappa is not None else ""),
        ]
        if row.beyond_k:
            lines.append(
                f"  {plural(row.beyond_k, 'item')} with more than {plural(k, 'label')} (labelled apart, "
                "or imported): every label counts, so all must agree or an adjudicator settles it"
            )
        if row.interval is not None and row.pairable < FEW_ITEMS:
            lines.append(f"  {FEW_ITEMS_NOTE}")
        if row.low_agreement:
            lines.append(f"  {LOW_AGREEMENT}")
    return lines
