"""The generative differential test's pieces (tests/lanes/test_differential.py): small random suites, the
scripted judge that answers them, the paths a suite is run through, and the oracle.

A `Suite` is plain frozen data: slices and their limits, cases (labels, pairs of both kinds,
missing evidence, check triggers, overrides), every control role, repeats, retries, concurrency,
the boundary, and for each case how the judge answers it (`Script`: transient errors first, then
a verdict that agrees or not, a permanent error, an unparseable reply, or answers that disagree
across repeats; latency; usage reported or not). `write` puts it on disk with tests/suite.py;
`arm` scripts a tests/fake_openai.py server to answer it.

The judge is scripted so that every path sees the same final answers whatever the order its
requests arrive in (concurrency, a kill, shards, a batch): a case's transient errors are fewer than
`max_attempts`, so whichever judgment meets them still ends on the verdict; a permanent error and
a verdict repeat for every request. Only answers that disagree across repeats depend on what came
before (the first request of the case disagrees), so the kill path, which may lose an answer it
was sent, is not compared on such suites.

A path is one small function `(Lab) -> Outcome`: it runs the suite through the real CLI against
the fake provider and returns the result.json it ended with and the requests the provider saw.
`PATHS` lists them; a new lane is one more function there.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fake_batches import FakeBatches
from fake_openai import Behaviour, FakeOpenAI, bad_request, drop, rate_limited, raw, reply, server_error
from suite import case, dump_yaml, write_suite

KEY_ENV = "GATE_TEST_KEY"
LIVE_PRICE = {
    "input_per_mtok": 1.0,
    "output_per_mtok": 2.0,
    "currency": "USD",
    "batch": {"input_per_mtok": 0.5, "output_per_mtok": 1.0},
}
ROLES = ("positive", "negative", "boundary", "persuasion", "injection", "missing_evidence")
ROLE_LABEL = {"positive": "pass"}  # every other role's human label is fail
CHECKS_PY = """
def no_forbidden(response: str) -> str:
    return "fail" if "FORBIDDEN" in response else "pass"

def explodes(response: str) -> str:
    if "BOOM" in response:
        raise ValueError("cannot read the citation list")
    return "pass"
