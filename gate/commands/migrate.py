"""`gate calibrate --candidate-model NEW`: move the judge to a successor with evidence.

1. The current judge's records of the calibration lane (`--records`) are measured as `gate calibrate`
   measures them: no call, whether or not that model still answers.
2. The candidate judges the same lane's labelled cases: a real `gate run` of that lane with the
   candidate model (the same judge path: metered, paced, under the cost boundary, the cache and the
   shutdown-date check included), into `DIR/candidate-run/`.
3. The candidate's records are measured into `DIR/calibration.json` (.md, .svg): the file to adopt.
4. `DIR/migration.json` and `migration.md` put the two judges side by side per slice (Se and Sp with
   their intervals, an exact paired test of their errors on the same cases:
   gate/measure/calibrate/candidate.py), with each one's controls, cost per judgment and shutdown
   date, whether the candidate meets the policy's calibration requirement, what certifying it needs,
   and the reviewed change that adopts it. The policy file is never edited.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.commands.decide import decide_from_records
from gate.commands.run import RunOptions, run
from gate.decide.core import Decision
from gate.judge import installed_version
from gate.measure import certify
from gate.measure.calibrate.candidate import ALL, SliceComparison, compare_judges, slice_lines
from gate.measure.calibrate.command import measure, write_outputs
from gate.measure.calibrate.requirement import unfit
from gate.model.cases import Dataset, load_dataset
from gate.model.errors import UsageError
from gate.model.escape import code as code_id
from gate.model.escape import markdown as md
from gate.model.escape import visible
from gate.model.paths import shown_path
from gate.model.policy import LoadedPolicy, Price, load_policy, today, with_judge_model
from gate.model.records import RECORDS_FILE, Record, read_records
from gate.model.result import Result
from gate.model.retirement import days_text
from gate.model.wording import agree, listed, plural
from gate.plan.selection import make_plan
from gate.run.lineage import recorded_judge, recorded_retirement

SCHEMA_VERSION = 1
LEGEND = (
    "Se: of the failures people labelled, the share the judge fails; Sp: of the passes, the share it passes "
    "(95% Wilson intervals); McNemar: exact, on the cases only one judge got wrong"
)
RUN_DIR = "candidate-run"
NOTHING_TO_ADOPT = "No change to adopt: the verdict above says why."
OUTPUTS = ("migration.json", "migration.md", "calibration.json", "calibration.md", "calibration.svg")


@dataclass(frozen=True)
class MigrationOptions:
    policy: Path
    records: Sequence[Path]  # the current judge's runs of the calibration lane
    model: str  # the candidate
    out_dir: Path
    price: Price | None = None  # the candidate's prices (default: the policy's)
    max_cost: float | None = None
    use_cache: bool = True
    causes: Path | None = None  # classified disagreements of the candidate's records


@dataclass(frozen=True)
class Migration:
    data: dict[str, Any]
    out_dir: Path
    candidate_state: str  # the candidate run's state: evaluation_incomplete means its figures are not whole

    @property
    def cannot_tell(self) -> bool:
        """No verdict on the candidate: a labelled case or a control has none from it, or its run is
        incomplete, and no control of it failed (a failed control is a verdict: it does not meet the
        requirement). Its run's state alone does not say it: a false pass outranks an evaluator error."""
        req, controls = self.data["requirement"], self.data["candidate"]["controls"]
        if controls["failures"]:
            return False
        unjudged = req["without_verdict"] or controls["without_verdict"]
        return bool(unjudged) or self.candidate_state == "evaluation_incomplete"


