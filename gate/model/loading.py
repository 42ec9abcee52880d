"""Shared helpers for reading user files and turning pydantic errors into actionable lines."""

from __future__ import annotations

import difflib
import errno
import hashlib
import json
import os
import re
import stat
import typing
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import yaml
from pydantic import BaseModel, ValidationError

from gate.model.escape import visible
from gate.model.paths import from_working_directory, shown_path, working_directory
from gate.model.process import gc_paused as gc_paused  # where the loaders have always imported it from
from gate.model.yaml12 import YamlProblem, load_yaml12


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> str:
    """A stable text form of parsed content: the same meaning always hashes the same."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _hint(err_type: str, loc: str) -> str:
    hints = {
        "extra_forbidden": f"remove `{loc}` (unknown key; check its spelling against the docs)",
        "string_pattern_mismatch": "use the documented form (for `api_key_env`: the NAME of an environment "
        "variable such as OPENAI_API_KEY, never the key itself; for `currency`: a code such as USD)",
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


def did_you_mean(value: object, known: Iterable[str]) -> str:
    """` (did you mean 'fail'?)` for a near miss of one of `known` (the same word in another case
    first, then the closest spelling); "" when nothing is close."""
    if not isinstance(value, str):
        return ""
    names = list(known)
    same = [k for k in names if k.lower() == value.lower() and k != value]
    close = same or difflib.get_close_matches(value, names, n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


_QUOTED = re.compile(r"'([^']*)'")
# pydantic's names of the types it wanted, as a person says them
_WANTED = {"string": "text", "integer": "a whole number", "number": "a number", "boolean": "true or false",
           "list": "a list", "dictionary": "a mapping", "date": "a date (YYYY-MM-DD)"}  # fmt: skip


def format_validation_error(exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None) -> list[str]:
    """One line per problem: `key.path: what is wrong; fix: what to do`.

    With `model`, an unknown key also names the closest known key ("did you mean ...").
    """
    lines: list[str] = []
    for err in exc.errors():
        parts = [visible(p, 120) for p in err["loc"]]
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
        elif err["type"] == "literal_error":
            allowed = _QUOTED.findall(str(err.get("ctx", {}).get("expected", "")))
            msg = f"{visible(err.get('input'), 80)!r} is not one of {', '.join(allowed)}{did_you_mean(err.get('input'), allowed)}"
            hint = f"write one of {', '.join(allowed)}"
        elif err["type"] in ("model_type", "dict_type"):
            msg = "must be a mapping (`{key: value, ...}`), not " + _kind_of(err.get("input"))
        elif msg.startswith("Input should be a valid ") and err["type"].endswith(("_type", "_parsing")):
            wanted = msg.removeprefix("Input should be a valid ").split(",")[0]
            msg = f"must be {_WANTED.get(wanted, wanted)}, not {_kind_of(err.get('input'))}"

        elif err["type"] == "value_error" and not parts:
            # A whole-file rule: its message names the keys and the fix itself.
            lines.append(str(err.get("ctx", {}).get("error", msg)))
            continue
        lines.append(f"`{loc}`: {msg}" if "; fix: " in msg else f"`{loc}`: {msg}; fix: {hint}")
    return lines


def _kind_of(value: object) -> str:
    kinds = {str: "text", bool: "true/false", int: "a number", float: "a number", list: "a list", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def surrogate_at(obj: Any) -> str | None:
    """The key path of the first string holding a lone surrogate (`"\\ud800"` is valid JSON, not text)."""
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path or "(top level)"
        elif isinstance(item, dict):
            for key, value in item.items():
                if _SURROGATE.search(key):
                    return path or "(top level)"
                stack.append((f"{path}.{key}" if path else key, value))
        elif isinstance(item, list):
            stack += [(f"{path}[{i}]", value) for i, value in enumerate(item)]
    return None


_SURROGATE = re.compile(r"[\ud800-\udfff]")


class FileProblem(Exception):
    """A file could not be read or parsed; `message` names the file and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# Small files are read whole; case and records files are streamed line by line.
MAX_TEXT_BYTES = 16 * 1024 * 1024
MAX_STREAM_BYTES = 4 * 1024 * 1024 * 1024


def _size(n: int) -> str:
    return f"{n / (1024 * 1024 * 1024):g} GiB" if n >= 1024**3 else f"{n / (1024 * 1024):g} MiB"


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
        if exc.errno == errno.ELOOP:
            raise FileProblem(
                f"{path}: the {what} is a symbolic link that loops back on itself; fix: point the link at a file"
            ) from None
        raise FileProblem(f"{path}: the {what} cannot be read ({exc.strerror}); fix: check permissions") from None
    except ValueError:  # an embedded NUL byte in the path
        raise FileProblem(f"{visible(str(path))}: the {what} path holds a NUL byte; fix: correct the path") from None


