"""The audit's size in a slice: how many answers people label in each stratum, fixed before anyone labels.

A product run knows, per slice, how many answers the judge failed (`K`) and passed (`n - K`), and from
calibration how often the judge catches a failing answer (Se) and passes a good one (Sp). From these the
planner predicts the failure rate (Rogan-Gladen) and the share people will fail in each stratum, and picks
the fewest labels that reach the verdict the prediction points to (`passed` below the limit, `exceeded` above
it) with 80% power: the chance, if the prediction is right, that the planned labels decide the slice. Power,
never "decides in expectation": a plan sized so that the expected counts decide passes about half the time.

The plan is fixed before any label: the verdict (`plan_verdict`) reads exactly the planned items, the first
`fail_labels` of the judged-fail draw and the first `pass_labels` of the judged-pass draw. A planned item
without a final pass or fail counts against the verdict on each side; a label past the plan is not read.
So labelling one at a time and stopping at the first pass buys nothing: the verdict is the same test on the
same planned sample whenever it is asked, and an unlabelled planned item only holds it back.

Where no plan of this run can reach the power (even people labelling every answer: a whole audit is the most
any plan can learn, and its exact test is the most powerful there is), the plan has no labels and says what
would: how many answers the slice needs, or the nearest limit this run could decide.

Pure and deterministic: the same counts give the same plan (gate decide recomputes it and compares). The
tests are gate/estimate/audit_tests.py's; bench/audit_sizing.py shows the power and the size on a grid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gate.estimate import audit_tests as at
from gate.estimate.audit_rate import AuditRate, AuditVerdict, StratumSample, _for, _ppv
from gate.estimate.failure_rate import Rate, _cp_edges, box_share, rogan_gladen

POWER = 0.8
# The judged-fail sample sizes the planner tries (all of a smaller stratum): the labels there pin down how
# many of the judge's failures are real; past a few dozen each one buys little.
FAIL_CAPS = (4, 6, 8, 11, 16, 23, 32, 45, 64, 90)
SEARCH_BUDGET = 800  # cells the planner's search may bound per question (the verdict's is audit_tests._BUDGET)
MAX_PASS_LABELS = 5_000  # past this many labels in one stratum, a plan is no practical route
MAX_ANSWERS = 10_000_000
Aim = Literal["passed", "exceeded"]


@dataclass(frozen=True)
class Calibration:
    """The judge's calibration in a slice: the four counts its Se and Sp come from."""

    true_fail: int
    false_pass: int
    true_pass: int
    false_fail: int

    @property
    def se(self) -> float | None:
        total = self.true_fail + self.false_pass
        return self.true_fail / total if total else None

    @property
    def sp(self) -> float | None:
        total = self.true_pass + self.false_fail
        return self.true_pass / total if total else None


