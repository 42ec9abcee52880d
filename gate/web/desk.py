"""The review desk: which item a reviewer sees next, and every act they make, written to the ledger.

No HTTP here: the page's views (gate.web.app) read a request, call one method, and render what it
returns. Every act is one ledger line, appended (locked, flushed, fsynced) before the method
returns, under one lock, so two tabs or two reviewers never interleave and a confirmed act is on
disk. What the desk hands a reviewer is the item's question, evidence and answer: never anything
of the judge (a queue holds none), never the stratum an audit drew it from (it would say what the
judge decided), never another reviewer's label or how many labels an item has.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gate.model.escape import NAME_RULE, is_name, visible
from gate.model.paths import from_working_directory
from gate.review.ledger import LedgerLine, append_line, final_labels, ledger_files, read_ledger
from gate.review.queue import ABSTAIN, Queue, QueueItem

MAX_REASON_CHARS = 4000
ADJUDICATIONS_SHOWN = 200  # the /adjudicate list's first N (the rest after these are settled)
UNDO_REASON = "withdrawn with undo on the review page"


class Refused(Exception):
    """An act the desk refuses: the page shows `message`; `status` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _order(reviewer: str, n: int) -> list[int]:
    """The reviewer's own order of the queue: a permutation seeded by their name alone."""
    seed = int.from_bytes(hashlib.sha256(f"gate review order\0{reviewer}".encode()).digest()[:8], "big")
    order: list[int] = np.random.default_rng(seed).permutation(n).tolist()
    return order


def item_view(item: QueueItem) -> dict[str, Any]:
    """What a reviewer is shown of an item: its question, evidence text and ids, and the answer."""
    return {
        "item_id": item.item_id,
        "slice": item.slice,
        "user_input": item.user_input,
        "reference": item.reference,
        "evidence": list(item.evidence),
        "response": item.response,
    }


def line_view(line: LedgerLine) -> dict[str, Any]:
    return {
        "reviewer": line.reviewer,
        "label": line.label,
        "reason": line.reason,
        "evidence": list(line.evidence),
        "at": line.at,
    }


@dataclass(frozen=True)
class Act:
    """What a reviewer or an adjudicator sends: the item, the label, the reason, the evidence ids."""

    person: str
    item_id: str
    label: str
    reason: str
    evidence: tuple[str, ...]


def _signature(ledger: Path) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in ledger_files(ledger):
        try:
            st = from_working_directory(path).stat()
        except OSError:
            continue
        out.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(out)