def run_migration(
    opts: MigrationOptions,
    env: Mapping[str, str] | None = None,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> Migration:
    """Judge the calibration lane's labelled cases with the candidate and compare it with the current judge."""
    loaded = load_policy(opts.policy)
    dataset = load_dataset(loaded)
    by_file = [(path, read_records(path)) for path in opts.records]
    current_records = [r for _, recs in by_file for r in recs]
    lane = _lane_of(current_records, opts)
    if opts.model == loaded.policy.evaluator.model:
        raise UsageError(
            f"--candidate-model {visible(opts.model, 80)} is the judge {shown_path(opts.policy)} already names; fix: "
            "pass the model to move to"
        )
    current_cal, current_data = measure(loaded, dataset, by_file, None, now())
    current_decision = decide_from_records(opts.policy, opts.records, lane)
    run_dir = opts.out_dir / RUN_DIR
    decision = run(
        opts.policy,
        RunOptions(
            lane=lane,
            out_dir=run_dir,
            max_cost=opts.max_cost,
            use_cache=opts.use_cache,
            judge_model=opts.model,
            judge_price=opts.price,
        ),
        env=dict(os.environ) if env is None else dict(env),
    )
    candidate = with_judge_model(loaded, opts.model, opts.price)
    path = run_dir / RECORDS_FILE
    candidate_records = read_records(path) if path.is_file() and path.read_bytes().strip() else []
    cand_cal, cand_data = measure(candidate, dataset, [(path, candidate_records)], opts.causes, now())
    write_outputs(cand_data, opts.out_dir)
    current_side = _side(loaded, current_records, current_decision, [shown_path(p) for p in opts.records])
    candidate_side = _side(candidate, candidate_records, decision, [shown_path(run_dir)])
    data: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "policy_id": loaded.policy.policy_id,
        "lane": lane,
        "current": {**current_side, "cohen_kappa": current_data["overall"]["cohen_kappa"]},
        "candidate": {
            **candidate_side,
            "cohen_kappa": cand_data["overall"]["cohen_kappa"],
            "state": decision.state.value,
        },
        "slices": {name: c.to_dict() for name, c in compare_judges(current_cal, cand_cal).items()},
        "requirement": _requirement(loaded, cand_data, candidate_side["controls"], _labelled(decision)),
        "certification": _certification(candidate, dataset, candidate_records),
    }
    # No change to adopt for a candidate not measured whole (a control failed, a case or control without a
    # verdict), nor for one measured whole that falls short of the requirement: adopting it would make every
    # later run fail calibration.
    measured = candidate_side["controls"]["ok"] and not data["requirement"]["without_verdict"]
    data["adopt"] = adoption_steps(loaded, opts, data) if measured and data["requirement"]["meets"] is not False else []
    _write(data, opts.out_dir)
    return Migration(data, opts.out_dir, decision.state.value)


def _lane_of(records: Sequence[Record], opts: MigrationOptions) -> str:
    lanes = sorted({r.lane for r in records if r.lane})
    if len(lanes) != 1:
        files = ", ".join(shown_path(p) for p in opts.records)
        raise UsageError(
            f"{files}: the records name {'no lane' if not lanes else 'several lanes: ' + ', '.join(lanes[:5])}; fix: "
            "pass the records of one run of the calibration lane (the lane over the `calibration` partition)"
        )
    return lanes[0]


def _side(loaded: LoadedPolicy, records: Sequence[Record], decision: Decision, sources: list[str]) -> dict[str, Any]:
    """One judge's facts beside the figures: its model, configuration, controls, cost and shutdown date."""
    result = decision.result
    judged = [r for r in records if r.attempts and r.cache != "hit"]
    cost = sum(r.cost for r in judged) / len(judged) if judged else None
    retirement = recorded_retirement(loaded, records)
    made_by = recorded_judge(loaded, records)
    return {
        "model": loaded.policy.evaluator.model,
        "config_sha256": certify.config_sha256(loaded, made_by.settings, made_by.ragas_version),
        "records": sources,
        "judgments": len(records),
        "cost_per_judgment": cost,
        "currency": loaded.policy.evaluator.price.currency if loaded.policy.evaluator.price else "USD",
        "controls": _controls(result),
        "shutdown_date": retirement.date.isoformat() if retirement.date is not None else None,
        "shutdown_source": retirement.source,
    }


