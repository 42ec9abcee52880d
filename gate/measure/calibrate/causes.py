"""Reading the team's classified disagreements back (`gate calibrate --causes FILE`).

The file is a filled copy of `calibration.json`'s disagreements as JSON Lines (other keys are
kept as they were and ignored) or a CSV of `case_id,cause` (a header line is optional). A blank
cause means "not classified yet". An unknown cause, or a case id that is not a disagreement of
the records, is a usage error naming the line.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
from collections.abc import Collection
from pathlib import Path

from gate.measure.calibrate.core import CAUSES
from gate.model.errors import UsageError
from gate.model.loading import FileProblem, read_text


class CausesError(UsageError):
    """The causes file cannot be used as given (exit 2)."""


def _rows(path: Path, text: str) -> list[tuple[int, str, str]]:
    """(line number, case id, cause) for every non-blank row."""
    rows: list[tuple[int, str, str]] = []
    first = next((line for line in text.splitlines() if line.strip()), "")
    if first.lstrip().startswith("{"):
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CausesError(
                    f"{path}:{lineno}: not valid JSON ({exc.msg}); fix: one JSON object per line, "
                    'e.g. {"case_id": "c-1", "cause": "prompt_gap"}'
                ) from None
            if not isinstance(obj, dict) or not isinstance(obj.get("case_id"), str):
                raise CausesError(
                    f"{path}:{lineno}: each line needs a string `case_id`; fix: copy the line from "
                    "calibration.json's disagreements and fill `cause`"
                )
            cause = obj.get("cause")
            if cause is not None and not isinstance(cause, str):
                raise CausesError(
                    f"{path}:{lineno}: `cause` must be a string or null; fix: write one of {list(CAUSES)}"
                )
            rows.append((lineno, obj["case_id"], cause or ""))
        return rows
    for lineno, fields in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not fields or not any(f.strip() for f in fields):
            continue
        if len(fields) != 2:
            raise CausesError(
                f"{path}:{lineno}: expected two columns `case_id,cause`, got {len(fields)}; "
                "fix: write one `case_id,cause` per line"
            )
        case_id, cause = (f.strip() for f in fields)
        if lineno == 1 and (case_id, cause) == ("case_id", "cause"):
            continue
        rows.append((lineno, case_id, cause))
    return rows


def read_causes(path: Path, disagreement_ids: Collection[str]) -> dict[str, str]:
    """case id -> cause, for the disagreements the file classifies."""
    try:
        text = read_text(path, "causes file (--causes)")
    except FileProblem as exc:
        raise CausesError(exc.message) from None
    out: dict[str, str] = {}
    for lineno, case_id, cause in _rows(path, text):
        if case_id not in disagreement_ids:
            raise CausesError(
                f"{path}:{lineno}: case {case_id!r} is not a disagreement of these records; fix: classify only "
                "the cases listed under `disagreements` in calibration.json (re-run gate calibrate to refresh them)"
            )
        if not cause:
            continue
        if cause not in CAUSES:
            close = difflib.get_close_matches(cause, CAUSES, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise CausesError(
                f"{path}:{lineno}: unknown cause {cause!r} for case {case_id}; {hint}fix: use one of {', '.join(CAUSES)}"
            )
        if case_id in out and out[case_id] != cause:
            raise CausesError(
                f"{path}:{lineno}: case {case_id} is classified twice ({out[case_id]} and {cause}); fix: keep one"
            )
        out[case_id] = cause
    return out
