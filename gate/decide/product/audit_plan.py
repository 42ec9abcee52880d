"""A product slice's audit plan: which of the run's answers people label, fixed before anyone labels.

The run's order seed (gate/run/order_seed.py, fixed when the run started) puts each stratum of the
slice (the answers the judge failed, those it passed) in its seeded draw order (gate/review/draw.py);
the plan is the first `a_F` and `a_P` of them, the counts the planner gives (`planned_counts`). It is
computed by this one function from the seed and the judged answers on every path (run, resume,
decide, merge, the queue), so they all reach the same plan, and the audit's verdict reads exactly
its sample: a planned answer without a final label counts against the verdict, a label beyond it
decides nothing. Labelling until it passes, or drawing queues until one suits, buys nothing.

Where no plan of this run can decide the slice's limit at the rate calibration predicts, the plan
is empty (nobody is asked for labels that cannot decide) and says what would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gate.estimate import audit_rate as ar
from gate.estimate import failure_rate as fr
from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.model.paths import shown_path
from gate.model.wording import plural
from gate.review.draw import JUDGED_FAIL, JUDGED_PASS, draw_order

if TYPE_CHECKING:
    from gate.decide.product.answers import JudgeCounts, SliceAnswers
    from gate.review.queue import Queue

# The judged-pass answers a plan draws per slice when calibration cannot size it (no figures).
DEFAULT_PASS_SAMPLE = ar.QUEUE_PASS_SAMPLE


@dataclass(frozen=True)
class PlannedStratum:
    population: int  # the stratum's answers this run judged
    case_ids: tuple[str, ...]  # the planned prefix of its seeded draw, in draw order

    @property
    def sample(self) -> int:
        return len(self.case_ids)


@dataclass(frozen=True)
class AuditPlan:
    """Which answers of a slice people label: the planned prefix of each stratum's seeded draw."""

    seed: str
    judged_fail: PlannedStratum
    judged_pass: PlannedStratum
    reviewers: int  # the labels that settle an item (`review.reviewers_per_item`)
    # None: the plan can decide the limit; else why no plan of this run can, and what would.
    undecidable: str | None = None

    @property
    def items(self) -> int:
        return self.judged_fail.sample + self.judged_pass.sample

    @property
    def case_ids(self) -> frozenset[str]:
        return frozenset((*self.judged_fail.case_ids, *self.judged_pass.case_ids))

    def stratum(self, name: str) -> PlannedStratum:
        return self.judged_fail if name == JUDGED_FAIL else self.judged_pass

    def to_dict(self) -> dict[str, Any]:
        """result.json's `audit_plan` of the slice."""
        return {
            "seed": self.seed,
            "judged_fail": {"population": self.judged_fail.population, "sample": self.judged_fail.sample,
                            "case_ids": list(self.judged_fail.case_ids)},
            "judged_pass": {"population": self.judged_pass.population, "sample": self.judged_pass.sample,
                            "case_ids": list(self.judged_pass.case_ids)},
            "items": self.items,
            "labels": self.items * self.reviewers,
            "reviewers_per_item": self.reviewers,
            "undecidable": self.undecidable,
        }  # fmt: skip

    def words(self) -> str:
        """Its items and labels counted apart (`plan_words`)."""
        f, p = self.judged_fail, self.judged_pass
        return plan_words(f.population, f.sample, p.population, p.sample, self.reviewers)


def plan_words(fail_population: int, fail_sample: int, pass_population: int, pass_sample: int, reviewers: int) -> str:
    """'59 items (all 43 answers the judge failed and 16 of the 2,957 it passed), 118 labels at two
    reviewers an item': a plan's items and labels counted apart, as every message says them."""
    parts = []
    if fail_population:
        parts.append(
            _whole(fail_population, "answers the judge failed")
            if fail_sample == fail_population
            else f"{fail_sample:,} of the {fail_population:,} answers the judge failed"
        )
    if pass_population:
        parts.append(
            _whole(pass_population, "it passed")
            if pass_sample == pass_population
            else f"{pass_sample:,} of the {pass_population:,} it passed"
        )
    items = fail_sample + pass_sample
    each = "one reviewer an item" if reviewers == 1 else f"{_count_word(reviewers)} reviewers an item"
    return f"{plural(items, 'item')} ({' and '.join(parts)}), {plural(items * reviewers, 'label')} at {each}"


def _whole(n: int, what: str) -> str:
    """'all 26 answers the judge failed', 'the 1 answer the judge failed', 'the 1 it passed'."""
    return f"all {n:,} {what}" if n > 1 else f"the 1 {what.replace('answers', 'answer')}"


def _count_word(n: int) -> str:
    return {2: "two", 3: "three", 4: "four", 5: "five"}.get(n, str(n))


def plan_slice(
    seed: str,
    name: str,
    answers: SliceAnswers,
    *,
    counts: JudgeCounts | None,
    limit: float,
    confidence: float,
    max_failures: int | None,
    reviewers: int,
) -> AuditPlan:
    """The slice's audit plan: the planner's counts, drawn as the prefix of each stratum's seeded order."""
    failing = list(answers.failing)
    passing = [o.case.case_id for o in answers.judged if o.verdict == "pass"]
    a_f, a_p, undecidable = planned_counts(
        judged_fail=len(failing), n=len(failing) + len(passing), counts=counts, limit=limit, confidence=confidence
    )
    if max_failures is not None:
        a_f = len(failing)  # zero tolerance: every answer the judge failed is labelled, decidable or not
    fail_order = draw_order(seed, name, JUDGED_FAIL, failing)[:a_f]
    pass_order = draw_order(seed, name, JUDGED_PASS, passing)[:a_p]
    return AuditPlan(
        seed=seed,
        judged_fail=PlannedStratum(len(failing), tuple(fail_order)),
        judged_pass=PlannedStratum(len(passing), tuple(pass_order)),
        reviewers=reviewers,
        undecidable=undecidable,
    )