def _controls(result: Result | None) -> dict[str, Any]:
    if result is None:
        return {"ok": False, "failures": [], "without_verdict": []}
    rows = [c for c in result.cases if c.control_role is not None and c.control_role != "missing_evidence"]
    return {
        "ok": result.controls.ok,
        "failures": [f.written() for f in result.controls.failures],
        "without_verdict": [c.case_id for c in rows if c.bucket != "completed"],
    }


def _labelled(decision: Decision) -> tuple[int, list[str]]:
    """The lane's labelled cases (controls left out) the candidate's run had to judge, and those it left
    without a verdict: errors, unrun (the boundary, an interruption), not needed once a control failed.
    A withheld case (no evidence) is never judged by either judge."""
    rows = [c for c in decision.result.cases if c.control_role is None] if decision.result is not None else []
    judged = [c for c in rows if c.bucket != "withheld"]
    return len(judged), sorted(c.case_id for c in judged if c.bucket != "completed")


def _requirement(
    loaded: LoadedPolicy, cand_data: Mapping[str, Any], controls: Mapping[str, Any], labelled: tuple[int, list[str]]
) -> dict[str, Any]:
    """Whether the candidate meets the policy's calibration requirement: not when a control of it failed
    (none of its verdicts counts); unknown (`meets` None) while a labelled case or a control has no
    verdict from it."""
    req = loaded.policy.calibration
    without_verdict = labelled[1]
    found: dict[str, Any] = {
        "set": req is not None,
        "findings": [],
        "labelled": labelled[0],
        "without_verdict": without_verdict,
    }
    if req is not None:
        found["file"] = req.file
    if controls["failures"]:
        return {**found, "meets": False, "findings": [_controls_said(controls)]}
    if without_verdict or controls["without_verdict"] or req is None:
        return {**found, "meets": None}
    messages = [f.message for f in unfit(req, cand_data, loaded.policy.slices)]
    return {**found, "meets": not messages, "findings": messages}


def _controls_said(controls: Mapping[str, Any]) -> str:
    wrong = [f"{f['case_id']}: expected {f['expected']}, got {f['got']}" for f in controls["failures"]]
    return (
        f"its controls did not separate ({'; '.join(wrong)}): none of its verdicts counts, so nothing of it is "
        "measured; fix: try another candidate (or the prompt with it)"
    )


def _certification(candidate: LoadedPolicy, dataset: Dataset, records: Sequence[Record]) -> list[dict[str, Any]]:
    """Per lane that certifies on held-out cases: whether the candidate can still be certified there."""
    made_by = recorded_judge(candidate, records)
    ragas = made_by.ragas_version or installed_version("ragas") or ""
    by_set: dict[str, dict[str, Any]] = {}  # lanes that run one held-out set certify it once
    for name in candidate.policy.lanes:
        found = certify.assess(candidate, make_plan(candidate, dataset, name), made_by.settings, ragas)
        if found is None:
            continue
        if found.held_out_sha256 in by_set:
            by_set[found.held_out_sha256]["also"].append(name)
            continue
        by_set[found.held_out_sha256] = {
            "lane": name,
            "also": [],
            "ledger": found.ledger_as_written,
            "held_out_cases": len(found.case_ids),
            "spent": bool(found.spent_ids or found.spent_by),
            "message": found.findings[0].message if found.findings else None,
        }
    return list(by_set.values())


