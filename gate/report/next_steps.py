"""What to do after a run that did not pass: a few steps chosen by its blockers. Pure.

The terminal (`gate.report.terminal`) and the report (`gate.report.markdown`) print the same steps;
the terminal names the policy and output paths the user typed, the report placeholders.
The hardest question after a failed run is whether the judge or the product is wrong: the steps
point to what answers it (the judge's reasons, `gate compare`, `gate calibrate`, overrides).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gate.model.overrides import WAIVABLE
from gate.validate.completeness import NEVER_GATED

CALIBRATION_PARTITION = "calibration"  # where `gate calibrate` measures a judge (gate.measure.calibrate)

if TYPE_CHECKING:
    from gate.model.result import Result

# Blockers about verdicts: the judge said something people did not, or could not say it twice.
VERDICT_KINDS = frozenset(
    {"false_pass_limit", "false_fail_limit", "control_failed", "pair_violated", "unstable_verdict", "check_failed"}
)
# Blockers about the gathering of evidence: what is missing can be judged again.
RESUMABLE_KINDS = frozenset(
    {
        "evaluator_errors",
        "control_error",
        "budget_exhausted",
        "unrun_cases",
        "internal_error",
        "output_failed",
        "worker_records_unreadable",
    }
)
# The lane requires a calibrated judge and this one is not, or no longer, or not well enough.
CALIBRATION_KINDS = frozenset({"judge_uncalibrated", "judge_unfit", "calibration_expired"})
# Judgments that ended in an error: the provider or the reply failed, never the product.
ERROR_KINDS = frozenset({"evaluator_errors", "control_error"})
# The judge's model shuts down: the judge moves to a successor (gate/model/retirement.py).
RETIREMENT_KINDS = frozenset({"judge_retiring", "judge_retired"})
# A product lane's slice its figures left open: people's audit, or a person's slice override, decides it.
PRODUCT_OPEN_KINDS = frozenset({"failure_rate_inconclusive", "audit_required", "judge_unfit"})
# A product lane's slice that fails: the application's answers, not the judge or the labels.
PRODUCT_FAILED_KINDS = frozenset({"failure_rate_exceeded", "failure_confirmed", "regressed"})
GOLD_SET_KINDS = frozenset(
    {"input_contract", "unknown_slice", "partition_leak", "control_missing", "missing_evidence", "label_conflict"}
)


def measures(result: Result) -> bool:
    """Whether the lane measures the judge rather than gates a merge: every case it judged (but the
    controls) is in a partition no lane gates on (`calibration`, `dev`); a product lane always gates."""
    rows = [row for row in result.cases if row.control_role is None]
    return result.product is None and bool(rows) and all(row.partition in NEVER_GATED for row in rows)


def calibrate_step(result: Result, policy: str, out: str, lane: str | None) -> str:
    """How to measure this judge against people: on the calibration partition's records (suggested
    limits come from there only), so a run of another lane first runs the calibration lane."""
    if any(row.partition == CALIBRATION_PARTITION for row in result.cases):
        return f"`gate calibrate --policy {policy} --records {out}`: how often this judge disagrees with people, per slice."
    which = (
        ""
        if lane is not None
        else f" (LANE: a lane over the `{CALIBRATION_PARTITION}` partition; add one under `lanes:` if there is none)"
    )
    return (
        f"How often this judge disagrees with people, per slice, is measured on the `{CALIBRATION_PARTITION}` "
        f"partition, not on these records: `gate run --policy {policy} --lane {lane or 'LANE'} --out "
        f"gate-out-calibration`, then `gate calibrate --policy {policy} --records gate-out-calibration`{which}."
    )


def _judge_steps(kinds: set[str], policy: str, out: str, calibrate: str, measuring: bool = False) -> list[str]:
    """The steps for a failed control or a verdict blocker: the judge's or the label's to fix. A lane
    that measures the judge (`measuring`) recorded its disagreements: `gate calibrate` comes next,
    and nothing is there to override."""
    steps: list[str] = []
    if measuring and kinds & VERDICT_KINDS and "control_failed" not in kinds:
        return [
            f"This lane measures the judge and gates nothing: its records ({out}) hold where the judge and people "
            f"disagree (above). Next, {calibrate}",
            "If a label is wrong, add a corrected case that supersedes it, then run the lane again.",
        ]
    if "control_failed" in kinds:
        # A control's answer and label are known: the judge missed it, not the product, and no other
        # verdict counts until the controls separate. No override waives it.
        steps += [
            "A control failed: the judge got a case with a known answer wrong, so fix the judge (its prompt, "
            "model or provider settings), not the product, and run again; no override waives a control.",
            calibrate,
        ]
    elif kinds & VERDICT_KINDS:
        steps += [
            "The answers are frozen and labelled, so a false pass or false fail is the judge's or the label's, "
            "never the product's: read the judge's reason on each case above; if the label is wrong, add a "
            "corrected case that supersedes it; if the reason is wrong, fix the judge (prompt, model, settings).",
            f"`gate compare --base BASE_RUN --head {out}`: against a base run (main's), the first input that "
            "differs for each changed verdict (a response points at the product; a prompt, model or provider at "
            "the judge).",
            calibrate,
        ]
        if kinds & set(WAIVABLE):
            steps.append(
                "A judge error people accept: an entry under the policy's `overrides:` (approver, expiry), then "
                f"`gate decide --policy {policy} --records {out}` decides again without a model call."
            )
    return steps


def _product_steps(kinds: set[str], policy: str, out: str) -> list[str]:
    """A product lane's steps: its answers are the application's, unlabelled, so a failure is the
    product's to fix, and what the judge's figures leave open people's audit decides (never a
    corrected case: nothing here is a labelled case)."""
    steps: list[str] = []
    if kinds & PRODUCT_FAILED_KINDS:
        steps.append(
            "The application's answers fail (too often, one more than a zero-tolerance slice allows, or worse than "
            "the base): the fix is the product's. Read the answers named above (the judge's reason, and people's "
            "label where they audited), fix the application, and run the lane on its new answers; no override "
            "waives a failure."
        )
    if kinds & PRODUCT_OPEN_KINDS:
        steps.append(
            f"People's labels decide what the judge's figures leave open: `gate review queue --policy {policy} --from "
            f"{out} --out audit/queue.jsonl` draws this run's audit plan, `gate review serve audit/queue.jsonl "
            "--ledger audit/ledger` lets people label it blind to the judge, then `gate decide --policy "
            f"{policy} --records {out} --audit audit/ledger --audit-queue audit/queue.jsonl` decides again with their "
            "labels, without a model call (docs/PRODUCT_GATE.md)."
        )
        steps.append(
            "Or a person decides a slice: an entry under the policy's `overrides:` with `slice: NAME` (approver, "
            "evidence, expiry, follow-up) waives that slice's failure_rate_inconclusive, judge_unfit or "
            "audit_required, never a failure nor a finding of the calibration requirement."
        )
    if "labels_disagree" in kinds:
        steps.append(
            "People do not agree on these answers (alpha below review.min_alpha): `gate review status "
            "audit/queue.jsonl --ledger audit/ledger` shows where; sharpen the rubric, then label again."
        )
    if "calibration_not_transferable" in kinds:
        steps.append(
            "The judge errs on this run's answers otherwise than calibration measured: add labelled answers like "
            "these to the calibration partition and calibrate again; meanwhile the audit decides the slice."
        )
    return steps


def _resume_steps(result: Result, kinds: set[str], policy: str, out: str) -> list[str]:
    """The steps that gather the evidence still missing: resume, or collect or resend a batch."""
    steps: list[str] = []
    if kinds & RESUMABLE_KINDS:
        # The resume names the lane run (without it, gate run resumes pr into this --out); a product
        # lane's also needs the same answers again (they are what was judged).
        lane = f" --lane {result.lane}" if result.lane != "pr" or result.product is not None else ""
        product = " --responses RESPONSES.jsonl" if result.product is not None else ""
        steps.append(
            f"`gate run --policy {policy}{lane}{product} --out {out} --resume` judges only what is missing; nothing "
            "paid is paid again."
        )
    if "batch_pending" in kinds:
        steps.append(
            f"`gate run --policy {policy} --out {out} --lane {result.lane} --batch collect` once the provider has "
            "answered (within 24h): nothing is submitted or paid again."
        )
    if "batch_failed" in kinds and result.batch is None:  # never submitted: the same command picks it up
        steps.append(
            f"`gate run --policy {policy} --out {out} --lane {result.lane} --batch submit` again, into the same --out: "
            "it sends the lines it kept; the controls are not judged or paid again."
        )
    elif "batch_failed" in kinds:  # the provider refused the batch: its lines must change
        steps.append("Fix what the batch_failed blocker names, then `--batch submit` again into a new --out.")
    return steps


def migrate_step(policy: str, calibration_lane: str | None) -> str:
    """How to move a retiring judge: the candidate judges the calibration lane's labelled cases."""
    lane = calibration_lane or "LANE"
    return (
        f"Move the judge with evidence: `gate calibrate --policy {policy} --records gate-out-calibration "
        f"--candidate-model NEW` judges the calibration lane's labelled cases with the candidate beside this "
        "judge's records and prints the reviewed change that adopts it (docs/PROVIDERS.md); without a run of that "
        f"lane yet, `gate run --policy {policy} --lane {lane} --out gate-out-calibration` first (while the model "
        "still answers)."
    )


