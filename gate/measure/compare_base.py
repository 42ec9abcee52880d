"""The Action's `base-result`: this run against the base branch's last run, for the PR comment.

Never fails the step: a missing or unreadable base run is said in the comment, and the state is
the run's own. compare.json and compare.md are written beside the run's outputs.
"""

from __future__ import annotations

import json
from pathlib import Path

from gate.measure.compare import compare_runs, critical_slices_of, load_run
from gate.measure.compare_report import render_comment_section, render_compare
from gate.measure.trend import unreadable_base
from gate.model import escape
from gate.model.errors import GateError
from gate.model.records import RECORDS_FILE

HEADING = "### Against the base run"


def has_base_run(base: Path) -> bool:
    """A base run to compare against: a directory holding records.jsonl (or the file itself)."""
    return (base / RECORDS_FILE).is_file() if base.is_dir() else base.is_file()


def base_section(base: Path, head_dir: Path, policy: Path, shown_as: str) -> str:
    """The comment section comparing `head_dir` (this run's --out) with `base`; writes compare.*.

    Whatever the base holds, it never fails the step: an error no check foresaw (an OSError, a
    RecursionError) is one paragraph in the section."""
    try:
        return _base_section(base, head_dir, policy, shown_as)
    except Exception as exc:  # the state is the run's own; the comment says why
        return (
            f"{HEADING}\n\nThe comparison with the base run could not be made: "
            f"{escape.markdown(unreadable_base(Path(shown_as), exc), 1000)}\n"
        )


def _base_section(base: Path, head_dir: Path, policy: Path, shown_as: str) -> str:
    if not has_base_run(base):
        return (
            f"{HEADING}\n\nNo base run to compare against: {escape.code(shown_as)} holds no records.jsonl "
            "(the base branch has no run yet, or its artifact expired). The state above does not depend on it.\n"
        )
    records = head_dir / RECORDS_FILE
    if not records.is_file() or not records.read_text(encoding="utf-8", errors="replace").strip():
        return f"{HEADING}\n\nThis run judged no case (see above): there is nothing to compare with the base run.\n"
    try:
        base_run = load_run(base, "base-result")
        head_run = load_run(head_dir, "this run")
    except GateError as exc:
        return f"{HEADING}\n\nThe comparison with the base run could not be made: {escape.markdown(exc.message, 400)}\n"
    try:
        critical: tuple[str, ...] | None = critical_slices_of(policy)
    except GateError:
        critical = None
    comparison = compare_runs(base_run, head_run, critical)
    try:
        (head_dir / "compare.json").write_text(json.dumps(comparison.to_dict(), indent=2) + "\n", encoding="utf-8")
        (head_dir / "compare.md").write_text(render_compare(comparison), encoding="utf-8")
    except OSError:
        pass  # the comment still carries the transitions
    return render_comment_section(comparison)
