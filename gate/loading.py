"""Shared helpers for reading user files and turning pydantic errors into actionable lines."""

from __future__ import annotations

import difflib
import gc
import hashlib
import json
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import yaml
from pydantic import BaseModel, ValidationError


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many long-lived objects."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def canonical_json(value: Any) -> str:
    """A stable text form of parsed content: the same meaning always hashes the same."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _hint(err_type: str, loc: str) -> str:
    hints = {
        "extra_forbidden": f"remove `{loc}` (unknown key; check its spelling against the docs)",
        "string_pattern_mismatch": "use the documented form (for `api_key_env`: the NAME of an environment "
        "variable such as OPENAI_API_KEY, never the key itself)",
        "missing": f"add `{loc}`",
        "string_type": "write it as a quoted string",
        "int_type": "write a whole number",
        "int_parsing": "write a whole number",
        "float_type": "write a number",
        "float_parsing": "write a number",
        "bool_type": "write true or false",
        "bool_parsing": "write true or false",
        "list_type": "write a list, e.g. [a, b]",
        "dict_type": "write a mapping of key: value",
        "model_type": "write a mapping of key: value",
        "literal_error": "use one of the values listed",
        "date_from_datetime_parsing": "write a date as YYYY-MM-DD",
        "date_parsing": "write a date as YYYY-MM-DD",
        "date_type": "write a date as YYYY-MM-DD",
    }
    return hints.get(err_type, "correct the value")


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation like `Model`, `Model | None`, `list[Model]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _known_keys(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed where `loc` points, found by walking the model along the path."""
    for part in loc:
        if model is None:
            return []
        field = model.model_fields.get(str(part)) if isinstance(part, str) else None
        if field is None:
            continue  # a list index or a mapping key (e.g. a slice name): same model continues
        model = _model_in(field.annotation)
    return list(model.model_fields) if model is not None else []


def format_validation_error(exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None) -> list[str]:
    """One line per problem: `key.path: what is wrong; fix: what to do`.

    With `model`, an unknown key also names the closest known key ("did you mean ...").
    """
    lines: list[str] = []
    for err in exc.errors():
        parts = [str(p) for p in err["loc"]]
        loc = ".".join(parts) if parts else "(top level)"
        if prefix:
            loc = f"{prefix}.{loc}" if parts else prefix
        msg = err["msg"].removeprefix("Value error, ")
        hint = _hint(err["type"], loc)
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
            known = _known_keys(model, tuple(err["loc"][:-1]))
            close = difflib.get_close_matches(parts[-1], known, n=1) if parts and known else []
            if close:
                hint = f"rename it to `{close[0]}` if that is what you meant, or remove it"
            elif known:
                hint = f"remove it (allowed here: {', '.join(known)})"
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] == "value_error" and not parts:
            # A whole-file rule: its message names the keys and the fix itself.
            lines.append(str(err.get("ctx", {}).get("error", msg)))
            continue
        lines.append(f"`{loc}`: {msg}; fix: {hint}")
    return lines


class FileProblem(Exception):
    """A file could not be read or parsed; `message` names the file and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@contextmanager
def _file_problems(path: Path, what: str) -> Iterator[None]:
    """Turn the ways a file cannot be read into one actionable message each."""
    try:
        yield
    except FileNotFoundError:
        raise FileProblem(f"{path}: the {what} does not exist; fix: create it or correct the path") from None
    except IsADirectoryError:
        raise FileProblem(f"{path}: the {what} is a directory; fix: point to a file") from None
    except UnicodeDecodeError as exc:
        raise FileProblem(f"{path}: the {what} is not UTF-8 text (byte {exc.start}); fix: save it as UTF-8") from None
    except OSError as exc:
        raise FileProblem(f"{path}: the {what} cannot be read ({exc.strerror}); fix: check permissions") from None


def open_binary(path: Path, what: str) -> BinaryIO:
    """Open a file for streaming reads; the same actionable messages as `read_text`."""
    with _file_problems(path, what):
        if path.is_dir():
            raise IsADirectoryError
        return path.open("rb")


def read_text(path: Path, what: str) -> str:
    with _file_problems(path, what):
        text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise FileProblem(f"{path}: the {what} is empty; fix: write its content")
    return text


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping.

    PyYAML keeps the last value silently; a reviewer reading the first would approve a policy the
    gate does not run.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} is written twice (first at line {seen[key] + 1}); the second value would "
                    "silently win",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    text = read_text(path, what)
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FileProblem(
            f"{path}: the {what} is not valid YAML{where} ({problem}); fix: correct the YAML syntax there"
        ) from None
    if not isinstance(data, dict):
        raise FileProblem(
            f"{path}: the {what} must be a YAML mapping of keys to values, not {type(data).__name__}; "
            "fix: start the file with `key: value` lines"
        )
    return data
