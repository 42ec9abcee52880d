"""A YAML loader for policy and evidence files: YAML 1.2 core scalars, no surprises, no bombs.

PyYAML reads YAML 1.1, where `on`, `no` and `yes` are booleans, `1.10` is the float 1.1, `010` is
eight and `2026-12-31` is a date, even as a key. A policy is reviewed as text, so the gate reads it
as the YAML 1.2 core schema (only `true/false`, decimal, `0o`/`0x` integers, plain floats and
`null` are not text), keeps every key as written, keeps the text of numbers so version fields stay
as typed, and refuses what a reviewer cannot see in place (aliases, merge keys) or what would
exhaust the reader (deep nesting, giant numbers).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode

MAX_DEPTH = 64
MAX_NUMBER_CHARS = 40

_SURROGATE = re.compile(r"[\ud800-\udfff]")


class YamlFloat(float):
    """A float that remembers how it was written (`1.10` stays "1.10" where text is wanted)."""

    source_text: str

    def __new__(cls, value: float, text: str) -> YamlFloat:
        made = super().__new__(cls, value)
        made.source_text = text
        return made


class YamlInt(int):
    """An integer that remembers how it was written (`010`, `0x1F`)."""

    source_text: str

    def __new__(cls, value: int, text: str) -> YamlInt:
        made = super().__new__(cls, value)
        made.source_text = text
        return made


def as_written(value: object) -> object:
    """The text an author typed for a number read from YAML; other values unchanged.

    For fields that are text by nature (versions): `policy_version: 1.10` must stay "1.10".
    """
    text = getattr(value, "source_text", None)
    if isinstance(text, str):
        return text
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


class YamlProblem(yaml.MarkedYAMLError):
    """A refusal of ours, raised like PyYAML's own errors so one handler reports both."""

    def __init__(self, problem: str, mark: yaml.Mark | None) -> None:
        super().__init__(problem=problem, problem_mark=mark)


_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$"
)


_KEY_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "null", "bool", "int", "float"))


class Yaml12Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core implicit types and the refusals described above."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    # ---- composing: depth and aliases ----------------------------------------------------------
    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise YamlProblem(
                "an alias (`*name`, also in a `<<: *name` merge key) repeats a value written elsewhere; "
                "a reviewer must see every value where it applies, so the gate does not read aliases; "
                "fix: write the values out in place",
                event.start_mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise YamlProblem(f"the file nests deeper than {MAX_DEPTH} levels; fix: flatten it", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    # ---- constructing: keys as written, numbers with their text ---------------------------------
    def construct_scalar(self, node: ScalarNode | MappingNode) -> str:
        value: str = super().construct_scalar(node)
        if _SURROGATE.search(value):
            raise YamlProblem(
                "a value holds a lone surrogate escape (e.g. `\\udfff`), which is not text; fix: remove it",
                node.start_mark,
            )
        return value

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        result: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            key = self._key_text(key_node)
            if key in first_line:
                raise YamlProblem(
                    f"key '{key}' is written twice (first at line {first_line[key] + 1}); the second value would "
                    "silently win; fix: keep one",
                    key_node.start_mark,
                )
            first_line[key] = key_node.start_mark.line
            result[key] = self.construct_object(value_node, deep=deep)
        return result

    def _key_text(self, key_node: Node) -> str:
        if not isinstance(key_node, ScalarNode):
            raise YamlProblem(
                "a list or mapping is used as a key (`? [a, b]`); keys must be names; fix: write a plain name",
                key_node.start_mark,
            )
        text = self.construct_scalar(key_node)
        if key_node.tag not in _KEY_TAGS:
            raise YamlProblem(
                f"the key `{text}` has the tag {key_node.tag}; keys must be plain names; fix: remove the tag",
                key_node.start_mark,
            )
        if key_node.style is None and text == "<<":
            raise YamlProblem(
                "merge keys (`<<:`) are not supported: a reviewer must see every value where it applies; "
                "fix: write the keys out in place",
                key_node.start_mark,
            )
        if key_node.style is None and _NULL.match(text):
            raise YamlProblem(
                f"a key has no name (`{text}` reads as null); fix: write a name, quoted if needed",
                key_node.start_mark,
            )
        # Every other key stays the text the author wrote: `on`, `no`, `1`, `2026-12-31`, `1.10`.
        return text

    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = self.construct_scalar(node)
        digits = text.lstrip("+-")
        if len(digits) > MAX_NUMBER_CHARS:
            raise YamlProblem(
                f"a number of {len(digits)} digits is too long (at most {MAX_NUMBER_CHARS}); fix: write a real value",
                node.start_mark,
            )
        sign = -1 if text.startswith("-") else 1
        if digits.startswith("0o"):
            value = int(digits[2:], 8)
        elif digits.startswith("0x"):
            value = int(digits[2:], 16)
        else:
            value = int(digits, 10)  # `010` is ten, as written: YAML 1.1 read it as eight
        return YamlInt(sign * value, text)

    def construct_yaml_float(self, node: ScalarNode) -> float:
        text = self.construct_scalar(node)
        if len(text) > MAX_NUMBER_CHARS:
            raise YamlProblem(
                f"a number of {len(text)} characters is too long (at most {MAX_NUMBER_CHARS}); fix: write a real value",
                node.start_mark,
            )
        lowered = text.lower()
        if lowered.endswith(".inf"):
            value = float("-inf") if lowered.startswith("-") else float("inf")
        elif lowered == ".nan":
            value = float("nan")
        else:
            value = float(text)
        return YamlFloat(value, text)

    def construct_yaml_bool(self, node: ScalarNode) -> bool:
        return self.construct_scalar(node).lower() == "true"


# Only the YAML 1.2 core types below: none of PyYAML's YAML 1.1 ones (yes/no/on/off, dates, 0777, 1_000).
Yaml12Loader.yaml_implicit_resolvers = {}
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""])
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
Yaml12Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789"))
Yaml12Loader.add_constructor("tag:yaml.org,2002:int", Yaml12Loader.construct_yaml_int)
Yaml12Loader.add_constructor("tag:yaml.org,2002:float", Yaml12Loader.construct_yaml_float)
Yaml12Loader.add_constructor("tag:yaml.org,2002:bool", Yaml12Loader.construct_yaml_bool)


def load_yaml12(text: str) -> Any:
    """Parse one YAML document as described in the module docstring; errors are `yaml.YAMLError`."""
    loader = Yaml12Loader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
