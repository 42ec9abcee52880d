"""batch.json: the batch a `gate run --batch submit` sent from an --out, read by every run there.

`gate run --batch` writes and reads it (gate/commands/batch.py); a live `gate run` or `--resume`
on the same --out asks `uncollected` first, and refuses while the batch's judgments are not all
recorded: judging them live too would pay for them twice (once live, once when collected).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from gate.model.errors import UsageError
from gate.model.paths import shown_path
from gate.model.records import RECORDS_FILE, AuditSizing, Record, read_records
from gate.model.result import BatchCounts
from gate.model.wording import agree, plural

BATCH_FILE = "batch.json"
INPUT_FILE = "batch-input.jsonl"
OUTPUT_FILE = "batch-output.jsonl"
ERRORS_FILE = "batch-errors.jsonl"
BATCH_FILE_SCHEMA = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class BatchJudgment(_Strict):
    custom_id: str
    case_id: str
    repeat_index: int


class BatchPrices(_Strict):
    input_per_mtok: float
    output_per_mtok: float
    currency: str


class BatchFile(_Strict):
    """batch.json: what was submitted from this --out, so it is collected (never submitted) again."""

    schema_version: int = BATCH_FILE_SCHEMA
    batch_id: str | None  # None: the batch not created yet (the same --batch command picks it up)
    # None: the lines are in batch-input.jsonl, not uploaded yet (an upload that failed: the same
    # --batch command uploads them; the controls judged before are kept, never judged again).
    input_file_id: str | None
    submitted_at: str
    endpoint: str
    model: str
    policy_id: str
    lane: str
    policy_sha256: str
    dataset_sha256: str
    config_fingerprint: str
    prices: BatchPrices
    reserved_cost: float
    judgments: list[BatchJudgment]
    status: str = "validating"
    request_counts: BatchCounts | None = None
    collected_at: str | None = None
    # A product lane: the --responses file whose answers were submitted, and the order seed the submit
    # fixed, which the collect keeps (its records and audit plan are the submitted run's). Written on those only.
    responses_sha256: str | None = None
    order_seed: str | None = None
    # What sized each slice's audit plan when the submit started (gate/decide/product/seal.py), which the
    # collect keeps. Written on a product lane only.
    audit_sizing: dict[str, AuditSizing] | None = None


def read_batch_file(out_dir: Path) -> BatchFile | None:
    path = out_dir / BATCH_FILE
    if not path.exists():
        return None
    try:
        return BatchFile.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) and exc.errors() else None
        where = f" (field {'.'.join(str(x) for x in first['loc'])}: {first['msg']})" if first else ""
        raise UsageError(
            f"{shown_path(path)} cannot be read{where}; it records a batch submitted from this --out. fix: restore "
            "it from the submit step's artifact, or submit again into a new --out"
        ) from None


def write_batch_file(out_dir: Path, bf: BatchFile) -> None:
    path = out_dir / BATCH_FILE
    tmp = path.with_suffix(".json.tmp")
    unset = {k for k in ("responses_sha256", "order_seed", "audit_sizing") if getattr(bf, k) is None} or None
    tmp.write_text(bf.model_dump_json(indent=2, exclude=unset) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def pending_judgments(bf: BatchFile, recorded: list[Record]) -> list[BatchJudgment]:
    """The batch's judgments no record from a batch answers yet."""
    done = {(r.case_id, r.repeat_index) for r in recorded if r.batch_id is not None}
    return [j for j in bf.judgments if (j.case_id, j.repeat_index) not in done]


def recorded(out_dir: Path) -> list[Record]:
    path = out_dir / RECORDS_FILE
    return read_records(path) if path.exists() and path.read_bytes().strip() else []


def uncollected(out_dir: Path) -> BatchFile | None:
    """The batch submitted from `out_dir` and not collected yet, or None. Once collected, every line
    was read and recorded: a later run's records here are that run's, never the batch's missing."""
    bf = read_batch_file(out_dir)
    return bf if bf is not None and bf.collected_at is None else None


def clear_collected(out_dir: Path) -> None:
    """A fresh run into `out_dir` drops the records of the run before it: a collected batch's files
    go with them, so nothing later reads them as this run's (or collects them into its records).
    A batch still out is never cleared (a live run on it is refused by `refuse_uncollected`)."""
    if uncollected(out_dir) is not None:
        return
    for name in (BATCH_FILE, INPUT_FILE, OUTPUT_FILE, ERRORS_FILE):
        (out_dir / name).unlink(missing_ok=True)


def refuse_uncollected(out_dir: Path, policy_path: str | Path, lane: str) -> None:
    """A usage error (exit 2) when a live run would judge what a batch from `out_dir` is judging."""
    bf = uncollected(out_dir)
    if bf is None:
        return
    n = len(pending_judgments(bf, recorded(out_dir)))
    command = f"gate run --policy {shown_path(policy_path)} --lane {lane} --out {shown_path(out_dir)} --batch"
    if bf.input_file_id is None:  # the submit's upload failed: nothing went to the provider yet
        raise UsageError(
            f"{shown_path(out_dir / BATCH_FILE)} holds the lines of a `--batch submit` from this --out whose upload "
            f"failed: {plural(n, 'judgment')} not sent or paid yet, which the next `--batch submit` here sends; a live run "
            f"here would judge them too; fix: send them: `{command} submit` (or run live into another --out)"
        )
    command += " collect"
    raise UsageError(
        f"{shown_path(out_dir / BATCH_FILE)} holds batch {bf.batch_id or '(not created yet)'}, submitted from this "
        f"--out and not collected: {plural(n, 'judgment')} {agree(n, 'waits', 'wait')} for it, already reserved at batch prices; a live run here "
        f"would judge and pay for them a second time; fix: collect it: `{command}` (or run live into another --out)"
    )