"""
# Kinds known before any model call: the validators', the team's checks', the overrides', the
# calibration requirement's and a product lane's (a slice with no judge figures, an answer missing, a
# regression check with no base it can compare).
# The dry run must name exactly these.
PRE_CALL_KINDS = frozenset(
    {
        "input_contract",
        "unknown_slice",
        "partition_leak",
        "control_missing",
        "held_out_spent",
        "missing_evidence",
        "check_failed",
        "check_error",
        "expired_override",
        "judge_uncalibrated",
        "judge_unfit",
        "calibration_expired",
        "missing_response",
        "regression_unchecked",
    }
)


@dataclass(frozen=True)
class Script:
    """How the judge answers one case. `final`: agree | disagree | bad_request | server_down |
    parse | unstable (the case's first request disagrees, the others agree)."""

    final: str = "agree"
    transients: tuple[str, ...] = ()  # "429" | "500" | "drop", each used once, before `final`
    delay: float = 0.0
    usage: bool = True


@dataclass(frozen=True)
class CaseSpec:
    case_id: str
    slice: str
    label: str
    script: Script = Script()
    role: str | None = None
    reference: bool = True  # False: missing evidence
    pair: tuple[str, str] | None = None  # (pair id, kind)
    check: str | None = None  # "fail" | "error": trips the team's check


@dataclass(frozen=True)
class Suite:
    slices: tuple[tuple[str, int, int | None], ...]  # (name, max_false_passes, max_false_fails)
    cases: tuple[CaseSpec, ...]
    repeats: int = 1
    max_attempts: int = 2
    concurrency: int = 1
    max_errors: int = 0
    missing_evidence: str = "block"
    controls: bool = True
    checks: bool = False
    overrides: tuple[tuple[str, str, bool], ...] = ()  # (case id, blocker, expired)
    max_total_cost: float = 1.0
    kill_at: float = 0.5  # where in the plain run's requests the kill path kills, as a fraction
    shards: int = 2
    # A product lane: the cases (controls aside) carry no response and no label; their answers come
    # from responses.jsonl (the same text, so the judge is scripted alike), judged by a calibrated judge.
    product: bool = False
    uncalibrated: tuple[str, ...] = ()  # product slices calibration.json has no figures for (judge_unfit)
    unanswered: tuple[str, ...] = ()  # product cases responses.jsonl has no line for (missing_response)
    # The `pr` product lane with `fail_on_regression`, given a base run (`--base-result`) in which
    # every answer passed: each answer judged fail now turned pass -> fail. The `stop` lane cannot
    # have it too (refused), so the stop paths are not compared on such a suite.
    regression: bool = False
    # People's audit of the `pr` lane's answers: the product cases two reviewers labelled (with the
    # case's label, what a person reading it finds), in audit.jsonl beside the policy. Given to every
    # `pr` path (`--audit`); the `stop` lane decides without it (its stop reads calibration alone).
    audited: tuple[str, ...] = ()

    @property
    def tight(self) -> bool:
        """A boundary the run may reach: which cases fit then depends on timing and on the path."""
        return self.max_total_cost < 1.0

    @property
    def order_free(self) -> bool:
        """Whether the plain run's outcome cannot depend on timing: one request at a time, or
        nothing that stops scheduling mid-lane (a violated pair, the boundary, a control race)."""
        return self.concurrency == 1 or (
            not self.tight and not any(c.pair for c in self.cases) and not self.control_race
        )

    @property
    def bad_controls(self) -> tuple[str, ...]:
        """The controls the judge fails or errs on (a control without reference evidence is withheld,
        never judged): each stops scheduling where it ends."""
        return tuple(c.case_id for c in self.cases if c.role is not None and c.reference and c.script.final != "agree")

    @property
    def control_race(self) -> bool:
        """Controls judged side by side, one of which fails or errs: it stops scheduling when it
        ends, and which of the other controls were judged by then depends on timing."""
        return self.concurrency > 1 and bool(self.bad_controls)

    @property
    def stateful(self) -> bool:
        return any(c.script.final == "unstable" for c in self.cases)


def _case_dict(c: CaseSpec) -> dict[str, Any]:
    text = f"Answer for {c.case_id}: refunds within 7 days."
    if c.check == "fail":
        text += " FORBIDDEN promise."
    elif c.check == "error":
        text += " BOOM"
    extra: dict[str, Any] = {}
    if c.pair is not None:
        extra["pair"] = {"id": c.pair[0], "kind": c.pair[1]}
    if not c.reference and c.role is None:  # no evidence: nothing for the label to cite either
        extra["human_adjudication"] = {"label": c.label, "reason": "reviewed", "evidence": []}
    return case(
        c.case_id,
        label=c.label,
        slice=c.slice,
        role=c.role,
        response=text,
        reference=None if not c.reference else "Refunds are allowed within 7 days of purchase.",
        **extra,
    )


RESPONSES = "responses.jsonl"
AUDIT = "audit.jsonl"
PRODUCT_LIMIT = 0.3
# The calibrated judge of a product suite, every slice: it catches 95 of 100 failing answers, passes 995 of 1000.
PRODUCT_JUDGE = {"true_fail": 95, "false_pass": 5, "true_pass": 995, "false_fail": 5}


def _lanes(suite: Suite) -> dict[str, Any]:
    def lane(**more: Any) -> dict[str, Any]:  # each its own objects: YAML would write shared ones as aliases
        made: dict[str, Any] = {"partitions": ["product" if suite.product else "sentinel"], "controls": suite.controls}
        return {**made, **({"product": True} if suite.product else {}), **more}

    regression = {"fail_on_regression": True} if suite.regression else {}
    return {"pr": lane(**regression), "stop": lane(stop_when_decided=True)}


def _productize(suite: Suite, root: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A product suite's cases without response or label, and its responses.jsonl with the answers."""
    if not suite.product:
        return cases
    out, lines = [], []
    for c in cases:
        if "expected_control_role" not in c:
            if c["case_id"] not in suite.unanswered:
                lines.append({"case_id": c["case_id"], "response": c["response"]})
            c = {k: v for k, v in c.items() if k not in ("response", "response_sha256", "human_adjudication")}
            c["partition"] = "product"
        out.append(c)
    (root / RESPONSES).write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    _write_audit(suite, root, {line["case_id"]: line["response"] for line in lines}, {c["case_id"]: c for c in out})
    return out


def _write_audit(suite: Suite, root: Path, responses: dict[str, str], cases: dict[str, dict[str, Any]]) -> None:
    """audit.jsonl: two blind reviewers' labels on each audited answer, appended as `gate review serve`
    appends them (each on the item the run's queue would show: the case's question and evidence text,
    the answer)."""
    from gate.review.ledger import append_line
    from gate.review.queue import item_id

    labels = {c.case_id: c.label for c in suite.cases}
    (root / AUDIT).write_bytes(b"")
    for case_id in suite.audited:
        if case_id not in responses:
            continue
        sha = hashlib.sha256(responses[case_id].encode()).hexdigest()
        case = cases[case_id]
        item = item_id(case_id, case["user_input"], case.get("reference") or "", responses[case_id])
        for reviewer in ("ana", "bo"):
            append_line(
                root / AUDIT,
                {
                    "at": "2026-12-05T07:15:01.000Z",
                    "kind": "label",
                    "item_id": item,
                    "case_id": case_id,
                    "response_sha256": sha,
                    "reviewer": reviewer,
                    "label": labels[case_id],
                    "reason": "read against the evidence",
                    "queue_sha256": "0" * 64,
                    "rubric_version": "rubric-1",
                    "blind": True,
                },
            )


def write_product_calibration(policy: Path, slice_names: list[str]) -> None:
    """calibration.json for the judge this policy makes (its config_sha256 as the gate computes it)."""
    from gate.judge import installed_version
    from gate.measure import certify
    from gate.model.policy import load_policy
    from gate.run.lineage import JudgeSettings

    loaded = load_policy(policy)
    judge = JudgeSettings.of(loaded, loaded.policy.evaluator.base_url or "")
    ragas = installed_version("ragas") or ""
    rate = {"value": 0.05, "low": 0.02, "high": 0.11, "n": 100}
    tally = {**PRODUCT_JUDGE, "completed": 1100, "cohen_kappa": 0.9, "false_pass_rate": rate}
    data = {
        "config_sha256": certify.config_sha256(loaded, judge, ragas),
        "config": certify.config_components(loaded, judge, ragas),
        "calibrated_at": "2026-11-30T09:00:00Z",
        "overall": tally,
        "slices": dict.fromkeys(slice_names, tally),
    }
    (policy.parent / "calibration.json").write_text(json.dumps(data), encoding="utf-8")


def write(suite: Suite, root: Path, base_url: str) -> Path:
    """The suite on disk; returns the policy path. Lanes: `pr` (plain) and `stop` (stop_when_decided),
    product lanes for a product suite (with responses.jsonl and calibration.json beside the policy)."""
    lanes = _lanes(suite)
    rate = {"max_failure_rate": PRODUCT_LIMIT} if suite.product else {}
    slices = {
        name: {"max_false_passes": fp, "priority": i, **({} if ff is None else {"max_false_fails": ff}), **rate}
        for i, (name, fp, ff) in enumerate(suite.slices)
    }
    evaluator = {
        "base_url": base_url,
        "repeats": suite.repeats,
        "max_concurrency": suite.concurrency,
        "retries": {
            "max_attempts": suite.max_attempts,
            "retry_on": ["rate_limit", "server_error", "timeout", "connection"],
        },
        "price": LIVE_PRICE,
    }
    extra: dict[str, Any] = {}
    if suite.checks:
        extra["checks"] = [
            {"name": "no_forbidden", "file": "checks/team.py", "function": "no_forbidden", "gate": True},
            {"name": "explodes", "file": "checks/team.py", "function": "explodes", "gate": True},
        ]
    if suite.overrides:
        extra["overrides"] = [
            {
                "id": f"OVR-{i}",
                "case_ids": [cid],
                "blocker": blocker,
                "approver": "@owner",
                "reason": "accepted judge error",
                "evidence": "https://example.invalid/review",
                "expires": "2020-01-01" if expired else "2099-12-31",
                "follow_up": "TICKET-1",
            }
            for i, (cid, blocker, expired) in enumerate(suite.overrides)
        ]
    if suite.product:
        extra.update(partitions=["product"], calibration={"file": "calibration.json", "min_kappa": 0.0})
    root.mkdir(parents=True, exist_ok=True)
    policy = write_suite(
        root,
        _productize(suite, root, [_case_dict(c) for c in suite.cases]),
        evaluator=evaluator,
        slices=slices,
        lanes=lanes,
        limits={"max_evaluator_errors": suite.max_errors, "max_total_cost": suite.max_total_cost},
        missing_evidence=suite.missing_evidence,
        **extra,
    )
    if suite.checks:
        (root / "checks").mkdir(exist_ok=True)
        (root / "checks" / "team.py").write_text(CHECKS_PY, encoding="utf-8")
    if suite.product:
        write_product_calibration(policy, [name for name, _, _ in suite.slices if name not in suite.uncalibrated])
    return policy


def behaviours(c: CaseSpec, *, batch: bool = False) -> list[Behaviour]:
    """The fake's answers to one case, in order (the last repeats). A batch line is one answer,
    never retried: the batch path's judge gives the same verdicts without the transient errors."""
    s = c.script
    other = "fail" if c.label == "pass" else "pass"
    kw: dict[str, Any] = {"delay": 0.0 if batch else s.delay, "usage": s.usage}
    finals = {
        "agree": [reply(c.label, **kw)],
        "disagree": [reply(other, **kw)],
        "bad_request": [bad_request(delay=kw["delay"])],
        "server_down": [server_error(delay=kw["delay"])],
        "parse": [raw("I think it is fine, mostly.", **kw)],
        "unstable": [reply(other, **kw), reply(c.label, **kw)],
    }
    transient = {"429": rate_limited(retry_after=0), "500": server_error(), "drop": drop()}
    prefix = [] if batch else [transient[t] for t in s.transients]
    return [*prefix, *finals[s.final]]


def arm(fake: FakeOpenAI, suite: Suite, *, batch: bool = False) -> None:
    """Forget what the fake saw and script it for `suite` afresh."""
    fake.reset()
    for c in suite.cases:
        fake.script(f"Answer for {c.case_id}:", *behaviours(c, batch=batch))


# -- running the CLI ----------------------------------------------------------------------------


def gate(*args: str | Path) -> tuple[int, str]:
    """The real CLI in-process (its terminal output kept, not shown); (exit code, stdout)."""
    from gate.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    assert code != 2, f"gate {' '.join(str(a) for a in args[:1])}: usage error: {err.getvalue()[-2000:]}"
    return code, out.getvalue()


def load(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "result.json").read_text())
    return data


@dataclass
class Lab:
    """One example: the suite on disk, its fake provider, a scratch directory."""

    suite: Suite
    policy: Path
    fake: FakeOpenAI
    tmp: Path
    plain: Outcome | None = None

    def out(self, name: str) -> Path:
        return self.tmp / name

    @property
    def answers(self) -> tuple[str, ...]:
        """`--responses FILE` for a product suite (every command is given it), and `--base-result` of
        the `pr` lane for a regression suite; else nothing."""
        return self.inputs("pr")

    def inputs(self, lane: str) -> tuple[str, ...]:
        responses = ("--responses", str(self.policy.parent / RESPONSES)) if self.suite.product else ()
        base = ("--base-result", str(self.base(lane))) if self.suite.regression and lane == "pr" else ()
        audit = ("--audit", str(self.policy.parent / AUDIT)) if self.suite.audited and lane == "pr" else ()
        return (*responses, *base, *audit)

    def base(self, lane: str) -> Path:
        return self.tmp / f"base-{lane}"

    @property
    def replay(self) -> tuple[str, ...]:
        """A product suite's every path after the plain run replays its order seed (--order-seed): one run
        judged many ways, so one order and one audit plan (the shards of one run share it too)."""
        seed = (self.plain.result.get("product") or {}).get("order_seed") if self.plain is not None else None
        return ("--order-seed", seed) if self.suite.product and seed else ()

    def run(self, out: Path, *extra: str, lane: str = "pr") -> dict[str, Any]:
        args = (
            ("run", "--policy", self.policy, "--lane", lane, "--out", out, "--no-cache")
            + (*extra, *self.inputs(lane))
            + (self.replay if "--resume" not in extra else ())
        )
        code, _ = gate(*args)
        res = load(out)
        assert code == res["exit_code"], (code, res["state"])
        return res


@dataclass(frozen=True)
class Outcome:
    result: dict[str, Any]
    requests: int  # chat completions the fake provider answered (batch lines included)
    # per case id: requests the provider saw for it after the last point nothing more may be paid
    repaid: dict[str, int] = field(default_factory=dict)
    slack: int = 0  # attempts journalled as sent that the provider may never have read (a kill)
    boundary: float = 1.0  # the boundary this path's result was held to


@contextlib.contextmanager
def key_env() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in (KEY_ENV, "RAGAS_DO_NOT_TRACK", "OPENAI_BASE_URL")}
    os.environ[KEY_ENV] = "sk-test-differential-0123"
    os.environ["RAGAS_DO_NOT_TRACK"] = "true"
    os.environ.pop("OPENAI_BASE_URL", None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def write_bases(lab: Lab) -> None:
    """A regression suite's base run: the `pr` lane on the same answers with every application answer
    judged pass (the controls as scripted)."""
    suite = lab.suite
    passing = replace(
        suite, cases=tuple(c if c.role is not None else replace(c, label="pass", script=Script()) for c in suite.cases)
    )
    arm(lab.fake, passing)
    out = lab.base("pr")
    gate("run", "--policy", lab.policy, "--lane", "pr", "--out", out, "--no-cache", *lab.inputs("pr")[:2])
    lab.fake.reset()


def refused_beside_regression(lab: Lab) -> tuple[int, str]:
    """`gate validate` on the suite's policy with its `stop` lane also failing on regression:
    (exit code, what it printed). A stop that looks at the failure rate alone could pass what the
    paired test fails, so the combination is refused."""
    import yaml

    data = yaml.safe_load(lab.policy.read_text(encoding="utf-8"))
    data["lanes"]["stop"]["fail_on_regression"] = True
    both = lab.policy.with_name("policy-stop-regression.yaml")
    both.write_text(dump_yaml(data, sort_keys=False), encoding="utf-8")
    from gate.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", "--policy", str(both)])
    return code, out.getvalue() + err.getvalue()


# -- the paths ----------------------------------------------------------------------------------


def plain(lab: Lab) -> Outcome:
    arm(lab.fake, lab.suite)
    res = lab.run(lab.out("plain"))
    return Outcome(res, lab.fake.count(), boundary=lab.suite.max_total_cost)


def stop_when_decided(lab: Lab) -> Outcome | None:
    if lab.suite.regression or lab.suite.audited:
        return None  # the stop lane cannot fail on regression (refused), and decides without the audit
    arm(lab.fake, lab.suite)
    res = lab.run(lab.out("stop"), lane="stop")
    return Outcome(res, lab.fake.count(), boundary=lab.suite.max_total_cost)


@contextlib.contextmanager
def workers_env(n: int) -> Iterator[None]:
    saved = os.environ.get("GATE_WORKERS")
    os.environ["GATE_WORKERS"] = str(n)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("GATE_WORKERS", None)
        else:
            os.environ["GATE_WORKERS"] = saved


def workers(lab: Lab) -> Outcome | None:
    """The plain lane judged by two forked worker processes (`GATE_WORKERS=2`)."""
    if lab.suite.concurrency < 2:
        return None  # one request at a time is one worker
    arm(lab.fake, lab.suite)
    with workers_env(2):
        res = lab.run(lab.out("workers"))
    return Outcome(res, lab.fake.count(), boundary=lab.suite.max_total_cost)


def workers_stop(lab: Lab) -> Outcome | None:
    """The stop_when_decided lane judged by two worker processes: one shared stop flag."""
    if lab.suite.concurrency < 2 or lab.suite.regression or lab.suite.audited:
        return None
    arm(lab.fake, lab.suite)
    with workers_env(2):
        res = lab.run(lab.out("workers-stop"), lane="stop")
    return Outcome(res, lab.fake.count(), boundary=lab.suite.max_total_cost)


def decide(lab: Lab) -> Outcome | None:
    """`gate decide` on the plain run's records: no call, the plain run's result."""
    lab.fake.reset()
    out = lab.out("decided")
    records = lab.out("plain") / "records.jsonl"
    if not records.exists() or not records.read_text().strip():
        return None  # blocked before any call: nothing recorded to decide (decide refuses an empty file)
    code, _ = gate("decide", "--policy", lab.policy, "--records", records, "--out", out, *lab.answers)
    res = load(out)
    assert code == res["exit_code"]
    assert lab.plain is not None
    return Outcome(res, lab.plain.requests + lab.fake.count(), boundary=lab.suite.max_total_cost)


def shards_then_merge(lab: Lab) -> Outcome | None:
    """Each shard against a freshly scripted judge (each is its own job), then `gate merge`. Not for a
    regression suite: `gate merge` compares with no base run."""
    if lab.suite.regression:
        return None
    n = lab.suite.shards
    outs, seen = [], 0
    for i in range(1, n + 1):
        arm(lab.fake, lab.suite)
        out = lab.out(f"shard-{i}")
        res = lab.run(out, "--shard", f"{i}/{n}")
        assert res["cost"]["http_attempts"] == lab.fake.count(), f"shard {i}/{n}"
        assert res["cost"]["budget_spent"] <= lab.suite.max_total_cost / n + 1e-12, f"shard {i}/{n}"
        seen += lab.fake.count()
        outs.append(out)
    merged = lab.out("merged")
    code, _ = gate("merge", "--policy", lab.policy, *outs, "--out", merged, *lab.answers)
    res = load(merged)
    assert code == res["exit_code"]
    return Outcome(res, seen, boundary=lab.suite.max_total_cost)


def batch_submit_collect(lab: Lab) -> Outcome:
    """`--batch submit`, then `collect` until the batch is done, against the fake Batches API."""
    arm(lab.fake, lab.suite, batch=True)
    batches = FakeBatches(lab.fake, script=("validating", "completed"))
    try:
        out = lab.out("batch")
        res = lab.run(out, "--batch", "submit")
        for _ in range(3):
            if not any(b["kind"] == "batch_pending" for b in res["blockers"]):
                break
            res = lab.run(out, "--batch", "collect")
        return Outcome(res, lab.fake.count(), boundary=lab.suite.max_total_cost)
    finally:
        lab.fake.routes = None
        del batches


def dry_run(lab: Lab) -> Outcome:
    lab.fake.reset()
    code, stdout = gate(
        "run",
        "--policy",
        lab.policy,
        "--lane",
        "pr",
        "--out",
        lab.out("dry"),
        "--dry-run",
        "--format",
        "json",
        *lab.answers,
    )
    res: dict[str, Any] = json.loads(stdout) if stdout.strip() else {}
    # It exits with the state of what the run has before any call: all but the blockers that say only
    # that nothing is judged yet (unrun cases, controls with no verdict).
    known = {b["state"] for b in res.get("blockers", []) if b["kind"] not in ("unrun_cases", "control_error")}
    best = next((s for s in ("quality_failed", "evaluation_incomplete", "review_required") if s in known), "passed")
    assert code == {"passed": 0, "quality_failed": 1, "evaluation_incomplete": 3, "review_required": 4}[best], code
    return Outcome(res, lab.fake.count())


def kill_then_resume(lab: Lab) -> Outcome | None:
    """SIGKILL a forked `gate run` once the provider has seen the drawn number of requests, then
    `--resume` in-process until it completes."""
    assert lab.plain is not None
    arm(lab.fake, lab.suite)
    out = lab.out("killed")
    if lab.plain.requests == 0:
        return None  # nothing is sent: nowhere to kill
    kill_at = 1 + int(lab.suite.kill_at * max(0, lab.plain.requests - 1))
    _run_until(lab, out, kill_at)
    before = lab.fake.count()
    recorded = _fully_recorded(out, lab.suite.repeats)
    counts = {cid: lab.fake.count(f"Answer for {cid}:") for cid in recorded}
    res = lab.run(out, "--resume")
    repaid = {cid: lab.fake.count(f"Answer for {cid}:") - n for cid, n in counts.items()}
    del before
    return Outcome(res, lab.fake.count(), repaid=repaid, slack=lab.suite.concurrency, boundary=lab.suite.max_total_cost)


def _run_until(lab: Lab, out: Path, kill_at: int) -> None:
    args = ["run", "--policy", str(lab.policy), "--lane", "pr", "--out", str(out), "--no-cache", *lab.answers]
    args += list(lab.replay)
    pid = os.fork()
    if pid == 0:  # the child: the real CLI, as a separate process the parent can SIGKILL
        code = 3
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the child exits below)
            from gate.cli import main

            code = main(args)
        finally:
            os._exit(code)
    deadline = time.monotonic() + 120
    while lab.fake.count() < kill_at and time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return  # it finished before its kill point: the resume finds a completed run
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def _fully_recorded(out: Path, repeats: int) -> set[str]:
    """Cases whose every repeat has an ok record: nothing more may be paid for them."""
    path = out / "records.jsonl"
    if not path.exists():
        return set()
    done: dict[str, set[int]] = {}
    for line in path.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue  # a line torn by the kill
        if r.get("status") == "ok":
            done.setdefault(r["case_id"], set()).add(r["repeat_index"])
    return {cid for cid, reps in done.items() if len(reps) == repeats}


