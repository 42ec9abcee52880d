"""`gate merge`: one decision from the outputs of `gate run --shard I/N`.

The merged outputs are those of `gate decide` on every shard's records, so a matrix of shards
decides exactly as one run would: each control by its majority within each shard, as that shard's
run decided it (a control that failed in any shard fails the merge). Shards of different
configurations, or two of one index, are refused (a usage error): their evidence cannot be summed;
a shard that judged nothing has no judge to compare, only its policy, dataset and prompt. A missing
index is blocker `missing_shard`, its cases unrun.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gate.commands.assemble import RunEvidence, assemble, beside
from gate.commands.decide import AuditInputs, evidence_of_records, refuse_other_policy
from gate.commands.outputs import write_assembled
from gate.decide.core import Decision
from gate.judge.journal import JOURNAL_FILE
from gate.measure.trend import TREND_RECORDS
from gate.model.errors import UsageError
from gate.model.escape import visible
from gate.model.policy import today
from gate.model.records import RECORDS_FILE, Record, RecordsError, RecordShard, iter_records, write_records
from gate.model.result import Result, ResultProblem, load_result
from gate.model.states import Finding, State
from gate.model.wording import agree, plural
from gate.plan.inputs import load_inputs
from gate.plan.selection import recorded_order_seed
from gate.plan.shard import Shard, owned_by, shard_of
from gate.run.lineage import make_lineage

# Lineage fields that may differ between shards of one run (the gate's own version decides nothing:
# the merge re-decides from the records; each shard asked the provider for the judge model's shutdown
# date on its own, and the merge reads it from the records).
_MAY_DIFFER = frozenset({"gate_version", "judge_shutdown_date", "judge_shutdown_source"})
# Lineage fields that say which judge made a shard's records: a shard that judged nothing (cancelled
# before its judge loaded) made none, so it has no configuration to disagree with; its cases are unrun.
_JUDGE_MADE = frozenset({"config_fingerprint", "ragas_version"})


# What `write_merged` copies into --out beside the outputs: every shard's records, trend and journal.
MERGED_EVIDENCE = (RECORDS_FILE, TREND_RECORDS, JOURNAL_FILE)


class MergeError(UsageError):
    """Shard outputs that cannot be merged: a usage error (exit 2) naming the directory and the fix."""


@dataclass(frozen=True)
class ShardOutput:
    directory: Path
    shard: Shard
    lane: str
    lineage: dict[str, str]
    max_total_cost: float | None
    records: tuple[Record, ...]
    order_seed: str | None = None  # a product lane's: the seed its order and audit plan come from


def _read_result(directory: Path) -> Result:
    path = directory / "result.json"
    if not path.exists():
        raise MergeError(
            f"{path}: no result.json; fix: pass the --out directories of `gate run --shard I/N` (the matrix "
            "jobs' artifacts)"
        )
    try:
        return load_result(path, "shard's result file", fix="download the shard's artifact again")
    except ResultProblem as exc:
        raise MergeError(exc.message) from None


def _shard_of_result(path: Path, result: Result) -> Shard:
    shard = result.shard
    if shard is None or not 1 <= shard.index <= shard.count:
        raise MergeError(
            f"{path}: field `shard` is missing or not {{index, count}} with 1 <= index <= count: this is not "
            "the output of `gate run --shard I/N`; fix: run each matrix job with --shard and merge those"
        )
    return Shard(shard.index, shard.count)


def read_shard_output(directory: Path) -> ShardOutput:
    """One shard's result.json and records.jsonl, checked for shape (not yet against the others)."""
    result = _read_result(directory)
    path = directory / "result.json"
    shard = _shard_of_result(path, result)
    lineage = result.lineage
    if lineage is None:
        raise MergeError(f"{path}: field `lineage` is required; fix: pass the --out directory of a shard")
    path = directory / RECORDS_FILE
    # A shard stopped before its first judgment (a crash, a signal) leaves no records, or an empty file;
    # one that is not a regular file (a directory, a FIFO that would block) is refused, naming it.
    try:
        records = tuple(iter_records(path))
    except RecordsError as exc:
        found = exc.message.split("; fix:", 1)[0]
        raise MergeError(f"{found}; fix: download the shard's artifact again, or leave that shard out") from None
    for r in records:
        if r.control_role is None and shard_of(r.case_id, shard.count) != shard.index:
            raise MergeError(
                f"{directory / 'records.jsonl'}: judgment of case {r.case_id}, which shard {shard} does not own "
                f"(it belongs to shard {shard_of(r.case_id, shard.count)}); fix: merge unmodified shard outputs"
            )
        if r.shard is not None and (r.shard.index, r.shard.count) != (shard.index, shard.count):
            raise MergeError(
                f"{directory / 'records.jsonl'}: a judgment of case {r.case_id} says shard {r.shard.index}/"
                f"{r.shard.count} made it, but this is the output of shard {shard}; fix: merge unmodified shard outputs"
            )
    # Records written before they carried their shard are this directory's: each control is then
    # decided by its majority within the shard, as that shard's run decided it.
    own = RecordShard(index=shard.index, count=shard.count)
    records = tuple(r if r.shard is not None else r.model_copy(update={"shard": own}) for r in records)
    return ShardOutput(
        directory=directory,
        shard=shard,
        lane=result.lane,
        lineage={k: str(v) for k, v in lineage.items()},
        max_total_cost=float(result.limits.max_total_cost) if result.limits is not None else None,
        records=records,
        order_seed=recorded_order_seed(records) or (result.product.order_seed if result.product else None),
    )


