"""A product lane's answers per slice, and the judge's calibration counts for a slice: what the
calibration estimate (gate/decide/product/verdict.py) and the audit estimate (gate/decide/product/audit.py) both read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gate.decide.evidence import CaseOutcome, Evidence


@dataclass(frozen=True)
class JudgeCounts:
    """One slice of calibration.json: how the judge did against people's labels."""

    true_pass: int
    true_fail: int
    false_pass: int
    false_fail: int


@dataclass(frozen=True)
class SliceAnswers:
    judged: tuple[CaseOutcome, ...]  # pass or fail verdicts: n
    failing: tuple[str, ...]  # judged fail: k
    unjudged: tuple[str, ...]  # unrun (missing responses, budget, interruption): the slice is incomplete
    # Sent but with no pass or fail from the judge (an evaluator error, a tie between repeats): never
    # counted in n, and never checked by anyone.
    no_verdict: tuple[str, ...] = ()
    waiting: tuple[CaseOutcome, ...] = ()  # the unjudged answers' outcomes (their case holds the answer given)


def answers_by_slice(ev: Evidence) -> dict[str, SliceAnswers]:
    """The application's answers of each slice the lane holds (controls are the judge's, not the app's)."""
    return answers_of(ev.outcomes)


def answers_of(outcomes_of_cases: Iterable[CaseOutcome]) -> dict[str, SliceAnswers]:
    """`answers_by_slice` over a decision's outcomes (the review queue draws its audit strata from them)."""
    found: dict[str, list[CaseOutcome]] = {}
    for o in outcomes_of_cases:
        if not o.case.is_control:
            found.setdefault(o.case.slice, []).append(o)
    out: dict[str, SliceAnswers] = {}
    for name, outcomes in sorted(found.items()):
        judged = tuple(o for o in outcomes if o.bucket == "completed" and o.verdict in ("pass", "fail"))
        out[name] = SliceAnswers(
            judged=judged,
            failing=tuple(sorted(o.case.case_id for o in judged if o.verdict == "fail")),
            unjudged=tuple(o.case.case_id for o in outcomes if o.bucket == "unrun"),
            waiting=tuple(o for o in outcomes if o.bucket == "unrun"),
            no_verdict=tuple(
                o.case.case_id
                for o in outcomes
                if o.bucket == "errored" or (o.bucket == "completed" and o.verdict not in ("pass", "fail"))
            ),
        )
    return out
