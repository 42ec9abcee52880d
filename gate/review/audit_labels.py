"""People's audit of a product run, read for the decision: the ledger's final labels and the draw.

`--audit LEDGER` (or `lanes.<lane>.audit`) names the ledger people appended to while labelling the
run's audit queue (`gate review queue --from OUT`); `--audit-queue QUEUE` names that queue, whose
items say each answer's stratum and place in the draw. Without it the draw is rebuilt: each stratum
of the run in the default seed's order (the run's responses_sha256), which is the order the queue
cuts. The ledger, the queue and the labels are untrusted: a line that does not parse, or names no
item of the queue, is a usage error naming the file and line (gate/review/ledger.py).

What reaches the decision (`AuditEvidence`): per answer, named by its case id and the sha256 of the
response people saw, people's final label; the draw order of each stratum. The decision keeps only
labels on answers the run judged (gate/decide/product/audit.py) and lists the others in a note.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gate.estimate import audit_rate as ar
from gate.estimate.audit_rate import Final
from gate.model.errors import UsageError
from gate.model.paths import shown_path
from gate.model.wording import agree, plural
from gate.review.draw import STRATA, draw_order
from gate.review.ledger import LedgerLine, final_labels, read_ledger
from gate.review.queue import Queue, read_queue


@dataclass(frozen=True)
class AuditEvidence:
    """People's final labels on the audit queue of a product run, as the decision reads them."""

    source: str  # the ledger, as shown to people
    # (case_id, response_sha256) -> people's final label, for the answers in the draw only.
    labels: Mapping[tuple[str, str], ar.Final]
    # (slice, stratum, case ids) -> the stratum's draw order (the queue's, or the default seed's).
    order: ar.Orderer
    notes: tuple[str, ...] = field(default=())


def _queue_order(
    order: Mapping[tuple[str, str], tuple[str, ...]], slice: str, stratum: str, case_ids: Sequence[str]
) -> list[str]:
    """The queue's draw of the stratum, restricted to the answers the run put in it."""
    wanted = set(case_ids)
    return [c for c in order.get((slice, stratum), ()) if c in wanted]


def _finals(lines: Sequence[LedgerLine], queue: Queue | None, reviewers: int) -> dict[tuple[str, str], Final]:
    """People's final label per answer (case id, response sha256): pass or fail when `reviewers`
    people agree or an adjudicator settled it; `open` for a final abstention or another label. Items
    still pending (fewer labels than the policy's `review.reviewers_per_item`) or in disagreement are
    left out: inside the audited prefix they count against the verdict anyway."""
    key_of = {line.item_id: (line.case_id, line.response_sha256) for line in lines if line.case_id is not None}
    out: dict[tuple[str, str], Final] = {}
    for item, final in final_labels(lines, queue, reviewers).items():
        key = key_of.get(item)
        if key is None or key[0] is None or final.status in ("pending", "disagreement"):
            continue
        label = final.label
        out[(key[0], key[1])] = label if final.final and label in ("pass", "fail") else "open"  # type: ignore[assignment]
    return out


def read_audit(
    ledger: Path,
    queue_path: Path | None,
    *,
    seed: str,
    answers: Mapping[str, str],
    reviewers: int,
) -> AuditEvidence:
    """The audit's evidence. `answers`: case id -> sha256 of the response this run judges (or
    judged); `seed`: the default draw's seed (the run's responses_sha256); `reviewers`: the labels
    that settle an answer (the policy's `review.reviewers_per_item`, as `gate review` counts them)."""
    queue = read_queue(queue_path) if queue_path is not None else None
    lines = read_ledger(ledger, queue)
    labels = _finals(lines, queue, reviewers)
    notes: list[str] = []
    if queue is not None:
        drawn: dict[tuple[str, str], list[tuple[int, str]]] = {}
        in_draw: set[tuple[str, str]] = set()
        for item in queue.items:
            if item.case_id is None or item.slice is None or item.stratum not in STRATA or item.draw is None:
                continue
            drawn.setdefault((item.slice, item.stratum), []).append((item.draw, item.case_id))
            in_draw.add((item.case_id, item.response_sha256))
        outside = [k for k in labels if k not in in_draw]
        if outside:
            notes.append(
                f"{plural(len(outside), 'label')} of {shown_path(ledger)} {agree(len(outside), 'is', 'are')} on "
                f"items outside the draw of {shown_path(queue.path)} ({', '.join(c for c, _ in outside[:5])}); not used"
            )
            labels = {k: v for k, v in labels.items() if k in in_draw}
        order = {key: tuple(c for _, c in sorted(found)) for key, found in drawn.items()}
        orderer = functools.partial(_queue_order, order)
    else:
        if not seed:
            raise UsageError(
                f"{shown_path(ledger)}: the run's default audit draw is seeded by its answers' sha256, which is not "
                "known here; fix: pass --responses with the answers the run judged, or --audit-queue with the queue "
                "the labels were made on"
            )
        if lines and not any(answers.get(line.case_id or "") == line.response_sha256 for line in lines):
            raise UsageError(
                f"{shown_path(ledger)}: no label of this ledger is on an answer this run judges, so none lies in the "
                "run's default audit draw; fix: pass --audit-queue with the queue these labels were made on "
                "(`gate review queue --from OUT`), or the ledger of this run's audit"
            )
        orderer = functools.partial(draw_order, seed)
    return AuditEvidence(
        source=shown_path(ledger),
        labels=labels,
        order=orderer,
        notes=tuple(notes),
    )
