"""A planned audit: its two exact tests hold their level, its verdict reads exactly the planned items, and the
planner sizes a plan that decides, or says before any label that none can and what would.

The size checks enumerate every outcome of small slices exactly (K, then each stratum's planned sample), at
points of the null that include the corners an adversary would pick (a judge that fails nothing, people
failing every answer the judge failed, none of them).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from gate.estimate import audit_sizing as sz
from gate.estimate import audit_tests as at

ALPHA = 0.05


def region_edge(side: at.Side, design: at.Design, limit: float) -> float | None:
    """The last statistic value the test rejects at (None: none): the verdict is the test at the outcome's
    statistic, and the test is monotone in it."""
    values = sorted(
        {
            at.statistic(side, design, k, x_f, x_p, ALPHA)
            for k in range(design.n + 1)
            for x_f in range(design.sizes(k)[0] + 1)
            for x_p in range(design.sizes(k)[1] + 1)
        },
        reverse=side == "exceeded",
    )
    test = at._Test(side, design, limit, ALPHA)
    lo, hi = -1, len(values)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if test.at_most(values[mid]) else (lo, mid)
    return values[lo] if lo >= 0 else None


def worst_size(side: at.Side, design: at.Design, edge: float, limit: float) -> float:
    """The largest P(the verdict `side`) over points of the null on the limit (where a test is likeliest to
    err), summed exactly over every outcome: K, then each stratum's planned sample."""
    pis, q_fs = np.meshgrid(np.linspace(0.0, 0.95, 20), np.linspace(0.0, 1.0, 21), indexing="ij")
    q_ps = (limit - pis * q_fs) / (1 - pis)
    on = (q_ps >= 0.0) & (q_ps <= 1.0)
    pis, q_fs, q_ps = pis[on], q_fs[on], q_ps[on]
    total = np.zeros(pis.shape)
    for k in range(design.n + 1):
        a_f, a_p = design.sizes(k)
        values = np.array(
            [[at.statistic(side, design, k, x_f, x_p, ALPHA) for x_p in range(a_p + 1)] for x_f in range(a_f + 1)]
        )
        verdict = (values <= edge) if side == "passed" else (values >= edge)
        p_f = binom.pmf(np.arange(a_f + 1)[None, :], a_f, q_fs[:, None])
        p_p = binom.pmf(np.arange(a_p + 1)[None, :], a_p, q_ps[:, None])
        total += binom.pmf(k, design.n, pis) * np.einsum("gf,gx,fx->g", p_f, p_p, verdict.astype(float))
    return float(total.max())


@pytest.mark.parametrize(
    ("side", "design", "limit"),
    [("passed", at.Design(30, 6, 15), 0.3), ("exceeded", at.Design(20, 4, 6), 0.15)],
)
def test_each_planned_test_reaches_its_verdict_at_most_one_time_in_twenty_where_it_is_wrong(
    side: at.Side, design: at.Design, limit: float
) -> None:
    edge = region_edge(side, design, limit)
    assert edge is not None  # the slice is large enough for the test to decide sometimes
    # The region is the verdict's: an outcome just inside rejects, one just outside does not.
    inside = next(
        (k, x_f, x_p)
        for k in range(design.n + 1)
        for x_f in range(design.sizes(k)[0] + 1)
        for x_p in range(design.sizes(k)[1] + 1)
        if at.statistic(side, design, k, x_f, x_p, ALPHA) == edge
    )
    assert at.rejects(side, design, *inside, limit, ALPHA)
    assert 0.01 < worst_size(side, design, edge, limit) <= ALPHA + 1e-9  # near its level somewhere, never past it


