"""Records are untrusted input: what a recorded judgment must satisfy before it counts as a verdict.

`gate decide`, `gate run --resume` and `gate merge` read records someone else wrote (or edited).
Every path into the decision applies the live path's rule (`gate.judge.outcome.read_label`): an
`ok` record counts only with an allowed label (after the policy's reviewed aliases), a
non-empty reason and evidence that a judge said it (an answered HTTP attempt or a cache hit), and
never with an error kind. Anything else becomes what the live path would
have recorded: an evaluator error (`invalid_label` / `parse_error`), never a pass or a fail.
The case file, not the record, is the answer key: a record's copy of the human label, control role,
slice and partition is replaced by the case's (and the disagreement is noted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gate.judge.outcome import read_label
from gate.model.cases import Case
from gate.model.policy import Metric
from gate.model.records import Record
from gate.model.wording import agree, plural

_MAX_IDS_SHOWN = 5


@dataclass(frozen=True)
class Vetted:
    records: list[Record]  # one per input record, in order: corrected, never dropped (cost counts)
    notes: list[str]


def verdict_problem(r: Record, metric: Metric) -> Record | None:
    """The errored record an `ok` record outside the contract becomes, or None when it is sound."""
    return verdict_problem_for(r, metric.allowed_values, metric.label_aliases)


def verdict_problem_for(r: Record, allowed: Sequence[str], aliases: Mapping[str, str]) -> Record | None:
    """`verdict_problem` against these allowed values and aliases (`gate compare` has no policy:
    it uses the allowed values the record carries)."""
    if r.status != "ok":
        return None
    if r.error_kind is not None:
        kind, message = "parse_error", f"status ok with error_kind {r.error_kind}: the record contradicts itself"
    elif not has_evidence(r):
        kind, message = "parse_error", "status ok with no answered HTTP attempt and no cache hit: nothing judged it"
    else:
        reading = read_label(r.judge_label, r.judge_reason, allowed, aliases, source="the record")
        if reading.error_kind is None:
            if reading.label != r.judge_label:  # a reviewed alias: the verdict is its allowed value
                return r.model_copy(update={"judge_label": reading.label})
            return None
        kind, message = reading.error_kind, reading.message or "not a verdict"
    return r.model_copy(
        update={
            "status": "error",
            "error_kind": kind,
            "error_message": f"recorded judgment outside the contract: {message}",
            "judge_label": None,
        }
    )


def has_evidence(r: Record) -> bool:
    """A verdict comes from a judge: a successful HTTP answer, or a cache hit of one.

    Every records schema the gate ever wrote (docs/SCHEMA.md: all version 1) lists the attempts of
    a paid judgment and marks a served one `cache: hit`, so this holds for every old file too.
    """
    return r.cache == "hit" or any(a.status_code is not None and 200 <= a.status_code < 300 for a in r.attempts)


def vet_record(r: Record, metric: Metric, case: Case | None) -> Record:
    """`r` as evidence for this policy and case file: answer key from the case, verdict checked."""
    if case is not None:
        key = {
            "human_label": case.human_label,
            "control_role": case.expected_control_role,
            "slice": case.slice,
            "partition": case.partition,
        }
        if any(getattr(r, k) != v for k, v in key.items()):
            r = r.model_copy(update=key)
    fixed = verdict_problem(r, metric)
    return r if fixed is None else fixed


def vet_records(records: Sequence[Record], metric: Metric, cases: Mapping[str, Case], repeats: int) -> Vetted:
    vetting = Vetting(metric, repeats)
    out = [vetting.add(r, cases.get(r.case_id)) for r in records]
    return Vetted(out, vetting.notes())


class Vetting:
    """`vet_record` over records one at a time (`add`), counting what the notes say about them
    (`notes`): only the ids of records with a problem are kept, never the records."""

    def __init__(self, metric: Metric, repeats: int) -> None:
        self.metric, self.repeats = metric, repeats
        # case ids (first seen first) with how many records of each kind
        self.rejudged = _Ids()
        self.errors = _Ids()
        self.relabelled = _Ids()
        self.out_of_range = _Ids()

    def add(self, r: Record, case: Case | None) -> Record:
        """`r` as evidence for this policy and its case (None: not in the case file)."""
        if case is not None and (r.human_label != case.human_label or r.control_role != case.expected_control_role):
            self.relabelled.add(r.case_id)
        if not 0 <= r.repeat_index < self.repeats:
            self.out_of_range.add(r.case_id)
        if r.cache == "rejudged":
            self.rejudged.add(r.case_id)
        v = vet_record(r, self.metric, case)
        if v.status != r.status:
            self.errors.add(r.case_id)
        return v

    def notes(self) -> list[str]:
        notes: list[str] = []
        rejudged, errors, relabelled, out_of_range = self.rejudged, self.errors, self.relabelled, self.out_of_range
        if rejudged:
            notes.append(
                f"{len(rejudged)} cache entr{'y' if len(rejudged) == 1 else 'ies'} failed vetting (a label not allowed, "
                f"no reason): judged again (paid) and overwritten, never served: {rejudged.shown()}"
            )
        if errors:
            notes.append(
                f"{plural(len(errors), 'recorded judgment')} outside the contract (a label not allowed, no reason, no "
                f"answered attempt or cache hit, a contradiction) count as evaluator errors: {errors.shown()}"
            )
        if relabelled:
            notes.append(
                f"{plural(len(relabelled), 'record')} {agree(len(relabelled), 'carries', 'carry')} a human label or control role that differs from the case file "
                f"({relabelled.shown()}); the case file is the answer key"
            )
        if out_of_range:
            notes.append(
                f"{plural(len(out_of_range), 'record')} {agree(len(out_of_range), 'has', 'have')} a repeat_index outside 0..{self.repeats - 1} ({out_of_range.shown()}); "
                "they are not evidence for this policy"
            )
        return notes


class _Ids:
    """Records with one problem: how many, and their case ids once each, first seen first."""

    def __init__(self) -> None:
        self.count = 0
        self.unique: dict[str, None] = {}

    def add(self, case_id: str) -> None:
        self.count += 1
        self.unique.setdefault(case_id)

    def __len__(self) -> int:
        return self.count

    def shown(self) -> str:
        return _ids(list(self.unique))


def _ids(ids: Sequence[str]) -> str:
    unique = list(dict.fromkeys(ids))
    shown = ", ".join(unique[:_MAX_IDS_SHOWN])
    return shown + (f" and {len(unique) - _MAX_IDS_SHOWN} more" if len(unique) > _MAX_IDS_SHOWN else "")