def planned_counts(
    *, judged_fail: int, n: int, counts: JudgeCounts | None, limit: float, confidence: float
) -> tuple[int, int, str | None]:
    """How many judged-fail and judged-pass answers people label, and (when no plan of this run can
    decide the limit) why not and what would; then both counts are 0. Every judged-fail answer, and
    at least DEFAULT_PASS_SAMPLE judged-pass ones or as many as the audit's own tests need at the
    shares calibration predicts (`audits_to_decide`), at most the stratum."""
    passes = n - judged_fail
    default = (judged_fail, min(passes, DEFAULT_PASS_SAMPLE), None)
    if counts is None or n == 0:
        return default
    q_fail, q_pass = predicted_shares(judged_fail, n, counts)
    route = ar.audits_to_decide(
        judged_fail=judged_fail, n=n, q_fail=q_fail, q_pass=q_pass, confidence=confidence, max_failure_rate=limit
    )
    if route is None:
        return 0, 0, _what_would(judged_fail, n, counts, limit, confidence)
    return judged_fail, min(passes, max(default[1], route[1])), None


def predicted_shares(judged_fail: int, n: int, counts: JudgeCounts) -> tuple[float, float]:
    """The shares of each stratum people would fail, as calibration's Se and Sp predict them at the
    failure rate the run's judged-fail share implies: (q_F, q_P)."""
    se = counts.true_fail / max(1, counts.true_fail + counts.false_pass)
    sp = counts.true_pass / max(1, counts.true_pass + counts.false_fail)
    q = judged_fail / n if n else 0.0
    p = float(fr.rogan_gladen(q, se, sp, empty=q)[()])
    return ar._ppv(p, se, sp), ar._for(p, se, sp)


def _what_would(judged_fail: int, n: int, counts: JudgeCounts, limit: float, confidence: float) -> str:
    """Why no plan of this run decides the limit, and the answers a run would need (at the same shares)."""
    q_fail, q_pass = predicted_shares(judged_fail, n, counts)
    share = judged_fail / n
    rate = share * q_fail + (1 - share) * q_pass
    more = None
    for scale in (2, 4, 8, 16):
        m = n * scale
        k = round(share * m)
        if ar.audits_to_decide(
            judged_fail=k, n=m, q_fail=q_fail, q_pass=q_pass, confidence=confidence, max_failure_rate=limit
        ):
            more = m
            break
    need = (
        f"a run of about {more:,} answers would (at the same shares)"
        if more is not None
        else f"no run of up to {16 * n:,} answers would at these shares"
    )
    return (
        f"no audit of this run's {n:,} answers decides a {fr.percent(limit)} limit at the failure rate calibration "
        f"predicts ({fr.percent(rate)}): even labelling every answer leaves the limit inside the interval; {need}, "
        "or a limit further from that rate"
    )


def refuse_other_queue(queue: Queue, seed: str, plans: Mapping[str, AuditPlan] | None = None) -> None:
    """`--audit-queue` must be the run's audit plan: its seed, then (given the plans of the slices whose
    answers are all judged) each slice's counts and items. Another queue is a usage error naming what
    differs: the audit reads the run's plan whatever queue people labelled, and a queue drawn another way
    (another seed, another size, edited by hand) is how a team would pick its own sample."""
    differs = _queue_differences(queue, seed, plans or {})
    if differs:
        raise UsageError(
            f"--audit-queue {shown_path(queue.path)} is not this run's audit plan: {'; '.join(differs[:4])}"
            f"{'; and more' if len(differs) > 4 else ''}. The audit reads the plan the run fixed from its order "
            "seed before anyone labelled, whatever queue people labelled; fix: make the queue from the run "
            "(`gate review queue --from` its output directory) and label that, or drop --audit-queue (labels on "
            "the plan's items count whichever queue they were made in)"
        )


def _queue_differences(queue: Queue, seed: str, plans: Mapping[str, AuditPlan]) -> list[str]:
    theirs = queue.header.design.get("seed") if isinstance(queue.header.design, dict) else None
    if theirs != seed:
        return [f"it was drawn with seed {visible(str(theirs), 80)}, the run's plan with {visible(seed, 80)}"]
    out: list[str] = []
    drawn: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for item in queue.items:
        if item.slice is not None and item.case_id is not None and item.draw is not None and item.stratum:
            drawn.setdefault((item.slice, item.stratum), []).append((item.draw, item.case_id))
    for name, plan in sorted(plans.items()):
        for stratum in (JUDGED_FAIL, JUDGED_PASS):
            planned = plan.stratum(stratum).case_ids
            given = tuple(c for _, c in sorted(drawn.pop((name, stratum), [])))
            if len(given) != len(planned):
                out.append(
                    f"slice {visible(name, 80)} {stratum}: {len(given)} answers in the queue, {len(planned)} in the plan"
                )
            elif given != planned:
                other = [c for c in given if c not in set(planned)]
                out.append(
                    f"slice {visible(name, 80)} {stratum}: other answers than the plan's "
                    f"({', '.join(visible(c, 60) for c in (other or given)[:3])})"
                )
    for name, stratum in sorted(k for k in drawn if k[0] not in plans):
        out.append(f"slice {visible(name, 80)} {stratum}: {len(drawn[(name, stratum)])} answers the plan does not hold")
    return out
