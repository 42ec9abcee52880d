"""Cases (JSON Lines) and evidence (YAML): strict models and loaders.

Problems in the dataset are not usage errors: they are `input_contract` findings (the change
broke the input contract), collected for every line so one run shows them all.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from gate.model.errors import PolicyError
from gate.model.escape import NAME_RULE, is_name, visible
from gate.model.loading import (
    FileProblem,
    format_validation_error,
    gc_paused,
    open_binary,
    read_bytes,
    read_yaml_mapping,
    sha256_hex,
    surrogate_at,
)
from gate.model.overrides import case_problems
from gate.model.paths import shown_path
from gate.model.policy import ControlRole, LoadedPolicy
from gate.model.states import Finding, State
from gate.model.yaml12 import as_written

MAX_FINDINGS_PER_FILE = 200


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Adjudication(_Strict):
    label: str
    reason: str = ""
    evidence: list[str] = Field(default_factory=list)


class Pair(_Strict):
    id: str = Field(min_length=1)
    kind: Literal["invariant", "flip"]


def _name(what: str, v: object) -> object:
    if isinstance(v, str) and not is_name(v):
        raise ValueError(f"{what} '{visible(v, 80)}' is not allowed: use {NAME_RULE}")
    return v


class Case(_Strict):
    case_id: str = Field(min_length=1)
    partition: str
    slice: str
    rubric_version: str
    user_input: str
    reference: str | None = None
    # Both required, but for a product lane's case (`unlabelled_allowed`): its response comes from
    # `--responses` and no person labels it. The loader refuses them missing anywhere else.
    response: str | None = None
    response_sha256: str | None = None
    human_adjudication: Adjudication | None = None
    expected_control_role: ControlRole | None = None
    pair: Pair | None = None
    group_id: str | None = None
    # A corrected case names the case it replaces; the old one stays in the file, never eligible.
    supersedes: str | None = Field(default=None, min_length=1)
    # The production stratum the case was sampled from (policy `strata`, gate/model/strata.py).
    stratum: str | None = None
    provenance: dict[str, Any] = Field(default_factory=dict)
    generation: dict[str, Any] = Field(default_factory=dict)

    @field_validator("rubric_version", mode="before")
    @classmethod
    def _as_text(cls, v: object) -> object:
        return str(v) if isinstance(v, int | float) else v

    @field_validator("case_id", "slice")
    @classmethod
    def _safe_name(cls, v: str, info: ValidationInfo) -> str:
        # Ids and slice names are printed raw in logs, comments, check runs and XML.
        _name("the case id" if info.field_name == "case_id" else "the slice name", v)
        return v

    @field_validator("stratum")
    @classmethod
    def _safe_stratum(cls, v: str | None) -> str | None:
        _name("the stratum", v)
        return v

    @property
    def human_label(self) -> str | None:
        """The reviewed label; None for a product lane's case, which no person labelled."""
        return None if self.human_adjudication is None else self.human_adjudication.label

    @property
    def evidence_ids(self) -> list[str]:
        """The evidence ids the label rests on (none for an unlabelled product case)."""
        return [] if self.human_adjudication is None else self.human_adjudication.evidence

    @property
    def labelled(self) -> bool:
        return self.human_adjudication is not None

    @property
    def is_control(self) -> bool:
        return self.expected_control_role is not None

    def field_text(self, name: str) -> str | None:
        value = getattr(self, name, None)
        return value if isinstance(value, str) else None


class EvidenceDoc(_Strict):
    version: str
    text: str | None = None
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")

    @field_validator("version", mode="before")
    @classmethod
    def _as_text(cls, v: object) -> object:
        return as_written(v)