class Desk:
    """The queue, the ledger and what the page needs of them, kept in memory and on disk together."""

    def __init__(self, queue: Queue, ledger: Path, k: int = 2, *, allow_self_adjudication: bool = False) -> None:
        self.queue = queue
        self.ledger = ledger
        self.k = k
        self.allow_self_adjudication = allow_self_adjudication
        self._lock = threading.Lock()
        self._index = {item.item_id: i for i, item in enumerate(queue.items)}
        self._orders: dict[str, list[int]] = {}
        self._cursor: dict[str, int] = {}
        self._load(read_ledger(ledger, queue, missing_ok=True))

    # -- the ledger in memory --------------------------------------------------------------

    def _load(self, lines: Sequence[LedgerLine]) -> None:
        self._lines: list[LedgerLine] = []
        self._by_sha: dict[str, LedgerLine] = {}
        self._labels: dict[str, list[LedgerLine]] = {}  # item -> its active labels, in ledger order
        self._adjudicated: dict[str, LedgerLine] = {}
        for line in lines:
            self._apply(line)
        self._cursor.clear()
        self._seen = _signature(self.ledger)

    def _apply(self, line: LedgerLine) -> None:
        self._lines.append(line)
        self._by_sha[line.line_sha256] = line
        if line.kind == "label":
            self._labels.setdefault(line.item_id, []).append(line)
        elif line.kind == "adjudication":
            self._adjudicated[line.item_id] = line
        else:
            target = self._by_sha.get(line.retracts or "")
            if target is not None and target.kind == "label":
                self._labels[target.item_id] = [x for x in self._labels.get(target.item_id, []) if x is not target]
            elif target is not None and self._adjudicated.get(target.item_id) is target:
                earlier = [x for x in self._lines if x.kind == "adjudication" and x.item_id == target.item_id]
                still = [x for x in earlier if x is not target and not self._retracted(x)]
                if still:
                    self._adjudicated[target.item_id] = still[-1]
                else:
                    del self._adjudicated[target.item_id]
            self._cursor.clear()  # an item withdrawn is open again: every order is read from its start

    def _retracted(self, line: LedgerLine) -> bool:
        return any(x.retracts == line.line_sha256 for x in self._lines)

    def _fresh(self) -> None:
        """Lines another process appended (a second server on a ledger directory, an import) are read in."""
        if _signature(self.ledger) != self._seen:
            self._load(read_ledger(self.ledger, self.queue, missing_ok=True))

    def _append(self, fields: Mapping[str, object]) -> LedgerLine:
        line = append_line(self.ledger, fields)
        self._apply(line)
        self._seen = _signature(self.ledger)
        return line

    def _base(self, item: QueueItem) -> dict[str, object]:
        return {
            "item_id": item.item_id,
            "case_id": item.case_id,
            "response_sha256": item.response_sha256,
            "queue_sha256": self.queue.sha256,
            "rubric_version": self.queue.header.rubric_version,
            "blind": True,
        }

    # -- checks ----------------------------------------------------------------------------

    @staticmethod
    def check_name(name: object, role: str = "reviewer") -> str:
        if not is_name(name):
            raise Refused(400, f"the {role}'s name must be {NAME_RULE}: give it once on the page")
        assert isinstance(name, str)
        return name

    def _item(self, item_id: object) -> QueueItem:
        item = self.queue.by_id.get(item_id) if isinstance(item_id, str) else None
        if item is None:
            raise Refused(404, f"item {visible(item_id, 24)} is not in this queue")
        return item

    def _check_act(self, act: Act) -> QueueItem:
        item = self._item(act.item_id)
        labels = self.queue.header.labels
        if act.label not in labels:
            raise Refused(400, f"label {visible(act.label, 40)} is not one of {', '.join(labels)}")
        if not act.reason.strip():
            raise Refused(400, "say why: every label needs a reason")
        if len(act.reason) > MAX_REASON_CHARS:
            raise Refused(400, f"the reason is longer than {MAX_REASON_CHARS} characters: say it shorter")
        unknown = [e for e in act.evidence if e not in item.evidence]
        if unknown:
            raise Refused(400, f"evidence {visible(unknown[0], 40)} is not one of this item's evidence ids")
        return item

    def _reviewers(self, item_id: str) -> set[str]:
        return {line.reviewer for line in self._labels.get(item_id, ())}

    # -- the reviewer's page ---------------------------------------------------------------

    def _open_for(self, reviewer: str, index: int) -> bool:
        item_id = self.queue.items[index].item_id
        if item_id in self._adjudicated:
            return False
        reviewers = self._reviewers(item_id)
        return reviewer not in reviewers and len(reviewers) < self.k

    def next_item(self, reviewer: str) -> dict[str, Any]:
        """The first item of the reviewer's own order they have not labelled and that lacks its K labels."""
        self.check_name(reviewer)
        with self._lock:
            self._fresh()
            order = self._orders.get(reviewer)
            if order is None:
                order = self._orders[reviewer] = _order(reviewer, len(self.queue.items))
            at = self._cursor.get(reviewer, 0)
            while at < len(order) and not self._open_for(reviewer, order[at]):
                at += 1
            self._cursor[reviewer] = at
            done = at >= len(order)
            return {
                "item": None if done else item_view(self.queue.items[order[at]]),
                "position": at,
                "total": len(order),
            }

    def label(self, act: Act) -> LedgerLine:
        """Append the reviewer's label (fsynced before it returns). A second label of one item by one
        reviewer is refused, and so is a label past the item's K (it got them while this reviewer read it)."""
        self.check_name(act.person)
        with self._lock:
            self._fresh()
            item = self._check_act(act)
            if act.person in self._reviewers(item.item_id):
                raise Refused(409, "you labelled this item already (in another tab?): undo that label to change it")
            if item.item_id in self._adjudicated:
                raise Refused(409, "this item was settled while you read it: here is the next one")
            if len(self._reviewers(item.item_id)) >= self.k:
                raise Refused(
                    409,
                    f"this item got its {self.k} labels from others while you read it (your label was not "
                    "recorded): here is the next one",
                )
            fields = {**self._base(item), "kind": "label", "reviewer": act.person, "label": act.label,
                      "reason": act.reason, "evidence": list(act.evidence)}  # fmt: skip
            return self._append(fields)

    def undo(self, reviewer: str, line_sha256: str | None = None) -> tuple[LedgerLine, dict[str, Any]]:
        """Append a retraction of the reviewer's latest label (or the one named); returns it and the item."""
        self.check_name(reviewer)
        with self._lock:
            self._fresh()
            withdrawn = {x.retracts for x in self._lines if x.retracts}
            own = [
                x
                for x in self._lines
                if x.reviewer == reviewer and x.kind != "retraction" and x.line_sha256 not in withdrawn
            ]
            if line_sha256 is not None:
                own = [x for x in own if x.line_sha256 == line_sha256]
            if not own:
                raise Refused(409, "nothing of yours to undo")
            target = own[-1]
            item = self._item(target.item_id)
            fields = {**self._base(item), "kind": "retraction", "reviewer": reviewer, "label": target.label,
                      "reason": UNDO_REASON, "retracts": target.line_sha256}  # fmt: skip
            return self._append(fields), item_view(item)

    # -- adjudication ----------------------------------------------------------------------

    def _awaiting(self) -> list[str]:
        finals = final_labels(self._lines, None, self.k)
        return [
            item_id
            for item_id in sorted(finals, key=lambda i: self._index.get(i, 0))
            if finals[item_id].status in ("disagreement", "abstain") and finals[item_id].adjudicator is None
        ]

    def disagreements(self, adjudicator: str) -> dict[str, Any]:
        """The items whose K labels disagree or all abstain, each with every original label and reason."""
        self.check_name(adjudicator, "adjudicator")
        with self._lock:
            self._fresh()
            awaiting = self._awaiting()
            shown = []
            for item_id in awaiting[:ADJUDICATIONS_SHOWN]:
                labels = self._labels.get(item_id, [])
                own = any(line.reviewer == adjudicator for line in labels)
                shown.append(
                    {
                        **item_view(self.queue.by_id[item_id]),
                        "labels": [line_view(line) for line in labels],
                        "you_labelled": own,
                        "may_settle": not own or self.allow_self_adjudication,
                    }
                )
            return {"items": shown, "awaiting": len(awaiting)}

    def adjudicate(self, act: Act) -> LedgerLine:
        """Append the adjudicator's label of an item awaiting adjudication (never one they labelled,
        unless --allow-self-adjudication, which the line records)."""
        self.check_name(act.person, "adjudicator")
        with self._lock:
            self._fresh()
            item = self._check_act(act)
            if item.item_id not in self._awaiting():
                raise Refused(409, "this item is not awaiting adjudication (settled already, or its labels agree)")
            own = act.person in self._reviewers(item.item_id)
            if own and not self.allow_self_adjudication:
                raise Refused(
                    403,
                    "you labelled this item, so another person adjudicates it "
                    "(`gate review serve --allow-self-adjudication` permits it, and the ledger records it)",
                )
            fields = {**self._base(item), "kind": "adjudication", "reviewer": act.person, "label": act.label,
                      "reason": act.reason, "evidence": list(act.evidence), "self_adjudication": own}  # fmt: skip
            return self._append(fields)

    # -- progress --------------------------------------------------------------------------

    def status(self, reviewer: str | None) -> dict[str, Any]:
        """Progress without anything an item's labels say: the queue, what is left, what awaits adjudication."""
        with self._lock:
            self._fresh()
            items = self.queue.items
            full = sum(
                1 for item in items if len(self._reviewers(item.item_id)) >= self.k or item.item_id in self._adjudicated
            )
            out: dict[str, Any] = {
                "policy_id": self.queue.header.policy_id,
                "rubric_version": self.queue.header.rubric_version,
                "labels": list(self.queue.header.labels),
                "reviewers_per_item": self.k,
                "items": len(items),
                "items_with_their_labels": full,
                "awaiting_adjudication": len(self._awaiting()),
            }
            if reviewer is not None:
                self.check_name(reviewer)
                mine = sum(1 for lines in self._labels.values() if any(x.reviewer == reviewer for x in lines))
                left = sum(1 for i in range(len(items)) if self._open_for(reviewer, i))
                out["you"] = {"reviewer": reviewer, "labelled": mine, "left": left}
            return out


__all__ = ["ABSTAIN", "Act", "Desk", "Refused"]
