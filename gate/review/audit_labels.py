"""People's audit of a product run, read for the decision: each item's final label, and the queue.

`--audit LEDGER` (or `lanes.<lane>.audit`) names the ledger people appended to while labelling the
run's audit queue (`gate review queue --from OUT`); `--audit-queue QUEUE` names that queue. Which
answers count is the run's own audit plan (gate/decide/product/audit_plan.py, drawn from the run's
order seed), never the queue's: a given queue is only checked against the plan, and refused when it
is another draw. The ledger, the queue and the labels are untrusted: a line that does not parse,
names no item of the queue, or a rubric the policy no longer has is a usage error naming the file
and line (gate/review/ledger.py).

A label is known by its item and rubric (`LabelKey`): the item is the sha256 of the case id, the
question, the evidence text and the answer people saw (`gate.review.queue.item_id`), so a label
given under other evidence, another question or another rubric is on another item, whichever answer
it names. What reaches the decision (`AuditEvidence`): per item people labelled, their final label
and each reviewer's own, the queues the labels were made in; the queue given, if any; and the
rubric the policy gates under. The decision looks up the item of each answer it judged
(`AuditEvidence.label_on`) and lists every other label in a note (gate/decide/product/audit.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from gate.estimate import audit_rate as ar
from gate.model.cases import Case
from gate.model.paths import shown_path
from gate.review.ledger import EMPTY_SHA256, LedgerLine, final_labels, ledger_files, read_ledger
from gate.review.queue import Queue, answer_item_id, read_queue
from gate.review.status import independent_labels


class LabelKey(NamedTuple):
    """A label's identity: the item people saw (case id, question, evidence text, answer) under a rubric."""

    item_id: str
    rubric_version: str


@dataclass(frozen=True)
class AuditLabel:
    """What people said of one item, as the audit reads it."""

    case_id: str | None
    response_sha256: str  # the answer people saw
    # pass or fail: K reviewers agree, or an adjudicator settled it; open: a final abstention or another
    # label; None: not settled yet (fewer than K labels, or awaiting adjudication).
    final: ar.Final | None
    reviewers: Mapping[str, str]  # reviewer -> their own latest label (abstain included), no adjudication
    queues: tuple[str, ...]  # the queue_sha256 of every line the label rests on, in ledger order
    blind: bool  # every line it rests on was made blind


class LedgerFile(NamedTuple):
    """One file of the ledger as the audit read it: what a reader can compare with git's copy (the chain
    anchors every line but the last, which only the file's history can)."""

    path: str  # as shown to people
    lines: int
    last_line_sha256: str  # EMPTY_SHA256 for an empty file


@dataclass(frozen=True)
class AuditEvidence:
    """People's labels on the items of a ledger, as the decision of a product run reads them."""

    source: str  # the ledger, as shown to people
    rubric_version: str  # the rubric the policy gates under: only labels under it are this run's
    labels: Mapping[LabelKey, AuditLabel]  # every item people labelled
    notes: tuple[str, ...] = field(default=())
    files: tuple[LedgerFile, ...] = ()  # each file of the ledger: its lines and last line's sha256
    queue: Queue | None = None  # `--audit-queue`: checked against the run's audit plan

    def key_of(self, case: Case, response_sha256: str) -> LabelKey:
        """The identity of the item a case's answer is, under the rubric the policy gates with."""
        return LabelKey(answer_item_id(case, response_sha256), self.rubric_version)

    def label_on(self, case: Case, response_sha256: str) -> AuditLabel | None:
        """People's label on this very item (the case's question and evidence, this answer, this rubric)."""
        return self.labels.get(self.key_of(case, response_sha256))


def _final(status: str, label: str | None) -> ar.Final | None:
    if status in ("pending", "disagreement"):
        return None
    return label if status in ("unanimous", "adjudicated") and label in ("pass", "fail") else "open"  # type: ignore[return-value]


def audit_labels(lines: Sequence[LedgerLine], reviewers: int) -> dict[LabelKey, AuditLabel]:
    """Each item's label per rubric: settled when `reviewers` people agree or an adjudicator decided
    (the policy's `review.reviewers_per_item`, as `gate review` counts them). Labels under two rubrics
    are two labels: people judged against different rules."""
    by_rubric: dict[str, list[LedgerLine]] = {}
    for line in lines:
        by_rubric.setdefault(line.rubric_version, []).append(line)
    out: dict[LabelKey, AuditLabel] = {}
    for rubric, group in by_rubric.items():
        first = {line.item_id: line for line in reversed(group)}
        by_sha = {line.line_sha256: line for line in group}
        own = independent_labels(group)
        for item, final in final_labels(group, None, reviewers).items():
            named = first[item]
            out[LabelKey(item, rubric)] = AuditLabel(
                case_id=named.case_id,
                response_sha256=named.response_sha256,
                final=_final(final.status, final.label),
                reviewers=own.get(item, {}),
                queues=tuple(dict.fromkeys(by_sha[s].queue_sha256 for s in final.lines if s in by_sha)),
                blind=final.blind,
            )
    return out


def read_audit(
    ledger: Path,
    queue_path: Path | None,
    *,
    rubrics: Sequence[str],
    reviewers: int,
) -> AuditEvidence:
    """The audit's evidence. `rubrics`: the policy's, the last the one it gates under (a line under a
    rubric the policy no longer has is a usage error); `reviewers`: the labels that settle an item
    (`review.reviewers_per_item`)."""
    queue = read_queue(queue_path) if queue_path is not None else None
    lines = read_ledger(ledger, queue, rubrics=rubrics)
    return AuditEvidence(
        source=shown_path(ledger),
        rubric_version=rubrics[-1],
        labels=audit_labels(lines, reviewers),
        files=_files_read(ledger, lines),
        queue=queue,
    )


def no_ledger_yet(ledger: Path, named_by: str, rubrics: Sequence[str]) -> AuditEvidence:
    """The audit of a run whose policy names a ledger that does not exist yet (nobody has labelled this
    lane's answers): no label, said in a note; the run decides as it would without an audit."""
    note = (
        f"{named_by} names the review ledger {shown_path(ledger)}, which does not exist yet: no label of people "
        "decides anything here; people label this run's answers from `gate review queue --from` this run's "
        f"output directory, with `gate review serve QUEUE --ledger {shown_path(ledger)}`"
    )
    return AuditEvidence(
        source=shown_path(ledger),
        rubric_version=rubrics[-1],
        labels={},
        notes=(note,),
    )


def _files_read(ledger: Path, lines: Sequence[LedgerLine]) -> tuple[LedgerFile, ...]:
    last: dict[Path, LedgerLine] = {}
    count: dict[Path, int] = {}
    for line in lines:
        last[line.file] = line
        count[line.file] = count.get(line.file, 0) + 1
    return tuple(
        LedgerFile(shown_path(path), count.get(path, 0), last[path].line_sha256 if path in last else EMPTY_SHA256)
        for path in ledger_files(ledger)
    )
