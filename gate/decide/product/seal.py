"""A product run's audit plan is sized once, when the run starts: what sizes it besides the answers travels with them.

A slice's plan (gate/decide/product/audit_plan.py) is sized from its answers and from four more things:
the slice's `max_failure_rate`, the lane's `confidence`, whether the slice is zero tolerance
(`max_failures`), and calibration's figures for the slice (Se and Sp). The answers come with the
records; the rest was read from the policy and calibration.json, which can be edited between the run
and the decide: another Se or another limit sizes another prefix of the same seeded draw, chosen after
the run, and a team could try calibrations until a prefix passed. So the run writes them on every
answer's record (`audit_sizing`, with the order seed), and every path that decides a run's records
(`gate decide`, `gate merge`, `--resume`, a batch's collect, the crash path, the Action's) checks that
the policy and calibration it is given size each slice's plan the same, and refuses (exit 2, naming
the file, the field, the run's value and the given one) when they would not. An edit the plan does not
read (another slice, another key, other bytes of calibration.json) decides as before.

The records are untrusted too: answers of one slice that carry different sizings, or some that carry
one and some none, are an edited or mixed file, refused. Records that carry an order seed and no
sizing at all were written before runs recorded it: their plan is sized from what is given now, and
the result says so in a note, which is what a reviewer looks for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gate.decide.product.verdict import ProductEvidence
from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy
from gate.model.records import AuditSizing, JudgeFigures, Record
from gate.model.wording import plural


def sizing_of(loaded: LoadedPolicy, lane: str, pe: ProductEvidence) -> dict[str, AuditSizing]:
    """Per slice with a limit, what sizes its audit plan under this policy and calibration."""
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
        )
    return out


@dataclass(frozen=True)
class Sealed:
    """What a run's answers say sized each slice's plan."""

    sizing: Mapping[str, AuditSizing]  # per slice, as every answer of it carries it
    unsealed: bool = False  # the answers carry an order seed and no sizing: records of an older gate


def sealed_sizing(records: Iterable[Record], lane: str, named: str = "the records given") -> Sealed:
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
    return Sealed({name: next(iter(seen)) for name, seen in found.items()}, unsealed=bool(bare))


def unsealed_note(lane: str) -> str:
    return (
        f"the answers of lane {lane} carry an order seed but not what sized its audit plan (records of an older "
        "gate): each slice's plan is sized from the policy and calibration given now, which may not be the run's; "
        "a run made now fixes them when it starts"
    )


def refuse_resized(sealed: Sealed, loaded: LoadedPolicy, lane: str, pe: ProductEvidence, where: str) -> None:
    """A usage error when the policy and calibration given would size a slice's plan otherwise than the
    run did (`where`: what carries the run's sizing: the records given, the records in --out, batch.json)."""
    now = sizing_of(loaded, lane, pe)
    calibration = (
        shown_path(loaded.resolve(loaded.policy.calibration.file))
        if loaded.policy.calibration is not None
        else "the calibration file"
    )
    policy = shown_path(loaded.path)
    differs: list[str] = []
    for name, run in sorted(sealed.sizing.items()):
        differs += _differences(name, run, now.get(name), policy, calibration, lane)
    differs = list(dict.fromkeys(differs))  # the lane's confidence is every slice's: said once
    if differs:
        raise UsageError(
            f"{where}: the run sized its audit plan when it started, and the policy and calibration given now would "
            f"size it otherwise: {'; '.join(differs[:4])}{'; and more' if len(differs) > 4 else ''}. Decided under "
            "them, a slice's plan would be another prefix of the run's seeded draw, picked after the run; fix: "
            "decide under the policy and calibration the run was made with (restore them from the run's commit), "
            "or run the lane again, which draws a new order seed that its result shows"
        )


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


def _figures(s: AuditSizing) -> str:
    """'Se 20/25, Sp 60/66 (calibration file sha256 3f2a9c01d4e5)', or that there were none."""
    file = f" (calibration file sha256 {s.calibration_sha256[:12]})" if s.calibration_sha256 else ""
    j = s.judge
    if j is None:
        return f"no figures for the judge that made these records{file}"
    return f"Se {j.true_fail}/{j.true_fail + j.false_pass}, Sp {j.true_pass}/{j.true_pass + j.false_fail}{file}"


def _sizing_words(s: AuditSizing) -> str:
    zero = ", zero tolerance" if s.zero_tolerance else ""
    return f"limit {s.max_failure_rate:g}, confidence {s.confidence:g}{zero}, {_figures(s)}"


def _ids(ids: list[str]) -> str:
    shown = ", ".join(visible(i, 60) for i in ids[:3])
    return shown + (" ..." if len(ids) > 3 else "")
