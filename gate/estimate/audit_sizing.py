"""The audit's size in a slice: how many answers people label in each stratum, fixed before anyone labels.

A product run knows, per slice, how many answers the judge failed (`K`) and passed (`n - K`), and from
calibration how often the judge catches a failing answer (Se) and passes a good one (Sp). The plan is two
designs sized from n and calibration alone, before K is known: one to pass a product at a quarter of its
limit, one to show a product at twice its limit exceeded, each the fewest labels with which its own exact
test reaches that verdict with 80% power (the chance the planned labels decide it, if the rate is that;
never "decides in expectation": a plan sized so that the expected counts decide passes about half the time).
The run's K only chooses which design people label: where calibration predicts the run under its limit
(Rogan-Gladen at K/n), the one to pass (with the judged-fail answers the other reads); else the one to
show it exceeded.

Why not size the plan from K: each exact test holds its level for a design fixed before K, summed over
every K the run could have had. A design chosen from K is not fixed, and a planner that did so passed a
product at its limit up to 5.8% of the time at a 5% allowance (bench/audit_steering.py, section 4). Here
`passed` is read only from the design fixed for it, so its chance where it is wrong is at most its test's
level whatever K comes out; `exceeded` may come from either design, so each reads it at a share of the
level (nine tenths in the design sized for it, a tenth in the other), which together stay within it.

The verdict (`plan_verdict`) reads exactly the planned items: each design's first so many of the
judged-fail and judged-pass draws. A planned item without a final pass or fail counts against the
verdict on each side; a label past the plan is not read. So labelling one at a time and stopping at the
first pass buys nothing: the verdict is the same test on the same planned sample whenever it is asked, and
an unlabelled planned item only holds it back.

Where no audit of the slice's answers can reach the power (even people labelling every answer: a whole
audit is the most any plan can learn, and its exact test is the most powerful there is), that design has
no labels and says what would: how many answers the slice needs, or the nearest limit it could decide.

Pure and deterministic: the same counts give the same plan (gate decide recomputes it and compares). The
tests are gate/estimate/audit_tests.py's; bench/audit_sizing.py shows the power and the size on a grid.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
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


# The two designs are sized before the run's K is known, for a product at these multiples of its limit: one
# comfortably under it (to pass) and one well over it (to show exceeded: the first of these multiples at
# which an audit of the slice's answers can, so that a small slice failing far too often is still shown
# exceeded). K only chooses which is labelled.
PASS_SIZED_AT = 0.25
EXCEED_SIZED_AT = (2.0, 3.0, 5.0)
# `exceeded` can be read from either design (whichever K chooses): the exceeded design's test at this share
# of 1 - confidence, the pass design's at the rest, so that the two routes together stay within it.
EXCEED_ALPHA_SHARE = 0.9


@dataclass(frozen=True)
class Part:
    """One of a plan's two designs, fixed before the run's K is known: the one sized to pass the slice (the
    only design `passed` is read from) or the one sized to show it exceeded. `design` None: no audit of a
    slice this size reaches the power at `sized_at` (then `answers_needed`/`limit_it_decides` say what
    would). `power` is the chance of `side` at `sized_at`, the K calibration expects there (`expected_k`)
    and its shares q."""

    side: Aim
    design: at.Design | None
    sized_at: float
    expected_k: int
    q_fail: float
    q_pass: float
    power: float
    decides: bool
    answers_needed: int | None = None
    limit_it_decides: float | None = None
    rate_it_decides: float | None = None  # to pass: the highest rate a whole audit passes with `power`


@dataclass(frozen=True)
class Sizing:
    """A slice's audit plan: two designs sized before the run's K (`to_pass`, `to_exceed`), and the one
    people label at this run's K.

    The design must not depend on K: each exact test is valid for a design fixed before K, summed over every
    K the run could have had, and a design picked from K inflates false approval (a planner that sized each
    run's plan from its own K passed a product at its limit up to 5.8% of the time at a 5% allowance). So K
    only chooses between two designs fixed before it: `to_pass` where calibration predicts the run under its
    limit (`aim` passed), else `to_exceed`. `passed` is read only from `to_pass`, at 1 - confidence: its
    chance where the slice is at or above its limit is at most that, whatever K does. `exceeded` is read
    from whichever is labelled, each at its share of 1 - confidence (`to_exceed` at EXCEED_ALPHA_SHARE of it,
    `to_pass` at the rest), so that the two routes to it together stay within 1 - confidence: people who
    find many failures among the answers the judge passed can still show the slice exceeded.
    `sized_at`, `power` and the words of the plan are the labelled design's."""

    n: int
    judged_fail: int
    limit: float
    confidence: float
    predicted: float  # the failure rate calibration predicts for this run (without calibration, K / n)
    calibrated: bool
    calibration: Calibration | None
    power_target: float = POWER
    method: str = at.METHOD
    pass_sized_at: float | None = None  # the rate the design to pass is sized at; None: PASS_SIZED_AT of the limit

    # Each design is sized on first use (a search of up to seconds; `size_part` remembers it): a run labels one.
    @functools.cached_property
    def to_pass(self) -> Part:
        return size_part(
            "passed", self.n, self.calibration, self.limit, self.confidence, self.power_target, self.pass_sized_at
        )

    @functools.cached_property
    def to_exceed(self) -> Part:
        return size_part("exceeded", self.n, self.calibration, self.limit, self.confidence, self.power_target)

    @property
    def judged_pass(self) -> int:
        return self.n - self.judged_fail

    @property
    def aim(self) -> Aim:
        return "passed" if self.predicted < self.limit else "exceeded"

    @property
    def part(self) -> Part:
        """The design the run's prediction points to: people label it, if it decides."""
        return self.to_pass if self.aim == "passed" else self.to_exceed

    @property
    def design(self) -> at.Design | None:
        """The design people label at this K (None: no plan of this slice decides its aim, or none of this
        design's outcomes at this K could: nobody is asked for labels that cannot decide)."""
        return self.part.design if self.part.decides and self.reachable else None

    @functools.cached_property
    def reachable(self) -> bool:
        """Whether the aim's design can reach its verdict at this run's K at all (every planned answer failing
        people, or passing them): a design sized at the K a product at its rate is expected to give may read
        too few answers at a K far below it."""
        design = self.part.design
        if design is None or not self.part.decides:
            return True  # nothing to label anyway: `answers_needed` says what would
        a_f, a_p = design.sizes(self.judged_fail)
        best = (a_f, a_p) if self.aim == "exceeded" else (0, 0)
        return at.rejects(self.aim, design, self.judged_fail, *best, self.limit, self.alpha(self.aim))

    @property
    def pass_design(self) -> at.Design | None:
        """The design `passed` is read from, where it is labelled."""
        return self.design if self.aim == "passed" else None

    def alpha(self, side: at.Side) -> float:
        """The level each verdict's test is read at in the labelled design (see the class)."""
        alpha = 1.0 - self.confidence
        if side == "passed":
            return alpha
        return alpha * (EXCEED_ALPHA_SHARE if self.aim == "exceeded" else 1.0 - EXCEED_ALPHA_SHARE)

    @property
    def decides(self) -> bool:
        return self.part.decides and self.reachable

    @property
    def sized_at(self) -> float:
        return self.part.sized_at

    @property
    def power(self) -> float:
        return self.part.power

    @property
    def q_fail(self) -> float:
        return self.part.q_fail

    @property
    def q_pass(self) -> float:
        return self.part.q_pass

    @property
    def answers_needed(self) -> int | None:
        return self.part.answers_needed

    @property
    def limit_it_decides(self) -> float | None:
        return self.part.limit_it_decides

    @property
    def rate_it_decides(self) -> float | None:
        return self.part.rate_it_decides

    @property
    def fail_labels(self) -> int:
        return self.design.sizes(self.judged_fail)[0] if self.design is not None else 0

    @property
    def pass_labels(self) -> int:
        return self.design.sizes(self.judged_fail)[1] if self.design is not None else 0

    @property
    def labels(self) -> int:
        return self.fail_labels + self.pass_labels

    def as_dict(self) -> dict[str, Any]:
        """The plan as result.json's `audit_plan` carries it (the draw's seed is the run's, added there)."""
        return {
            "judged_fail": {"population": self.judged_fail, "labels": self.fail_labels},
            "judged_pass": {"population": self.judged_pass, "labels": self.pass_labels},
            "labels": self.labels,
            "limit": self.limit,
            "confidence": self.confidence,
            "predicted": self.predicted,
            "aim": self.aim,
            "sized_at": self.sized_at,
            "power": self.power,
            "power_target": self.power_target,
            "decides": self.decides,
            "calibrated": self.calibrated,
            "answers_needed": self.answers_needed,
            "limit_it_decides": self.limit_it_decides,
            "designs": self.designs_dict(),
            "method": self.method,
        }

    def designs_dict(self) -> list[dict[str, Any]]:
        """The design this run's prediction chose, as fixed before K, and whether people label it (the other
        is not sized: `gate validate --lane` shows both)."""
        part = self.part
        design = part.design
        caps = None if design is None else {"judged_fail": design.fail_cap, "judged_pass": design.pass_cap}
        return [
            {
                "verdict": part.side,
                "sized_at": part.sized_at,
                "expected_judged_fail": part.expected_k,
                "power": part.power,
                "decides": part.decides,
                "caps": caps,
                "labelled": self.design is not None,
            }
        ]


def predicted(judged_fail: int, n: int, calibration: Calibration | None) -> tuple[float, float, float, bool]:
    """The failure rate calibration predicts for this run (Rogan-Gladen at K/n), and the shares people are
    expected to fail among the answers the judge failed (PPV) and passed (false-omission rate). Without
    usable calibration the judge is taken at its word: the rate is K/n, every answer it failed fails."""
    share = judged_fail / n if n else 0.0
    se, sp = _usable(calibration)
    if se is None or sp is None:
        return share, 1.0, 0.0, False
    rate = float(rogan_gladen(share, se, sp, empty=share)[()])
    return rate, _ppv(rate, se, sp), _for(rate, se, sp), True


def _usable(calibration: Calibration | None) -> tuple[float | None, float | None]:
    se = calibration.se if calibration is not None else None
    sp = calibration.sp if calibration is not None else None
    return (se, sp) if se is not None and sp is not None and se + sp > 1.0 else (None, None)


def expected(rate: float, n: int, calibration: Calibration | None) -> tuple[int, float, float]:
    """The K calibration expects of a run of n answers failing at `rate`, and the shares people would fail
    in each stratum (without usable calibration the judge is taken at its word: K = n * rate)."""
    se, sp = _usable(calibration)
    if se is None or sp is None:
        return min(n, round(n * rate)), 1.0, 0.0
    k = min(n, round(n * (se * rate + (1 - sp) * (1 - rate))))
    return k, _ppv(rate, se, sp), _for(rate, se, sp)


def sizing_rates(side: Aim, limit: float, pass_sized_at: float | None = None) -> tuple[float, ...]:
    """The rates a design for `side` may be sized at, in the order tried: to pass, the slice's
    `audit_sized_at`, else a quarter of the limit; twice, three and five times it to show exceeded (a rate
    past halfway from the limit to 1 is that)."""
    if side == "passed":
        return (pass_sized_at if pass_sized_at is not None else limit * PASS_SIZED_AT,)
    return tuple(dict.fromkeys(min(limit * m, (1.0 + limit) / 2) for m in EXCEED_SIZED_AT))


def plan_audit(
    *,
    judged_fail: int,
    judged_pass: int,
    calibration: Calibration | None,
    limit: float,
    confidence: float,
    power: float = POWER,
    pass_sized_at: float | None = None,
) -> Sizing:
    """The slice's two designs, each the fewest labels that reach `power` on its verdict at its rate, sized
    from n and calibration only (`size_part`, the same whatever K the run had), and this run's prediction,
    which chooses between them."""
    box_share(confidence)  # the same check of confidence as every estimate
    if judged_fail < 0 or judged_pass < 0:
        raise ValueError(f"stratum sizes must be >= 0, not {judged_fail} and {judged_pass}")
    if pass_sized_at is not None and not 0.0 < pass_sized_at < limit:
        raise ValueError(f"the rate to size the design to pass at must be in (0, {limit}), not {pass_sized_at}")
    n = judged_fail + judged_pass
    rate, _, _, calibrated = predicted(judged_fail, n, calibration)
    return Sizing(
        n=n, judged_fail=judged_fail, limit=limit, confidence=confidence, predicted=rate, calibrated=calibrated,
        calibration=calibration, power_target=power, pass_sized_at=pass_sized_at,
    )  # fmt: skip


@functools.lru_cache(maxsize=256)
def size_part(
    side: Aim,
    n: int,
    calibration: Calibration | None,
    limit: float,
    confidence: float,
    power: float = POWER,
    pass_sized_at: float | None = None,
) -> Part:
    """One design fixed before K: the fewest labels with which its verdict's test reaches `power` at its
    rate and the K calibration expects there. The rate is the first of `sizing_rates` at which a plan short
    of the whole slice reaches it, else the first at which a whole audit of n answers does (a judge that
    fails many good answers may need a product further over the limit before its failures alone show
    it); where none does, no design and what would at the first rate."""
    alpha = (1.0 - confidence) * (EXCEED_ALPHA_SHARE if side == "exceeded" else 1.0)
    rates = sizing_rates(side, limit, pass_sized_at)
    decidable = [r for r in rates if n and _whole_power(side, n, r, limit, alpha) >= power]
    if not decidable:
        rate = rates[0]
        k, q_f, q_p = expected(rate, n, calibration)
        whole = _whole_power(side, n, rate, limit, alpha)
        needed, nearest = _what_would(side, n, rate, limit, alpha, power)
        highest = _highest_rate_passed(n, limit, alpha, power) if side == "passed" else None
        return Part(
            side, None, rate, k, q_f, q_p, whole, False, answers_needed=needed, limit_it_decides=nearest,
            rate_it_decides=highest,
        )  # fmt: skip
    found: tuple[float, at.Design] | None = None
    # To show a slice exceeded, the judged-fail answers alone first, at each rate (a search of seconds at most);
    # then with judged-pass answers too, at the first rate only (a search that can take minutes).
    for rate, mixed in [(r, side == "passed") for r in decidable] + (
        [(decidable[0], True)] if side == "exceeded" else []
    ):
        k, q_f, q_p = expected(rate, n, calibration)
        design = _smallest(side, k, n, q_f, q_p, limit, alpha, power, mixed=mixed)
        if design is not None:
            found = (rate, design)
            break
    rate, design = found or (decidable[0], at.Design(n, n, n))
    k, q_f, q_p = expected(rate, n, calibration)
    reached = plan_power(side, design, k, q_f, q_p, rate, limit, alpha)
    return Part(side, design, rate, k, q_f, q_p, reached, reached >= power)


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
        x = _whole_pass_threshold(n, limit, alpha)
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
    aim: Aim, k: int, n: int, q_f: float, q_p: float, limit: float, alpha: float, power: float, mixed: bool = True
) -> at.Design | None:
    """The capped design with the fewest labels at this K that reaches `power` (None: none of them does)."""
    # A cap at or above K labels this run's whole judged-fail stratum (and the first K of a larger one); K
    # itself is tried too, so a stratum larger than the ladder has a plan short of a whole audit. With K = 0 any
    # cap labels the whole (empty) stratum: the design still needs one for the K the run could have had, and
    # the ladder's first is as good as any (at K = 0 only the judged-pass labels decide).
    caps = sorted({min(c, k) for c in (*FAIL_CAPS, k) if 0 < min(c, k) <= MAX_PASS_LABELS}) or [FAIL_CAPS[0]]
    if aim == "exceeded":
        fail_only = _smallest_to_exceed(caps, k, n, q_f, q_p, limit, alpha, power)
        if fail_only is not None or not mixed:
            return fail_only
        # A judge that fails many good answers: its failures alone cannot show the slice exceeded; the judged-pass
        # answers people fail can, as they can pass it.
    found: dict[int, int | None] = {}

    def total(i: int, guess: int) -> float:
        if i not in found:
            found[i] = _fewest_pass_labels(aim, k, n, caps[i], guess, q_f, q_p, limit, alpha, power)
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
    between it and the one below, tried one by one where the gap is small (the power is a saw in the cap:
    each step of the Clopper-Pearson bound's threshold drops it, so halving could step over the smallest
    that reaches); in a wide gap (past the ladder, at a large K) halved to within 12 first."""

    def reaches(cap: int) -> bool:
        return _reaches("exceeded", at.Design(n, cap, 0), k, q_f, q_p, limit, alpha, power)

    below = 0
    for cap in caps:
        if reaches(cap):
            lo, hi = below, cap
            while hi - lo > 12:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
            fewest = next((c for c in range(lo + 1, hi) if reaches(c)), hi)
            return at.Design(n, fewest, 0)
        below = cap
    return None


def _fewest_pass_labels(
    aim: Aim,
    k: int,
    n: int,
    fail_cap: int,
    guess: int,
    q_f: float,
    q_p: float,
    limit: float,
    alpha: float,
    power: float,
) -> int | None:
    """The fewest judged-pass labels with which the design reaches `power` on `aim`, searched from `guess`:
    out by a fifth at a time to a bracket, then halving (power rises with the labels up to the steps of a
    discrete test, which "fewest" allows)."""
    top = min(n - k, MAX_PASS_LABELS)
    if top < 1:
        return None

    def reaches(m: int) -> bool:
        return _reaches(aim, at.Design(n, fail_cap, m), k, q_f, q_p, limit, alpha, power)

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


def _whole_pass_threshold(n: int, limit: float, alpha: float) -> int:
    """The most failures a whole audit of n answers may find and pass `limit`: the largest x with
    P(X <= x | limit) <= alpha (-1: none)."""
    from scipy.stats import binom

    x = int(binom.ppf(alpha, n, limit))  # found near here
    while x >= 0 and binom.cdf(x, n, limit) > alpha:
        x -= 1
    return x


def _highest_rate_passed(n: int, limit: float, alpha: float, power: float) -> float | None:
    """The highest failure rate at which a whole audit of n answers passes `limit` with `power` (None: it
    never passes): the whole audit passes at x <= x*, and P(X <= x* | n, rate) falls with the rate."""
    if n == 0 or not 0.0 < limit < 1.0:
        return None
    from scipy.special import betaincinv

    x = _whole_pass_threshold(n, limit, alpha)
    if x < 0:
        return None
    if x >= n:
        return 1.0
    # P(X <= x | rate) = I_{1 - rate}(n - x, x + 1)
    return float(1.0 - betaincinv(n - x, x + 1, power))


# --- the verdict and the interval, read from exactly the planned sample ---


def planned_sample(count: int, population: int, labels: Sequence[str | None]) -> StratumSample:
    """A stratum's planned sample from the final labels of its draw in order ('fail', 'pass', anything else
    or None: no final pass or fail): only the first `count` are read, whatever lies past them."""
    head = list(labels[:count]) + [None] * max(0, count - len(labels))
    fails = sum(1 for x in head if x == "fail")
    passes = sum(1 for x in head if x == "pass")
    return StratumSample(population=population, size=count, fails=fails, passes=passes, case_ids=())


Labels = Sequence[str | None]  # a stratum's final labels ('fail', 'pass', else open) in its draw order


def plan_verdict(plan: Sizing, fail: Labels, passed: Labels) -> AuditVerdict:
    """The verdict from exactly the planned labels (each stratum's final labels in draw order; what lies past
    the plan is not read), each verdict's test at its level in the labelled design. `passed` counts each
    planned item without a final label as failing, `exceeded` as passing, so neither is helped by leaving an
    item open."""
    design, k = plan.design, plan.judged_fail
    if design is None:
        return "inconclusive"
    fs, ps = planned_sample(plan.fail_labels, k, fail), planned_sample(plan.pass_labels, plan.judged_pass, passed)
    if at.rejects("exceeded", design, k, fs.fails, ps.fails, plan.limit, plan.alpha("exceeded")):
        return "exceeded"
    high_fails = (fs.fails + fs.open, ps.fails + ps.open)
    if plan.pass_design is not None and at.rejects("passed", design, k, *high_fails, plan.limit, plan.alpha("passed")):
        return "passed"
    return "inconclusive"


def plan_rate(
    plan: Sizing, fail: Labels, passed: Labels, fail_ids: Sequence[str] = (), pass_ids: Sequence[str] = ()
) -> AuditRate:
    """The audit's estimate and its interval from the planned labels: each bound the edge of its verdict's
    test (the verdict at the limit agrees with them), open items against each; the upper bound is 1 where
    the design is not one `passed` is read from. `fail_ids`/`pass_ids`: the planned answers, carried into
    the samples."""
    k, n, design = plan.judged_fail, plan.n, plan.design
    fs = replace(planned_sample(plan.fail_labels, k, fail), case_ids=tuple(fail_ids[: plan.fail_labels]))
    ps = replace(planned_sample(plan.pass_labels, n - k, passed), case_ids=tuple(pass_ids[: plan.pass_labels]))
    high, low = 1.0, 0.0
    if design is not None:
        low = at.bound("exceeded", design, k, fs.fails, ps.fails, plan.alpha("exceeded"))
        if plan.pass_design is not None:
            high = at.bound("passed", design, k, fs.fails + fs.open, ps.fails + ps.open, plan.alpha("passed"))
    pi = Rate(value=k / n if n else 0.0, low=0.0, high=1.0, x=k, n=n)
    q_f, q_p = _share(fs), _share(ps)
    settled = all(s.population == 0 or s.fails + s.passes > 0 for s in (fs, ps))
    estimate = pi.value * q_f.value + (1 - pi.value) * q_p.value if n and settled and plan.labels else None
    return AuditRate(estimate=estimate, low=low, high=high, judged_fail=k, n=n, pi=pi, q_fail=q_f, q_pass=q_p,
                     fail_sample=fs, pass_sample=ps, confidence=plan.confidence, method=plan.method)  # fmt: skip


def _share(sample: StratumSample) -> Rate:
    labelled = sample.fails + sample.passes
    return Rate(value=sample.fails / labelled if labelled else 0.0, low=0.0, high=1.0, x=sample.fails, n=sample.size)