def _check_one_seed(shards: Sequence[ShardOutput]) -> None:
    """The shards of one product run share its order seed (in GitHub Actions, the workflow run's): shards
    of different seeds are different runs, whose audit plans differ, so none of them is the run's."""
    seeded = [(s, s.order_seed) for s in shards if s.order_seed is not None]
    for s, seed in seeded[1:]:
        first, theirs = seeded[0]
        if seed != theirs:
            raise MergeError(
                f"{s.directory / 'result.json'}: shard {s.shard} judged in the order of seed {visible(seed, 80)}, "
                f"but {first.directory} (shard {first.shard}) in that of {visible(theirs, 80)}: shards of one "
                "run share one seed, which fixes the order and the audit plan (in GitHub Actions the workflow run's: "
                "a re-run of some jobs is another attempt, and so another seed); fix: run every shard in one workflow "
                f"run attempt (re-run all jobs), or outside GitHub Actions give each shard --order-seed "
                f"{visible(theirs, 80)}"
            )


def check_compatible(shards: Sequence[ShardOutput], current: dict[str, str]) -> None:
    """Refuse a set of shards that are not the shares of one run of this policy."""
    first = shards[0]
    # The judge's lineage is compared with a shard that judged something, when one did.
    judged = next((s for s in shards if s.records), first)
    for s in shards:
        where = s.directory / "result.json"
        if s.shard.count != first.shard.count:
            raise MergeError(
                f"{where}: shard {s.shard} has count {s.shard.count}, but {first.directory} has {first.shard.count}; "
                "fix: merge the shards of one matrix"
            )
        if s.lane != first.lane:
            raise MergeError(f"{where}: lane {s.lane!r}, but {first.directory} ran lane {first.lane!r}")
        for key in sorted((set(s.lineage) | set(first.lineage)) - _MAY_DIFFER):
            other = judged if key in _JUDGE_MADE else first
            if key in _JUDGE_MADE and not (s.records and other.records):
                continue
            mine, theirs = s.lineage.get(key, ""), other.lineage.get(key, "")
            if mine != theirs:
                raise MergeError(
                    f"{where}: lineage.{key} is {mine!r}, but {other.directory} has {theirs!r}: these shards did not "
                    "run one configuration; fix: re-run every shard on the same commit and merge those"
                )
        for key, now in current.items():
            if s.lineage.get(key) != now and key == "responses_sha256":
                raise MergeError(
                    f"{where}: the shards judged a responses file with sha256 {s.lineage.get(key, '')[:12]}, not "
                    f"the --responses given to merge ({now[:12]}); fix: pass the responses file the shards ran with"
                )
            if s.lineage.get(key) != now:
                what = key.removesuffix("_sha256")
                raise MergeError(
                    f"{where}: the shards ran a {what} with sha256 {s.lineage.get(key, '')[:12]}, not the {what} of "
                    f"the policy given to merge ({now[:12]}); fix: pass the policy file the shards ran, on the same "
                    "commit"
                )
    _check_one_seed(shards)
    seen: dict[int, Path] = {}
    for s in shards:
        if s.shard.index in seen:
            raise MergeError(
                f"{s.directory} and {seen[s.shard.index]} are both shard {s.shard}; fix: pass each shard's output once"
            )
        seen[s.shard.index] = s.directory