@dataclass(frozen=True)
class Sizing:
    """How many answers people label in each stratum of one slice, and what that buys.

    `fail_labels`/`pass_labels` are the first so many of each stratum's draw; `fail_cap`/`pass_cap` the
    design's caps (the tests read them at every K the run could have had; the labels at this run's K are
    min(cap, stratum)). `sized_at` is the failure rate the plan was sized at (calibration's prediction for
    this run; without calibration, the share the judge failed), `aim` the verdict that rate points to, and
    `power` the chance of that verdict if the rate is `sized_at`. `decides`: the plan
    reaches POWER on its aim. When it does not, the plan has no labels and `answers_needed` (the answers the
    slice would need, at the same rates) or `limit_it_decides` (the nearest limit this run could decide:
    the smallest it could pass, or the largest it could show exceeded) say what would."""

    n: int
    judged_fail: int
    fail_cap: int
    pass_cap: int
    limit: float
    confidence: float
    sized_at: float
    q_fail: float  # the share of judged-fail answers people are expected to fail
    q_pass: float  # ... of judged-pass answers
    aim: Aim
    power: float  # P(the aim's verdict) if the rate is sized_at; with no labels, what a whole audit would reach
    decides: bool
    calibrated: bool
    answers_needed: int | None = None
    limit_it_decides: float | None = None
    power_target: float = POWER
    method: str = at.METHOD

    @property
    def judged_pass(self) -> int:
        return self.n - self.judged_fail

    @property
    def design(self) -> at.Design:
        return at.Design(self.n, self.fail_cap, self.pass_cap)

    @property
    def fail_labels(self) -> int:
        return self.design.sizes(self.judged_fail)[0]

    @property
    def pass_labels(self) -> int:
        return self.design.sizes(self.judged_fail)[1]

    @property
    def labels(self) -> int:
        return self.fail_labels + self.pass_labels

    def as_dict(self) -> dict[str, Any]:
        """The plan as result.json's `audit_plan` carries it (the draw's seed is the run's, added there)."""
        return {
            "judged_fail": {"population": self.judged_fail, "labels": self.fail_labels, "cap": self.fail_cap},
            "judged_pass": {"population": self.judged_pass, "labels": self.pass_labels, "cap": self.pass_cap},
            "labels": self.labels,
            "limit": self.limit,
            "confidence": self.confidence,
            "sized_at": self.sized_at,
            "aim": self.aim,
            "power": self.power,
            "power_target": self.power_target,
            "decides": self.decides,
            "calibrated": self.calibrated,
            "answers_needed": self.answers_needed,
            "limit_it_decides": self.limit_it_decides,
            "method": self.method,
        }


def predicted(judged_fail: int, n: int, calibration: Calibration | None) -> tuple[float, float, float, bool]:
    """The failure rate calibration predicts for this run (Rogan-Gladen at K/n), and the shares people are
    expected to fail among the answers the judge failed (PPV) and passed (false-omission rate). Without
    usable calibration the judge is taken at its word: the rate is K/n, every answer it failed fails."""
    share = judged_fail / n if n else 0.0
    se = calibration.se if calibration is not None else None
    sp = calibration.sp if calibration is not None else None
    if se is None or sp is None or se + sp <= 1.0:
        return share, 1.0, 0.0, False
    rate = float(rogan_gladen(share, se, sp, empty=share)[()])
    return rate, _ppv(rate, se, sp), _for(rate, se, sp), True


def plan_audit(
    *,
    judged_fail: int,
    judged_pass: int,
    calibration: Calibration | None,
    limit: float,
    confidence: float,
    power: float = POWER,
) -> Sizing:
    """The fewest labels that reach `power` on the verdict calibration's prediction points to; or, where no
    plan of this run can, an empty plan that says what would."""
    box_share(confidence)  # the same check of confidence as every estimate
    if judged_fail < 0 or judged_pass < 0:
        raise ValueError(f"stratum sizes must be >= 0, not {judged_fail} and {judged_pass}")
    n = judged_fail + judged_pass
    rate, q_f, q_p, calibrated = predicted(judged_fail, n, calibration)
    aim: Aim = "passed" if rate < limit else "exceeded"
    alpha = 1.0 - confidence

    def plan(fail_cap: int, pass_cap: int, power_reached: float, decides: bool, **what: Any) -> Sizing:
        return Sizing(
            n=n, judged_fail=judged_fail, fail_cap=fail_cap, pass_cap=pass_cap, limit=limit, confidence=confidence,
            sized_at=rate, q_fail=q_f, q_pass=q_p, aim=aim, power=power_reached, decides=decides,
            calibrated=calibrated, power_target=power, **what,
        )  # fmt: skip

    whole = _whole_power(aim, n, rate, limit, alpha)
    if n == 0 or whole < power:
        needed, nearest = _what_would(aim, n, rate, limit, alpha, power)
        return plan(0, 0, whole, False, answers_needed=needed, limit_it_decides=nearest)
    design = _smallest(aim, judged_fail, n, q_f, q_p, limit, alpha, power) or at.Design(n, n, n)
    reached = plan_power(aim, design, judged_fail, q_f, q_p, rate, limit, alpha)
    return plan(design.fail_cap, design.pass_cap, reached, reached >= power)


