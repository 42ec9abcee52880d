"""The review desk: which item a reviewer sees next, and every act they make, written to the ledger.

No HTTP here: the page's views (gate.web.app) read a request, call one method, and render what it
returns. Every act is one ledger line, appended (locked, flushed, fsynced) before the method
returns, under one lock, so two tabs or two reviewers never interleave and a confirmed act is on
disk. What the desk hands a reviewer is the item's question, evidence and answer: never anything
of the judge (a queue holds none), never the stratum an audit drew it from (it would say what the
judge decided), never another reviewer's label or how many labels an item has.

Blind until final: nothing the desk answers a person moves with another person's label of an item
they labelled, and an item's labels are shown (to adjudicators who did not label it) only once it
has its K labels, from when no label of it can be undone. A line written after its author could
have seen the others' labels (a self-adjudication, a label of an item that once had its K) says
`blind: false`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
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
        self._completed = completed_items(lines, self.k)
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
        if len(self._reviewers(line.item_id)) >= self.k or line.item_id in self._adjudicated:
            self._completed.add(line.item_id)
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
            # an item that once had its K labels had them shown on /adjudicate: a label now is not blind
            fields = {**self._base(item), "kind": "label", "reviewer": act.person, "label": act.label,
                      "reason": act.reason, "evidence": list(act.evidence),
                      "blind": item.item_id not in self._completed}  # fmt: skip
            return self._append(fields)

    def undo(self, reviewer: str, line_sha256: str | None = None) -> tuple[LedgerLine, dict[str, Any]]:
        """Append a retraction of the reviewer's own latest label (or the label named); returns it and
        the item. Never an adjudication, never another person's line, and never once the item has (or
        had) its K labels: from then on its labels may be shown to adjudicators."""
        self.check_name(reviewer)
        with self._lock:
            self._fresh()
            standing = {x.line_sha256 for lines in self._labels.values() for x in lines if x.reviewer == reviewer}
            own = [x for x in self._lines if x.line_sha256 in standing]  # in the order written
            if line_sha256 is not None:
                own = [x for x in own if x.line_sha256 == line_sha256]
                if not own:
                    raise Refused(409, "that line is no label of yours still standing: nothing was withdrawn")
            if not own:
                raise Refused(409, "you have no label to undo (undo withdraws labels only, never an adjudication)")
            target = own[-1]
            item = self._item(target.item_id)
            if target.item_id in self._completed:
                raise Refused(
                    409,
                    f"your last label ({target.label}) stands: its item has its {self.k} labels, so no label of it "
                    "can be undone any more (if the labels differ, an adjudicator settles it)",
                )
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

    def _may_see(self, adjudicator: str, item_id: str) -> bool:
        return self.allow_self_adjudication or adjudicator not in self._reviewers(item_id)

    def disagreements(self, adjudicator: str) -> dict[str, Any]:
        """The items whose K labels disagree or all abstain, each with every original label and reason;
        never an item the adjudicator labelled (unless --allow-self-adjudication), nor a count of them."""
        self.check_name(adjudicator, "adjudicator")
        with self._lock:
            self._fresh()
            awaiting = [item_id for item_id in self._awaiting() if self._may_see(adjudicator, item_id)]
            shown = []
            for item_id in awaiting[:ADJUDICATIONS_SHOWN]:
                labels = self._labels.get(item_id, [])
                shown.append(
                    {
                        **item_view(self.queue.by_id[item_id]),
                        "labels": [line_view(line) for line in labels],
                        "you_labelled": any(line.reviewer == adjudicator for line in labels),
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
            # before any word on the item's state: the answer to someone who labelled it never says it
            if not self._may_see(act.person, item.item_id):
                raise Refused(
                    403,
                    "you labelled this item, so another person adjudicates it "
                    "(`gate review serve --allow-self-adjudication` permits it, and the ledger records it)",
                )
            if item.item_id not in self._awaiting():
                raise Refused(
                    409, "this item is not awaiting adjudication (its labels are not all in, agree, or are settled)"
                )
            own = act.person in self._reviewers(item.item_id)
            # a self-adjudication is made after reading the others' labels: not blind
            fields = {**self._base(item), "kind": "adjudication", "reviewer": act.person, "label": act.label,
                      "reason": act.reason, "evidence": list(act.evidence), "self_adjudication": own,
                      "blind": not own}  # fmt: skip
            return self._append(fields)

    # -- progress --------------------------------------------------------------------------

    def status(self, reviewer: str | None) -> dict[str, Any]:
        """The queue and, for a reviewer, their own progress: no count another person's label moves
        (how many items have their labels, or await adjudication, is `gate review status`'s)."""
        with self._lock:
            self._fresh()
            items = self.queue.items
            out: dict[str, Any] = {
                "policy_id": self.queue.header.policy_id,
                "rubric_version": self.queue.header.rubric_version,
                "labels": list(self.queue.header.labels),
                "reviewers_per_item": self.k,
                "items": len(items),
            }
            if reviewer is not None:
                self.check_name(reviewer)
                mine = sum(1 for lines in self._labels.values() if any(x.reviewer == reviewer for x in lines))
                left = sum(1 for i in range(len(items)) if self._open_for(reviewer, i))
                out["you"] = {"reviewer": reviewer, "labelled": mine, "left": left}
            return out


def _written_at(at: str) -> float:
    """A line's time as a number (any ISO 8601 offset; without one, UTC). The page and the import
    write times that read; one that does not goes last."""
    try:
        when = dt.datetime.fromisoformat(at)
    except ValueError:
        return math.inf
    return (when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)).timestamp()


def completed_items(lines: Sequence[LedgerLine], k: int) -> set[str]:
    """The items that have, or once had, K labels standing at once (or an adjudication), replaying
    the lines in the order they were written (`at`; a directory's files are read one after another)."""
    withdrawn: set[str] = set()
    standing: dict[str, dict[str, str]] = {}  # item -> line_sha256 -> reviewer
    done: set[str] = set()
    for line in sorted(lines, key=lambda x: _written_at(x.at)):
        if line.kind == "retraction":
            withdrawn.add(line.retracts or "")
            standing.get(line.item_id, {}).pop(line.retracts or "", None)
        elif line.kind == "adjudication":
            done.add(line.item_id)
        elif line.line_sha256 not in withdrawn:
            labels = standing.setdefault(line.item_id, {})
            labels[line.line_sha256] = line.reviewer
            if len(set(labels.values())) >= k:
                done.add(line.item_id)
    return done


__all__ = ["ABSTAIN", "Act", "Desk", "Refused"]
