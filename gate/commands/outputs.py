"""A run's output files: the reports, the ledger line and the rollback bundle, then result.json last.

Each file is written atomically (a temporary file replaced into place), so a partial file is never
read as an output. result.json is written last so that it can say when another output failed
(blocker `output_write_failed`); a result.json that cannot be written is an
`OutputWriteError` naming every file that failed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from gate.commands.assemble import RunEvidence, assemble
from gate.decide.core import Decision
from gate.measure import certify
from gate.measure.rollback import write_rollback
from gate.model.loading import FileProblem, read_bytes, sha256_hex
from gate.model.paths import shown_path
from gate.model.result import Result
from gate.model.states import OUTPUT_WRITE_FAILED, Finding, State, overall_state
from gate.plan.responses import MAX_RESPONSES_BYTES
from gate.report.junit import junit_pieces
from gate.report.markdown import render_report, render_summary
from gate.report.product import product_svg
from gate.run.outdir import OutputWriteError, describe


def write_text_atomic(path: Path, text: str | bytes | Iterable[str]) -> None:
    """`text` into `path`, whole or not at all (pieces of text are written as they come)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        if isinstance(text, str | bytes):
            tmp.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
        else:
            with tmp.open("w", encoding="utf-8") as fh:
                pieces: list[str] = []
                for piece in text:
                    pieces.append(piece)
                    if len(pieces) >= 4096:  # a write per piece would cost more than the pieces
                        fh.write("".join(pieces))
                        pieces.clear()
                fh.write("".join(pieces))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)  # a partial file must never be read as an output
        raise


def write_outputs(out_dir: Path, decision: Decision, redo: Redo | None = None, kept: Sequence[Kept] = ()) -> Decision:
    """Write the reports, then result.json last (atomically); the decision result.json holds.

    When a report, the ledger line or the rollback bundle cannot be written, result.json says so:
    `redo` assembles the decision again with blocker `output_write_failed` naming the
    files (evaluation_incomplete, exit 3). Only a result.json that cannot be written raises
    OutputWriteError (naming every file that failed). `kept`: files the run keeps beside its outputs
    (a product run's answers), written with the reports."""
    result = decision.result
    if result is None:
        return decision  # a plan: nothing was decided, so nothing is written
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputWriteError(f"{out_dir}: cannot create the output directory ({describe(exc)})") from None
    failed = _write_reports(out_dir, result, kept)
    if failed:
        finding = output_write_failed(out_dir, failed)
        decision = redo(finding) if redo is not None else _with_failure(decision, finding)
        assert decision.result is not None
        _write_reports(out_dir, decision.result, kept)  # what can be written says what result.json says
    assert decision.result is not None
    try:
        write_text_atomic(out_dir / "result.json", decision.result.json_chunks())
    except OSError as exc:
        failed.insert(0, f"result.json ({describe(exc)})")
        raise OutputWriteError(f"{out_dir}: could not write {', '.join(failed)}") from None
    return decision


Redo = Callable[[Finding], Decision]
Kept = tuple[str, Callable[[], str | bytes]]
RESPONSES_FILE = "responses.jsonl"


def write_assembled(out_dir: Path, ev: RunEvidence) -> Decision:
    """`assemble(ev)` written into `out_dir`; a failed output is one more finding of the same evidence."""
    return write_outputs(
        out_dir, assemble(ev), lambda finding: assemble(ev.adding(finding)), kept_responses(out_dir, ev)
    )


def kept_responses(out_dir: Path, ev: RunEvidence) -> list[Kept]:
    """A product run keeps the answers it judged: the --responses file's bytes as `responses.jsonl`
    (their sha256 is lineage's `responses_sha256`), so the audit's review queue and `gate decide`
    need nothing else. Under `records.clear_text: false` it keeps none (and removes an older copy)."""
    source = ev.dataset.responses_path
    if source is None:
        return []  # not a product run, or a decision of its records without --responses: the run's copy stays
    if not ev.loaded.policy.records.clear_text:
        (out_dir / RESPONSES_FILE).unlink(missing_ok=True)
        return []
    expected = ev.dataset.responses_sha256

    def copy() -> bytes:
        data = read_bytes(source, "responses file (--responses)", MAX_RESPONSES_BYTES)
        if sha256_hex(data) != expected:
            raise OSError(0, f"{shown_path(source)} changed while the run read it")
        return data

    return [(RESPONSES_FILE, copy)]


def _write_reports(out_dir: Path, result: Result, kept: Sequence[Kept] = ()) -> list[str]:
    """Every output but result.json; each that fails, named with why."""
    files: list[tuple[str, Callable[[], str | bytes | Iterable[str]]]] = [
        *kept,
        ("report.md", lambda: render_report(result)),
        ("summary.md", lambda: render_summary(result)),
        ("junit.xml", lambda: junit_pieces(result)),  # a testcase at a time: never a tree of every case
    ]
    shown = result.product
    if shown is not None:  # each slice's interval against its limit, a picture beside report.md
        files.append(("product.svg", lambda: product_svg(shown)))
    entry = certify.entry_line(result)
    if entry is not None:  # the ledger line people append once they accept the certification
        files.append((certify.ENTRY_FILE, lambda: entry))
    failed: list[str] = []
    for name, text in files:
        try:
            write_text_atomic(out_dir / name, text())
        except FileProblem as exc:
            failed.append(f"{name} ({exc.message})")
        except OSError as exc:
            failed.append(f"{name} ({describe(exc)})")
    try:
        write_rollback(out_dir, result)
    except OSError as exc:
        failed.append(f"the rollback bundle ({describe(exc)})")
    return failed


def output_write_failed(out_dir: Path, failed: Sequence[str]) -> Finding:
    """The blocker for outputs that could not be written: the result is not a verdict anyone saw whole."""
    return Finding(
        State.EVALUATION_INCOMPLETE,
        OUTPUT_WRITE_FAILED,
        f"{shown_path(out_dir)}: could not write {', '.join(failed)}; the outputs are incomplete, so this is not a "
        f"verdict; fix: free space in (or repair) {shown_path(out_dir)}, then decide again "
        f"(`gate decide --records {shown_path(out_dir / 'records.jsonl')} --out DIR`) or run again with --resume",
        extra={"files": [f.split(" (", 1)[0] for f in failed]},
    )


def _with_failure(decision: Decision, finding: Finding) -> Decision:
    """A decision made elsewhere (the drift lane) with `finding` added to its blockers."""
    assert decision.result is not None
    blockers = [*decision.blockers, finding]
    state = overall_state([b.state for b in blockers])
    result = decision.result.with_(
        state=state.value,
        exit_code=state.exit_code,
        blockers=[*decision.result.written()["blockers"], finding.to_dict()],
    )
    return dataclasses.replace(decision, state=state, blockers=blockers, result=result)