@dataclass
class Dataset:
    """The cases a policy names, with the findings met while loading them."""

    cases: list[Case]
    evidence: dict[str, EvidenceDoc]
    findings: list[Finding]
    sha256: str
    # case_id -> "file:line" of its first occurrence, for messages
    locations: dict[str, str] = field(default_factory=dict)
    # "file:line" of every case, parallel to `cases` (duplicated ids each keep their own line)
    case_locations: list[str] = field(default_factory=list)
    # A product lane's --responses file (gate/plan/responses.py), whose answers the cases now hold.
    responses_sha256: str = ""
    responses_path: Path | None = None  # that file: the run keeps a copy of it (gate/commands/outputs.py)

    def by_id(self) -> dict[str, Case]:
        return {c.case_id: c for c in self.cases}


# Keys every case carries but a product lane's (its answer comes from --responses; no person labels it).
LABELLED_KEYS: tuple[str, ...] = ("response", "human_adjudication")


def unlabelled_allowed(partition: object, control_role: object, product_partitions: frozenset[str]) -> bool:
    """A product lane's case (not a control: controls are labelled, as everywhere) may go without
    `response` and `human_adjudication`."""
    return control_role is None and partition in product_partitions


def _missing_keys(obj: dict[str, Any], product_partitions: frozenset[str]) -> list[str]:
    if unlabelled_allowed(obj.get("partition"), obj.get("expected_control_role"), product_partitions):
        return []
    return [k for k in LABELLED_KEYS if obj.get(k) is None]


def _missing_key_problem(key: str) -> str:
    return f"`{key}`: required key is missing; fix: add `{key}`"


def _in_field_order(problems: list[str]) -> list[str]:
    order = {name: i for i, name in enumerate(Case.model_fields)}

    def position(problem: str) -> int:
        name = problem[1:].split("`", 1)[0].split(".", 1)[0] if problem.startswith("`") else ""
        return order.get(name, len(order))

    return sorted(problems, key=position)


def _contract(message: str, location: str, case_ids: tuple[str, ...] = ()) -> Finding:
    return Finding(State.QUALITY_FAILED, "input_contract", message, case_ids=case_ids, location=location)


# How many of the latest case lines the loader remembers (`load_cases_file`).
RECENT_LINES = 16


def load_cases_file(
    path: Path, display: str, product_partitions: frozenset[str] = frozenset()
) -> tuple[list[Case], list[Finding], list[str], str]:
    """Parse one JSONL file; every bad line becomes a finding naming file, line and field.

    Cases of `product_partitions` (a product lane's, controls aside) may go without `response`
    and `human_adjudication`.

    Streams the file (a large dataset is never held twice in memory) and returns the cases, the
    findings, the "file:line" of each case and the sha256 of the file's bytes.
    """
    findings: list[Finding] = []
    cases: list[Case] = []
    where_each: list[str] = []
    digest = hashlib.sha256()
    try:
        handle = open_binary(path, "case file")
    except FileProblem as exc:
        return [], [_contract(exc.message, display)], [], digest.hexdigest()
    has_content = False
    capped = False
    # The last few lines that were cases: a line equal to one of them byte for byte is that case
    # again (frozen, so shared), so a case a script copied 200,000 times, in a row or in turn with a
    # few others, is parsed once. A handful of lines, never the file twice.
    recent: dict[bytes, Case] = {}
    field_sets: dict[tuple[type, frozenset[str]], set[str]] = {}
    with handle:
        for lineno, line in enumerate(handle, start=1):
            digest.update(line)
            if not line.strip():
                continue
            has_content = True
            again = recent.get(line)
            if again is not None:
                cases.append(again)
                where_each.append(f"{display}:{lineno}")
                continue
            try:
                # Fast path: one call parses and validates a well-formed line.
                fast = Case.model_validate_json(line)
            except ValidationError:
                pass
            else:
                complete = fast.labelled and fast.response is not None
                complete = complete or unlabelled_allowed(
                    fast.partition, fast.expected_control_role, product_partitions
                )
                if complete and (line.count(b":") <= _parsed_key_count(fast) or _duplicate_key(line) is None):
                    if len(recent) >= RECENT_LINES:
                        del recent[next(iter(recent))]
                    recent[line] = fast
                    cases.append(_sharing_field_sets(fast, field_sets))
                    where_each.append(f"{display}:{lineno}")
                    continue
            if capped:
                continue
            if len(findings) >= MAX_FINDINGS_PER_FILE:
                findings.append(_contract(f"{display}: more problems not shown; fix the ones above first", display))
                capped = True
                continue
            where = f"{display}:{lineno}"
            case, problems = _parse_case_line(line, where, product_partitions)
            if case is not None:
                cases.append(_sharing_field_sets(case, field_sets))
                where_each.append(where)
            findings += problems
    if not has_content:
        findings.append(_contract(f"{path}: the case file is empty; fix: write one JSON case per line", display))
    return cases, findings, where_each, digest.hexdigest()


