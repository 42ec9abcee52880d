"""What a product lane's decision reads beyond its records: the judge's figures and the base run.

The judge's sensitivity and specificity per slice come from the calibration.json the policy names
(only when it measured the very judge that decided: `gate.measure.calibrate.requirement`); the base
run's verdicts from `--base-result`'s result.json (untrusted, validated). Both become one frozen
`ProductEvidence` that gate/decide/product/verdict.py decides from, on every path (run, decide, merge).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.decide.product.answers import JudgeCounts
from gate.decide.product.verdict import BaseVerdicts, ProductEvidence
from gate.measure.calibrate.requirement import JudgeCalibration
from gate.model.cases import Dataset
from gate.model.loading import sha256_hex
from gate.model.paths import from_working_directory, shown_path
from gate.model.policy import LoadedPolicy
from gate.model.result import ResultProblem, load_result
from gate.model.states import Finding
from gate.review.audit_labels import AuditEvidence


def product_evidence(
    loaded: LoadedPolicy,
    lane: str,
    checked: JudgeCalibration | None,
    base: BaseVerdicts | None = None,
    audit: AuditEvidence | None = None,
    out_dir: Path | None = None,
) -> ProductEvidence | None:
    """None unless `lane` is a product lane."""
    spec = loaded.policy.lanes[lane]
    if not spec.product:
        return None
    cal = checked.calibration if checked is not None else None
    calibrated = checked is not None and cal is not None and cal.config_sha256 == checked.config_sha256
    judges: dict[str, JudgeCounts] = {}
    if calibrated and cal is not None:
        for name, t in cal.slices.items():
            if t.true_pass is None or t.true_fail is None or t.false_fail is None:
                continue  # a file without the whole table: no figures for the slice
            judges[name] = JudgeCounts(t.true_pass, t.true_fail, t.false_pass, t.false_fail)
    return ProductEvidence(
        confidence=spec.confidence,
        sequential=spec.stop_when_decided,
        fail_on_regression=spec.fail_on_regression,
        require_audit=spec.require_audit,
        calibrated=calibrated,
        judges=judges,
        base=base,
        audit=audit,
        queue_command=queue_command(loaded, out_dir),
        calibration_sha256=_file_sha256(checked.path) if checked is not None else None,
    )


def _file_sha256(path: Path) -> str | None:
    """The calibration file's sha256, which names it where the run's audit sizing is compared (None: unreadable)."""
    try:
        return sha256_hex(path.read_bytes())
    except OSError:
        return None


def queue_command(loaded: LoadedPolicy, out_dir: Path | str | None) -> str:
    """The command that makes this run's audit queue, for people to label."""
    run = shown_path(out_dir) if out_dir is not None else "OUT"
    return f"gate review queue --policy {shown_path(loaded.path)} --from {run} --out audit-queue.jsonl"


def read_base_verdicts(base_dir: Path, lane: str, policy_id: str) -> BaseVerdicts:
    """The base branch's product run in `base_dir` (its --out) of `lane` of policy `policy_id`: each
    answer's verdict, or why it cannot be compared."""
    shown = shown_path(base_dir)
    try:
        base = load_result(base_dir / "result.json", "base result (--base-result)")
    except ResultProblem as exc:
        return BaseVerdicts(problem=exc.message)
    if base.product is None:
        return BaseVerdicts(problem=f"{shown} is not a product lane's run (its result.json has no `product`)")
    if base.lane != lane:
        return BaseVerdicts(problem=f"{shown} is a run of lane {base.lane}, not {lane}")
    if base.policy_id != policy_id:
        return BaseVerdicts(problem=f"{shown} is a run of policy {base.policy_id}, not {policy_id}")
    verdicts = {
        row.case_id: row.verdict
        for row in base.cases
        if row.control_role is None and row.bucket == "completed" and row.verdict in ("pass", "fail")
    }
    return BaseVerdicts(verdicts={k: v for k, v in verdicts.items() if v is not None})


