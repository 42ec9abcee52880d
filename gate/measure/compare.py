"""`gate compare`: verdict transitions between two runs and the first diverging artifact.

Pure over records: `compare_runs(base, head, critical_slices)` takes two loaded runs and returns
a frozen `Comparison`; `load_run` is the only I/O. No model call, no ragas import.

The walk follows the order of a debugging walk (the first diverging artifact): what people
decided, then what the judge was shown, then how it was asked, then what read its answer. A step
an older record cannot answer is `unknown`; when an unknown step comes before the first known
difference, `first_divergence` is `unknown` (a later difference would be a guess), and
`differing_steps` still lists every step known to differ.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gate.decide.evidence import UNRUN_ERROR_KINDS, best_records
from gate.judge.vetting import verdict_problem_for
from gate.measure.rollback import read_rollback
from gate.model.errors import UsageError
from gate.model.records import RECORDS_FILE, Record, majority, read_records
from gate.model.result import Result, ResultProblem, load_result

COMPARE_SCHEMA_VERSION = 1
Verdict = Literal["pass", "fail", "error", "review", "unrun", "absent"]
StepState = Literal["same", "differs", "unknown"]
STEPS: tuple[str, ...] = (
    "gold",
    "response",
    "reference",
    "user_input",
    "rubric_version",
    "prompt",
    "evaluator_model",
    "provider_settings",
    "ragas_version",
    "allowed_values",
    "parser",
)
JUDGE_LABELS = {"pass": "pass", "fail": "fail", "review_required": "review"}


@dataclass(frozen=True)
class Run:
    """One side of a comparison: its records, and its result.json when the run directory had one."""

    label: str  # the path the user gave, for messages and the report
    records: tuple[Record, ...]
    result: Result | None = None
    rollback: Mapping[str, Any] | None = None  # rollback.json, when the run wrote one

    @property
    def policy_id(self) -> str:
        """The policy the run judged under ("" when neither its result nor its records say)."""
        if self.result is not None and self.result.policy_id:
            return self.result.policy_id
        counted = Counter(r.policy_id for r in self.records if r.policy_id).most_common(1)
        return counted[0][0] if counted else ""

    @property
    def lineage(self) -> dict[str, Any]:
        if self.result is not None and self.result.lineage is not None:
            return dict(self.result.lineage.items())
        return lineage_from_records(self.records)

    @property
    def unrun_ids(self) -> frozenset[str]:
        """Cases the run saw but did not judge: its unrun ids and the withheld (missing evidence)."""
        if self.result is None:
            return frozenset()
        ids = list(self.result.unrun_case_ids)
        for blocker in self.result.blockers:
            if blocker.kind == "missing_evidence":
                ids += blocker.case_ids
        return frozenset(ids)


@dataclass(frozen=True)
class Transition:
    case_id: str
    slice: str
    partition: str
    human_label: str
    base: Verdict
    head: Verdict
    critical: bool | None  # None: no policy was given, so which slices are critical is unknown
    first_divergence: str  # a STEPS entry, "unknown" or "none"
    differing_steps: tuple[str, ...]
    unknown_steps: tuple[str, ...]
    # The first diverging artifact as each side recorded it (short, display-ready), if any.
    base_value: str | None = None
    head_value: str | None = None

    @property
    def kind(self) -> str:
        return f"{self.base}->{self.head}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "slice": self.slice,
            "partition": self.partition,
            "human_label": self.human_label,
            "base": self.base,
            "head": self.head,
            "critical": self.critical,
            "first_divergence": self.first_divergence,
            "differing_steps": list(self.differing_steps),
            "unknown_steps": list(self.unknown_steps),
            "base_value": self.base_value,
            "head_value": self.head_value,
        }


@dataclass(frozen=True)
class Comparison:
    base: Run
    head: Run
    transitions: tuple[Transition, ...]
    unchanged: int
    critical_slices: tuple[str, ...] | None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def counts(self) -> dict[str, int]:
        return dict(Counter(t.kind for t in self.transitions).most_common())

    @property
    def across_policies(self) -> str | None:
        """The sentence that must come first when the two runs judged under two policies."""
        a, b = self.base.policy_id, self.head.policy_id
        if not a or not b or a == b:
            return None
        return (
            f"these runs are of two policies (base {a!r}, head {b!r}): their cases, limits and judge are not one "
            "suite's, so a transition below is not a change of verdict; compare two runs of one policy"
        )

    def lineage_changes(self) -> dict[str, tuple[Any, Any]]:
        """Lineage keys whose value differs between the two sides (either side's keys)."""
        a, b = self.base.lineage, self.head.lineage
        return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": COMPARE_SCHEMA_VERSION,
            "base": {"path": self.base.label, "lineage": self.base.lineage, "rollback": self.base.rollback},
            "head": {"path": self.head.label, "lineage": self.head.lineage, "rollback": self.head.rollback},
            "critical_slices": list(self.critical_slices) if self.critical_slices is not None else None,
            "across_policies": self.across_policies,
            "cases": len(self.transitions) + self.unchanged,
            "unchanged": self.unchanged,
            "counts": self.counts,
            "transitions": [t.to_dict() for t in self.transitions],
            "notes": list(self.notes),
        }


