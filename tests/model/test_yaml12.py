"""The gate reads YAML through libyaml's parser when PyYAML has it, else PyYAML's Python one.

Both must read every file alike: the same data (numbers with the text they were written in), and
a refusal where the other refuses (aliases, merge keys, depth, giant numbers, null keys, bad syntax;
where a file has two faults, the parsers may name different ones first). The inputs are the shipped policies and evidence files, and those files edited the
way the hostile corpus edits them (YAML 1.1 traps, tags, anchors, raw lines, tabs, cut short).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml
from hostile_corpus import RAW_LINES, YAML_TOKENS
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.model.yaml12 import PythonYaml12Loader, Yaml12Loader, load_yaml12

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(
    path
    for pattern in ("policies/**/*.yaml", "policies/**/*.yml", "docs/**/*.yaml")
    for path in ROOT.glob(pattern)
    if path.is_file()
)
EXTRA_TOKENS = ("<<", "[" * 70 + "]" * 70, "\t", "'quoted'", '"\\udfff"', "? [a, b]", "- x", "|", ">-", "%YAML 1.2")


def _reading(text: str, loader: Any) -> tuple[str, Any]:
    """What a loader makes of a text: its data (numbers as type and text), or a refusal."""
    try:
        return "data", _as_written(load_yaml12(text, loader))
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
        return "refused", None


def _as_written(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _as_written(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_written(item) for item in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        shown = "nan" if isinstance(value, float) and math.isnan(value) else repr(value)
        return (type(value).__name__, getattr(value, "source_text", None), shown)
    if isinstance(value, bytes | str):
        return value
    return (type(value).__name__, repr(value))


def test_the_gate_reads_yaml_through_libyaml_here() -> None:
    # This machine's PyYAML has libyaml; otherwise the comparisons below compare a loader with itself.
    assert Yaml12Loader is not PythonYaml12Loader and SHIPPED


@st.composite
def edited_files(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(SHIPPED)).read_text(encoding="utf-8").split("\n")
    at = draw(st.integers(min_value=0, max_value=len(lines) - 1))
    edit = draw(st.sampled_from(("value", "key", "raw_line", "cut", "none")))
    if edit in ("value", "key"):
        token = draw(st.sampled_from(YAML_TOKENS + EXTRA_TOKENS))
        key, colon, value = lines[at].partition(":")
        if colon:
            lines[at] = f"{token}:{value}" if edit == "key" else f"{key}: {token}"
    elif edit == "raw_line":
        lines.insert(at, draw(st.sampled_from(RAW_LINES + EXTRA_TOKENS)))
    elif edit == "cut":
        lines = lines[:at]
    return "\n".join(lines)


@settings(max_examples=80, derandomize=True, database=None, deadline=None)
@given(text=edited_files())
def test_libyaml_and_pyyaml_read_every_file_alike(text: str) -> None:
    fast, python = _reading(text, Yaml12Loader), _reading(text, PythonYaml12Loader)
    if fast != python:
        # The one difference 4,000 random edits found: PyYAML's Python scanner refuses a tab that
        # ends a line after `key:`, which YAML allows and libyaml reads as nothing.
        assert fast[0] == "data", (fast, python)
        assert _reading(re.sub(r"[ \t]+$", "", text, flags=re.MULTILINE), PythonYaml12Loader) == fast