@dataclass(frozen=True)
class Merged:
    evidence: RunEvidence  # every shard's: records, trend, journal (`gate decide` over them agrees)
    decision: Decision
    records: tuple[Record, ...]  # every shard's records, shard by shard
    directories: tuple[Path, ...] = ()  # the shards' output directories, shard by shard


def merge(
    policy_path: str | Path,
    directories: Sequence[Path],
    *,
    clock: Callable[[], dt.date] = today,
    responses: Path | None = None,
    base_result: Path | None = None,
    audit: Path | None = None,
    audit_queue: Path | None = None,
    out_dir: Path | None = None,
) -> Merged:
    if not directories:
        raise MergeError("gate merge: no shard directory given; fix: pass the --out directory of every shard")
    shards = sorted((read_shard_output(Path(d)) for d in directories), key=lambda s: s.shard.index)
    refuse_other_policy(policy_path, [(s.directory, s.records) for s in shards])
    loaded, dataset, plan, _findings = load_inputs(policy_path, shards[0].lane, responses)
    lineage = make_lineage(loaded, dataset).to_dict()
    # A product lane's shards judged one responses file: the one given to merge, when it is given.
    keys = ("policy_sha256", "dataset_sha256", "prompt_sha256", *(("responses_sha256",) if responses else ()))
    check_compatible(shards, {k: lineage[k] for k in keys})
    count = shards[0].shard.count
    present = {s.shard.index for s in shards}
    owners = owned_by(plan, count)
    missing = [
        Finding(
            State.EVALUATION_INCOMPLETE,
            "missing_shard",
            f"shard {i}/{count} is missing from the merge: its {plural(len(owners[i]), 'case')} {agree(len(owners[i]), 'was', 'were')} not judged; fix: re-run "
            f"that matrix job (gate run --shard {i}/{count}) and merge again",
            case_ids=tuple(owners[i]),
        )
        for i in range(1, count + 1)
        if i not in present
    ]
    found = [beside(s.directory, s.records) for s in shards]
    caps = [s.max_total_cost for s in shards if s.max_total_cost is not None]
    max_cost = max(caps) * count if caps else None
    notes = [f"merged shards {', '.join(str(s.shard) for s in shards)}"]
    merged_shards = {
        "count": count,
        "indices": sorted(present),
        "missing": [i for i in range(1, count + 1) if i not in present],
    }
    evidence = evidence_of_records(
        policy_path,
        shards[0].lane,
        found,
        max_cost,
        clock(),
        findings=missing,
        notes=notes,
        sections={"merged_shards": merged_shards},
        responses=responses,
        base_result=base_result,  # a product lane's base run: the shards' answers paired with it, as one run's
        # People's audit of the answers every shard judged; its queue is made from the merged output, which holds
        # every shard's records (the first shard's directory where none is given).
        audit=AuditInputs(audit, audit_queue, out_dir or shards[0].directory),
        named="the records of shards " + ", ".join(str(s.directory / RECORDS_FILE) for s in shards),
    )
    records = tuple(r for s in shards for r in s.records)
    return Merged(evidence, assemble(evidence), records, tuple(s.directory for s in shards))


def write_merged(out_dir: Path, merged: Merged) -> Decision:
    """The merged outputs, plus every shard's records in one records.jsonl (for `gate decide`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / RECORDS_FILE
    path.unlink(missing_ok=True)
    write_records(path, merged.records)
    trend = out_dir / TREND_RECORDS
    trend.unlink(missing_ok=True)
    if merged.evidence.trend.records:  # the trend combined across shards like the verdicts
        write_records(trend, merged.evidence.trend.records)
    # Every shard's attempt journal, so `gate decide` on the merged records bills what the shards paid
    # and never recorded (a killed shard's attempts), as the merge did.
    journal = out_dir / JOURNAL_FILE
    journal.unlink(missing_ok=True)
    with journal.open("ab") as into:
        for directory in merged.directories:
            if (directory / JOURNAL_FILE).is_file():
                with (directory / JOURNAL_FILE).open("rb") as shard_journal:
                    shutil.copyfileobj(shard_journal, into)
    return write_assembled(out_dir, merged.evidence)