def audit_of(
    loaded: LoadedPolicy,
    lane: str,
    ledger: Path | None,
    queue: Path | None,
) -> AuditEvidence | None:
    """People's audit of the run (`--audit`, else `lanes.<lane>.audit`), None without one; `--audit-queue`
    without a ledger is a usage error."""
    from gate.model.errors import UsageError

    spec = loaded.policy.lanes[lane]
    named = ledger is None and spec.audit is not None  # the policy names it, for every release of the lane
    if ledger is None and spec.audit is not None:
        ledger = loaded.resolve(spec.audit)
    if ledger is None:
        if queue is not None:
            raise UsageError("--audit-queue names the draw of an audit; fix: add --audit LEDGER, or drop --audit-queue")
        return None
    if not spec.product:
        raise UsageError(
            f"--audit reads people's labels on a product lane's answers, and lane {lane} is not a product lane; "
            "fix: drop --audit, or pass --lane with a product lane"
        )
    from gate.review.audit_labels import no_ledger_yet, read_audit

    if not from_working_directory(ledger).exists():
        if named:
            return no_ledger_yet(ledger, f"lanes.{lane}.audit", loaded.policy.rubrics)
        raise UsageError(
            f"--audit {shown_path(ledger)}: no such review ledger; fix: pass the ledger people labelled this run's "
            "audit queue into (a .jsonl file, or the directory `gate review serve --ledger` appends to), or leave "
            "--audit out to decide without people's labels"
        )

    return read_audit(
        ledger,
        queue,
        rubrics=loaded.policy.rubrics,
        reviewers=loaded.policy.review.reviewers_per_item,
    )


def product_lane_check(
    loaded: LoadedPolicy, dataset: Dataset, lane: str, env: Mapping[str, str], today: dt.date
) -> ProductCheck:
    """What `gate validate --lane L` says of a product lane before any model call, as `gate run` would:
    a slice without `max_failure_rate` is the run's policy error (exit 2), a calibration file that did
    not measure this judge its `judge_uncalibrated`; and per slice, the smallest `max_failure_rate`
    the slice could pass with its calibration and the answers the lane holds (none judged fail, the
    best case), with a finding when the slice's limit is below it: no run can pass it."""
    from gate.estimate import failure_rate as fr
    from gate.judge import installed_version, resolve_base_url
    from gate.measure.calibrate import requirement
    from gate.model.errors import PolicyError
    from gate.model.states import FAILURE_RATE_INCONCLUSIVE, Finding, State
    from gate.model.supersede import superseded_ids
    from gate.plan.responses import unanswered_limits
    from gate.run.lineage import JudgeSettings

    spec = loaded.policy.lanes[lane]
    if not spec.product:
        return ProductCheck()
    superseded = superseded_ids(dataset.cases)
    cases = [
        c for c in dataset.cases if not c.is_control and c.partition in spec.partitions and c.case_id not in superseded
    ]
    problems = unanswered_limits(loaded, cases, lane)
    if problems:
        raise PolicyError(str(loaded.path), problems)
    judge = JudgeSettings.of(loaded, resolve_base_url(loaded.policy.evaluator.base_url, env.get("OPENAI_BASE_URL")))
    checked = requirement.check_calibration(loaded, lane, judge, installed_version("ragas") or "", today)
    # A missing file is lint's finding already (gate/validate/lint.py); one that measured another judge is said here.
    exists = loaded.policy.calibration is not None and loaded.resolve(loaded.policy.calibration.file).is_file()
    findings = list(checked.findings) if checked is not None and exists else []
    evidence = product_evidence(loaded, lane, checked)
    notes: list[str] = []
    for name in sorted({c.slice for c in cases if c.slice in loaded.policy.slices}):
        limit = loaded.policy.slices[name].max_failure_rate
        counts = evidence.judges.get(name) if evidence is not None and evidence.calibrated else None
        n = sum(1 for c in cases if c.slice == name)
        if counts is None or limit is None:
            continue
        accuracy = fr.judge_accuracy(
            true_fail=counts.true_fail, false_pass=counts.false_pass, true_pass=counts.true_pass,
            false_fail=counts.false_fail, confidence=spec.confidence,
        )  # fmt: skip
        best = fr.failure_rate(
            judged_fail=0, n=n, judge=accuracy, confidence=spec.confidence, sequential=spec.stop_when_decided
        )
        floor = fr.percent(best.high, "up")
        notes.append(
            f"slice {name}: with its calibration (Se {accuracy.se.x}/{accuracy.se.n}, Sp {accuracy.sp.x}/{accuracy.sp.n}) "
            f"and the {n} answers lane {lane} holds, the smallest max_failure_rate it could pass is {floor} (no answer "
            f"judged fail); its limit is {fr.percent(limit)}"
        )
        audit_floor, audit_note = audit_before_run(
            n,
            counts,
            limit,
            spec.confidence,
            loaded.policy.review.reviewers_per_item,
            loaded.policy.slices[name].audit_sized_at,
        )
        notes.append(f"slice {name}: {audit_note}")
        if best.high > limit:
            audit = ", or people's audit of the run (--audit)" if audit_floor <= limit else ""
            findings.append(
                Finding(
                    State.REVIEW_REQUIRED,
                    FAILURE_RATE_INCONCLUSIVE,
                    f"slice {name}: its limit {fr.percent(limit)} is below {floor}, the smallest max_failure_rate its "
                    f"calibration (Se {accuracy.se.x}/{accuracy.se.n}, Sp {accuracy.sp.x}/{accuracy.sp.n}) and the {n} "
                    f"answers lane {lane} holds could pass even with no answer judged fail: no run can pass it; fix: "
                    f"more answers, more labelled answers in calibration{audit}, or a limit the evidence can reach",
                    slice=name,
                )
            )
    return ProductCheck(tuple(findings), tuple(notes))