Path_ = Callable[[Lab], Outcome | None]
PATHS: dict[str, Path_] = {
    "stop_when_decided": stop_when_decided,
    "workers": workers,
    "workers_stop": workers_stop,
    "decide": decide,
    "shards": shards_then_merge,
    "batch": batch_submit_collect,
    "kill_resume": kill_then_resume,
    "dry_run": dry_run,
}


# -- the oracle ---------------------------------------------------------------------------------


def projection(res: dict[str, Any]) -> dict[str, Any]:
    """What every path must agree on: the state, the blockers (kind, slice, cases) and the counts;
    on a product lane also each slice's verdict, n and k."""
    counts = {k: v for k, v in res["counts"].items() if k != "cached"}
    blockers = sorted((b["kind"], b.get("slice") or "", tuple(sorted(b["case_ids"]))) for b in res["blockers"])
    out = {"state": res["state"], "blockers": blockers, "counts": counts}
    if res.get("product"):
        out["product"] = {
            name: (row["verdict"], row["n"], row["judged_fail"], row.get("decided_by"))
            for name, row in res["product"]["slices"].items()
        }
    return out


def pre_call(res: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    return sorted(
        (b["kind"], b.get("slice") or "", tuple(sorted(b["case_ids"])))
        for b in res.get("blockers", [])
        if b["kind"] in PRE_CALL_KINDS
    )


def with_(suite: Suite, **kw: Any) -> Suite:
    return replace(suite, **kw)
