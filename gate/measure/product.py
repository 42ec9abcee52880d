"""What a product lane's decision reads beyond its records: the judge's figures and the base run.

The judge's sensitivity and specificity per slice come from the calibration.json the policy names
(only when it measured the very judge that decided: `gate.measure.calibrate.requirement`); the base
run's verdicts from `--base-result`'s result.json (untrusted, validated). Both become one frozen
`ProductEvidence` that gate/decide/product.py decides from, on every path (run, decide, merge).
"""

from __future__ import annotations

from pathlib import Path

from gate.decide.audit import AuditEvidence
from gate.decide.product import BaseVerdicts, ProductEvidence
from gate.decide.slice_answers import JudgeCounts
from gate.measure.calibrate.requirement import JudgeCalibration
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy
from gate.model.result import ResultProblem, load_result


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
        calibrated=calibrated,
        judges=judges,
        base=base,
        audit=audit,
        queue_command=queue_command(loaded, out_dir),
    )


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
    *,
    seed: str,
    answers: dict[str, str],
) -> AuditEvidence | None:
    """People's audit of the run (`--audit`, else `lanes.<lane>.audit`), None without one; `--audit-queue`
    without a ledger is a usage error."""
    from gate.model.errors import UsageError

    spec = loaded.policy.lanes[lane]
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
    from gate.measure.audit import read_audit

    return read_audit(ledger, queue, seed=seed, answers=answers)