def adoption_steps(loaded: LoadedPolicy, opts: MigrationOptions, data: Mapping[str, Any]) -> list[str]:
    """The reviewed change that adopts the candidate, step by step (the gate makes none of it)."""
    policy = shown_path(opts.policy)
    ev = loaded.policy.evaluator
    edit = f"in {policy}, evaluator.model: {ev.model} -> {opts.model}"
    if opts.price is not None:
        edit += f", evaluator.price: input_per_mtok {opts.price.input_per_mtok:g}, output_per_mtok {opts.price.output_per_mtok:g}"
    if ev.shutdown_date is not None:
        edit += " (and remove evaluator.shutdown_date: it was the old model's)"
    steps = [edit]
    req = loaded.policy.calibration
    written = shown_path(opts.out_dir / "calibration.json")
    if req is not None:
        target = shown_path(loaded.resolve(req.file))
        steps.append(f"copy {written} (with its .md and .svg) to {target}, where calibration.file points")
    else:
        steps.append(f"keep {written}: the policy requires no calibration, but it is the candidate's measurement")
    for cert in data["certification"]:
        if cert["spent"]:
            steps.append(
                f"lane {cert['lane']}: its held-out cases already certified the current judge in {cert['ledger']}, so "
                "certifying the candidate needs a new untouched held-out partition (new cases, new ids)"
            )
        else:
            steps.append(
                f"certify it: `gate run --policy {policy} --lane {cert['lane']} --out gate-out-{cert['lane']}`, then "
                f"append its certification-entry.json to {cert['ledger']} once people accept the run"
            )
    steps.append("commit these together, in one reviewed change")
    return steps


