"""Deterministic validators: no network, no model, no ragas.

Each validator is a plain function `(Context) -> list[Finding]`, one small module per concern.
`run_validators` returns the loader's findings followed by every validator's, in a fixed order.
The deterministic checks are loaded and read here (`case_checks`); gate/judge/checks.py runs them.
What it may import: `gate.model`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gate.model.cases import Dataset
from gate.model.errors import UsageError
from gate.model.loading import gc_paused
from gate.model.policy import LoadedPolicy
from gate.model.states import Finding
from gate.validate.card import card_defects
from gate.validate.checks import check_inputs
from gate.validate.completeness import incomplete_gated_cases
from gate.validate.context import Context
from gate.validate.controls import control_labels, missing_controls
from gate.validate.drift import drift_prompt
from gate.validate.duplicates import duplicate_case_ids
from gate.validate.evidence import reference_mismatch, unresolved_evidence
from gate.validate.fields import empty_fields
from gate.validate.integrity import response_hash_mismatch
from gate.validate.labels import disallowed_labels
from gate.validate.leakage import group_leaks, text_leaks
from gate.validate.pairs import pair_defects
from gate.validate.references import missing_references
from gate.validate.rubrics import unknown_rubrics
from gate.validate.strata import unknown_strata
from gate.validate.supersedes import supersede_defects
from gate.validate.taxonomy import unknown_partitions, unknown_slices
from gate.validate.templates import unfilled_templates
from gate.validate.trend import trend_bands

Validator = Callable[[Context], list[Finding]]

VALIDATORS: tuple[Validator, ...] = (
    card_defects,
    unfilled_templates,
    duplicate_case_ids,
    supersede_defects,
    empty_fields,
    unknown_rubrics,
    unknown_partitions,
    unknown_slices,
    unknown_strata,
    disallowed_labels,
    unresolved_evidence,
    reference_mismatch,
    response_hash_mismatch,
    missing_references,
    incomplete_gated_cases,
    pair_defects,
    missing_controls,
    control_labels,
    group_leaks,
    text_leaks,
    check_inputs,
    trend_bands,
    drift_prompt,
)


def run_validators(
    loaded: LoadedPolicy, dataset: Dataset, lane: str | None = None, *, run_checks: bool = True
) -> list[Finding]:
    """The loader's findings, then every validator's, in a deterministic order.

    With `lane`, lane-specific checks (controls) look at that lane only; otherwise at every lane.
    An unknown lane is a usage error. `run_checks=False`: the team's checks are only loaded and
    their signatures read; the caller (a run, decide, merge, a dry run) runs them on the lane's
    cases, and their blockers reach the result once, with those results.
    """
    if lane is not None and lane not in loaded.policy.lanes:
        raise UsageError(
            f"--lane {lane}: {loaded.path} defines no lane {lane!r}; fix: use one of {sorted(loaded.policy.lanes)}"
        )
    ctx = Context(loaded=loaded, dataset=dataset, lane=lane, run_checks=run_checks)
    findings = list(dataset.findings)
    # The validators build many small containers over a large, long-lived dataset: pausing the
    # cyclic collector spares it rescanning every case again and again.
    with gc_paused():
        for validator in VALIDATORS:
            findings += validator(ctx)
    return findings


def withheld_case_ids(findings: Iterable[Finding]) -> set[str]:
    """Cases never sent to the judge because their evidence is missing."""
    return {cid for f in findings if f.kind == "missing_evidence" for cid in f.case_ids}


__all__ = [
    "VALIDATORS",
    "Context",
    "Validator",
    "run_validators",
    "withheld_case_ids",
]