# --- loading -------------------------------------------------------------------------------


def load_run(path: Path, flag: str) -> Run:
    """A run's --out directory (records.jsonl, result.json if present) or a records.jsonl file."""
    if path.is_dir():
        records_path = path / RECORDS_FILE
        result_path = path / "result.json"
        if not records_path.exists():
            raise UsageError(
                f"{flag} {path}: the directory has no records.jsonl; fix: pass the --out directory of a "
                "`gate run`, or its records.jsonl"
            )
    elif path.exists():
        records_path = path
        result_path = path.parent / "result.json"
    else:
        raise UsageError(
            f"{flag} {path}: no such file or directory; fix: pass a run's --out directory or records.jsonl"
        )
    records = read_records(records_path)
    rollback = read_rollback(result_path.parent)
    return Run(label=str(path), records=tuple(records), result=_read_result(result_path), rollback=rollback)


def critical_slices_of(policy_path: Path) -> tuple[str, ...]:
    """The policy's critical slices: those allowing no false pass (`max_false_passes: 0`)."""
    from gate.model.policy import load_policy

    slices = load_policy(policy_path).policy.slices
    return tuple(sorted(name for name, limit in slices.items() if limit.max_false_passes == 0))


def compare_paths(base: Path, head: Path, policy: Path | None) -> Comparison:
    """Load both sides (and the policy, when given) and compare them."""
    base_run, head_run = load_run(base, "--base"), load_run(head, "--head")
    critical = critical_slices_of(policy) if policy is not None else applied_critical_slices(head_run, base_run)
    return compare_runs(base_run, head_run, critical)


def applied_critical_slices(*runs: Run) -> tuple[str, ...] | None:
    """The critical slices by the limits the first of `runs` with a result.json applied (
    `slices.<s>.max_false_passes`); None when none says (records only, or an older result)."""
    for run in runs:
        slices = run.result.slices if run.result is not None else {}
        if any(t.max_false_passes is not None for t in slices.values()):
            return tuple(sorted(name for name, t in slices.items() if t.max_false_passes == 0))
    return None


def _read_result(path: Path) -> Result | None:
    """The run's result.json, or None when it is absent or unreadable (the records still compare)."""
    try:
        return load_result(path)
    except ResultProblem:
        return None


def lineage_from_records(records: Sequence[Record]) -> dict[str, Any]:
    """A run lineage read from its records (the most common value of each field)."""

    def common(values: Iterable[str]) -> str:
        counted = Counter(v for v in values if v).most_common(1)
        return counted[0][0] if counted else ""

    return {
        "policy_sha256": common(r.policy_sha256 for r in records),
        "dataset_sha256": common(r.dataset_sha256 for r in records),
        "dataset_card_sha256": common(r.dataset_card_sha256 for r in records),
        "prompt_sha256": common(r.prompt_template_sha256 or "" for r in records),
        "metric_version": common(r.metric_version for r in records),
        "evaluator_model": common(r.evaluator_model for r in records),
        "ragas_version": common(r.ragas_version for r in records),
        "gate_version": common(r.gate_version for r in records),
    }


# --- verdicts ------------------------------------------------------------------------------


def case_verdicts(run: Run) -> dict[str, tuple[Verdict, Record | None]]:
    """Each case's verdict on one side and a representative record (repeat 0 first) for lineage."""
    best = best_records([_vetted(r) for r in run.records])
    by_case: dict[str, list[Record]] = {}
    for (case_id, _), rec in sorted(best.items(), key=lambda kv: kv[0]):
        by_case.setdefault(case_id, []).append(rec)
    out: dict[str, tuple[Verdict, Record | None]] = {}
    for case_id, recs in by_case.items():
        out[case_id] = (_verdict(recs), recs[0])
    for case_id in run.unrun_ids - set(out):
        out[case_id] = ("unrun", None)
    return out