_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def open_binary(path: Path, what: str, limit: int = MAX_STREAM_BYTES) -> BinaryIO:
    """Open a regular file of at most `limit` bytes for streaming reads.

    Anything else (a FIFO that would block forever, `/dev/zero` or `/dev/urandom` that never end,
    a directory, a symlink loop) is refused with a message naming the file and the fix.
    """
    with _file_problems(path, what):
        # O_NONBLOCK: opening a FIFO with no writer must not hang; regular files ignore it. A relative
        # path is read from the working directory (see gate.model.paths); messages name it as written.
        fd = os.open(from_working_directory(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise FileProblem(f"{path}: the {what} is a directory; fix: point to a file")
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _SPECIAL_KINDS if test(info.st_mode)), "not a regular file")
            raise FileProblem(
                f"{path}: the {what} is {kind}, not a regular file; reading it could block or never end; "
                "fix: point to a regular file"
            )
        if info.st_size > limit:
            raise FileProblem(
                f"{path}: the {what} is {_size(info.st_size)}, over the {_size(limit)} limit for it; "
                "fix: point to the right file or split it"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path, what: str, limit: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see `open_binary`)."""
    chunks: list[bytes] = []
    total = 0
    with open_binary(path, what, limit) as handle, _file_problems(path, what):
        # In chunks: `read(limit + 1)` would reserve the whole limit up front.
        while total <= limit and (chunk := handle.read(1024 * 1024)):
            chunks.append(chunk)
            total += len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:  # a file that grew, or one whose size the system does not report
        raise FileProblem(
            f"{path}: the {what} is over the {_size(limit)} limit for it; fix: point to the right file or split it"
        )
    return data


def read_text(path: Path, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    data = read_bytes(path, what, limit)
    with _file_problems(path, what):
        text = data.decode("utf-8").removeprefix("\ufeff")  # a byte-order mark is not content
    if not text.strip():
        raise FileProblem(f"{path}: the {what} is empty; fix: write its content")
    return text


MAX_NAME_CHARS = 255
MAX_PATH_CHARS = 4096


def read_json(path: Path, what: str, limit: int = MAX_TEXT_BYTES) -> Any:
    """A JSON file (a result, a rollback bundle), read with `read_bytes`'s limits.

    Every way it cannot be read, nesting too deep for the parser included, is a FileProblem.
    """
    data = read_bytes(path, what, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FileProblem(f"{path}: the {what} is not UTF-8 text (byte {exc.start}); fix: restore it") from None
    except RecursionError:
        raise FileProblem(f"{path}: the {what} nests too deep to read; fix: restore it") from None
    except ValueError as exc:  # invalid JSON, or a number of thousands of digits
        raise FileProblem(f"{path}: the {what} is not valid JSON ({visible(exc, 200)}); fix: restore it") from None


def workspace() -> Path:
    """The checkout the gate runs in: `$GITHUB_WORKSPACE` on Actions, else the working directory."""
    return Path(os.environ.get("GITHUB_WORKSPACE") or working_directory()).resolve()


def resolve_inside(base_dir: Path, written: str, key: str) -> Path:
    """Resolve a path a policy names, relative to the policy's directory, symlinks included.

    A policy comes from a pull request: it may only name files under its own directory or the
    workspace, so `../../../etc/passwd`, an absolute path or a link pointing out are refused.
    """
    fix = "write it relative to the policy file, inside the repository"
    if not written.strip():
        raise FileProblem(f"`{key}` is empty; fix: {fix}")
    if len(written) > MAX_PATH_CHARS or any(len(part) > MAX_NAME_CHARS for part in written.split("/")):
        raise FileProblem(
            f"`{key}`: a path of {len(written)} characters, longer than a file system allows "
            f"({MAX_NAME_CHARS} per name, {MAX_PATH_CHARS} in all); fix: {fix}"
        )
    if "\0" in written:
        raise FileProblem(f"`{key}`: {visible(written, 200)} holds a NUL byte; fix: {fix}")
    if os.path.isabs(written) or written.startswith("~"):
        raise FileProblem(
            f"`{key}`: {visible(written, 200)} is an absolute path; the gate reads only files under the "
            f"policy's directory or the workspace; fix: {fix}"
        )
    try:
        target = (base_dir / written).resolve()
    except (OSError, RuntimeError):
        raise FileProblem(
            f"`{key}`: {visible(written, 200)} is a symbolic link that loops back on itself; fix: {fix}"
        ) from None
    roots = (base_dir.resolve(), workspace())
    if not any(target.is_relative_to(root) for root in roots):
        raise FileProblem(
            f"`{key}`: {visible(written, 200)} resolves to {shown_path(target)}, outside the policy's directory "
            f"({shown_path(roots[0])}) and the workspace ({shown_path(roots[1])}); fix: {fix}"
        )
    return target


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML file whose top level is a mapping, read as YAML 1.2 core (see `gate.model.yaml12`)."""
    text = read_text(path, what)
    try:
        data = load_yaml12(text)
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = visible(getattr(exc, "problem", None) or str(exc).splitlines()[0])
        if isinstance(exc, YamlProblem):  # our own refusal: its text names the fix
            raise FileProblem(f"{path}: the {what}{where}: {problem}") from None
        raise FileProblem(
            f"{path}: the {what} is not valid YAML{where} ({problem}); fix: correct the YAML syntax there"
        ) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # e.g. `!!timestamp 2026-02-30`
        raise FileProblem(
            f"{path}: the {what} holds a value that cannot be read ({visible(str(exc))}); fix: correct it"
        ) from None
    if not isinstance(data, dict):
        raise FileProblem(
            f"{path}: the {what} must be a YAML mapping of keys to values, not {type(data).__name__}; "
            "fix: start the file with `key: value` lines"
        )
    return data


def read_run_json(base: Path, name: str, what: str) -> dict[str, Any]:
    """A JSON object an earlier run wrote: `name` in its --out directory, or the file itself.

    Raises FileProblem (naming the file and the fix) when it is absent, unreadable or not an object.
    """
    path = base / name if base.is_dir() else base
    data = read_bytes(path, what)
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise FileProblem(f"{path}: the {what} is not valid JSON ({exc}); fix: pass the file a run wrote") from None
    if not isinstance(obj, dict):
        raise FileProblem(f"{path}: the {what} is not a JSON object; fix: pass the file a run wrote")
    return obj