def _write(data: Mapping[str, Any], out_dir: Path) -> None:
    try:
        (out_dir / "migration.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
        (out_dir / "migration.md").write_text(render_migration(data), "utf-8")
    except OSError as exc:
        raise UsageError(
            f"{out_dir}: cannot write migration.json ({exc.strerror}); fix: pass a writable --out"
        ) from None


def _money(value: float | None, currency: str) -> str:
    return "–" if value is None else f"{value:.6f} {currency}"


def judge_line(who: str, side: Mapping[str, Any], on: dt.date) -> str:
    """One judge in a line: model, controls, cost per judgment, shutdown date."""
    controls = side["controls"]
    if controls["ok"]:
        said = "controls separate"
    elif controls["failures"]:
        wrong = ", ".join(f"{f['case_id']} (expected {f['expected']}, got {f['got']})" for f in controls["failures"])
        said = f"controls did not separate: {wrong}"
    else:
        said = f"{plural(len(controls['without_verdict']), 'control')} without a verdict"
    when = "no shutdown date known"
    if side["shutdown_date"]:
        left = (dt.date.fromisoformat(side["shutdown_date"]) - on).days
        when = f"shuts down {side['shutdown_date']} ({days_text(left)})"
    elif side["shutdown_source"] == "provider":
        when = "no shutdown date announced"
    cost = _money(side["cost_per_judgment"], side["currency"])
    kappa = side.get("cohen_kappa")
    agrees = f"kappa {kappa:.2f}, " if isinstance(kappa, float) else ""
    return f"{who} {side['model']}: {agrees}{said}; {cost} a judgment; {when}"


def verdict_lines(data: Mapping[str, Any]) -> list[str]:
    """Whether the candidate meets the calibration requirement, and what certifying it needs."""
    req = data["requirement"]
    controls = data["candidate"]["controls"]
    unjudged, no_control = req.get("without_verdict", []), controls["without_verdict"]
    if controls["failures"]:
        lines = [f"calibration requirement: the candidate does NOT meet it: {req['findings'][0]}"]
    elif unjudged or no_control:
        nor = f", nor {plural(len(no_control), 'control')} ({listed(no_control)})" if no_control else ""
        lines = [
            f"calibration requirement: cannot tell: {len(unjudged)} of {plural(req['labelled'], 'labelled case')} "
            f"{agree(len(unjudged), 'has', 'have')} no verdict from {data['candidate']['model']}"
            f"{f' ({listed(unjudged)})' if unjudged else ''}{nor}; fix: see why "
            f"in {data['candidate']['records'][0]}/report.md, then run the same command again (with a larger --max-cost if the boundary "
            "stopped it; what it judged comes from the cache unless --no-cache)"
        ]
    elif not req["set"]:
        lines = ["calibration requirement: the policy sets none (`calibration:`)"]
    elif req["meets"]:
        kappa = data["candidate"]["cohen_kappa"]
        shown = "undefined" if kappa is None else f"{kappa:.2f}"
        lines = [
            f"calibration requirement: the candidate meets it (kappa {shown}; min_kappa and max_false_pass_high of "
            f"the policy's calibration, {req['file']})"
        ]
    else:
        lines = ["calibration requirement: the candidate does NOT meet it:", *(f"  {m}" for m in req["findings"])]
    for cert in data["certification"]:
        state = "spent: a new untouched held-out partition is needed" if cert["spent"] else "open to certify it"
        also = f" (lane {', '.join(cert['also'])} runs the same set)" if cert["also"] else ""
        lines.append(f"certification, lane {cert['lane']}: {cert['held_out_cases']} held-out cases{also}, {state}")
    if not data["certification"]:
        lines.append("certification: no lane certifies on held-out cases with a ledger")
    return lines


def render_migration(data: Mapping[str, Any], on: dt.date | None = None) -> str:
    """migration.md: the two judges side by side, the verdicts, and the change that adopts the candidate.
    Names come from the policy and the command line: escaped, as every report escapes them (slice names
    are names, safe inside the text block)."""
    day = on or today()
    current, candidate = data["current"], data["candidate"]
    lines = [
        f"# Moving the judge of {md(data['policy_id'])}: {md(current['model'])} -> {md(candidate['model'])}",
        "",
        f"Lane {code_id(data['lane'])}, its labelled cases judged by both (controls left out).",
        "",
        f"- {md(judge_line('current', current, day))}; its records: {md(', '.join(current['records']))}",
        f"- {md(judge_line('candidate', candidate, day))}; judged now, into {md(', '.join(candidate['records']))} "
        f"(that run of the lane: {code_id(candidate['state'])})",
        "",
        "## Side by side",
        "",
        f"{LEGEND}.",
        "",
        "```text",
    ]
    for name, c in data["slices"].items():
        lines += slice_lines(name, SliceComparison.from_dict(c))
    lines += ["```", "", "## Verdict", "", *(f"- {md(line)}" for line in verdict_lines(data)), ""]
    if data["adopt"]:
        lines += ["## To adopt it", "", "A reviewed change; the gate edits no policy:", ""]
        lines += [f"{i}. {md(step)}" for i, step in enumerate(data["adopt"], start=1)]
    else:
        lines += [NOTHING_TO_ADOPT]
    return "\n".join(lines) + "\n"


def summary(migration: Migration, on: dt.date | None = None) -> list[str]:
    """What the terminal shows: both judges, each slice side by side, the verdict, the change to adopt, the files."""
    data, day = migration.data, on or today()
    out = [
        f"gate calibrate --candidate-model: {data['policy_id']}, lane {data['lane']}: "
        f"{data['current']['model']} -> {data['candidate']['model']}",
        judge_line("current", data["current"], day),
        judge_line("candidate", data["candidate"], day) + f" (its run of the lane: {data['candidate']['state']})",
        "",
    ]
    out.append(LEGEND)
    for name, c in data["slices"].items():
        if name != ALL or len(data["slices"]) > 2:
            out += slice_lines(name, SliceComparison.from_dict(c))
    out += ["", *verdict_lines(data), ""]
    if data["adopt"]:
        out += ["To adopt it (a reviewed change; the gate edits no policy):"]
        out += [f"  {i}. {step}" for i, step in enumerate(data["adopt"], start=1)]
    else:
        out.append(NOTHING_TO_ADOPT)
    where = shown_path(migration.out_dir)
    out += ["", f"Wrote {where}/{{{', '.join(OUTPUTS)}}} and the candidate's run, {where}/{RUN_DIR}/"]
    return out