def _vetted(r: Record) -> Record:
    """Records are untrusted, here as in `gate decide`: an `ok` record without an allowed label (the
    allowed values it was judged under, else pass/fail/review_required), a reason, or an answered
    attempt or cache hit is an evaluator error, never a verdict."""
    allowed = r.allowed_values if r.allowed_values else list(JUDGE_LABELS)
    return verdict_problem_for(r, allowed, {}) or r


def _verdict(recs: Sequence[Record]) -> Verdict:
    repeats = max([r.sampling.repeats for r in recs if r.sampling is not None] + [r.repeat_index + 1 for r in recs])
    if any(r.status == "error" and r.error_kind not in UNRUN_ERROR_KINDS for r in recs):
        return "error"
    oks = [r for r in recs if r.status == "ok"]
    if any(r.judge_label not in JUDGE_LABELS for r in oks):
        return "error"  # a label outside the contract is an evaluator error, never a verdict
    if len(oks) < repeats:
        return "unrun"
    top = majority([JUDGE_LABELS[r.judge_label or ""] for r in oks])
    if top == "pass":
        return "pass"
    if top == "fail":
        return "fail"
    return "review"  # an abstention or a tie


# --- the diverging artifact ----------------------------------------------------------------

StepResult = tuple[StepState, str | None, str | None]  # state, base value, head value


def _short(value: object) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:12]  # a sha256: its prefix is enough to tell two apart
    return text[:120]


def _values(a: object, b: object) -> StepResult:
    if a is None or b is None or a == "" or b == "":
        return ("unknown", None, None)
    return ("same", None, None) if a == b else ("differs", _short(a), _short(b))


def _gold(a: Record, b: Record) -> StepResult:
    if a.gold_sha256 and b.gold_sha256:
        return _values(a.gold_sha256, b.gold_sha256)
    visible = (a.human_label or "", a.slice, a.partition), (b.human_label or "", b.slice, b.partition)
    if visible[0] != visible[1]:
        return ("differs", "/".join(visible[0]), "/".join(visible[1]))
    return ("unknown", None, None)


def _field(name: str) -> Callable[[Record, Record], StepResult]:
    def step(a: Record, b: Record) -> StepResult:
        if a.field_sha256 is not None and b.field_sha256 is not None:
            if name not in a.field_sha256 or name not in b.field_sha256:
                return ("same", None, None)  # not shown to the judge on both sides: the prompt step says why
            return _values(a.field_sha256[name], b.field_sha256[name])
        if a.input_sha256 and a.input_sha256 == b.input_sha256:
            return ("same", None, None)  # every rendered field is identical
        return ("unknown", None, None)

    return step


def _prompt(a: Record, b: Record) -> StepResult:
    if a.prompt_template_sha256 and b.prompt_template_sha256:
        return _values(a.prompt_template_sha256, b.prompt_template_sha256)
    if a.input_sha256 and a.input_sha256 == b.input_sha256 and a.prompt_sha256 and b.prompt_sha256:
        return _values(a.prompt_sha256, b.prompt_sha256)  # same fields: a rendered difference is the template
    return ("unknown", None, None)


def _provider(a: Record, b: Record) -> StepResult:
    if a.sampling is None or b.sampling is None or a.base_url_host is None or b.base_url_host is None:
        return ("unknown", None, None)
    sa = {"base_url_host": a.base_url_host, **a.sampling.model_dump()}
    sb = {"base_url_host": b.base_url_host, **b.sampling.model_dump()}
    # top_p and response_format are None in records written before they were recorded: unknown there
    unknown_old = {k for k in ("top_p", "response_format") if sa.get(k) is None or sb.get(k) is None}
    changed = [k for k in sa if sa[k] != sb[k] and k not in unknown_old]
    if changed:
        return ("differs", ", ".join(f"{k}={sa[k]}" for k in changed), ", ".join(f"{k}={sb[k]}" for k in changed))
    if _fingerprints_differ(a, b) and _same_judge_but_the_url(a, b):
        # Same host and settings, another judge: the base URL's scheme, port or path (a proxy,
        # another deployment), which a record keeps only inside its fingerprint.
        shown = "base URL (scheme, port or path), fingerprint "
        return ("differs", shown + _short(a.config_fingerprint), shown + _short(b.config_fingerprint))
    return ("same", None, None)


def _fingerprints_differ(a: Record, b: Record) -> bool:
    return bool(a.config_fingerprint and b.config_fingerprint and a.config_fingerprint != b.config_fingerprint)


def _same_judge_but_the_url(a: Record, b: Record) -> bool:
    """Every other part of the fingerprint a record carries is equal on both sides."""
    return (
        a.prompt_template_sha256 == b.prompt_template_sha256
        and a.evaluator_model == b.evaluator_model
        and a.metric_version == b.metric_version
        and a.ragas_version == b.ragas_version
        and a.allowed_values == b.allowed_values
        and a.label_aliases_sha256 == b.label_aliases_sha256
    )