def plan_power(
    side: at.Side, design: at.Design, k: int, q_f: float, q_p: float, rate: float, limit: float, alpha: float
) -> float:
    """P(the verdict `side`) at this run's K when people fail the strata at q_f and q_p (a whole audit
    reads the total, Binomial(n, rate))."""
    if design.whole:
        return _whole_power(side, design.n, rate, limit, alpha)
    return at.power(side, design, k, q_f, q_p, limit, alpha)


def _whole_power(side: at.Side, n: int, rate: float, limit: float, alpha: float) -> float:
    """P(a whole audit reaches `side`) when the rate is `rate`: Clopper-Pearson's exact test on x of n."""
    if n == 0 or not 0.0 < limit < 1.0:
        return 0.0
    from scipy.stats import binom

    if side == "passed":
        x = int(binom.ppf(alpha, n, limit))  # the largest x with P(X <= x | limit) <= alpha, found near here
        while x >= 0 and binom.cdf(x, n, limit) > alpha:
            x -= 1
        return float(binom.cdf(x, n, rate)) if x >= 0 else 0.0
    x = int(binom.isf(alpha, n, limit))  # the smallest x with P(X >= x | limit) <= alpha
    while x > 0 and binom.sf(x - 2, n, limit) <= alpha:
        x -= 1
    while x <= n and binom.sf(x - 1, n, limit) > alpha:
        x += 1
    return float(binom.sf(x - 1, n, rate)) if x <= n else 0.0


def _reaches(
    aim: at.Side, design: at.Design, k: int, q_f: float, q_p: float, limit: float, alpha: float, power: float
) -> bool:
    """Whether the plan's power on `aim` is at least `power`: the test reaches the statistic value that the
    best `power` of outcomes are at least as good as (one question, not a power sum)."""
    import numpy as np
    from scipy.stats import binom

    a_f, a_p = design.sizes(k)
    xs_f, xs_p = np.arange(a_f + 1), np.arange(a_p + 1)
    prob = binom.pmf(xs_f, a_f, q_f)[:, None] * binom.pmf(xs_p, a_p, q_p)[None, :]
    live = np.argwhere(prob > 1e-12)
    stats = np.array([at.statistic(aim, design, k, int(i), int(j), alpha) for i, j in live])
    order = np.argsort(stats if aim == "passed" else -stats, kind="stable")
    mass = np.cumsum(prob[live[:, 0], live[:, 1]][order])
    reach = int(np.searchsorted(mass, power - 1e-12))
    if reach >= len(order):
        return False
    x_f, x_p = (int(v) for v in live[order[reach]])
    # A quick question (a small budget may only say no where the verdict would say yes): a plan it finds
    # reaches the power under the verdict itself.
    return at.rejects(aim, design, k, x_f, x_p, limit, alpha, budget=SEARCH_BUDGET)


