"""A product run's audit plan is sized once, when the run starts: what sizes it besides the answers travels with them.

A slice's plan (gate/decide/product/audit_plan.py) is sized from its answers and from four more things:
the slice's `max_failure_rate` and `audit_sized_at`, the lane's `confidence`, whether the slice is zero
tolerance (`max_failures`), and calibration's figures for the slice (Se and Sp). The answers come with the
records, but which of them are the slice's is the dataset's say; the rest was read from the policy and
calibration.json. All three can be edited between the run and the decide: another Se or another limit
sizes another prefix of the same seeded draw, chosen after the run, and so does a case moved to another
slice, withdrawn or added (another n and K); a team could try edits until a prefix passed. So the run
writes them on every answer's record (`audit_sizing`, with the order seed: the slice's case count and a
sha256 of its sorted case ids, the whole lane's whichever share a shard judges), and every path that
decides a run's records (`gate decide`, `gate merge`, `--resume`, a batch's collect, the crash path, the
Action's) checks that the policy, calibration and dataset it is given size each slice's plan the same,
and refuses (exit 2, naming the file, the field or the cases, the run's value and the given one) when
they would not. An edit the plan does not read (another slice, another key, other bytes of
calibration.json, a case outside the product lane) decides as before; a case whose question or answer
changed is a stale record, as it always was.

The records are untrusted too: answers of one slice that carry different sizings, or some that carry
one and some none, are an edited or mixed file, refused. Records that carry an order seed and no
sizing at all were written before runs recorded it: their plan is sized from what is given now, and
the result says so in a note, which is what a reviewer looks for; so are records whose sizing carries
no case set (a gate before it kept one), whose slices' cases are the dataset's given now.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gate.decide.product.verdict import ProductEvidence
from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy
from gate.model.records import AuditSizing, JudgeFigures, Record
from gate.model.wording import listed, plural
from gate.plan.selection import Plan


def slice_cases(lane_plan: Plan) -> dict[str, list[str]]:
    """The lane's cases of each slice, controls aside, in id order: the whole lane's (`lane_plan` before a
    shard's share is taken), so every shard of a run carries the same."""
    out: dict[str, list[str]] = {}
    for c in lane_plan.eligible:
        if not c.is_control:
            out.setdefault(c.slice, []).append(c.case_id)
    for ids in out.values():
        ids.sort()
    return out


def _ids_sha256(ids: Sequence[str]) -> str:
    """sha256 of the ids joined by newlines, hashed as they come (a large lane's are never joined in memory)."""
    h = hashlib.sha256()
    for i, case_id in enumerate(ids):
        h.update(f"\n{case_id}".encode() if i else case_id.encode())
    return h.hexdigest()


def sizing_of(loaded: LoadedPolicy, lane: str, pe: ProductEvidence, lane_plan: Plan) -> dict[str, AuditSizing]:
    """Per slice with a limit, what sizes its audit plan under this policy, calibration and dataset."""
    cases = slice_cases(lane_plan)
    out: dict[str, AuditSizing] = {}
    for name, spec in loaded.policy.slices.items():
        if spec.max_failure_rate is None:
            continue
        counts = pe.judges.get(name) if pe.calibrated else None
        figures = (
            JudgeFigures(
                true_fail=counts.true_fail,
                false_pass=counts.false_pass,
                true_pass=counts.true_pass,
                false_fail=counts.false_fail,
            )
            if counts is not None
            else None
        )
        out[name] = AuditSizing(
            max_failure_rate=spec.max_failure_rate,
            confidence=pe.confidence,
            zero_tolerance=spec.max_failures is not None,
            judge=figures,
            calibration_sha256=pe.calibration_sha256,
            cases=len(cases.get(name, ())),
            case_ids_sha256=_ids_sha256(cases.get(name, ())),
            audit_sized_at=spec.audit_sized_at,
        )
    return out


@dataclass(frozen=True)
class Sealed:
    """What a run's answers say sized each slice's plan."""

    sizing: Mapping[str, AuditSizing]  # per slice, as every answer of it carries it
    unsealed: bool = False  # the answers carry an order seed and no sizing: records of an older gate
    # The run's records (not copied), which name the cases that moved when a slice's case set differs.
    records: Sequence[Record] = field(default=(), compare=False, repr=False)

    @property
    def without_cases(self) -> bool:
        """The sizing carries no case set (records of a gate before it kept one)."""
        return any(s.case_ids_sha256 is None for s in self.sizing.values())

    def keeping(self, now: Mapping[str, AuditSizing]) -> dict[str, AuditSizing]:
        """The sizing a run that continues this one writes: the records' own where they carry one (an older
        gate's without a case set stays so: one slice's answers carry one sizing), what is given elsewhere."""
        return {**now, **self.sizing}


def sealed_sizing(records: Sequence[Record], lane: str, named: str = "the records given") -> Sealed:
    """The sizing the lane's seeded answers carry, per slice. A usage error when answers of one slice
    carry different ones, or some carry one and some none: an edited or mixed records file (`named`:
    the records as the message names them)."""
    found: dict[str, dict[AuditSizing, str]] = {}  # slice -> each sizing seen -> the first case carrying it
    bare: list[str] = []
    carried = 0
    for r in records:
        if r.lane != lane or r.order_seed is None:
            continue
        if r.audit_sizing is None:
            bare.append(r.case_id)
            continue
        carried += 1
        found.setdefault(r.slice, {}).setdefault(r.audit_sizing, r.case_id)
    if carried and bare:
        raise UsageError(
            f"{named}: {plural(len(bare), 'answer')} of lane {lane} ({_ids(bare)}) carry no audit sizing and "
            f"{plural(carried, 'answer')} do: the answers of one run all carry what sized its audit plan, so this "
            "is an edited file or the records of several runs; fix: decide the records as the run wrote them "
            "(its shards merged with `gate merge`)"
        )
    for name, seen in sorted(found.items()):
        if len(seen) > 1:
            (one, first), (other, second) = list(seen.items())[:2]
            raise UsageError(
                f"{named}: answers of slice {visible(name, 80)} carry different audit sizings ({visible(first, 60)}: "
                f"{_sizing_words(one)}; {visible(second, 60)}: {_sizing_words(other)}): one run sizes a slice's plan "
                "once, when it starts, so this is an edited file or the records of several runs; fix: decide the "
                "records as the run wrote them"
            )
    return Sealed({name: next(iter(seen)) for name, seen in found.items()}, unsealed=bool(bare), records=records)


def unsealed_note(lane: str) -> str:
    return (
        f"the answers of lane {lane} carry an order seed but not what sized its audit plan (records of an older "
        "gate): each slice's plan is sized from the policy and calibration given now, which may not be the run's; "
        "a run made now fixes them when it starts"
    )


def without_cases_note(lane: str) -> str:
    return (
        f"the answers of lane {lane} carry what sized its audit plan but not its slices' cases (records of an "
        "older gate): each slice's answers are the ones the dataset given now puts in it, which may not be the "
        "run's; a run made now fixes them when it starts"
    )


def refuse_resized(
    sealed: Sealed, loaded: LoadedPolicy, lane: str, pe: ProductEvidence, where: str, lane_plan: Plan
) -> None:
    """A usage error when the policy, calibration and dataset given would size a slice's plan otherwise than
    the run did (`where`: what carries the run's sizing: the records given, the records in --out, batch.json;
    `lane_plan`: the lane's plan before a shard's share is taken)."""
    now = sizing_of(loaded, lane, pe, lane_plan)
    calibration = (
        shown_path(loaded.resolve(loaded.policy.calibration.file))
        if loaded.policy.calibration is not None
        else "the calibration file"
    )
    policy = shown_path(loaded.path)
    differs: list[str] = []
    for name, run in sorted(sealed.sizing.items()):
        differs += _differences(name, run, now.get(name), policy, calibration, lane)
    moved = _moved(sealed, now, loaded, lane_plan, lane)
    differs = list(dict.fromkeys([*differs, *moved]))  # the lane's confidence is every slice's: said once
    if differs:
        inputs = "policy, calibration and dataset" if moved else "policy and calibration"
        raise UsageError(
            f"{where}: the run sized its audit plan when it started, and the {inputs} given now would size it "
            f"otherwise: {'; '.join(differs[:4])}{'; and more' if len(differs) > 4 else ''}. Decided under "
            "them, a slice's plan would be another prefix of the run's seeded draw, picked after the run; fix: "
            f"decide under the {inputs} the run was made with (restore them from the run's commit), "
            "or run the lane again, which draws a new order seed that its result shows"
        )


def _moved(
    sealed: Sealed, now: Mapping[str, AuditSizing], loaded: LoadedPolicy, lane_plan: Plan, lane: str
) -> list[str]:
    """Each slice whose cases in the dataset given are not the run's: 'slice critical has 59 cases in
    cases.jsonl, the run's had 60 (p-005 moved to slice general)'. The run's records name the cases that
    moved (the slice each was judged in); what no record names is said as such."""
    changed = [
        (name, run, now[name])
        for name, run in sorted(sealed.sizing.items())
        if run.case_ids_sha256 is not None and name in now and now[name].case_ids_sha256 != run.case_ids_sha256
    ]
    if not changed:
        return []
    files = ", ".join(shown_path(p) for p in loaded.case_paths)
    current = {c.case_id: c.slice for c in lane_plan.eligible if not c.is_control}
    recorded: dict[str, str] = {}
    for r in sealed.records:
        if r.lane == lane and r.order_seed is not None:
            recorded.setdefault(r.case_id, r.slice)
    out = []
    for name, run, given in changed:
        count = (
            f"has {plural(given.cases or 0, 'case')} in {files}, the run's had {run.cases}"
            if given.cases != run.cases
            else f"has other cases in {files} than the {plural(run.cases or 0, 'case')} the run's had"
        )
        moved = _which_moved(name, current, recorded, lane, (run.cases or 0, given.cases or 0))
        out.append(f"slice {visible(name, 80)} {count} ({moved})")
    return out


def _which_moved(
    name: str, current: Mapping[str, str], recorded: Mapping[str, str], lane: str, counts: tuple[int, int]
) -> str:
    """The cases of slice `name` that moved, as the run's records and the dataset given say, a few of each kind
    (`counts`: the slice's cases at the run and now). A case no record names is new to the slice, or one the run
    never got to: named when the counts say the slice gained that many."""
    if not recorded:  # a batch's collect: batch.json keeps the sizing, no record yet
        return "its case ids differ from the run's; the records do not say which moved"
    said: list[str] = []
    into = sorted(i for i, s in current.items() if s == name and i in recorded and recorded[i] != name)
    away = sorted(i for i, s in recorded.items() if s == name and i in current and current[i] != name)
    gone = sorted(i for i, s in recorded.items() if s == name and i not in current)
    unknown = sorted(i for i, s in current.items() if s == name and i not in recorded)
    said += [f"{visible(i, 60)} moved here from slice {visible(recorded[i], 80)}" for i in into[:3]]
    said += [f"{visible(i, 60)} moved to slice {visible(current[i], 80)}" for i in away[:3]]
    said += [f"{visible(i, 60)} is no longer in lane {lane}" for i in gone[:3]]
    added = counts[1] - counts[0] + len(gone) + len(away) - len(into)
    if unknown and added == len(unknown):
        said += [f"{visible(i, 60)} was not in it" for i in unknown[:3]]
    elif unknown and added > 0:
        said.append(f"no record of the run names {listed([visible(i, 60) for i in unknown], 3)}")
    more = sum(max(0, len(x) - 3) for x in (into, away, gone, unknown if added == len(unknown) else ()))
    if more:
        said.append(f"{plural(more, 'more case')} moved")
    return "; ".join(said) if said else "its case ids differ from the run's; the records do not say which moved"


def _differences(
    name: str, run: AuditSizing, given: AuditSizing | None, policy: str, calibration: str, lane: str
) -> list[str]:
    shown = visible(name, 80)
    if given is None:
        return [f"slice {shown} has no `max_failure_rate` in {policy}, the run's was {run.max_failure_rate:g}"]
    out: list[str] = []
    if given.max_failure_rate != run.max_failure_rate:
        out.append(
            f"`slices.{shown}.max_failure_rate` is {given.max_failure_rate:g} in {policy}, the run's was "
            f"{run.max_failure_rate:g}"
        )
    if given.audit_sized_at != run.audit_sized_at:
        out.append(
            f"`slices.{shown}.audit_sized_at` is {_sized_at_words(given)} in {policy}, the run's was "
            f"{_sized_at_words(run)}"
        )
    if given.confidence != run.confidence:
        out.append(f"`lanes.{lane}.confidence` is {given.confidence:g} in {policy}, the run's was {run.confidence:g}")
    if given.zero_tolerance != run.zero_tolerance:
        out.append(
            f"`slices.{shown}.max_failures` is {'set' if given.zero_tolerance else 'not set'} in {policy}, at the "
            f"run it was {'set' if run.zero_tolerance else 'not'}"
        )
    if given.judge != run.judge:
        out.append(f"{calibration} gives slice {shown} {_figures(given)}, the run's calibration gave {_figures(run)}")
    return out


def _sized_at_words(s: AuditSizing) -> str:
    return f"{s.audit_sized_at:g}" if s.audit_sized_at is not None else "not set (a quarter of the limit)"


def _figures(s: AuditSizing) -> str:
    """'Se 20/25, Sp 60/66 (calibration file sha256 3f2a9c01d4e5)', or that there were none."""
    file = f" (calibration file sha256 {s.calibration_sha256[:12]})" if s.calibration_sha256 else ""
    j = s.judge
    if j is None:
        return f"no figures for the judge that made these records{file}"
    return f"Se {j.true_fail}/{j.true_fail + j.false_pass}, Sp {j.true_pass}/{j.true_pass + j.false_fail}{file}"


def _sizing_words(s: AuditSizing) -> str:
    zero = ", zero tolerance" if s.zero_tolerance else ""
    if s.audit_sized_at is not None:
        zero += f", sized at {s.audit_sized_at:g}"
    return f"limit {s.max_failure_rate:g}, confidence {s.confidence:g}{zero}, {_figures(s)}"


def _ids(ids: list[str]) -> str:
    shown = ", ".join(visible(i, 60) for i in ids[:3])
    return shown + (" ..." if len(ids) > 3 else "")
