"""A run's output files: result.json first, then the reports, the ledger line and the rollback bundle.

Each file is written atomically (a temporary file replaced into place), so a partial file is never
read as an output; every file that fails is named in one `OutputWriteError`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from gate.decide.core import Decision
from gate.measure import certify
from gate.measure.rollback import write_rollback
from gate.report.junit import render_junit
from gate.report.markdown import render_report, render_summary
from gate.run.outdir import OutputWriteError, describe


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # a partial file must never be read as an output
        raise


def write_outputs(out_dir: Path, decision: Decision) -> None:
    """Write result.json first, then the reports; each that fails is named in OutputWriteError."""
    result = decision.result
    if result is None:
        return  # a plan: nothing was decided, so nothing is written
    files: list[tuple[str, Callable[[], str]]] = [
        ("result.json", result.to_json),
        ("report.md", lambda: render_report(result)),
        ("summary.md", lambda: render_summary(result)),
        ("junit.xml", lambda: render_junit(result)),
    ]
    entry = certify.entry_line(result)
    if entry is not None:  # the ledger line people append once they accept the certification
        files.append((certify.ENTRY_FILE, lambda: entry))
    failed: list[str] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputWriteError(f"{out_dir}: cannot create the output directory ({describe(exc)})") from None
    for name, text in files:
        try:
            _write_text_atomic(out_dir / name, text())
        except OSError as exc:
            failed.append(f"{name} ({describe(exc)})")
    try:
        write_rollback(out_dir, result)
    except OSError as exc:
        failed.append(f"the rollback bundle ({describe(exc)})")
    if failed:
        raise OutputWriteError(f"{out_dir}: could not write {', '.join(failed)}")
