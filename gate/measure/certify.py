"""Certification: a held-out case certifies one configuration, once.

`config_sha256` hashes everything that makes the judge; `held_out_sha256` hashes the lane's
canonical held-out cases, and `held_out_cases` names each one by `sha256(case_id + "\n" +
gold_sha256)`, where the gold hash covers what is judged and labelled (inputs, reference, evidence
ids, label, slice) and not provenance or generation metadata. Spend is per case: a lane that runs
held-out cases with a ledger named is refused before any model call (`held_out_spent`, naming
the spent cases) when any of them is in an entry of another configuration, so a cosmetic edit or
a superseded case does not reopen the others; an entry written before `held_out_cases` spends
its whole set (`held_out_sha256`). A re-run of the same configuration is allowed (it is not a
new look). The run writes the ledger line to append (`certification-entry.json`); people append
and commit it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from gate.model.cases import Case
from gate.model.errors import UsageError
from gate.model.fingerprint import JudgeConfig
from gate.model.loading import FileProblem, canonical_json, format_validation_error, read_text, sha256_hex
from gate.model.policy import LoadedPolicy
from gate.model.records import Record
from gate.model.states import Finding, State
from gate.plan.selection import Plan
from gate.run import lineage
from gate.run.lineage import JudgeSettings
from gate.validate.context import describe_locations

if TYPE_CHECKING:
    from gate.model.result import Result

HELD_OUT = "held_out"
ENTRY_FILE = "certification-entry.json"


class LedgerError(UsageError):
    """The ledger file cannot be read (exit 2): the message names the file, the line and the fix."""


class LedgerEntry(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    config_sha256: str
    held_out_sha256: str
    state: str = ""
    date: str = ""
    gate_version: str = ""
    held_out_cases: list[str] = []  # absent in entries written before issue 19


def config_sha256(loaded: LoadedPolicy, judge: JudgeSettings, ragas_version: str) -> str:
    """The judge's identity for certification: the run's configuration fingerprint (`gate.model.fingerprint`:
    prompt text, metric name and version, allowed values, label aliases, evaluator model, sampling,
    ragas version) taken with the base URL's host only, plus `repeats` (the certification list)."""
    host_only = replace(JudgeConfig.of(loaded, "", ragas_version), base_url=judge.base_url_host)
    return sha256_hex(canonical_json({"judge": host_only.fingerprint, "repeats": judge.sampling.repeats}))


def config_components(loaded: LoadedPolicy, judge: JudgeSettings, ragas_version: str) -> dict[str, Any]:
    """What `config_sha256` covers, component by component in the comparison order (the metric's name and
    version stand where a case's rubric version does), so a mismatch can name what moved first."""
    p = loaded.policy
    return {
        "metric": f"{p.metric.name} v{p.metric.version}",
        "prompt": loaded.prompt_sha256,
        "evaluator_model": p.evaluator.model,
        "provider_settings": {"base_url_host": judge.base_url_host, **judge.sampling.model_dump()},
        "ragas_version": ragas_version,
        "allowed_values": list(judge.allowed_values),
        "parser": {"label_aliases_sha256": judge.label_aliases_sha256},
    }


def recorded_judge(loaded: LoadedPolicy, records: Sequence[Record]) -> JudgeSettings:
    """The judge settings of recorded judgments (`gate.run.lineage.recorded_judge`, the one answer to
    "which judge made these records"); never this shell's environment."""
    return lineage.recorded_judge(loaded, records).settings


def held_out_cases(plan: Plan) -> list[Case]:
    """The lane's held-out cases (controls run everywhere, so they are not part of the untouched set)."""
    return sorted((c for c in plan.eligible if c.partition == HELD_OUT and not c.is_control), key=lambda c: c.case_id)


def held_out_sha256(cases: Sequence[Case]) -> str:
    """sha256 over the canonical JSON of every held-out case, in case-id order."""
    return sha256_hex(canonical_json([c.model_dump(mode="json") for c in sorted(cases, key=lambda c: c.case_id)]))


def held_out_gold_sha256(case: Case) -> str:
    """What is judged and labelled of a held-out case: its inputs, reference, evidence ids, label
    and slice; not its provenance, generation metadata, rubric or pair bookkeeping."""
    gold = {
        "user_input": case.user_input,
        "response": case.response,
        "reference": case.reference,
        "evidence": sorted(case.evidence_ids),
        "label": case.human_label,
        "slice": case.slice,
    }
    return sha256_hex(canonical_json(gold))


def held_out_case_hash(case: Case) -> str:
    """One held-out case as the ledger names it: `sha256(case_id + "\n" + gold_sha256)`."""
    return sha256_hex(f"{case.case_id}\n{held_out_gold_sha256(case)}")