def _sharing_field_sets(case: Case, known: dict[tuple[type, frozenset[str]], set[str]]) -> Case:
    """`case`, its record of which fields were set (and its parts') shared with every case that
    set the same ones: pydantic keeps a set of names per model (about 1 KB a case, the same for
    nearly every case of a file). Safe to share: a case and its parts are frozen, and a copy
    (`model_copy`) copies the set before it changes it."""
    for model in (case, case.human_adjudication, case.pair):
        if model is None:
            continue
        names = model.__pydantic_fields_set__
        shared = known.setdefault((type(model), frozenset(names)), names)
        if shared is not names:
            object.__setattr__(model, "__pydantic_fields_set__", shared)
    return case


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(pairs)
    if len(made) != len(pairs):
        seen: set[str] = set()
        for key, _value in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return made


def _parsed_key_count(case: Case) -> int:
    """How many keys the parsed case holds, nested ones included."""
    count = len(case.model_fields_set)
    if case.human_adjudication is not None:
        count += len(case.human_adjudication.model_fields_set)
    if case.pair is not None:
        count += len(case.pair.model_fields_set)
    stack: list[Any] = [case.provenance, case.generation]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            count += len(item)
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    return count


def _duplicate_key(line: bytes) -> str | None:
    """The first key written twice in one object of `line`, if any.

    Called only when the line has more colons than the parsed case has keys: every written key
    is followed by a colon, so fewer colons prove there is no duplicate without a second parse.
    """
    try:
        json.loads(line, object_pairs_hook=_refuse_duplicates)
    except _DuplicateKey as exc:
        return exc.key
    except (ValueError, RecursionError):
        return None
    return None


def _parse_case_line(
    line: bytes, where: str, product_partitions: frozenset[str] = frozenset()
) -> tuple[Case | None, list[Finding]]:
    """The slow path for a line the fast path refused: say exactly what is wrong with it."""
    try:
        text = line.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        return None, [_contract(f"{where}: not UTF-8 text (byte {exc.start}); fix: save the file as UTF-8", where)]
    try:
        obj = json.loads(text, object_pairs_hook=_refuse_duplicates)
    except _DuplicateKey as exc:
        message = (
            f"{where}: key `{visible(exc.key, 80)}` is written twice in one object; the second value would "
            "silently win; fix: keep one"
        )
        return None, [_contract(message, where)]
    except json.JSONDecodeError as exc:
        message = f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); fix: one JSON object per line"
        return None, [_contract(message, where)]
    except RecursionError:
        message = f"{where}: the JSON nests too deep to read; fix: a case is one flat object of text fields"
        return None, [_contract(message, where)]
    except ValueError:  # e.g. an integer of thousands of digits
        message = f"{where}: a number is too long to read (thousands of digits); fix: write a real value"
        return None, [_contract(message, where)]
    bad_text = surrogate_at(obj)
    if bad_text is not None:
        message = (
            f"{where}: `{visible(bad_text, 80)}` holds a lone surrogate escape (such as \\ud800), which is not "
            "text; fix: remove it or write the character itself"
        )
        return None, [_contract(message, where)]
    if not isinstance(obj, dict):
        message = (
            f"{where}: a case must be a JSON object, not {type(obj).__name__}; fix: write one {{...}} object per line"
        )
        return None, [_contract(message, where)]
    cid = obj.get("case_id")
    ids = (cid,) if isinstance(cid, str) and is_name(cid) else ()
    label = f" (case {cid})" if ids else ""
    missing = [_missing_key_problem(k) for k in _missing_keys(obj, product_partitions)]
    try:
        case = Case.model_validate(obj)
    except ValidationError as exc:
        problems = [p for p in format_validation_error(exc, model=Case) if p not in missing]
        problems = _in_field_order([*problems, *missing])
        return None, [_contract(f"{where}{label}: {problem}", where, ids) for problem in problems]
    if missing:
        return None, [_contract(f"{where}{label}: {problem}", where, ids) for problem in missing]
    return case, []