def test_a_whole_audit_reads_clopper_pearson_on_every_failure_people_found() -> None:
    # 70 answers, every one labelled: 6 failing, 4 of them among the answers the judge failed. The lower
    # bound counts the 2 the judge passed too: Clopper-Pearson on 6 of 70 (3.8%), not the 1.8% of 4.
    whole = at.Design(70, 70, 70)
    low = at.bound("exceeded", whole, 10, 4, 2, ALPHA)
    assert low == pytest.approx(0.0378, abs=5e-4)
    assert at.rejects("exceeded", whole, 10, 4, 2, 0.037, ALPHA)


@pytest.mark.parametrize("labelled", [60, 150, 180, 200])
def test_more_judged_fail_labels_never_turn_exceeded_into_a_verdict_an_override_may_waive(labelled: int) -> None:
    # 3,000 answers, the judge failed 200, people confirm 70% of those they label; the limit is 3.4%. Today 60
    # labels read exceeded, 150 and 180 inconclusive, all 200 exceeded again.
    design = at.Design(3000, labelled, 0)
    confirmed = round(0.7 * labelled)
    assert at.rejects("exceeded", design, 200, confirmed, 0, 0.034, ALPHA)


def test_within_a_plan_each_label_can_only_move_the_verdict_towards_what_it_says() -> None:
    plan = sz.plan_audit(
        judged_fail=12, judged_pass=988, calibration=sz.Calibration(85, 15, 990, 10), limit=0.05, confidence=0.95
    )
    assert plan.decides and plan.aim == "passed"
    fails = ["fail"] + ["pass"] * (plan.fail_labels - 1)
    clean = ["pass"] * plan.pass_labels
    # Labelled one at a time, all passing: open planned items count as failing for `passed`, so the slice
    # passes only once every planned item has its label; stopping early cannot pass it.
    verdicts = [
        sz.plan_verdict(plan, fails, clean[:done])
        for done in (0, plan.pass_labels // 2, plan.pass_labels - 1, plan.pass_labels)
    ]
    assert verdicts == ["inconclusive", "inconclusive", "inconclusive", "passed"]
    # A label past the plan is not read: a failure found there changes nothing.
    assert sz.plan_verdict(plan, fails, [*clean, "fail"]) == "passed"


def test_the_planner_says_before_any_label_that_no_audit_of_a_70_answer_slice_decides_a_5_percent_limit() -> None:
    # The trial: 70 answers a slice, 2 judged fail, a judge with Se 0.85 and Sp 0.99. Even people labelling all
    # 70 pass a 5% limit only if none fails (Clopper-Pearson on 0 of 70 is 4.2%): at the predicted rate that is
    # far from 80% of the time. The plan has no labels and says what would decide.
    plan = sz.plan_audit(
        judged_fail=2, judged_pass=68, calibration=sz.Calibration(85, 15, 990, 10), limit=0.05, confidence=0.95
    )
    assert not plan.decides and plan.labels == 0 and plan.power < 0.8
    assert plan.answers_needed is not None and plan.answers_needed > 70
    assert plan.limit_it_decides is not None and plan.limit_it_decides > 0.05
    # The verdict of an empty plan is never `passed`.
    assert sz.plan_verdict(plan, ["pass"] * 2, ["pass"] * 68) == "inconclusive"


def test_an_outcome_that_passes_with_fewer_judged_pass_labels_passes_with_more() -> None:
    # The pass region does not shrink as the plan's judged-pass sample grows: the same failures found among
    # more labels never lose the verdict (today's test lost it: P(passed) 68% at 190 labels, 50% at 230).
    before: set[tuple[int, int]] = set()
    for labels in (40, 60, 100):
        design = at.Design(400, 6, labels)
        region = {
            (x_f, x_p)
            for x_f in range(7)
            for x_p in range(4)
            if at.rejects("passed", design, 12, x_f, x_p, 0.08, ALPHA)
        }
        assert before <= region, f"{sorted(before - region)} passed with fewer labels than {labels}"
        before = region
    assert len(before) > 10  # the region grew, not only kept what it had


def test_once_a_plan_reads_exceeded_no_further_label_takes_it_away() -> None:
    # 3,000 answers, the judge failed 131, a 2% limit: the plan labels judged-fail answers only. Open items count
    # as passing for `exceeded`, so each label can only add a failure: once exceeded, always exceeded.
    plan = sz.plan_audit(
        judged_fail=131, judged_pass=2869, calibration=sz.Calibration(85, 15, 990, 10), limit=0.02, confidence=0.95
    )
    assert plan.decides and plan.aim == "exceeded" and plan.pass_labels == 0
    labels = ["fail", "fail", "pass", *["fail"] * (plan.fail_labels - 3)]
    verdicts = [sz.plan_verdict(plan, labels[:done], []) for done in range(plan.fail_labels + 1)]
    first = verdicts.index("exceeded")
    assert first > 0 and set(verdicts[first:]) == {"exceeded"}


def test_a_slice_whose_judge_failed_nothing_gets_a_plan_of_34_labels_not_a_whole_audit_of_120() -> None:
    # The example product's account-security: 120 answers, the judge failed none (K = 0), calibration Se 50/60
    # and Sp 120/120, a 10% limit. The plan to pass was sized before K, for a product at 2.5% (a quarter of the
    # limit, about 3 of 120 judged fail): 34 judged-pass answers (and up to 3 judged-fail ones), not all 120.
    plan = sz.plan_audit(
        judged_fail=0, judged_pass=120, calibration=sz.Calibration(50, 10, 120, 0), limit=0.10, confidence=0.95
    )
    assert (plan.decides, plan.aim, plan.fail_labels, plan.pass_labels) == (True, "passed", 0, 34)
    assert plan.pass_design is not None and plan.sized_at == 0.025
    # Its test is exact: at the limit no point of the null passes it more than one time in twenty.
    edge = region_edge("passed", plan.pass_design, 0.10)
    assert edge is not None and worst_size("passed", plan.pass_design, edge, 0.10) <= ALPHA + 1e-9
    # A truthful audit, simulated: people fail each planned answer at the rate they would. Where the application
    # fails none the verdict passes as planned; at 1% it passes as often as the plan's power there says.
    rng = np.random.default_rng(45)
    for rate in (0.0, 0.01):
        passed = 0
        for _ in range(400):
            labels = ["fail" if u < rate else "pass" for u in rng.random(plan.pass_labels)]
            passed += sz.plan_verdict(plan, [], labels) == "passed"
        planned = sz.plan_power("passed", plan.pass_design, 0, plan.q_fail, rate, rate, 0.10, ALPHA)
        assert planned >= (0.8 if rate == 0.0 else 0.7)
        assert abs(passed / 400 - planned) < 4 * (planned * (1 - planned) / 400) ** 0.5 + 1e-9


@pytest.mark.parametrize(("judged_fail", "n"), [(0, 60), (0, 400), (1, 120), (2, 120), (0, 29), (0, 28)])
def test_a_slice_whose_judge_failed_few_or_none_is_planned_short_of_a_whole_audit_where_one_decides(
    judged_fail: int, n: int
) -> None:
    # Tiny slices are what an adversary picks: the plan decides wherever a whole audit of the run could (0 failures
    # in 29 answers is 4.7% at a 10% limit, in 28 it is 5.2%), and asks for fewer labels than the whole slice
    # wherever its test allows it.
    plan = sz.plan_audit(
        judged_fail=judged_fail,
        judged_pass=n - judged_fail,
        calibration=sz.Calibration(50, 10, 120, 0),
        limit=0.10,
        confidence=0.95,
    )
    whole = sz._whole_power("passed", n, plan.sized_at, 0.10, ALPHA)
    assert plan.decides == (whole >= 0.8)
    if plan.decides:
        assert plan.power >= 0.8
        if n >= 60:
            assert plan.labels <= 40
    else:
        assert plan.labels == 0 and plan.answers_needed is not None


@pytest.mark.parametrize(("n", "limit"), [(120, 0.10), (400, 0.05), (3000, 0.02)])
def test_the_designs_each_verdict_reads_are_the_same_whatever_k_the_run_had(n: int, limit: float) -> None:
    # The tests are exact for a design fixed before K. A planner that sized each run's design from its own K
    # passed a product at its limit up to 5.8% of the time; here K only chooses which fixed design is read.
    calibration = sz.Calibration(50, 10, 120, 0)
    seen: dict[str, set[at.Design]] = {"passed": set(), "exceeded": set()}
    for k in sorted({*range(0, n + 1, max(1, n // 40)), 1, 2, 3}):
        plan = sz.plan_audit(judged_fail=k, judged_pass=n - k, calibration=calibration, limit=limit, confidence=0.95)
        if plan.design is not None:
            seen[plan.aim].add(plan.design)
            assert plan.labels == sum(plan.design.sizes(k))
            assert plan.alpha("passed") == pytest.approx(ALPHA) and plan.alpha("exceeded") < ALPHA
    assert len(seen["passed"]) == 1 and len(seen["exceeded"]) == 1
    # The two routes to `exceeded` share 1 - confidence between them.
    low = sz.plan_audit(judged_fail=0, judged_pass=n, calibration=calibration, limit=limit, confidence=0.95)
    high = sz.plan_audit(judged_fail=n, judged_pass=0, calibration=calibration, limit=limit, confidence=0.95)
    assert low.alpha("exceeded") + high.alpha("exceeded") == pytest.approx(ALPHA)


def test_a_judge_failing_few_on_the_run_no_longer_passes_a_product_at_its_limit_more_than_one_time_in_twenty() -> None:
    # Found by bench/audit_steering.py (section 4): 120 answers, a 10% limit, calibration Se 50/60 and Sp 120/120,
    # and a judge that on this run catches 10% of the failures (Sp 1.0). With each run's plan sized from its own
    # K, a product at its limit passed 5.34% of the time (4 designs). Exact here: every K, every outcome of its plan's labels.
    n, limit, se, sp = 120, 0.10, 0.1, 1.0
    pi = se * limit + (1 - sp) * (1 - limit)
    q_f, q_p = se * limit / pi, (1 - se) * limit / (1 - pi)
    calibration = sz.Calibration(50, 10, 120, 0)
    chance, edges = 0.0, {}
    for k in range(n + 1):
        weight = binom.pmf(k, n, pi)
        plan = sz.plan_audit(judged_fail=k, judged_pass=n - k, calibration=calibration, limit=limit, confidence=0.95)
        design = plan.pass_design
        if weight < 1e-12 or design is None:
            continue
        if design not in edges:  # the verdict is the test at the outcome's statistic, monotone in it
            edges[design] = region_edge("passed", design, limit)
        edge = edges[design]
        a_f, a_p = design.sizes(k)
        for x_f in range(a_f + 1):
            for x_p in range(a_p + 1):
                if edge is not None and at.statistic("passed", design, k, x_f, x_p, ALPHA) <= edge:
                    chance += weight * binom.pmf(x_f, a_f, q_f) * binom.pmf(x_p, a_p, q_p)
    assert len(edges) == 1 and 0.01 < chance <= ALPHA


def test_a_slice_none_of_whose_answers_was_judged_says_so_not_what_a_run_of_zero_answers_would_need() -> None:
    # A provider fault on every answer: the plan has nothing to be sized on. It said "no audit of this run's 0
    # answers can decide its 10% limit ... what would: a run of about 90 answers" of a slice of 120.
    from gate.decide.product.audit_plan import undecidable_words

    plan = sz.plan_audit(
        judged_fail=0, judged_pass=0, calibration=sz.Calibration(50, 10, 120, 0), limit=0.1, confidence=0.95
    )
    assert not plan.decides and plan.labels == 0
    assert undecidable_words(plan) == (
        "no answer of this slice has the judge's verdict yet: its plan is drawn from the answers judged"
    )