def next_steps(
    result: Result, policy: str = "POLICY", out: str = "gate-out", calibration_lane: str | None = None
) -> list[str]:
    """The steps for this result's blockers, most telling first; when nothing blocks, none (but a lane
    that measures the judge: gate calibrate on its records).
    `calibration_lane`: the policy's lane over the calibration partition, when known."""
    kinds = {b.kind for b in result.blockers}
    calibrate = calibrate_step(result, policy, out, calibration_lane)
    steps: list[str] = _judge_steps(kinds, policy, out, calibrate, measures(result))
    if not kinds and measures(result):  # nothing to fix: the measurement is recorded, calibrate reads it
        steps.append(
            f"This lane measures the judge and gates nothing: its records ({out}) are the measurement. Next, {calibrate}"
        )
    if kinds & CALIBRATION_KINDS and calibrate not in steps:
        steps.append(f"Calibrate this judge (see docs/CALIBRATION.md). {calibrate}")
    if "missing_credentials" in kinds:
        lane = f" --lane {result.lane}" if result.lane != "pr" else ""  # the demo's lane is pr unless told
        steps.append("Provide the judge's key (see the blocker), then run again: nothing was spent.")
        steps.append(
            f"No key yet: `python scripts/demo_offline.py --policy {policy}{lane}` runs this suite against an offline "
            "judge that answers with your labels: it checks the wiring (policy, cases, rendering, reports, exit "
            "codes), never the prompt. A small model on a local OpenAI-compatible server (docs/LOCAL_MODEL.md) "
            "also shows whether replies keep the contract and what they cost, but not whether the prompt judges well."
        )
    if kinds & ERROR_KINDS and any(row.error_kind for row in result.cases):  # not for controls merely unrun
        steps.append(
            "Errors are the provider's or the reply's, never the product's: each case's error kind says which "
            "(connection or auth: check the evaluator's base_url and key; timeout: the server was too slow or "
            "too busy, see below; rate_limit: lower max_concurrency or set evaluator.rate_limit; parse_error or "
            "invalid_label: the prompt or the model; bad_request: the provider refused the request (HTTP 400, "
            "nothing paid), and its message on each case says what it could not read: fix what it names, in the "
            "prompt or the evaluator's settings, then run again)."
        )
    if any(row.error_kind == "timeout" for row in result.cases):
        # A local server (llama.cpp, vLLM) answers as many requests at once as it has slots; the rest
        # wait in its queue, and that wait counts in timeout_s: the key and the address are fine.
        steps.append(
            "Timeouts: evaluator.timeout_s counts the time a request waits in the server's queue, and a "
            "server answers only as many requests at once as it has slots (llama.cpp's --parallel, vLLM's "
            "max_num_seqs): set evaluator.max_concurrency to at most the server's slots and evaluator.timeout_s "
            "to what one full reply takes there, then resume."
        )
    if "budget_exhausted" in kinds:
        # The cause is the boundary against what the cases cost: resuming alone meets it again.
        steps.append(
            "The cost boundary stopped the run: raise `limits.max_total_cost` (or pass a higher --max-cost, up to "
            f"it), or shorten or drop the case that did not fit (named above; `gate validate --policy {policy}` "
            "names a case dearer than its share), then resume."
        )
    steps += _resume_steps(result, kinds, policy, out)
    if "missing_shard" in kinds:
        steps.append("Re-run the missing shard's job, then `gate merge` again.")
    if kinds & RETIREMENT_KINDS:
        steps.append(migrate_step(policy, calibration_lane))
    if kinds & GOLD_SET_KINDS:
        steps.append(
            f"`gate validate --policy {policy}` names each finding's file and line: fix the cases, not the judge."
        )
    if "stale_records" in kinds:
        steps.append(f"`gate run --policy {policy}`: records from another judge configuration are not evidence.")
    if "expired_override" in kinds:
        steps.append("Renew the expired override (a new expiry, approved) or remove it from the policy.")
    if result.product is not None:
        return [*steps, *_product_steps(kinds, policy, out)]
    if any(b.state == "review_required" and b.kind not in RETIREMENT_KINDS for b in result.blockers):
        steps.append(
            f"`gate review queue --policy {policy} --from {out} --out review-queue.jsonl` queues the cases under "
            "review_required (and every case where the judge and people disagree) for people to label, blind to "
            "the judge (docs/REVIEW.md); then record the decision (an override, or a corrected case that supersedes "
            "the old one: `gate review export`)."
        )
    return steps