def _smallest(
    aim: Aim, k: int, n: int, q_f: float, q_p: float, limit: float, alpha: float, power: float
) -> at.Design | None:
    """The capped design with the fewest labels at this K that reaches `power` (None: none of them does)."""
    # A cap at or above K labels this run's whole judged-fail stratum (and the first K of a larger one); K
    # itself is tried too, so a stratum larger than the ladder has a plan short of a whole audit. With K = 0 any
    # cap labels the whole (empty) stratum: the design still needs one for the K the run could have had, and
    # the ladder's first is as good as any (at K = 0 only the judged-pass labels decide).
    caps = sorted({min(c, k) for c in (*FAIL_CAPS, k) if 0 < min(c, k) <= MAX_PASS_LABELS}) or [FAIL_CAPS[0]]
    if aim == "exceeded":
        return _smallest_to_exceed(caps, k, n, q_f, q_p, limit, alpha, power)
    found: dict[int, int | None] = {}

    def total(i: int, guess: int) -> float:
        if i not in found:
            found[i] = _fewest_pass_labels(k, n, caps[i], guess, q_f, q_p, limit, alpha, power)
        m = found[i]
        return math.inf if m is None else min(caps[i], k) + m

    # Labels against the cap fall, then rise, and are flat near the bottom: start at 16 and walk towards the
    # better neighbour only while a step saves more than 1% of the labels.
    i = min(range(len(caps)), key=lambda j: abs(caps[j] - 16))
    guess = max(1, int(math.log(1 / alpha) / max(limit, 1e-9)))
    here = total(i, guess)
    for step in (1, -1):
        j, best = i, here
        while 0 <= j + step < len(caps):
            nxt = total(j + step, found.get(j) or guess)
            if not nxt < 0.99 * best:
                break
            j, best = j + step, nxt
        if j != i:
            break  # one direction improved: the other rises
    winner = min(found, key=lambda j: total(j, guess))
    m = found[winner]
    return None if m is None else at.Design(n, caps[winner], m)


def _smallest_to_exceed(
    caps: list[int], k: int, n: int, q_f: float, q_p: float, limit: float, alpha: float, power: float
) -> at.Design | None:
    """The fewest judged-fail labels that reach `power` to show the slice exceeded (no judged-pass label: at
    a rate above the limit they add little): the first cap of the ladder that reaches it, then the fewest
    between it and the one below, tried one by one (the power is a saw in the cap: each step of the
    Clopper-Pearson bound's threshold drops it, so halving could step over the smallest that reaches)."""

    def reaches(cap: int) -> bool:
        return _reaches("exceeded", at.Design(n, cap, 0), k, q_f, q_p, limit, alpha, power)

    below = 0
    for cap in caps:
        if reaches(cap):
            fewest = next((c for c in range(below + 1, cap) if reaches(c)), cap)
            return at.Design(n, fewest, 0)
        below = cap
    return None


def _fewest_pass_labels(
    k: int, n: int, fail_cap: int, guess: int, q_f: float, q_p: float, limit: float, alpha: float, power: float
) -> int | None:
    """The fewest judged-pass labels with which the design reaches `power` to pass, searched from `guess`:
    out by a fifth at a time to a bracket, then halving (power rises with the labels up to the steps of a
    discrete test, which "fewest" allows)."""
    top = min(n - k, MAX_PASS_LABELS)
    if top < 1:
        return None

    def reaches(m: int) -> bool:
        return _reaches("passed", at.Design(n, fail_cap, m), k, q_f, q_p, limit, alpha, power)

    hi = max(1, min(top, guess))
    if reaches(hi):
        lo = hi
        while lo > 1:
            lo = max(0, int(lo / 1.2))
            if not reaches(lo):
                break
            hi = lo
        else:
            return hi
    else:
        lo = hi
        while True:
            if lo >= top:
                return None
            hi = min(top, math.ceil(lo * 1.2) + 1)
            if reaches(hi):
                break
            lo = hi
    # To within 1% (or one label): the steps of a discrete test make the last few a coin toss anyway.
    while hi - lo > max(1, int(0.01 * hi)):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi


def _what_would(
    aim: Aim, n: int, rate: float, limit: float, alpha: float, power: float
) -> tuple[int | None, float | None]:
    """Where no plan of this run decides: the answers a whole audit would need at this rate (None: no number,
    the rate is at the limit), and the nearest limit a whole audit of this run decides with `power`."""
    needed = None
    if rate != limit and 0.0 < limit < 1.0:
        size = max(n, 1)
        while _whole_power(aim, size, rate, limit, alpha) < power:
            if size >= MAX_ANSWERS:
                size = 0
                break
            size = min(MAX_ANSWERS, math.ceil(size * 1.25) + 1)
        needed = size or None
    nearest = None
    if n:
        from scipy.stats import binom

        quantile = int(binom.ppf(power, n, rate) if aim == "passed" else binom.ppf(1 - power, n, rate))
        low, high = _cp_edges(quantile, n, alpha)
        nearest = high if aim == "passed" else low
    return needed, nearest


