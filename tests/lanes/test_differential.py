"""The generative differential test (issue 28): small random suites, each run through every path
against the fake provider, compared with the plain run. tests/differential.py has the suites, the
scripted judge, the paths and the oracle; this file draws the suites and checks the properties.

The properties, for every path:
- it reaches the plain run's state, blockers (kind, slice, case ids) and counts; the one allowed
  difference is `stop_when_decided`, which may stop only when the full run is `quality_failed`,
  and then says `quality_failed`;
- `cost.http_attempts` equals the requests the fake provider saw (a kill may leave attempts
  journalled as sent that never arrived: at most one per request in flight), and a judgment
  recorded before a kill is never paid for again;
- spend stays within the boundary, and a run the boundary stopped has at most one refused
  reservation of headroom left;
- the dry run names exactly the plain run's findings known before any call.

`make test` runs a small seeded number of examples (profile `lanes-ci`, derandomized, no
database); `make fuzz-lanes` runs thousands (profile `lanes-fuzz`, `GATE_FUZZ_LANES=N` examples).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from differential import (
    PATHS,
    ROLE_LABEL,
    ROLES,
    CaseSpec,
    Lab,
    Outcome,
    Script,
    Suite,
    arm,
    gate,
    key_env,
    plain,
    pre_call,
    projection,
    refused_beside_regression,
    write,
    write_bases,
    write_product_calibration,
)
from fake_github import FakeGitHub
from fake_openai import FakeOpenAI
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from runner_env import runner_env

from gate.action import main as action_main

FUZZ_ENV = "GATE_FUZZ_LANES"
_COMMON: dict[str, Any] = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    "print_blob": True,
}
FUZZING = bool(os.environ.get(FUZZ_ENV))
# make fuzz-lanes splits its examples in half, plain lanes and product lanes, and each half over PARTS
# tests with their own random seeds (xdist runs them side by side): 2,000 examples is 2,000 in all.
PARTS = max(1, int(os.environ.get("GATE_FUZZ_PARTS") or 2)) if FUZZING else 1
settings.register_profile("lanes-ci", max_examples=10, derandomize=True, **_COMMON)
settings.register_profile(
    "lanes-fuzz", max_examples=-(-int(os.environ.get(FUZZ_ENV) or 2000) // (2 * PARTS)), **_COMMON
)
PROFILE = "lanes-fuzz" if FUZZING else "lanes-ci"

EPS = 1e-12
PAIR_STOP = "scheduling stopped: pair violated"

# -- drawing a suite ----------------------------------------------------------------------------

FINALS = ("agree", "agree", "agree", "agree", "disagree", "disagree", "bad_request", "server_down", "parse")


def scripts(draw: st.DrawFn, repeats: int, max_attempts: int) -> Script:
    finals = FINALS + (("unstable", "unstable") if repeats > 1 else ())
    final = draw(st.sampled_from(finals))
    transients: tuple[str, ...] = ()
    if final != "unstable":
        n = draw(st.integers(0, max_attempts - 1))
        transients = tuple(draw(st.lists(st.sampled_from(("429", "500", "drop")), min_size=n, max_size=n)))
    delay = draw(st.sampled_from((0.0, 0.0, 0.0, 0.005, 0.02)))
    usage = draw(st.sampled_from((True, True, True, False)))
    return Script(final, transients, delay, usage)


def controls(draw: st.DrawFn, slice_name: str, repeats: int, max_attempts: int) -> list[CaseSpec]:
    out = []
    for role in ROLES:
        if draw(st.integers(0, 19)) == 0:  # a role left out: control_missing
            continue
        script = Script() if draw(st.integers(0, 5)) else scripts(draw, repeats, max_attempts)
        out.append(
            CaseSpec(
                f"ctl-{role}",
                slice_name,
                ROLE_LABEL.get(role, "fail"),
                script,
                role=role,
                reference=role != "missing_evidence",
            )
        )
    return out


def pair_up(draw: st.DrawFn, cases: list[CaseSpec]) -> list[CaseSpec]:
    """Up to two pairs of either kind; most agree with their labels (a pair that does not is an
    input_contract finding)."""
    idx = list(range(len(cases)))
    for p in range(draw(st.integers(0, min(2, len(cases) // 2)))):
        a, b = draw(st.permutations(idx))[:2]
        idx = [i for i in idx if i not in (a, b)]
        kind = draw(st.sampled_from(("flip", "invariant")))
        label = cases[b].label
        if draw(st.integers(0, 9)):  # consistent: flip labels differ, invariant labels match
            other = "fail" if cases[a].label == "pass" else "pass"
            label = other if kind == "flip" else cases[a].label
        cases[a] = CaseSpec(**{**cases[a].__dict__, "pair": (f"p-{p}", kind)})
        cases[b] = CaseSpec(**{**cases[b].__dict__, "pair": (f"p-{p}", kind), "label": label})
    return cases


@st.composite
def suites(draw: st.DrawFn) -> Suite:
    n_slices = draw(st.integers(1, 3))
    slices = tuple((f"s{i}", draw(st.integers(0, 1)), draw(st.sampled_from((None, 0, 1)))) for i in range(n_slices))
    repeats = draw(st.sampled_from((1, 1, 3)))
    max_attempts = draw(st.sampled_from((2, 3)))
    with_controls = draw(st.integers(0, 4)) > 0
    checks = draw(st.integers(0, 3)) == 0
    cases: list[CaseSpec] = []
    for i in range(draw(st.integers(1, 6))):
        slice_name = draw(st.sampled_from([s[0] for s in slices])) if draw(st.integers(0, 24)) else "zz-unknown"
        cases.append(
            CaseSpec(
                f"c-{i}",
                slice_name,
                draw(st.sampled_from(("pass", "fail"))),
                scripts(draw, repeats, max_attempts),
                reference=draw(st.integers(0, 9)) > 0,
                check=draw(st.sampled_from((None, None, None, "fail", "error"))) if checks else None,
            )
        )
    cases = pair_up(draw, cases)
    missing_evidence = draw(st.sampled_from(("block", "review")))
    waivable = ["false_pass", "false_fail", "pair_violated", "unstable_verdict"]
    if missing_evidence == "review":  # under `block` missing evidence is an input problem no override waives
        waivable.append("missing_evidence")
    overrides = tuple(
        (
            draw(st.sampled_from([c.case_id for c in cases])),
            draw(st.sampled_from(waivable)),
            draw(st.integers(0, 4)) == 0,
        )
        for _ in range(draw(st.sampled_from((0, 0, 0, 1, 2))))
    )
    ctl = controls(draw, slices[0][0], repeats, max_attempts) if with_controls else []
    return Suite(
        slices=slices,
        cases=(*ctl, *cases),
        repeats=repeats,
        max_attempts=max_attempts,
        concurrency=draw(st.sampled_from((1, 1, 2, 4))),
        max_errors=draw(st.integers(0, 2)),
        missing_evidence=missing_evidence,
        controls=with_controls,
        checks=checks,
        overrides=overrides,
        max_total_cost=draw(st.sampled_from((1.0, 1.0, 1.0, 0.002, 0.004, 0.008))),
        kill_at=draw(st.floats(0.0, 0.99)),
        shards=draw(st.integers(2, 3)),
    )


# -- the oracle ---------------------------------------------------------------------------------


def largest_reservation(lab: Lab) -> float:
    """The largest reservation one attempt of this suite can ask for (the gate's own bound)."""
    from gate.judge.cost import judgment_upper_bound
    from gate.model.cases import load_dataset
    from gate.model.policy import load_policy

    loaded = load_policy(lab.policy)
    return max((judgment_upper_bound(loaded, c) for c in load_dataset(loaded).cases), default=0.0)


def check_bill(name: str, lab: Lab, got: Outcome) -> None:
    cost = got.result["cost"]
    assert got.requests <= cost["http_attempts"] <= got.requests + got.slack, (
        f"{name}: http_attempts {cost['http_attempts']}, the provider saw {got.requests}"
    )
    paid_twice = {cid: n for cid, n in got.repaid.items() if n}
    assert not paid_twice, f"{name}: judgments recorded before the kill were paid for again: {paid_twice}"


def check_boundary(name: str, lab: Lab, got: Outcome) -> None:
    spent = got.result["cost"]["budget_spent"]
    assert spent <= got.boundary + EPS, f"{name}: spent {spent} over the boundary {got.boundary}"
    stopped = any(b["kind"] == "budget_exhausted" for b in got.result["blockers"])
    if not stopped or name in ("batch", "shards"):
        return  # a batch reserves whole before it is submitted; each shard has its own share
    headroom = got.boundary - spent
    assert headroom <= largest_reservation(lab) + EPS, (
        f"{name}: the boundary stopped the run with {headroom:.6f} of {got.boundary} unspent, more than one "
        f"reservation ({largest_reservation(lab):.6f})"
    )


def check_same(name: str, lab: Lab, got: Outcome) -> None:
    assert lab.plain is not None
    s, base = lab.suite, lab.plain.result
    a, b = projection(base), projection(got.result)
    if name in ("stop_when_decided", "workers_stop"):
        if s.product:
            check_never_passes(name, base, got.result)
            check_stop_leaves_nothing_unrun(name, s, base, got.result)
        if s.tight and not s.order_free:
            return  # which cases fit the boundary depends on timing: nothing to compare
        if PAIR_STOP in base.get("notes", []) + got.result.get("notes", []):
            # A violated pair stops scheduling; which answers were in flight then (judged) or not yet
            # sent (unrun) depends on timing, on either run: the state must agree.
            assert b["state"] == a["state"], f"{name}: {b['state']} where the plain run has {a['state']}"
            return
        both_failed = base["state"] == got.result["state"] == "quality_failed"
        if s.control_race and not both_failed:  # every lane stops in the controls, deciding or not
            check_control_race(name, s, a, b)
            return
        if s.product and got.result.get("stopped_early") and not (a == b and base.get("stopped_early")):
            _check_product_stop(got.result)
            return
        if s.product and a != b and not got.result.get("stopped_early"):
            _check_product_looks(name, a, b)
            return
        # A lane stops after a failed or errored control whether or not it stops when decided (the
        # full run then has not_needed controls and its own stopped_early): equal results are fine.
        if a != b or (got.result.get("stopped_early") and not base.get("stopped_early")):
            assert (base["state"], got.result["state"]) == ("quality_failed", "quality_failed"), (
                f"{name}: {b} where the full run has {a}"
            )
        return
    if name == "batch" and _control_errs(s):
        return  # NEW defect (reported, test_a_control_error_stops_the_live_lane_as_it_stops_the_batch)
    if name in ("shards", "batch", "kill_resume", "workers") and s.tight:
        return  # the boundary is reached at another point on these paths (a share, batch prices, a kill's spend)
    if name == "kill_resume" and s.stateful:
        return  # answers that disagree across repeats depend on order: a lost answer is asked again
    if name in ("batch", "shards") and PAIR_STOP in base.get("notes", []):
        # The plain lane stopped at a violated pair and left the rest unrun; a batch is submitted
        # whole and a shard may not hold both mates, so they judge on: the state must agree.
        assert b["state"] == a["state"], f"{name}: {b['state']} where the plain run has {a['state']}"
        return
    if s.control_race and name != "decide":
        check_control_race(name, s, a, b)
    elif s.order_free or name == "decide":
        assert b == a, f"{name}: {b}\nwhere the plain run has {a}"
    else:
        assert b["state"] == a["state"], f"{name}: {b['state']} where the plain run has {a['state']}"


def check_control_race(name: str, s: Suite, a: dict[str, Any], b: dict[str, Any]) -> None:
    """Controls judged side by side, one of which fails or errs, stop scheduling when it ends: which
    of the other controls were judged by then depends on timing, so `completed` and `not_needed`
    may split differently (make fuzz-lanes at 10f78e9: 2 and 5 after a kill and resume, 4 and 3 in
    the plain run); a control cut between its repeats is `not_needed` too (it was `unrun`, make
    fuzz-lanes at a041fbf, repeats 3, the batch path's controls). When no control stopped the plain
    run there was no race:
    the results are equal. With one such control everything else agrees; with more, which ended
    first decides which blocker (and state) a path reports, so each must report a control's."""
    if b == a:
        return
    assert _control_stopped(a), f"{name}: {b}\nwhere the plain run, which no control stopped, has {a}"
    if len(s.bad_controls) > 1:
        assert _control_stopped(b), f"{name}: {b}\nreports no control, where controls {s.bad_controls} fail or err"
        return
    assert race_view(b) == race_view(a), f"{name}: {b}\nwhere the plain run has {a}"


def _control_stopped(p: dict[str, Any]) -> bool:
    return any(kind in ("control_error", "control_failed") for kind, _, _ in p["blockers"])


def race_view(p: dict[str, Any]) -> dict[str, Any]:
    """A projection with `completed` and `not_needed` counted together: what a control race may move
    from one to the other."""
    moved = ("completed", "not_needed")
    counts = {k: v for k, v in p["counts"].items() if k not in moved}
    counts["completed or not_needed"] = sum(p["counts"].get(k, 0) for k in moved)
    return {**p, "counts": counts}


def check_never_passes(name: str, full: dict[str, Any], stopped: dict[str, Any]) -> None:
    """A product lane that stops once decided never passes what the full lane fails on the answers'
    failure rate or against the base: a slice the full lane calls exceeded is never passed, and a
    run whose full lane has a slice exceeded or regressed never ends `passed`. (Its answers are judged
    in a seeded random order, so this holds but for a chance the stop's confidence allows: on these
    suites, where a topic that fails sorts last, at worst about five in a million.)"""
    rows = (full.get("product") or {}).get("slices", {})
    exceeded = {n for n, row in rows.items() if row["verdict"] == "exceeded"}
    regressed = {b.get("slice") for b in full["blockers"] if b["kind"] == "regressed"}
    if not exceeded | regressed:
        return
    assert stopped["state"] != "passed", (
        f"{name}: passed where the full lane has slices {sorted(exceeded)} exceeded and {sorted(regressed)} regressed"
    )
    looked = (stopped.get("product") or {}).get("slices", {})
    passed = sorted(n for n in exceeded if looked.get(n, {}).get("verdict") == "passed")
    assert not passed, f"{name}: slices {passed} passed where the full lane calls them exceeded"


def check_stop_leaves_nothing_unrun(name: str, s: Suite, full: dict[str, Any], stopped: dict[str, Any]) -> None:
    """A product lane that stops once decided leaves the answers it did not send `not_needed`: the
    judgments in flight when it stopped are recorded and never turn the decided verdict back into
    unrun cases (evaluation_incomplete). Only a cost boundary the run may reach leaves more unrun."""
    if s.tight:
        return
    more = stopped["counts"]["unrun"] - full["counts"]["unrun"]
    assert more <= 0, f"{name}: {more} more cases unrun than the full lane: {projection(stopped)}"


def check_refused_beside_regression(lab: Lab) -> None:
    """A lane that stops once decided and fails on regression is refused (exit 2) naming the lane
    and both keys: its stop asks the failure rate alone, so it would pass what the paired test fails."""
    code, said = refused_beside_regression(lab)
    assert code == 2 and all(w in said for w in ("lanes.stop", "stop_when_decided", "fail_on_regression")), (
        f"stop_when_decided beside fail_on_regression: exit {code}: {said[-600:]}"
    )


def check_missing_evidence_rule(lab: Lab, got: Outcome) -> None:
    """Under `missing_evidence: review` a case without evidence goes to a person: the rule the team
    chose decides it, so it is never also an input-contract defect for citing no evidence (it has
    none to cite), which would block the whole run."""
    if lab.suite.missing_evidence != "review":
        return
    routed = {c.case_id for c in lab.suite.cases if not c.reference and c.role is None}
    flagged = sorted(
        cid
        for b in got.result["blockers"]
        if b["kind"] == "input_contract" and "human_adjudication.evidence" in b["message"]
        for cid in b["case_ids"]
        if cid in routed
    )
    assert not flagged, f"cases {flagged} routed to review for missing evidence are also input_contract blockers"


def _check_product_stop(stopped: dict[str, Any]) -> None:
    """A product lane stops once every slice is decided on bounds valid at every look: one slice
    exceeded (quality_failed), or every slice passed. The full run may decide otherwise (answers
    after the stop were never judged), so the stopped run is checked on its own."""
    verdicts = {name: row["verdict"] for name, row in stopped["product"]["slices"].items()}
    exceeded = "exceeded" in verdicts.values()
    assert exceeded or stopped["state"] == "quality_failed" or set(verdicts.values()) == {"passed"}, (
        f"stop_when_decided stopped a product lane with slices {verdicts}"
    )


def _check_product_looks(name: str, full: dict[str, Any], looked: dict[str, Any]) -> None:
    """A product lane that stops when decided bounds each failure rate by an interval valid at every
    look, wider than the full run's: on the same answers (it did not stop) a slice it calls exceeded
    or passed, the full run calls the same; it may call inconclusive what the full run decides, or
    incomplete when an answer is missing (the full run's interval can call it exceeded all the same)."""
    assert looked["counts"] == full["counts"], f"{name}: {looked}\nwhere the full run has {full}"
    unanswered = {"missing_response", "unrun_cases", "evaluator_errors", "budget_exhausted"}
    undecided = ("inconclusive", "incomplete") if unanswered & {x[0] for x in looked["blockers"]} else ("inconclusive",)
    for slice_name, (verdict, n, k, _decided_by) in looked["product"].items():
        full_verdict, full_n, full_k, _ = full["product"][slice_name]
        assert (n, k) == (full_n, full_k) and verdict in (full_verdict, *undecided), (
            f"{name}: slice {slice_name} {verdict} ({k} of {n}) where the full run has {full_verdict}"
        )
    rates = ("failure_rate_exceeded", "failure_rate_inconclusive")
    others = [[x for x in p["blockers"] if x[0] not in rates] for p in (full, looked)]
    assert others[0] == others[1], f"{name}: {looked}\nwhere the full run has {full}"
    if looked["product"] == full["product"]:
        assert looked == full, f"{name}: {looked}\nwhere the full run has {full}"


def _control_errs(s: Suite) -> bool:
    return any(c.role is not None and c.script.final in ("bad_request", "server_down", "parse") for c in s.cases)


def check_dry_run(lab: Lab, got: Outcome) -> None:
    """The dry run names the run's findings known before any call, each as often as the run does;
    when those stopped the run before any call, the dry run is the run: state, blockers, counts."""
    assert lab.plain is not None
    dry, run = pre_call(got.result), pre_call(lab.plain.result)
    # A slice with no judge figures is judge_unfit before any call, unless people labelled one of its
    # answers: then whether the audit decides it hangs on the judge's verdicts (which stratum each
    # answer falls in), so only the run can say.
    labelled = set(lab.suite.audited) - set(lab.suite.unanswered)  # no label is made on a missing answer
    audited = {c.slice for c in lab.suite.cases if c.case_id in labelled}
    run = [x for x in run if not (x[0] == "judge_unfit" and x[1] in audited)]
    assert dry == run, f"dry run: {dry}\nwhere the run found before any call: {run}"
    if BLOCKED in lab.plain.result.get("notes", []):
        a, b = projection(lab.plain.result), projection(got.result)
        assert b == a, f"dry run: {b}\nwhere the run, blocked before any call, has {a}"


def check_once(name: str, got: Outcome) -> None:
    """No blocker is listed twice (but each expired override is its own, even for the same case, and
    two checks that fail or cannot fill one case are two blockers)."""
    blockers = [
        (b["kind"], b.get("slice") or "", tuple(sorted(b["case_ids"])), _check_named(b))
        for b in got.result["blockers"]
        if b["kind"] not in ONE_EACH
    ]
    twice = {b for b in blockers if blockers.count(b) > 1}
    assert not twice, f"{name}: blockers listed twice: {sorted(twice)}"


def _check_named(blocker: dict[str, Any]) -> str:
    """The check a check's blocker is about ("gating check NAME (file:function) failed ...")."""
    found = re.search(r"\bcheck (\S+)", blocker["message"]) if blocker["kind"] in CHECK_KINDS else None
    return found.group(1) if found else ""


ONE_EACH = frozenset({"expired_override"})
CHECK_KINDS = frozenset({"check_failed", "check_error"})
BLOCKED = "deterministic checks blocked: no model call was made"


def check_path(name: str, lab: Lab, got: Outcome) -> None:
    check_once(name, got)
    if name == "dry_run":
        check_dry_run(lab, got)
        return
    check_bill(name, lab, got)
    check_boundary(name, lab, got)
    check_same(name, lab, got)


def run_example(suite: Suite, tmp: Path, only: Callable[[str], bool] = lambda name: True) -> None:
    with key_env(), FakeOpenAI() as fake:
        policy = write(suite, tmp / "suite", fake.base_url)
        lab = Lab(suite, policy, fake, tmp)
        if suite.regression:
            check_refused_beside_regression(lab)
            write_bases(lab)
        lab.plain = plain(lab)
        check_missing_evidence_rule(lab, lab.plain)
        check_once("plain", lab.plain)
        check_bill("plain", lab, lab.plain)
        check_boundary("plain", lab, lab.plain)
        for name, path in PATHS.items():
            if only(name):
                got = path(lab)
                if got is not None:
                    check_path(name, lab, got)


# `make fuzz-lanes`: the cheap paths (decide, the dry run) on each example and two of the others,
# drawn, so thousands of examples fit in a sitting. `make test`: every path on each plain example;
# a product example takes the cheap paths and one of three pairs that together are every dear path.
DEAR = ("stop_when_decided", "workers", "workers_stop", "shards", "batch", "kill_resume")
CHEAP = {"decide", "dry_run"}
CHOSEN = (
    st.sets(st.sampled_from(DEAR), min_size=2, max_size=2).map(lambda dear: {*dear, *CHEAP})
    if FUZZING
    else st.just(set(PATHS))
)
CHOSEN_PRODUCT = (
    CHOSEN if FUZZING else st.sampled_from([DEAR[0:2], DEAR[2:4], DEAR[4:6]]).map(lambda dear: {*dear, *CHEAP})
)


@pytest.mark.timeout(0 if FUZZING else 900)  # examples are many small runs; at load 8 too
@pytest.mark.parametrize("part", range(PARTS))
@settings(settings.get_profile(PROFILE))
@given(suite=suites(), chosen=CHOSEN)
def test_every_path_reaches_the_plain_runs_decision(
    part: int, suite: Suite, chosen: set[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    event("dear paths: " + ", ".join(sorted(chosen - CHEAP)))  # --hypothesis-show-statistics
    run_example(suite, tmp_path_factory.mktemp("lanes"), chosen.__contains__)


@st.composite
def product_suites(draw: st.DrawFn) -> Suite:
    """A suite as a product lane; now and then a slice calibration.json has no figures for, and an
    answer the responses file leaves out. At length (make fuzz-lanes) also a topic that fails and
    sorts last, a lane that fails on a regression against a base run, and people's audit of some of
    its answers (`make test`'s seeded
    examples stay the ones they were: no draw is added there)."""
    suite = draw(suites())
    uncalibrated = tuple(name for name, _, _ in suite.slices if draw(st.integers(0, 7)) == 0)
    answered = [c.case_id for c in suite.cases if c.role is None]
    # At least one line stays: an empty responses file is a usage error.
    unanswered = tuple(cid for cid in answered[1:] if draw(st.integers(0, 11)) == 0)
    suite = replace(suite, product=True, uncalibrated=uncalibrated, unanswered=unanswered)
    if FUZZING and draw(st.integers(0, 2)) == 0:
        suite = draw(topic_last(suite))
    if FUZZING and draw(st.integers(0, 3)) == 0:
        suite = replace(suite, regression=True)
    if FUZZING and draw(st.integers(0, 2)) == 0:  # people's audit of some answers, given to every `pr` path
        product = [c.case_id for c in suite.cases if c.role is None]
        suite = replace(suite, audited=tuple(cid for cid in product if draw(st.booleans())))
    return suite


@st.composite
def topic_last(draw: st.DrawFn, suite: Suite) -> Suite:
    """One slice gains a topic of answers: good ones first, then wrong ones (judged fail), their case
    ids sorting after the good ones, as ids that name a topic do. In case-id order a stop would pass
    the slice on the good answers before it reached the wrong ones, where the full lane fails it.
    Judged several at a time, one answer at a time, each a single judgment; no cost boundary."""
    name = draw(st.sampled_from([s[0] for s in suite.slices]))
    good, wrong = draw(st.integers(12, 20)), draw(st.integers(6, 26))
    delays = st.sampled_from((0.0, 0.0, 0.0, 0.002, 0.01))
    topic = [CaseSpec(f"t-a{i:02d}", name, "pass", Script(delay=draw(delays))) for i in range(good)]
    topic += [CaseSpec(f"t-z{i:02d}", name, "fail", Script(delay=draw(delays))) for i in range(wrong)]
    return replace(
        suite,
        cases=(*suite.cases, *topic),
        concurrency=draw(st.sampled_from((2, 4, 8))),
        repeats=1,
        max_total_cost=1.0,
    )


@pytest.mark.timeout(0 if FUZZING else 900)
@pytest.mark.parametrize("part", range(PARTS))
@settings(settings.get_profile(PROFILE))
@given(suite=product_suites(), chosen=CHOSEN_PRODUCT)
def test_every_path_of_a_product_lane_reaches_the_plain_runs_decision(
    part: int, suite: Suite, chosen: set[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The same suites as a product lane: the application's answers from --responses (given to every
    command), judged by a calibrated judge (now and then with no figures for a slice, or an answer missing); every path reaches the plain run's state, blockers,
    counts and each slice's verdict, n and k."""
    event("dear paths: " + ", ".join(sorted(chosen - CHEAP)))
    if any(c.case_id.startswith("t-z") for c in suite.cases):
        event(f"a topic that fails sorts last, concurrency {suite.concurrency}")
    if suite.regression:
        event("fail_on_regression against a base run")
    if suite.audited:
        event("people's audit given to every pr path")
    run_example(suite, tmp_path_factory.mktemp("product"), chosen.__contains__)


# -- regressions: each suite a failure Hypothesis shrank to ---------------------------------------


def controls_with(**scripts: Script) -> tuple[CaseSpec, ...]:
    """The six controls, each answered as its human label says unless `scripts` names its role."""
    return tuple(
        CaseSpec(
            f"ctl-{r}",
            "s0",
            ROLE_LABEL.get(r, "fail"),
            scripts.get(r, Script()),
            role=r,
            reference=r != "missing_evidence",
        )
        for r in ROLES
    )


def test_a_control_error_stops_the_live_lane_as_it_stops_the_batch(tmp_path: Path) -> None:
    """SPEC 8: once a control ended in an evaluator error nothing else is scheduled. The batch lane
    stops there (its cases unrun); the live lane judged every case anyway, so the two disagree on
    the counts and the blockers."""
    suite = Suite(
        slices=(("s0", 0, None),),
        cases=(
            *controls_with(negative=Script("bad_request")),
            CaseSpec("c-0", "s0", "pass"),
            CaseSpec("c-1", "s0", "fail"),
        ),
    )
    with key_env(), FakeOpenAI() as fake:
        lab = Lab(suite, write(suite, tmp_path / "suite", fake.base_url), fake, tmp_path)
        lab.plain = plain(lab)
        live = projection(lab.plain.result)
        batch = projection(PATHS["batch"](lab).result)  # type: ignore[union-attr]
    assert batch == live


def run_paths(suite: Suite, tmp: Path, *names: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The plain run's result and each named path's, for a regression's own assertions."""
    with key_env(), FakeOpenAI() as fake:
        lab = Lab(suite, write(suite, tmp / "suite", fake.base_url), fake, tmp)
        lab.plain = plain(lab)
        got = {name: PATHS[name](lab) for name in names}
    return lab.plain.result, {name: o.result for name, o in got.items() if o is not None}


def test_a_stopped_lane_never_passes_a_flip_pair_the_full_lane_fails(tmp_path: Path) -> None:
    """Issue 28 item 1. People: a pass, b fail; the judge fails a (within the false-fail limit) and passes b (a
    critical false pass). The what-if fills b with its label, sees the pair violated and stops; the
    full lane judges b: quality_failed."""
    suite = Suite(
        slices=(("s0", 0, 1), ("s1", 1, None)),
        cases=(
            *controls_with(),
            CaseSpec("c-a", "s0", "pass", Script("disagree"), pair=("p-0", "flip")),
            CaseSpec("c-b", "s0", "fail", Script("disagree"), pair=("p-0", "flip")),
            *(CaseSpec(f"g-{i}", "s1", "pass") for i in range(3)),
        ),
    )
    full, got = run_paths(suite, tmp_path, "stop_when_decided")
    assert full["state"] == "quality_failed"
    assert got["stop_when_decided"]["state"] == "quality_failed", projection(got["stop_when_decided"])


CHECKED = Suite(
    slices=(("s0", 0, None),),
    cases=(*controls_with(), CaseSpec("c-0", "s0", "pass", check="fail"), CaseSpec("c-1", "s0", "pass", check="error")),
    checks=True,
)


def test_the_dry_run_names_the_check_blockers_the_run_finds_before_any_call(tmp_path: Path) -> None:
    """Issue 28 item 9: the dry run dropped the team's check blockers."""
    full, got = run_paths(CHECKED, tmp_path, "dry_run")
    assert {b[0] for b in pre_call(full)} == {"check_failed", "check_error"}
    assert set(pre_call(got["dry_run"])) == set(pre_call(full))


def test_a_check_blocker_is_listed_once(tmp_path: Path) -> None:
    """A gating check that fails a case, and one that raises: the run's result.json, and gate decide
    on its records, listed each blocker twice (the validators ran the checks, then the run did).
    Every path lists each once: the plain run, stop_when_decided, decide, shards merged, --batch
    collect, a kill then --resume, the dry run."""
    paths = ("stop_when_decided", "decide", "shards", "batch", "kill_resume", "dry_run")
    full, got = run_paths(CHECKED, tmp_path, *paths)
    assert set(got) == set(paths)
    for name, res in {"plain": full, **got}.items():
        checks = sorted(b for b in projection(res)["blockers"] if b[0] in CHECK_KINDS)
        assert checks == [("check_error", "", ("c-1",)), ("check_failed", "", ("c-0",))], name


def test_the_dry_run_names_a_product_slice_the_calibration_has_no_figures_for(tmp_path: Path) -> None:
    """Issue 28 item 9: a product lane whose calibration.json has no figures for slice s1. The run says
    `judge_unfit` on s1 whatever it judges (known before any call); the dry run, deciding outside the
    one assembly without the lane's product evidence, said nothing of it."""
    suite = Suite(
        slices=(("s0", 0, None), ("s1", 0, None)),
        cases=(*controls_with(), CaseSpec("c-0", "s0", "pass"), CaseSpec("c-1", "s1", "pass")),
        product=True,
    )
    with key_env(), FakeOpenAI() as fake:
        policy = write(suite, tmp_path / "suite", fake.base_url)
        write_product_calibration(policy, ["s0"])  # measured before slice s1 was added
        lab = Lab(suite, policy, fake, tmp_path)
        lab.plain = plain(lab)
        dry = PATHS["dry_run"](lab)
    assert dry is not None
    assert ("judge_unfit", "s1", ()) in pre_call(lab.plain.result)
    assert pre_call(dry.result) == pre_call(lab.plain.result)


def test_the_action_lists_a_check_blocker_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Action's run (the container entry point, publishing to the fake GitHub): each check blocker
    once in result.json, in the check run's annotations and in the sticky comment."""
    with key_env(), FakeOpenAI() as fake, FakeGitHub(user_status=403) as github:
        env = runner_env(tmp_path, api_url=github.base_url, fail_on="")
        write(CHECKED, tmp_path / "workspace" / "evals", fake.base_url)
        arm(fake, CHECKED)
        for name, value in {**env, "RAGAS_DO_NOT_TRACK": "true"}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path / "workspace")
        assert action_main() == 1  # quality_failed is in the default fail-on
        res = json.loads((tmp_path / "workspace" / "evals" / "gate-out" / "result.json").read_text())
        (comment,) = github.comments("acme/support-bot", 17)
        (run,) = github.check_runs
    checks = sorted(b for b in projection(res)["blockers"] if b[0] in CHECK_KINDS)
    assert checks == [("check_error", "", ("c-1",)), ("check_failed", "", ("c-0",))]
    titles = sorted(a["title"] for a in run["annotations"])
    assert titles == ["evaluation_incomplete: check_error", "quality_failed: check_failed"]
    assert [comment["body"].count(f"**`{kind}`**") for kind in sorted(CHECK_KINDS)] == [1, 1]


def test_a_dry_run_blocked_before_any_call_is_the_run_whole_and_sharded(tmp_path: Path) -> None:
    """Inputs that stop the run before any call (a case of an undeclared slice, missing evidence
    under `block`) with the team's checks failing and erroring, an expired override: the dry run's
    state, blockers and counts are the run's, for the lane and for one shard of it."""
    suite = Suite(
        slices=(("s0", 0, None),),
        cases=(
            *controls_with(),
            CaseSpec("c-0", "s0", "pass", check="fail"),
            CaseSpec("c-1", "zz-unknown", "pass", check="error"),
            CaseSpec("c-2", "s0", "pass", reference=False),
            CaseSpec("c-3", "s0", "fail"),
        ),
        checks=True,
        overrides=(("c-3", "false_pass", True),),
    )
    with key_env(), FakeOpenAI() as fake:
        lab = Lab(suite, write(suite, tmp_path / "suite", fake.base_url), fake, tmp_path)
        lab.plain = plain(lab)
        dry = PATHS["dry_run"](lab)
        shard = lab.run(lab.out("shard"), "--shard", "1/2")
        args = ("run", "--policy", lab.policy, "--lane", "pr", "--out", lab.out("dry-shard"), "--dry-run")
        _, stdout = gate(*args, "--shard", "1/2", "--format", "json")
        assert fake.count() == 0
    assert dry is not None and BLOCKED in lab.plain.result["notes"] and BLOCKED in shard["notes"]
    kinds = {b[0] for b in projection(lab.plain.result)["blockers"]}
    assert {"unknown_slice", "missing_evidence", "check_failed", "check_error", "expired_override"} <= kinds
    assert projection(dry.result) == projection(lab.plain.result)
    assert projection(json.loads(stdout)) == projection(shard)


def test_the_dry_run_says_the_check_blockers_stop_the_run_passing(tmp_path: Path) -> None:
    """A person reading the dry run's plan sees what the team's checks already decided: the run
    would judge, but could not pass; a gating check that failed a case makes it quality_failed
    whatever the judge says, so the dry run exits 1 as the run will (it exited 0)."""
    with key_env():
        policy = write(CHECKED, tmp_path / "suite", "http://127.0.0.1:9/v1")
        code, stdout = gate("run", "--policy", policy, "--lane", "pr", "--out", tmp_path / "dry", "--dry-run")
    assert code == 1
    assert "cannot pass (check_failed, quality_failed): gating check no_forbidden" in stdout
    assert "cannot pass (check_error, evaluation_incomplete): check explodes" in stdout
    # Each names its cases, as the run's blocker does under it.
    failed = next(line for line in stdout.splitlines() if "cannot pass (check_failed" in line)
    errored = next(line for line in stdout.splitlines() if "cannot pass (check_error" in line)
    assert failed.endswith(" [cases: c-0]") and errored.endswith(" [cases: c-1]"), stdout
    assert "before any call: quality_failed (check_failed); whatever the judge says the run can end no better" in stdout


def test_a_check_that_fails_a_case_decides_a_stopping_lane_before_any_call_and_its_dry_run_says_so(
    tmp_path: Path,
) -> None:
    """A gating check failed c-0, which people labelled pass: quality_failed is certain before any
    call. The stop_when_decided lane sends nothing (it paid for the controls and every case), and its
    dry run says exactly that result and exits 1 as the run does (it exited 0)."""
    suite = Suite(
        slices=(("s0", 0, None),),
        cases=(*controls_with(), CaseSpec("c-0", "s0", "pass", check="fail"), CaseSpec("c-1", "s0", "pass")),
        checks=True,
    )
    with key_env(), FakeOpenAI() as fake:
        policy = write(suite, tmp_path / "suite", fake.base_url)
        arm(fake, suite)
        args = ("run", "--policy", policy, "--lane", "stop", "--format", "json", "--out")
        dry_code, dry = gate(*args, tmp_path / "dry", "--dry-run")
        code, run = gate(*args, tmp_path / "run")
        calls = fake.count()
    assert (code, dry_code, calls) == (1, 1, 0)
    assert projection(json.loads(run)) == projection(json.loads(dry))
    assert [b[0] for b in projection(json.loads(run))["blockers"]] == ["check_failed"]


def test_a_stop_after_an_errored_control_is_the_full_run(tmp_path: Path) -> None:
    """make fuzz-lanes' failure at f257b0f: an errored positive control stops every lane, so the full
    run too leaves a control not_needed and says stopped_early; a stop_when_decided lane whose result
    equals it broke no property (the oracle had asked for quality_failed whenever stopped_early)."""
    suite = Suite(
        slices=(("s0", 0, None),),
        cases=(
            *controls_with(positive=Script("bad_request")),
            CaseSpec("c-0", "s0", "pass", Script("agree", ("429",))),
        ),
        max_attempts=3,
        kill_at=0.0,
    )
    run_example(suite, tmp_path, {"stop_when_decided", "decide"}.__contains__)


def test_controls_raced_by_an_errored_one_may_split_completed_and_not_needed(tmp_path: Path) -> None:
    """make fuzz-lanes' failure at 10f78e9 (FUZZ_EXAMPLES=2000, example ~295 of a plain part): two
    controls judged side by side, the boundary control ending in an error (after a 500 and a 429):
    it stops scheduling when it ends, so which other controls were judged by then depends on
    timing; a killed and resumed run had judged 2 where the plain run judged 4. State, blockers
    and every other count agree; the oracle had asked for the same split."""
    suite = Suite(
        slices=(("s0", 0, None), ("s1", 0, None)),
        cases=(
            *controls_with(boundary=Script("bad_request", ("500", "429"))),
            CaseSpec("c-0", "s1", "pass", Script("parse", ("drop",))),
            CaseSpec("c-1", "s0", "pass", Script("disagree", ("drop",), delay=0.02)),
            CaseSpec("c-2", "s0", "pass", Script("parse", ("drop",))),
        ),
        max_attempts=3,
        concurrency=2,
        overrides=(("c-2", "false_fail", False),),
        kill_at=0.0,
        shards=3,
    )
    assert suite.control_race and not suite.order_free
    base = {"state": "evaluation_incomplete", "blockers": [("control_error", "", ("ctl-boundary",))]}
    counts = {"eligible": 9, "errored": 1, "withheld": 1, "unrun": 0, "review": 0}
    plain_run = {**base, "counts": {**counts, "completed": 4, "not_needed": 3}}
    check_control_race("kill_resume", suite, plain_run, {**base, "counts": {**counts, "completed": 2, "not_needed": 5}})
    with pytest.raises(AssertionError):  # a count outside the split still must agree
        check_control_race(
            "kill_resume", suite, plain_run, {**base, "counts": {**counts, "completed": 2, "not_needed": 4}}
        )
    # make fuzz-lanes at a041fbf (repeats 3, the batch path): a control cut between its repeats was
    # unrun, with an unrun_cases blocker; it is not_needed now, as one never started, and the oracle
    # no longer allows the difference.
    cut = {**base, "counts": {**counts, "completed": 3, "not_needed": 3, "unrun": 1}}
    cut["blockers"] = [*base["blockers"], ("unrun_cases", "", ("ctl-persuasion",))]
    with pytest.raises(AssertionError):
        check_control_race("batch", suite, plain_run, cut)
    check_control_race("batch", suite, plain_run, {**base, "counts": {**counts, "completed": 3, "not_needed": 4}})
    run_example(suite, tmp_path, {"kill_resume", "workers", "decide", "dry_run"}.__contains__)


def test_a_product_lane_that_stops_when_decided_may_call_inconclusive_what_the_full_run_decides(
    tmp_path: Path,
) -> None:
    """make fuzz-lanes at a757374 (a product part, FUZZ_EXAMPLES=2000): slice s1's four answers are
    all wrong and judged so. The full lane's fixed interval calls the slice exceeded
    (`quality_failed`). The same lane with stop_when_decided judged all four too (nothing was decided
    sooner), but its interval is valid at every look, so wider: on four answers, inconclusive
    (`review_required`). That is the design (docs/PRODUCT_GATE.md); the oracle had asked for one
    result."""
    pairs = {"c-0": "p-0", "c-1": "p-1", "c-2": "p-1", "c-3": "p-0"}
    suite = Suite(
        slices=(("s0", 0, None), ("s1", 0, None), ("s2", 0, None)),
        cases=(
            *controls_with(),
            *(
                CaseSpec(
                    cid, "s1", "fail", Script(transients=("429",) if cid == "c-3" else ()), pair=(pid, "invariant")
                )
                for cid, pid in pairs.items()
            ),
        ),
        shards=2,
        product=True,
        uncalibrated=("s0", "s2"),
    )
    run_example(suite, tmp_path, {"stop_when_decided", "decide"}.__contains__)


def test_a_stopping_product_lane_may_call_incomplete_what_the_full_run_exceeds_past_a_missing_answer(
    tmp_path: Path,
) -> None:
    """make fuzz-lanes at cfb1db8 (a product part): one answer of the slice is missing from the
    responses file. The full lane's fixed interval calls the slice exceeded all the same; the lane that
    stops when decided, with its wider interval, cannot, and with an answer missing the slice is
    incomplete (the missing_response blocker says why), not inconclusive. The oracle had allowed only
    inconclusive."""
    cases = tuple(CaseSpec(f"c-{i}", "s0", "fail") for i in range(5))
    suite = Suite(
        slices=(("s0", 0, None),), cases=cases, controls=False, product=True, unanswered=("c-0",), concurrency=2
    )
    full, got = run_paths(suite, tmp_path, "stop_when_decided")
    assert full["product"]["slices"]["s0"]["verdict"] == "exceeded"
    assert got["stop_when_decided"]["product"]["slices"]["s0"]["verdict"] == "incomplete"
    run_example(suite, tmp_path / "oracle", {"stop_when_decided"}.__contains__)


def test_a_stopping_product_lane_never_passes_a_topic_that_fails_last(tmp_path: Path) -> None:
    """A product slice of 16 good answers and 20 wrong ones whose case ids sort last (a topic), judged
    four at a time. The full lane calls the slice exceeded (quality_failed). Judged in case-id order,
    the lane that stops when decided passed it on the good answers before it reached a wrong one,
    and the wrong answers in flight then undid the verdict: evaluation_incomplete, with 18 answers
    never judged (found by the generator's topic that sorts last). Judged in a seeded random order
    it meets the wrong ones early: it never passes the slice, and what it did not send is not_needed."""
    topic = [CaseSpec(f"t-a{i:02d}", "s0", "pass") for i in range(16)]
    topic += [CaseSpec(f"t-z{i:02d}", "s0", "fail", Script(delay=0.002)) for i in range(20)]
    suite = Suite(slices=(("s0", 0, None),), cases=tuple(topic), concurrency=4, controls=False, product=True)
    full, got = run_paths(suite, tmp_path, "stop_when_decided")
    assert full["product"]["slices"]["s0"]["verdict"] == "exceeded"
    check_never_passes("stop_when_decided", full, got["stop_when_decided"])
    check_stop_leaves_nothing_unrun("stop_when_decided", suite, full, got["stop_when_decided"])


def test_a_lane_that_stops_and_fails_on_regression_is_refused(tmp_path: Path) -> None:
    """Eight answers the base run passed, all judged fail now: the plain lane with fail_on_regression
    is regressed (quality_failed), and `gate decide` on its records agrees. The same lane with
    stop_when_decided beside fail_on_regression asked only the failure rate and passed after six
    answers where the full lane is regressed; now such a policy is refused (exit 2) naming the lane
    and both keys."""
    answers = tuple(CaseSpec(f"c-{i}", "s0", "fail") for i in range(8))
    suite = Suite(slices=(("s0", 0, None),), cases=answers, controls=False, product=True, regression=True)
    with key_env(), FakeOpenAI() as fake:
        lab = Lab(suite, write(suite, tmp_path / "suite", fake.base_url), fake, tmp_path)
        code, said = refused_beside_regression(lab)
    assert code == 2, said
    run_example(suite, tmp_path / "example", {"decide"}.__contains__)
    full = json.loads((tmp_path / "example" / "plain" / "result.json").read_text())
    assert ("regressed", "s0") in {(b["kind"], b["slice"]) for b in full["blockers"]}


def test_a_case_without_evidence_under_review_is_not_also_an_input_contract_defect(tmp_path: Path) -> None:
    """`missing_evidence: review` and a case with no reference, citing no evidence ids (it has none):
    on 0ca9dd1 the case was also an input_contract blocker for citing no evidence, so the run was
    quality_failed with no model call, against the rule the team chose. The generator now writes such
    a case as a real one would be; the plain run, gate decide and the dry run route it to review."""
    suite = Suite(
        slices=(("s0", 0, None),),
        cases=(*controls_with(), CaseSpec("c-0", "s0", "pass"), CaseSpec("c-1", "s0", "pass", reference=False)),
        missing_evidence="review",
    )
    run_example(suite, tmp_path, {"decide", "dry_run"}.__contains__)  # check_missing_evidence_rule on the plain run
    full = json.loads((tmp_path / "plain" / "result.json").read_text())
    assert projection(full)["blockers"] == [("missing_evidence", "s0", ("c-1",))]


def test_every_path_of_a_product_lane_with_peoples_audit_reaches_the_plain_runs_decision(tmp_path: Path) -> None:
    """People's audit given to every path of the `pr` lane (run, decide, shards then merge, batch, kill
    then resume, workers, the dry run): each reaches the plain run's state, blockers, counts and each
    slice's verdict and `decided_by`. The judge disagrees with people on one answer of each slice, so
    the audit (people's labels) and the calibration estimate (the judge's verdicts) part; every answer
    is labelled, so the audit decides both slices (each plan a part of them), and one is exceeded. In s0
    the judge passes an answer people fail; it has 24 answers, as a plan fixed before the run that passes
    a 30% limit with 80% power (at 7.5%, a quarter of it) needs: no audit of 15 answers could."""
    ok = [CaseSpec(f"a-{i:02d}", "s0", "pass") for i in range(23)]
    bad = [CaseSpec(f"b-{i:02d}", "s1", "fail" if i < 9 else "pass") for i in range(14)]
    cases = (*controls_with(), *ok, *bad, CaseSpec("a-99", "s0", "fail", Script("disagree")))
    suite = Suite(
        slices=(("s0", 0, None), ("s1", 0, None)),
        cases=cases,
        product=True,
        concurrency=2,
        audited=tuple(c.case_id for c in cases if c.role is None),
    )
    with key_env(), FakeOpenAI() as fake:
        lab = Lab(suite, write(suite, tmp_path / "suite", fake.base_url), fake, tmp_path)
        lab.plain = plain(lab)
        full = lab.plain.result
        slices = full["product"]["slices"]
        assert {name: row["decided_by"] for name, row in slices.items()} == {"s0": "audit", "s1": "audit"}
        assert slices["s1"]["verdict"] == "exceeded" and full["state"] == "quality_failed"
        for name in ("decide", "shards", "batch", "kill_resume", "workers", "dry_run"):
            got = PATHS[name](lab)
            assert got is not None, name
            check_path(name, lab, got)


def test_gate_decide_reads_peoples_audit_on_an_answer_the_run_withheld(tmp_path: Path) -> None:
    """make fuzz-lanes (FUZZ_EXAMPLES=150, a product part): people labelled c-3, whose case has no
    reference evidence, so the run withheld it. The run took the ledger (the label is on one of its
    answers) and noted the label unused; gate decide over its records refused it as another run's
    ledger (usage error), reading only the answers the records judged."""
    suite = Suite(
        slices=(("s0", 0, None),),
        cases=(*controls_with(), CaseSpec("c-0", "s0", "pass"), CaseSpec("c-3", "s0", "pass", reference=False)),
        missing_evidence="review",
        product=True,
        audited=("c-3",),
    )
    run_example(suite, tmp_path, CHEAP.__contains__)
    assert any("c-3" in note for note in json.loads((tmp_path / "plain" / "result.json").read_text())["notes"])


def test_the_dry_run_leaves_open_a_slice_without_calibration_figures_that_peoples_audit_may_decide(
    tmp_path: Path,
) -> None:
    """A slice calibration.json has no figures for, and a ledger with people's label on one of its
    answers: the run's audit decides the slice; the dry run, before any call, said judge_unfit
    (review_required: "whatever the judge says the run can end no better"). Found beside the withheld
    answer above (with nine answers, then the fewest whose plan could pass the 30% limit). A plan fixed
    before the run needs 24 to pass it with 80% power at 7.5%: people label every answer, so the plan's
    draw holds labels whatever the run's seed."""
    answers = tuple(CaseSpec(f"c-{i}", "s0", "pass") for i in range(24))
    suite = Suite(
        slices=(("s0", 0, None),),
        cases=(*controls_with(), *answers),
        product=True,
        uncalibrated=("s0",),
        audited=tuple(c.case_id for c in answers),
    )
    run_example(suite, tmp_path, {"dry_run", "decide"}.__contains__)
    assert (
        json.loads((tmp_path / "plain" / "result.json").read_text())["product"]["slices"]["s0"]["decided_by"] == "audit"
    )


def test_the_dry_run_leaves_judge_unfit_to_the_run_where_the_audit_may_decide_an_uncalibrated_slice(
    tmp_path: Path,
) -> None:
    """make fuzz-lanes (FUZZ_EXAMPLES=400, a product part): s0 has no judge figures and people labelled
    c-2 only. On the run the judge passed c-0, whose stratum then held no label, so the audit could not
    decide and s0 was judge_unfit; the dry run cannot know which stratum c-0 falls in, and leaves s0
    open (the oracle had asked it to name judge_unfit)."""
    suite = Suite(
        slices=(("s0", 0, None),),
        cases=(
            CaseSpec("c-0", "s0", "pass", pair=("p-0", "flip")),
            CaseSpec("c-1", "s0", "pass", reference=False, pair=("p-0", "flip")),
            CaseSpec("c-2", "s0", "fail"),
        ),
        controls=False,
        missing_evidence="review",
        product=True,
        uncalibrated=("s0",),
        unanswered=("c-1",),
        audited=("c-2",),
    )
    run_example(suite, tmp_path, {"dry_run", "decide"}.__contains__)
    full = json.loads((tmp_path / "plain" / "result.json").read_text())
    assert ("judge_unfit", "s0") in {(b["kind"], b["slice"]) for b in full["blockers"]}


def test_the_dry_run_names_judge_unfit_where_the_only_audited_answer_is_missing(tmp_path: Path) -> None:
    """make fuzz-lanes (FUZZ_EXAMPLES=600, a product part): the audit names c-1, which responses.jsonl
    lacks, so the ledger holds no label and s0 (no judge figures) is judge_unfit before any call, on
    the run and the dry run alike; the oracle had set s0 aside as audited."""
    suite = Suite(
        slices=(("s0", 0, None),),
        cases=(*controls_with(), CaseSpec("c-0", "s0", "pass"), CaseSpec("c-1", "s0", "pass")),
        product=True,
        uncalibrated=("s0",),
        unanswered=("c-1",),
        audited=("c-1",),
    )
    run_example(suite, tmp_path, {"dry_run"}.__contains__)