def read_ledger(path: Path) -> list[LedgerEntry]:
    """Entries of a ledger; a ledger not written yet is empty (the first certification)."""
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return []
    try:
        text = read_text(path, "certification ledger (`certification.ledger`)")
    except FileProblem as exc:
        raise LedgerError(f"{exc.message} (fix: restore the ledger from git)") from None
    entries: list[LedgerEntry] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            entries.append(LedgerEntry.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise LedgerError(
                f"{where}: not valid JSON ({exc.msg}); fix: each line is one certification-entry.json, "
                "restore the ledger from git"
            ) from None
        except ValidationError as exc:
            raise LedgerError(f"{where}: {'; '.join(format_validation_error(exc))}; fix: restore it from git") from None
    return entries


@dataclass(frozen=True)
class Certification:
    """The certification facts of one lane run, and the blocker when its held-out set is spent."""

    ledger: Path
    ledger_as_written: str  # as the policy names it (relative to the policy file), for reports
    config_sha256: str
    held_out_sha256: str
    case_ids: tuple[str, ...]
    spent_by: LedgerEntry | None
    case_hashes: tuple[str, ...] = ()  # `held_out_cases`, in case-id order
    spent_ids: tuple[str, ...] = ()  # the held-out cases another configuration already spent

    @property
    def findings(self) -> list[Finding]:
        if self.spent_by is None:
            return []
        e = self.spent_by
        when = f" on {e.date}" if e.date else ""
        state = f" (state {e.state})" if e.state else ""
        spent = self.spent_ids or self.case_ids
        return [
            Finding(
                State.QUALITY_FAILED,
                "held_out_spent",
                f"{len(spent)} of the {len(self.case_ids)} held-out cases of this lane already certified another "
                f"configuration ({e.config_sha256[:12]}{when}{state}) in {self.ledger_as_written}: "
                f"{describe_locations(spent)}; this configuration is {self.config_sha256[:12]}. A case judged for a second "
                "configuration is no longer an untouched test (editing its provenance or superseding another case "
                "does not change that), so no model call was made; fix: freeze a new untouched held-out partition "
                "for this candidate (new cases, new case ids), or restore the configuration "
                f"{e.config_sha256[:12]} certified there",
                case_ids=spent,
                location=str(self.ledger),
                extra={"earlier_config_sha256": e.config_sha256},
            )
        ]

    def to_result(self, state: str, date: str, gate_version: str, *, judged: bool = True) -> dict[str, Any]:
        """`certification` in result.json; `ledger_entry` is the line to append (None when refused,
        or when not every held-out case was judged: an entry would spend cases nobody looked at)."""
        entry = None
        if self.spent_by is None and judged:
            entry = {
                "config_sha256": self.config_sha256,
                "held_out_sha256": self.held_out_sha256,
                "state": state,
                "date": date,
                "gate_version": gate_version,
                "held_out_cases": list(self.case_hashes),
            }
        return {
            "config_sha256": self.config_sha256,
            "held_out_sha256": self.held_out_sha256,
            "ledger": self.ledger_as_written,
            "ledger_entry": entry,
            "held_out_cases": list(self.case_hashes),
        }


def assess(loaded: LoadedPolicy, plan: Plan, judge: JudgeSettings, ragas_version: str) -> Certification | None:
    """None unless the policy names a ledger and the lane runs held-out cases."""
    spec = loaded.policy.certification
    cases = held_out_cases(plan)
    if spec is None or not cases:
        return None
    ledger = loaded.resolve(spec.ledger)
    config = config_sha256(loaded, judge, ragas_version)
    held = held_out_sha256(cases)
    hashes = {c.case_id: held_out_case_hash(c) for c in cases}
    spent_by: LedgerEntry | None = None
    spent: set[str] = set()
    for e in read_ledger(ledger):
        if e.config_sha256 == config:
            continue  # the same configuration again: not a new look
        whole_set = e.held_out_sha256 == held  # every entry names its set; older ones nothing more
        theirs = set(e.held_out_cases)
        ids = {cid for cid, h in hashes.items() if whole_set or h in theirs}
        if ids:
            spent_by = spent_by or e
            spent |= ids
    return Certification(
        ledger=ledger,
        ledger_as_written=spec.ledger,
        config_sha256=config,
        held_out_sha256=held,
        case_ids=tuple(c.case_id for c in cases),
        spent_by=spent_by,
        case_hashes=tuple(hashes[c.case_id] for c in cases),
        spent_ids=tuple(c.case_id for c in cases if c.case_id in spent),
    )


def assess_records(
    loaded: LoadedPolicy, plan: Plan, records: Sequence[Record], ragas_version: str
) -> Certification | None:
    """`assess` for recorded judgments (`gate decide`, `gate merge`): the configuration that made
    them, so the provider host comes from the records (or the policy), never from this shell's
    environment."""
    return assess(loaded, plan, recorded_judge(loaded, records), ragas_version)


def entry_line(result: Result) -> str | None:
    """The ledger line for certification-entry.json, or None when the result has none."""
    cert = result.certification
    if cert is None or cert.ledger_entry is None:
        return None
    return json.dumps(cert.ledger_entry.written(), sort_keys=True) + "\n"


def attach(result: Result, cert: Certification | None, date: str, gate_version: str) -> Result:
    """The result with `certification: {...}` (unchanged when the lane certifies nothing)."""
    if cert is None:
        return result
    unjudged = sorted({c.case_id for c in result.cases if c.bucket in ("unrun", "not_needed")} & set(cert.case_ids))
    section = cert.to_result(result.state, date, gate_version, judged=not unjudged)
    if not unjudged:
        return result.with_(certification=section)
    note = (
        f"no certification entry: {len(unjudged)} of the {len(cert.case_ids)} held-out cases were not judged, "
        "and an entry would spend them; run the lane to the end (--resume), then append its entry"
    )
    return result.with_(certification=section, notes=[*result.notes, note])
