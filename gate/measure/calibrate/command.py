"""The I/O edge of `gate calibrate`: read policy, dataset and records; write the three outputs."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gate.measure.calibrate.causes import read_causes
from gate.measure.calibrate.core import (
    Calibration,
    CalibrationInputError,
    CaseFacts,
    calibrate,
    to_json,
    with_causes,
)
from gate.measure.calibrate.markdown import (
    WIDE_INTERVAL,
    num,
    pct,
    rate_text,
    render_calibration,
    shown_limit,
    stricter,
)
from gate.measure.calibrate.svg import render_svg
from gate.measure.certify import config_components, config_sha256
from gate.model.cases import Case, Dataset
from gate.model.errors import UsageError
from gate.model.policy import LoadedPolicy, load_policy
from gate.model.records import Record, read_records
from gate.model.textfit import say
from gate.model.wording import plural
from gate.plan.selection import make_plan
from gate.run.lineage import recorded_judge

DEFAULT_OUT = Path("gate-calibration")
OUTPUTS = ("calibration.json", "calibration.md", "calibration.svg")


@dataclass(frozen=True)
class CalibrationOutput:
    data: dict[str, Any]
    out_dir: Path


def _check_configuration(
    loaded: LoadedPolicy, path: Path, records: Sequence[Record], measured: Mapping[str, Any]
) -> None:
    """Records judged under another policy, model, metric version, prompt or provider settings (or
    by another judge than the one most records were made by) measure another judge than the one calibration.json names."""
    policy = loaded.policy
    config = measured["config"]
    for r in records:
        settings = {"base_url_host": r.base_url_host, **r.sampling.model_dump()} if r.sampling else None
        aliases = {"label_aliases_sha256": r.label_aliases_sha256} if r.label_aliases_sha256 else None
        for what, got, want in (
            ("policy_id", r.policy_id, policy.policy_id),
            ("evaluator_model", r.evaluator_model, policy.evaluator.model),
            ("metric_version", r.metric_version, policy.metric.version),
            ("prompt template sha256", r.prompt_template_sha256 or "", loaded.prompt_sha256),
            ("provider settings", settings if r.base_url_host is not None else None, config["provider_settings"]),
            ("ragas_version", r.ragas_version, config["ragas_version"]),
            ("allowed_values", r.allowed_values, config["allowed_values"]),
            ("label aliases", aliases, config["parser"]),
        ):
            if got and got != want:
                raise CalibrationInputError(
                    f"{path}: case {r.case_id} was judged with {what} {got!r} but {loaded.path} (and the judge most "
                    f"records were made by) has {want!r}: these records measure another judge; fix: calibrate with the policy "
                    "that made them, pass records of one configuration only, or run this policy's calibration lane first"
                )


def measured_judge(loaded: LoadedPolicy, records: Sequence[Record], now: dt.datetime) -> dict[str, Any]:
    """The configuration the records were judged with (`config_sha256` as certification hashes it,
    with the provider host and ragas version the records name) and the moment of this calibration."""
    made_by = recorded_judge(loaded, records)
    judge, ragas = made_by.settings, made_by.ragas_version
    return {
        "config_sha256": config_sha256(loaded, judge, ragas),
        "config": config_components(loaded, judge, ragas),
        "calibrated_at": now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def case_facts(loaded: LoadedPolicy, dataset: Dataset) -> CaseFacts:
    cases: dict[str, Case] = {}
    for c in dataset.cases:
        cases.setdefault(c.case_id, c)  # a duplicated id is a validator finding; the first one counts
    lane_labels: dict[str, dict[str, tuple[int, int]]] = {}
    for lane in loaded.policy.lanes:
        counts: dict[str, tuple[int, int]] = {}
        for c in make_plan(loaded, dataset, lane).eligible:
            if c.is_control:
                continue
            fails, passes = counts.get(c.slice, (0, 0))
            counts[c.slice] = (fails + (c.human_label == "fail"), passes + (c.human_label == "pass"))
        lane_labels[lane] = counts
    return CaseFacts(cases=cases, lane_labels=lane_labels)


def run_calibrate(
    policy_path: str | Path,
    record_paths: Sequence[Path],
    causes_path: Path | None,
    out_dir: Path,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> CalibrationOutput:
    from gate.model.cases import load_dataset

    loaded = load_policy(policy_path)
    dataset = load_dataset(loaded)
    by_file = [(path, read_records(path)) for path in record_paths]
    data = measure(loaded, dataset, by_file, causes_path, now())[1]
    write_outputs(data, out_dir)
    return CalibrationOutput(data=data, out_dir=out_dir)


def measure(
    loaded: LoadedPolicy,
    dataset: Dataset,
    by_file: Sequence[tuple[Path, Sequence[Record]]],
    causes_path: Path | None,
    now: dt.datetime,
) -> tuple[Calibration, dict[str, Any]]:
    """The judge the records were made by, measured against people: the calibration and calibration.json's
    content. Records of another judge than the one most of them were made by are a usage error."""
    from gate.measure.calibrate.alignment import ragas_comparator
    from gate.run.lineage import make_lineage

    records = [r for _, file_records in by_file for r in file_records]
    measured = measured_judge(loaded, records, now)
    for path, file_records in by_file:
        _check_configuration(loaded, path, file_records, measured)
    cal = calibrate(loaded.policy, records, ragas_comparator(), case_facts(loaded, dataset))
    if causes_path is not None:
        cal = with_causes(cal, read_causes(causes_path, {d.case_id for d in cal.disagreements}))
    return cal, to_json(cal, loaded.policy, make_lineage(loaded, dataset, records).to_dict(), measured)


def write_outputs(data: Mapping[str, Any], out_dir: Path) -> None:
    """calibration.json, .md and .svg into `out_dir` (a usage error when it cannot be written)."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "calibration.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
        (out_dir / "calibration.md").write_text(render_calibration(data), "utf-8")
        (out_dir / "calibration.svg").write_text(render_svg(data), "utf-8")
    except OSError as exc:
        raise UsageError(
            f"{out_dir}: cannot write the calibration outputs ({exc.strerror}); fix: pass a writable --out"
        ) from None