def audit_before_run(
    n: int, counts: JudgeCounts, limit: float, confidence: float, reviewers: int, sized_at: float | None = None
) -> tuple[float, str]:
    """What an audit of a run of `n` answers can do, known before the run: the smallest limit any audit of
    them could pass (every answer labelled, none failing; by the audit's own test), and the plan itself,
    whose two designs are fixed before the judge's verdicts (the run's count only chooses which people
    label): each at the judged-fail count calibration's Se and Sp expect at its rate."""
    from gate.decide.product.audit_plan import plan_words, power_words, size_plan, whole_audit_words
    from gate.estimate import failure_rate as fr

    # A whole audit is Clopper-Pearson on every failure found: with none, its upper bound is the floor.
    floor = fr._cp_edges(0, n, 1.0 - confidence)[1]
    fixed = size_plan(0, n, counts, limit, confidence, sized_at)  # its two designs: the same at every K
    parts = []
    for part in (fixed.to_pass, fixed.to_exceed):
        k = part.expected_k
        z = size_plan(k, n - k, counts, limit, confidence, sized_at)
        parts.append(
            f"a run failing at {fr.percent(part.sized_at)} (about {k} of {n} judged fail) would have "
            + (
                f"{plan_words(k, z.fail_labels, n - k, z.pass_labels, reviewers)}, {power_words(z, why=False)}"
                if z.decides and z.aim == part.side
                else f"no audit plan that decides it: {whole_audit_words(z)}"
            )
        )
    return floor, (
        f"no audit of {n} answers can pass a limit below {fr.percent(floor, 'up')} (every answer labelled, none "
        f"failing). The audit plan is fixed before the run, from calibration and the slice's size; the judge's "
        f"count only chooses its design: {'; '.join(parts)}"
    )


@dataclass(frozen=True)
class ProductCheck:
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