# --- the verdict and the interval, read from exactly the planned sample ---


def planned_sample(count: int, population: int, labels: Sequence[str | None]) -> StratumSample:
    """A stratum's planned sample from the final labels of its draw in order ('fail', 'pass', anything else
    or None: no final pass or fail): only the first `count` are read, whatever lies past them."""
    head = list(labels[:count]) + [None] * max(0, count - len(labels))
    fails = sum(1 for x in head if x == "fail")
    passes = sum(1 for x in head if x == "pass")
    return StratumSample(population=population, size=count, fails=fails, passes=passes, case_ids=())


def _check(plan: Sizing, fs: StratumSample, ps: StratumSample) -> None:
    if (fs.population, ps.population) != (plan.judged_fail, plan.judged_pass):
        raise ValueError(
            f"the strata ({fs.population}, {ps.population}) are not the plan's ({plan.judged_fail}, {plan.judged_pass})"
        )
    if (fs.size, ps.size) != (plan.fail_labels, plan.pass_labels):
        raise ValueError(
            f"the samples ({fs.size}, {ps.size}) are not the plan's ({plan.fail_labels}, {plan.pass_labels})"
        )


def plan_verdict(plan: Sizing, fail_sample: StratumSample, pass_sample: StratumSample) -> AuditVerdict:
    """The verdict from exactly the planned sample: `passed` counts each planned item without a final label
    as failing, `exceeded` as passing, so neither is helped by leaving an item open."""
    _check(plan, fail_sample, pass_sample)
    if not plan.labels:
        return "inconclusive"
    alpha, k = 1.0 - plan.confidence, plan.judged_fail
    fs, ps = fail_sample, pass_sample
    if at.rejects("passed", plan.design, k, fs.fails + fs.open, ps.fails + ps.open, plan.limit, alpha):
        return "passed"
    if at.rejects("exceeded", plan.design, k, fs.fails, ps.fails, plan.limit, alpha):
        return "exceeded"
    return "inconclusive"


def plan_rate(plan: Sizing, fail_sample: StratumSample, pass_sample: StratumSample) -> AuditRate:
    """The audit's estimate and its interval from the planned sample: each bound the edge of its test (the
    verdict at the limit agrees with them), open items against each."""
    _check(plan, fail_sample, pass_sample)
    alpha, k, n = 1.0 - plan.confidence, plan.judged_fail, plan.n
    fs, ps = fail_sample, pass_sample
    if plan.labels:
        high = at.bound("passed", plan.design, k, fs.fails + fs.open, ps.fails + ps.open, alpha)
        low = at.bound("exceeded", plan.design, k, fs.fails, ps.fails, alpha)
    else:
        low, high = 0.0, 1.0
    pi = Rate(value=k / n if n else 0.0, low=0.0, high=1.0, x=k, n=n)
    q_f, q_p = _share(fs), _share(ps)
    settled = all(s.population == 0 or s.fails + s.passes > 0 for s in (fs, ps))
    estimate = pi.value * q_f.value + (1 - pi.value) * q_p.value if n and settled and plan.labels else None
    return AuditRate(estimate=estimate, low=low, high=high, judged_fail=k, n=n, pi=pi, q_fail=q_f, q_pass=q_p,
                     fail_sample=fs, pass_sample=ps, confidence=plan.confidence, method=plan.method)  # fmt: skip


def _share(sample: StratumSample) -> Rate:
    labelled = sample.fails + sample.passes
    return Rate(value=sample.fails / labelled if labelled else 0.0, low=0.0, high=1.0, x=sample.fails, n=sample.size)
