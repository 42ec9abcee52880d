"""A product slice's audit plan: which of the run's answers people label, fixed before anyone labels.

The run's order seed (gate/run/order_seed.py, fixed when the run started) puts each stratum of the
slice (the answers the judge failed, those it passed) in its seeded draw order (gate/review/draw.py);
the plan is the first so many of each, the counts the planner gives (gate/estimate/audit_sizing.py,
`plan_audit`: two designs sized before the judge's verdicts, one to pass and one to show the slice exceeded,
each with 80% power; the judge's count only chooses which people label). It is
computed by this one function from the seed and the judged answers on every path (run, resume,
decide, merge, the queue), so they all reach the same plan, and the audit's verdict reads exactly
its sample: a planned answer without a final label counts against the verdict, a label beyond it
decides nothing. Labelling until it passes, or drawing queues until one suits, buys nothing.

Where no plan of this run can decide the slice's limit, the plan is empty (nobody is asked for labels
that cannot decide) and says what would. A zero-tolerance slice (`max_failures`) has every answer the
judge failed labelled besides, whatever the plan says: zero tolerance reads each of them, the rate only
the planned ones.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gate.estimate import audit_sizing as ep
from gate.estimate import failure_rate as fr
from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.model.paths import shown_path
from gate.model.wording import plural
from gate.review.draw import JUDGED_FAIL, JUDGED_PASS, draw_order

if TYPE_CHECKING:
    from gate.decide.product.answers import JudgeCounts, SliceAnswers
    from gate.review.queue import Queue


@dataclass(frozen=True)
class PlannedStratum:
    population: int  # the stratum's answers this run judged
    case_ids: tuple[str, ...]  # the answers people label, a prefix of its seeded draw, in draw order
    rate_sample: int  # how many of them (the first so many) the failure rate reads: the planner's

    @property
    def sample(self) -> int:
        return len(self.case_ids)

    @property
    def rated(self) -> tuple[str, ...]:
        """The answers the audit's failure rate reads: the plan's own sample."""
        return self.case_ids[: self.rate_sample]


@dataclass(frozen=True)
class AuditPlan:
    """Which answers of a slice people label: the planned prefix of each stratum's seeded draw."""

    seed: str
    judged_fail: PlannedStratum
    judged_pass: PlannedStratum
    reviewers: int  # the labels that settle an item (`review.reviewers_per_item`)
    sizing: ep.Sizing  # the planner's: the sample sizes, the power, what would decide it
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
        z = self.sizing
        return {
            "seed": self.seed,
            "judged_fail": {"population": self.judged_fail.population, "sample": self.judged_fail.sample,
                            "rate_sample": self.judged_fail.rate_sample, "case_ids": list(self.judged_fail.case_ids)},
            "judged_pass": {"population": self.judged_pass.population, "sample": self.judged_pass.sample,
                            "rate_sample": self.judged_pass.rate_sample, "case_ids": list(self.judged_pass.case_ids)},
            "items": self.items,
            "labels": self.items * self.reviewers,
            "reviewers_per_item": self.reviewers,
            "aim": z.aim,
            "sized_at": z.sized_at,
            "power": z.power,
            "power_target": z.power_target,
            "predicted": z.predicted,
            "designs": z.designs_dict(),
            "calibrated": z.calibrated,
            "answers_needed": z.answers_needed,
            "limit_it_decides": z.limit_it_decides,
            "method": z.method,
            "undecidable": self.undecidable,
        }  # fmt: skip

    def words(self) -> str:
        """Its items and labels counted apart (`plan_words`)."""
        f, p = self.judged_fail, self.judged_pass
        return plan_words(f.population, f.sample, p.population, p.sample, self.reviewers)

    def power_words(self) -> str:
        """'sized to pass it 81% of the time if the failure rate is the 0.5% calibration predicts'."""
        return power_words(self.sizing)


def _aim(z: ep.Sizing) -> str:
    return "pass it" if z.aim == "passed" else "show it exceeded"


def _chance(power: float) -> str:
    return "almost surely" if power >= 0.995 else f"{fr.percent(power)} of the time"


def _rate(z: ep.Sizing) -> str:
    """'0.5% (a quarter of the limit)': the rate the labelled design was sized at."""
    if z.aim == "passed" and z.pass_sized_at is not None:
        return f"{fr.percent(z.sized_at)} (the slice's `audit_sized_at`)"
    times = z.sized_at / z.limit if z.limit else 0.0
    share = {0.25: "a quarter of", 2.0: "twice", 3.0: "three times", 5.0: "five times"}.get(round(times, 6))
    of_it = f"{share} the limit" if share else "halfway from the limit to 100%"
    return f"{fr.percent(z.sized_at)} ({of_it})"


def _sized_at(z: ep.Sizing) -> str:
    return f"if the failure rate is {_rate(z)}"