def load_evidence(path: Path, display: str) -> tuple[dict[str, EvidenceDoc], list[Finding], bytes]:
    try:
        raw = read_yaml_mapping(path, "evidence file")
        data = read_bytes(path, "evidence file")
    except FileProblem as exc:
        return {}, [_contract(exc.message, display)], b""
    docs: dict[str, EvidenceDoc] = {}
    findings: list[Finding] = []
    for written, value in raw.items():
        key = visible(written, 120)
        if not isinstance(value, dict):
            findings.append(
                _contract(
                    f"{display}: `{key}` must be a mapping {{version, text or sha256}}; fix: add those keys", display
                )
            )
            continue
        try:
            doc = EvidenceDoc.model_validate(value)
        except ValidationError as exc:
            findings += [_contract(f"{display}: {p}", display) for p in format_validation_error(exc, prefix=str(key))]
            continue
        if doc.text is None and doc.sha256 is None:
            findings.append(_contract(f"{display}: `{key}` has neither `text` nor `sha256`; fix: add one", display))
            continue
        if doc.text is not None and doc.sha256 is not None and sha256_hex(doc.text) != doc.sha256:
            findings.append(
                _contract(
                    f"{display}: `{key}.sha256` does not match its `text`; fix: recompute the hash or restore the text",
                    display,
                )
            )
        docs[str(written)] = doc
    return docs, findings, data


def load_dataset(loaded: LoadedPolicy) -> Dataset:
    """Load every case file and the evidence file the policy names.

    Raises PolicyError when an override names a case id the dataset does not have.
    """
    # Parsing creates many objects that all stay alive: pausing the cyclic garbage collector
    # (which would rescan them again and again) makes loading several times faster.
    with gc_paused():
        dataset = _load_dataset(loaded)
    problems = case_problems(loaded.policy.overrides, {c.case_id for c in dataset.cases})
    if problems:
        raise PolicyError(str(loaded.path), problems)
    return dataset


def _load_dataset(loaded: LoadedPolicy) -> Dataset:
    digest_parts: list[str] = []
    cases: list[Case] = []
    findings: list[Finding] = []
    locations: dict[str, str] = {}
    case_locations: list[str] = []
    for rel, path in zip(loaded.policy.cases, loaded.case_paths, strict=True):
        # Messages name the file as the user reads it: relative to the working directory, not the policy.
        file_cases, file_findings, file_locations, file_digest = load_cases_file(
            path, shown_path(path), loaded.policy.product_partitions
        )
        cases += file_cases
        findings += file_findings
        case_locations += file_locations
        for case, loc in zip(file_cases, file_locations, strict=True):
            locations.setdefault(case.case_id, loc)
        digest_parts.append(f"{rel}\0{file_digest}")
    evidence: dict[str, EvidenceDoc] = {}
    if loaded.evidence_path is not None and loaded.policy.evidence is not None:
        evidence, ev_findings, raw = load_evidence(loaded.evidence_path, shown_path(loaded.evidence_path))
        findings += ev_findings
        digest_parts.append(f"{loaded.policy.evidence}\0{sha256_hex(raw)}")
    return Dataset(
        cases=cases,
        evidence=evidence,
        findings=findings,
        sha256=sha256_hex("\n".join(digest_parts)),
        locations=locations,
        case_locations=case_locations,
    )