# The table fits 100 columns: a slice name wider than this stands on its own line, its figures under it.
TABLE_WIDTH = 100
FIGURES_WIDTH = 77  # everything right of the name column


def print_summary(result: CalibrationOutput, out: IO[str]) -> None:
    """A few lines for the terminal; calibration.md has the rest."""
    d = result.data
    o = d["overall"]
    out.write(
        f"gate calibrate: {d['policy_id']}: {plural(o['cases'], 'case')} from the records, "
        f"{plural(d['controls_left_out'], 'control')} left out\n"
    )
    names = [len("all slices"), *(len(n) for n in d["slices"]), *(len(n) for n in d["partitions"])]
    name_w = min(max(names), TABLE_WIDTH - FIGURES_WIDTH)
    header = f"  {'':{name_w}}  {'done':>4}  {'agree':>5}  {'kappa':>5}  {'false-pass (95% CI)':<22}  " + (
        f"{'false-fail (95% CI)':<22}  e/r/u\n"
    )

    def line(name: str, t: dict[str, Any]) -> str:
        own_line = f"  {name}\n" if len(name) > name_w else ""  # too wide for the column: above its figures
        return own_line + (
            f"  {'' if own_line else name:{name_w}}  {t['completed']:>4}  {pct(t['agreement']):>5}  {num(t['cohen_kappa']):>5}  "
            f"{rate_text(t['false_pass_rate'], t['false_pass']):<22}  "
            f"{rate_text(t['false_fail_rate'], t['false_fail']):<22}  {t['errors']}/{t['review']}/{t['unrun']}\n"
        )

    out.write("slices, worst first:\n" + header)
    for name, t in d["slices"].items():
        out.write(line(name, t))
    out.write(line("all slices", o))
    out.write("partitions:\n")
    for name, t in d["partitions"].items():
        out.write(line(name, t))
    out.write("  (e/r/u: errors / review / unrun, counted beside the rates and never inside them)\n")
    widest = max(
        (
            (r["high"] - r["low"], name, r["n"])
            for name, t in d["slices"].items()
            for r in (t["false_pass_rate"], t["false_fail_rate"])
            if r["n"]
        ),
        default=None,
    )
    if widest is not None and widest[0] > WIDE_INTERVAL:
        say(
            out,
            f"warning: too few cases for these rates to mean much: intervals up to {widest[0] * 100:.0f} points "
            f"wide ({widest[1]}, n = {widest[2]}); add labelled calibration cases before trusting a limit",
        )
    dis = d["disagreements"]
    fp = sum(1 for x in dis if x["kind"] == "false_pass")
    classified = sum(d["causes"].values())
    say(
        out,
        f"{plural(len(dis), 'disagreement')}: {fp} false pass, {len(dis) - fp} false fail; {classified} classified"
        + ("" if classified == len(dis) else " (fill `cause` and pass --causes FILE)"),
    )
    _suggested_limits(d, name_w, out)
    for note in d.get("notes", []):
        say(out, f"note: {note}")
    say(
        out,
        (
            f"judge measured: config_sha256 {d['config_sha256'][:12]} ({d['config']['evaluator_model']} at "
            f"{d['config']['provider_settings']['base_url_host'] or 'an unrecorded host'}), calibrated_at "
            f"{d['calibrated_at']}; a lane with require_calibration gates only with this judge (commit "
            "calibration.json where the policy's calibration.file points)"
        ),
    )
    say(out, f"Wrote {result.out_dir}/{', '.join(OUTPUTS)}")


def _suggested_limits(d: Mapping[str, Any], name_w: int, out: IO[str]) -> None:
    """Each slice's suggested limits as "k of n" beside the policy's, with calibration.md's warning."""
    sugg = d.get("suggested_limits")
    if sugg is None:
        out.write("suggested limits: none (the calibration partition has no completed case)\n")
    else:
        lane = next(iter(sugg.values()))["scaled_to"]["lane"]
        say(out, f"suggested limits (calibration partition only, scaled to lane {lane}; rule in calibration.md):")

        def show(v: int | None) -> str:
            return "–" if v is None else str(v)

        for n, s in sugg.items():
            cur, lane_cases, rates = s["current"], s["scaled_to"], d.get("slices", {}).get(n, {})
            passes = shown_limit(s["max_false_passes"], lane_cases["fail_cases"], rates.get("false_pass_rate"))
            fails = shown_limit(s["max_false_fails"], lane_cases["pass_cases"], rates.get("false_fail_rate"))
            say(
                out,
                f"  {n:{name_w}}  max_false_passes {passes} (policy {show(cur['max_false_passes'])}), "
                f"max_false_fails {fails} (policy {show(cur['max_false_fails'])})",
                hang=name_w + 4,
            )
            if stricter(s):  # calibration.md's warning, on its own lines under the slice's figures
                say(out, f"  {'':{name_w}}  the policy is {stricter(s).strip(' ()')}", hang=0)
