"""The one byte-limit helper behind the comment, check-run, report and step-summary caps."""

from __future__ import annotations

from gate.model.textfit import fit_bytes, head_bytes


def test_a_character_cut_in_two_is_dropped_and_the_note_fits() -> None:
    text = "é" * 10  # 2 bytes each
    assert head_bytes(text, 5) == "éé"
    fitted = fit_bytes(text, 9, "!")
    assert fitted == "éééé!" and len(fitted.encode("utf-8")) <= 9
    assert fit_bytes(text, 20, "!") == text  # fits exactly: untouched
    assert fit_bytes(text, 3, "a long note") == "a l"  # no room for any text: the note's head
