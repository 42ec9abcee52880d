"""A generated corpus of hostile and malformed input files, and the property each must meet.

Every input starts from a suite that validates clean (tests/suite.py) and changes one file: the
policy, the prompt, a case file, the evidence file or a records file. The changes are those a
careless author or a hostile contributor makes: deleted keys, swapped types, the YAML 1.1 traps,
deep nesting, huge numbers, a byte-order mark, CRLF, NUL, invalid UTF-8, lone surrogates, very
long fields, special files in place of a file, and injections in every text field.

The property (issue 11): the real CLI ends every input with exit 2 and a message naming the file,
or with findings, within a time bound; never a traceback, never an "internal error", never a log
line an attacker starts, never a report that carries a second sticky marker or XML that does not
parse. `tests/validate/test_hostile_corpus.py` runs a small sample; `bench/fuzz_inputs.py` a large one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st
from suite import case, controls, policy_dict, write_suite
from workflow_log import commands

from gate.cli import main

SECONDS_PER_COMMAND = 20.0

INJECTIONS = (
    "c-1\r\n::warning::injected",
    "\n::error file=x::injected",
    "<!-- ragas-gate:other-policy -->",
    "a|b|c",
    "`code` **bold** [link](https://evil.example) <img src=x onerror=alert(1)> @org/team",
    "tempera\u200bture",
    "\u202eevil\u202c",
    "##[group]injected",
    "%0A::warning::encoded",
    "\x00nul",
    "\x1b[31mred",
)
HOSTILE_VALUES: tuple[Any, ...] = (
    None,
    True,
    False,
    0,
    -1,
    2**70,
    1.5,
    "",
    " ",
    "x" * 100_000,
    [],
    {},
    ["a"],
    {"a": 1},
    *INJECTIONS,
)
# Raw YAML scalars written in place of a value: the YAML 1.1 traps and worse.
YAML_TOKENS = (
    "on",
    "off",
    "yes",
    "no",
    "y",
    "1.10",
    "010",
    "0x1F",
    "0o17",
    "1_000",
    "2026-02-30",
    "2026-12-31",
    "~",
    "null",
    ".inf",
    "-.inf",
    ".nan",
    "1e400",
    "9" * 5000,
    "!!timestamp 2026-02-30",
    "!!binary aGVsbG8=",
    "!!python/object/apply:os.system [echo]",
    "!!set {a, b}",
    "&anchor x",
    "*anchor",
    "{<<: {a: 1}}",
    "'unclosed",
    '"\\udfff"',
    '"\\ud800x"',
    '"\\0"',
    "[" * 1000 + "]" * 1000,
    "{a: " * 300 + "1" + "}" * 300,
    "|\n  block text",
    "- a\n- b",
)
RAW_LINES = (
    "",
    "[]",
    "null",
    "1",
    '"text"',
    "{",
    "{}",
    '{"case_id": ' + "9" * 5000 + "}",
    '{"a": ' + "[" * 1000 + "]" * 1000 + "}",
    '{"case_id": "\\udfff"}',
    '{"case_id": "x", "case_id": "y"}',
    "\ufeff{}",
    "NaN",
    '{"cost": Infinity}',
)
BYTE_EDITS = ("bom", "crlf", "nul", "invalid_utf8", "truncate", "empty", "whitespace", "duplicate_line", "huge_line")
SPECIAL_FILES = ("fifo", "directory", "symlink_loop", "dangling_symlink", "dev_zero", "dev_urandom", "dev_null")
FILES = {
    "policy": "policy.yaml",
    "prompt": "prompt.txt",
    "cases": "cases.jsonl",
    "evidence": "evidence.yaml",
    "records": "records.jsonl",
}


@dataclass(frozen=True)
class Mutation:
    """One change to a clean suite: which file, which family (for counting), how."""

    target: str
    family: str
    detail: str
    apply: Callable[[Path], None] = field(repr=False, compare=False)


# ---- base data ---------------------------------------------------------------------------------
def base_cases() -> list[dict[str, Any]]:
    return [*controls(), case("c-1"), case("c-2", label="fail"), case("g-1", slice="general")]


def base_records() -> list[dict[str, Any]]:
    return [
        {
            "case_id": c["case_id"],
            "slice": c["slice"],
            "partition": c["partition"],
            "control_role": c.get("expected_control_role"),
            "human_label": c["human_adjudication"]["label"],
            "judge_label": c["human_adjudication"]["label"],
            "judge_reason": "matches the reference",
            "status": "ok",
            "lane": "pr",
            "cache": "off",
            "attempts": [{"status_code": 200, "input_tokens": 100, "output_tokens": 10}],
        }
        for c in base_cases()
        if c["reference"]
    ]


def base_evidence() -> dict[str, Any]:
    return {"refund-window": {"version": "1", "text": "Refunds are allowed within 7 days of purchase."}}


def write_base(root: Path) -> Path:
    policy = write_suite(root, base_cases())
    (root / FILES["records"]).write_text("".join(json.dumps(r) + "\n" for r in base_records()), encoding="utf-8")
    return policy


# ---- tree edits --------------------------------------------------------------------------------
def _paths(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            out.append((*prefix, key))
            out += _paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            out.append((*prefix, i))
            out += _paths(value, (*prefix, i))
    return out


def _edit_tree(tree: Any, path: tuple[Any, ...], op: str, value: Any) -> None:
    parent = tree
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "set":
        parent[last] = value
    elif op == "rename" and isinstance(parent, dict):
        parent[f"{last}{value}"] = parent.pop(last)


def _dump_yaml(tree: Any) -> str:
    return yaml.safe_dump(tree, sort_keys=False, allow_unicode=False, width=10**9)


def _tree_mutation(target: str, make_tree: Callable[[], Any], write: Callable[[Path, Any], None]) -> Any:
    paths = _paths(make_tree())

    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(("delete", "set", "set", "rename")))
        if op == "rename":
            value: Any = draw(st.sampled_from(("\u200b", "_x", "\u00a0", "\n::warning::k", "|", ".")))
        else:
            value = draw(st.sampled_from(HOSTILE_VALUES)) if op == "set" else None

        def apply(root: Path) -> None:
            tree = make_tree()
            _edit_tree(tree, path, op, value)
            write(root, tree)

        family = f"{op}:{type(value).__name__}" if op == "set" else op
        return Mutation(target, family, f"{'.'.join(map(str, path))} {op} {value!r:.60}", apply)

    return build()


def _write_policy(root: Path, tree: Any) -> None:
    (root / FILES["policy"]).write_text(_dump_yaml(tree), encoding="utf-8")


def _write_evidence(root: Path, tree: Any) -> None:
    (root / FILES["evidence"]).write_text(_dump_yaml(tree), encoding="utf-8")


def _jsonl_writer(name: str) -> Callable[[Path, Any], None]:
    def write(root: Path, tree: Any) -> None:
        (root / name).write_text("".join(json.dumps(item) + "\n" for item in tree), encoding="utf-8")

    return write


# ---- text and byte edits -----------------------------------------------------------------------
def _yaml_token_mutation(target: str) -> Any:
    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        token = draw(st.sampled_from(YAML_TOKENS))
        where = draw(st.integers(min_value=0, max_value=10_000))
        as_key = draw(st.booleans())

        def apply(root: Path) -> None:
            path = root / FILES[target]
            lines = path.read_text(encoding="utf-8").split("\n")
            candidates = [i for i, line in enumerate(lines) if ":" in line]
            i = candidates[where % len(candidates)]
            key, _, value = lines[i].partition(":")
            indent = key[: len(key) - len(key.lstrip())]
            if as_key:
                lines[i] = f"{indent}{token}:{value}"
            else:
                lines[i] = f"{key}: {token}" if value.strip() else f"{key}: {token}\n{indent}  _: 1"
            path.write_text("\n".join(lines), encoding="utf-8")

        return Mutation(target, "yaml_key" if as_key else "yaml_value", f"{token!r:.40}", apply)

    return build()


def _line_mutation(target: str) -> Any:
    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        raw = draw(st.sampled_from(RAW_LINES))
        where = draw(st.integers(min_value=0, max_value=100))

        def apply(root: Path) -> None:
            path = root / FILES[target]
            lines = path.read_text(encoding="utf-8").split("\n")
            lines.insert(where % len(lines), raw)
            path.write_text("\n".join(lines), encoding="utf-8")

        return Mutation(target, "raw_line", f"{raw!r:.40}", apply)

    return build()


def _byte_mutation(target: str) -> Any:
    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        edit = draw(st.sampled_from(BYTE_EDITS))
        where = draw(st.floats(min_value=0, max_value=1))

        def apply(root: Path) -> None:
            path = root / FILES[target]
            data = path.read_bytes()
            at = int(len(data) * where)
            if edit == "bom":
                data = b"\xef\xbb\xbf" + data
            elif edit == "crlf":
                data = data.replace(b"\n", b"\r\n")
            elif edit == "nul":
                data = data[:at] + b"\x00" + data[at:]
            elif edit == "invalid_utf8":
                data = data[:at] + b"\xff\xc3\x28" + data[at:]
            elif edit == "truncate":
                data = data[:at]
            elif edit == "empty":
                data = b""
            elif edit == "whitespace":
                data = b"  \n\t\n"
            elif edit == "duplicate_line":
                lines = data.split(b"\n")
                i = int(len(lines) * where) % len(lines)
                lines.insert(i, lines[i])
                data = b"\n".join(lines)
            elif edit == "huge_line":
                data = data[:at] + b"x" * 2_000_000 + data[at:]
            path.write_bytes(data)

        return Mutation(target, f"bytes:{edit}", f"at {where:.2f}", apply)

    return build()


def _special_file(target: str) -> Any:
    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        kind = draw(st.sampled_from(SPECIAL_FILES))

        def apply(root: Path) -> None:
            path = root / FILES[target]
            path.unlink()
            if kind == "fifo":
                os.mkfifo(path)
            elif kind == "directory":
                path.mkdir()
            elif kind == "symlink_loop":
                path.symlink_to(path)
            elif kind == "dangling_symlink":
                path.symlink_to(root / "nowhere")
            else:
                path.symlink_to("/dev/" + kind.removeprefix("dev_"))

        return Mutation(target, f"special:{kind}", kind, apply)

    return build()


def _prompt_text_mutation() -> Any:
    templates = (
        "{response.__class__}",
        "{0}",
        "{",
        "}{",
        "{human_adjudication}",
        "{response!r}",
        "{response:.5}",
        "{user_input[0]}",
        "{" + "a" * 10_000 + "}",
        "no placeholder at all",
    )

    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        text = draw(st.sampled_from(templates + INJECTIONS))

        def apply(root: Path) -> None:
            path = root / FILES["prompt"]
            path.write_text(path.read_text(encoding="utf-8") + "\n" + text + "\n", encoding="utf-8")

        return Mutation("prompt", "prompt_text", f"{text!r:.40}", apply)

    return build()


def mutations() -> Any:
    """A strategy over every family of change, for every input file."""
    return st.one_of(
        _tree_mutation("policy", policy_dict, _write_policy),
        _yaml_token_mutation("policy"),
        _byte_mutation("policy"),
        _special_file("policy"),
        _tree_mutation("cases", base_cases, _jsonl_writer(FILES["cases"])),
        _line_mutation("cases"),
        _byte_mutation("cases"),
        _special_file("cases"),
        _tree_mutation("evidence", base_evidence, _write_evidence),
        _yaml_token_mutation("evidence"),
        _byte_mutation("evidence"),
        _special_file("evidence"),
        _prompt_text_mutation(),
        _byte_mutation("prompt"),
        _special_file("prompt"),
        _tree_mutation("records", base_records, _jsonl_writer(FILES["records"])),
        _line_mutation("records"),
        _byte_mutation("records"),
        _special_file("records"),
    )


# ---- running and the property ------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    command: str
    code: int
    out: str
    err: str
    seconds: float


def run_cli(argv: list[str]) -> Outcome:
    """The real CLI entry in-process; an escaping exception is a traceback a user would see.

    The outcome is named by the command, `dry-run` for `run --dry-run`."""
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    command = "dry-run" if "--dry-run" in argv else argv[0]
    return Outcome(command, code, out.getvalue(), err.getvalue(), time.perf_counter() - start)


def exercise(root: Path, mutation: Mutation) -> list[Outcome]:
    """Apply `mutation` to a clean suite under `root` and run the commands that read that file."""
    policy = write_base(root)
    mutation.apply(root)
    p = str(policy)
    out_dir = str(root / "out")
    if mutation.target == "records":
        return [run_cli(["decide", "--policy", p, "--records", str(root / FILES["records"]), "--out", out_dir])]
    return [
        run_cli(["validate", "--policy", p]),
        run_cli(["run", "--dry-run", "--policy", p, "--out", out_dir]),
        run_cli(["run", "--policy", p, "--out", out_dir, "--no-cache"]),  # no key: nothing is called
    ]


# The dry run exits with the state the run has before any call (0 when the judge decides it).
ALLOWED_CODES = {"validate": {0, 1, 2}, "dry-run": {0, 1, 2, 3, 4}, "run": {0, 1, 2, 3, 4}, "decide": {0, 1, 2, 3, 4}}


def check(root: Path, mutation: Mutation, outcomes: list[Outcome]) -> None:
    """The property; raises AssertionError naming what broke."""
    for o in outcomes:
        where = f"{mutation} / {o.command}"
        text = o.out + o.err
        assert o.code in ALLOWED_CODES[o.command], f"{where}: exit {o.code}\n{text[-2000:]}"
        assert "internal error" not in text and "Traceback" not in text, f"{where}: crashed\n{text[-2000:]}"
        assert o.seconds < SECONDS_PER_COMMAND, f"{where}: took {o.seconds:.1f}s"
        text.encode("utf-8")  # a lone surrogate here would crash a real terminal write
        forged = commands(text)  # read as the Actions runner reads a step log
        assert not forged, f"{where}: a log line is a workflow command: {forged[0].line!r:.200}"
        for line in text.split("\n"):
            assert "\r" not in line, f"{where}: a carriage return reached the log: {line!r:.200}"
        if o.code == 2:
            named = (FILES[mutation.target], "policy.yaml", "--policy")
            assert o.err.startswith("error: ") and any(n in o.err for n in named), f"{where}: no file named\n{o.err}"
            assert "fix" in o.err, f"{where}: no fix given\n{o.err}"
        if o.command == "validate" and o.code == 1:
            first = o.out.splitlines()[0] if o.out else ""
            assert re.match(r"\d+ findings? in ", first), f"{where}: exit 1 without findings first\n{o.out}"
    check_outputs(root / "out", mutation)


def check_outputs(out_dir: Path, mutation: Mutation) -> None:
    report = out_dir / "report.md"
    if report.is_file():
        after_marker = report.read_text(encoding="utf-8").partition("\n")[2]
        assert "<!--" not in after_marker, f"{mutation}: report.md carries an HTML comment after its marker line"
        summary = (out_dir / "summary.md").read_text(encoding="utf-8")
        assert "<!--" not in summary, f"{mutation}: summary.md carries an HTML comment"
    junit = out_dir / "junit.xml"
    if junit.is_file():
        ET.fromstring(junit.read_bytes())