def _parser(a: Record, b: Record) -> StepResult:
    aliases = _values(a.label_aliases_sha256, b.label_aliases_sha256)
    gate = _values(a.gate_version, b.gate_version)
    if aliases[0] == "differs":
        return ("differs", f"label_aliases {aliases[1]}", f"label_aliases {aliases[2]}")
    if gate[0] == "differs":
        return ("differs", f"gate {gate[1]}", f"gate {gate[2]}")
    return ("unknown", None, None) if "unknown" in (aliases[0], gate[0]) else ("same", None, None)


STEP_CHECKS: dict[str, Callable[[Record, Record], StepResult]] = {
    "gold": _gold,
    "response": _field("response"),
    "reference": _field("reference"),
    "user_input": _field("user_input"),
    "rubric_version": lambda a, b: _values(a.rubric_version, b.rubric_version),
    "prompt": _prompt,
    "evaluator_model": lambda a, b: _values(a.evaluator_model, b.evaluator_model),
    "provider_settings": _provider,
    "ragas_version": lambda a, b: _values(a.ragas_version, b.ragas_version),
    "allowed_values": lambda a, b: _values(a.allowed_values, b.allowed_values),
    "parser": _parser,
}
assert tuple(STEP_CHECKS) == STEPS


@dataclass(frozen=True)
class Divergence:
    first: str
    differing: tuple[str, ...]
    unknown: tuple[str, ...]
    base_value: str | None = None
    head_value: str | None = None


def first_divergence(base: Record | None, head: Record | None) -> Divergence:
    """The first step in the comparison order at which the two records differ."""
    if base is None or head is None:
        return Divergence("unknown", (), STEPS)  # a side left the case unrun without a record
    results = {name: check(base, head) for name, check in STEP_CHECKS.items()}
    differing = tuple(n for n in STEPS if results[n][0] == "differs")
    unknown = tuple(n for n in STEPS if results[n][0] == "unknown")
    for name in STEPS:
        state, a, b = results[name]
        if state == "unknown":
            return Divergence("unknown", differing, unknown)
        if state == "differs":
            return Divergence(name, differing, unknown, a, b)
    if _fingerprints_differ(base, head):
        # Two judges by their fingerprints, though no step a record spells out differs (the
        # metric's name or version): not "the judge itself moved".
        return Divergence("unknown", (), ())
    return Divergence("none", (), ())


# --- the comparison ------------------------------------------------------------------------


def _presence(verdict: Verdict) -> str:
    return "not in the run" if verdict == "absent" else "in the run"


def compare_runs(base: Run, head: Run, critical_slices: Sequence[str] | None = None) -> Comparison:
    vb, vh = case_verdicts(base), case_verdicts(head)
    critical = frozenset(critical_slices) if critical_slices is not None else None
    transitions: list[Transition] = []
    unchanged = 0
    for case_id in sorted(set(vb) | set(vh)):
        b_verdict, b_rec = vb.get(case_id, ("absent", None))
        h_verdict, h_rec = vh.get(case_id, ("absent", None))
        if b_verdict == h_verdict:
            unchanged += 1
            continue
        shown = h_rec or b_rec
        slices = {r.slice for r in (b_rec, h_rec) if r is not None}
        if b_verdict == "absent" or h_verdict == "absent":
            # Only one side saw the case: the case set, part of the gold, changed.
            div = Divergence("gold", ("gold",), (), _presence(b_verdict), _presence(h_verdict))
        else:
            div = first_divergence(b_rec, h_rec)
        transitions.append(
            Transition(
                case_id=case_id,
                slice=shown.slice if shown else "",
                partition=shown.partition if shown else "",
                human_label=(shown.human_label or "") if shown else "",
                base=b_verdict,
                head=h_verdict,
                critical=None if critical is None else bool(slices & critical),
                first_divergence=div.first,
                differing_steps=div.differing,
                unknown_steps=div.unknown,
                base_value=div.base_value,
                head_value=div.head_value,
            )
        )
    transitions.sort(key=lambda t: (not t.critical, t.slice, t.case_id))
    notes: list[str] = []
    if critical is None:
        notes.append(
            "no --policy given and no result.json with the limits it applied: which slices are critical "
            "(max_false_passes 0) is unknown"
        )
    chosen = tuple(sorted(critical)) if critical is not None else None
    return Comparison(base, head, tuple(transitions), unchanged, chosen, tuple(notes))