def power_words(z: ep.Sizing, why: bool = True) -> str:
    """What the plan is sized to, fixed before the judge's verdicts were known, and why this design:
    'sized to pass it 81.4% of the time if the failure rate is 0.5% (a quarter of the limit); chosen because
    calibration predicts 0.5% for this run'."""
    sized = f"sized before the run to {_aim(z)} {_chance(z.power)} {_sized_at(z)}"
    if not why:  # a run imagined before it is made (`gate validate --lane`): no prediction chose it
        return sized
    source = "calibration predicts" if z.calibrated else "the judge's verdicts give"
    return f"{sized}; this design because {source} {fr.percent(z.predicted)} for this run"


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
        passed = "it passed" if parts else "answers the judge passed"  # the judge failed none: say who passed them
        parts.append(
            _whole(pass_population, passed)
            if pass_sample == pass_population
            else f"none of the {pass_population:,} {passed}"
            if pass_sample == 0
            else f"{pass_sample:,} of the {pass_population:,} {passed}"
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
    sized_at: float | None = None,
) -> AuditPlan:
    """The slice's audit plan: the planner's counts, drawn as the prefix of each stratum's seeded order."""
    failing = list(answers.failing)
    passing = [o.case.case_id for o in answers.judged if o.verdict == "pass"]
    sizing = size_plan(len(failing), len(passing), counts, limit, confidence, sized_at)
    a_f = len(failing) if max_failures is not None else sizing.fail_labels
    fail_order = draw_order(seed, name, JUDGED_FAIL, failing)[:a_f]
    pass_order = draw_order(seed, name, JUDGED_PASS, passing)[: sizing.pass_labels]
    return AuditPlan(
        seed=seed,
        judged_fail=PlannedStratum(len(failing), tuple(fail_order), sizing.fail_labels),
        judged_pass=PlannedStratum(len(passing), tuple(pass_order), sizing.pass_labels),
        reviewers=reviewers,
        sizing=sizing,
        undecidable=None if sizing.decides else undecidable_words(sizing),
    )


@functools.lru_cache(maxsize=256)
def size_plan(
    judged_fail: int,
    judged_pass: int,
    counts: JudgeCounts | None,
    limit: float,
    confidence: float,
    sized_at: float | None = None,
) -> ep.Sizing:
    """The planner's sizes for a slice of these strata (gate/estimate/audit_sizing.py, `plan_audit`). Pure, and
    a search of up to seconds: one command asks it once a slice (decide, the report, validate share it)."""
    calibration = (
        ep.Calibration(counts.true_fail, counts.false_pass, counts.true_pass, counts.false_fail)
        if counts is not None
        else None
    )
    return ep.plan_audit(
        judged_fail=judged_fail,
        judged_pass=judged_pass,
        calibration=calibration,
        limit=limit,
        confidence=confidence,
        pass_sized_at=sized_at,
    )


def undecidable_words(z: ep.Sizing) -> str:
    """Why no plan of this run can decide the limit, and what would, from the planner's figures: 'no audit of
    this run's 70 answers can decide its 5% limit: if the failure rate is 1.2% (a quarter of the limit), even
    people labelling all 70 would pass it only 41.5% of the time, ...; what would: a run of about 180 ...'."""
    if z.n == 0:  # an evaluator error on every answer, or none run yet: nothing to size a plan on
        return "no answer of this slice has the judge's verdict yet: its plan is drawn from the answers judged"
    if not z.reachable:
        return (
            f"no outcome of this run's audit plan could {_aim(z)}: it was sized before the run for a failure rate of {_rate(z)}, "
            f"where about {z.part.expected_k:,} of the {z.n:,} answers would be judged fail, and with this run's "
            f"{z.judged_fail:,} its {plural(z.part.design.sizes(z.judged_fail)[0] if z.part.design else 0, 'label')} "
            "cannot decide; what would: a run of more answers, or a judge that fails fewer good answers"
        )
    return (
        f"no audit of this run's {z.n:,} answers can decide its {fr.percent(z.limit)} limit: {_sized_at(z)}, "
        f"{whole_audit_words(z)}"
    )


def whole_audit_words(z: ep.Sizing) -> str:
    """'even people labelling all 120 would pass it only 60.6% of the time, and a plan needs 80%; what would:
    a run of about 239 answers (failing at the same rate), or a limit of 11.7% or more'."""
    would = []
    if z.answers_needed is not None:
        would.append(f"a run of about {z.answers_needed:,} answers (failing at the same rate)")
    if z.limit_it_decides is not None:
        side = "or more" if z.aim == "passed" else "or less"
        would.append(f"a limit of {fr.percent(z.limit_it_decides)} {side}")
    if z.aim == "passed" and z.pass_sized_at is not None and z.rate_it_decides is not None:
        would.append(f"an `audit_sized_at` of {fr.percent(z.rate_it_decides, 'down')} or less")
    what = ", or ".join(would) if would else "nothing: the rate is the limit itself"
    return (
        f"even people labelling all {z.n:,} would {_aim(z)} only {fr.percent(z.power)} of the time, and a plan "
        f"needs {fr.percent(z.power_target)}; what would: {what}"
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
