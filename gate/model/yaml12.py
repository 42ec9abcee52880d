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
from collections.abc import Callable
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent, Event
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

MAX_DEPTH = 64
MAX_NUMBER_CHARS = 40
TOO_DEEP = f"the file nests deeper than {MAX_DEPTH} levels; fix: flatten it"

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

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$"
)


_KEY_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "null", "bool", "int", "float"))
_CORE_TAGS = _KEY_TAGS | {"tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"}


class _Yaml12Rules(Composer, SafeConstructor, Resolver):
    """The reading rules described above, over the parser a subclass names for the events."""

    # Given by the parser class each loader below adds.
    check_event: Callable[..., bool]
    peek_event: Callable[[], Event | None]
    dispose: Callable[[], None]

    def __init__(self) -> None:
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0

    # ---- composing: depth and aliases ----------------------------------------------------------
    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(AliasEvent):
            raise YamlProblem(
                "an alias (`*name`, also in a `<<: *name` merge key) repeats a value written elsewhere; "
                "a reviewer must see every value where it applies, so the gate does not read aliases; "
                "fix: write the values out in place",
                self._here(),
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlProblem(TOO_DEEP, self._here())
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _here(self) -> Any:
        """Where the next event starts (a PyYAML mark, or libyaml's, which has no snippet)."""
        event = self.peek_event()
        return None if event is None else event.start_mark

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
        # A plain key has no style: None from PyYAML's parser, "" from libyaml's.
        if not key_node.style and text == "<<":
            raise YamlProblem(
                "merge keys (`<<:`) are not supported: a reviewer must see every value where it applies; "
                "fix: write the keys out in place",
                key_node.start_mark,
            )
        if not key_node.style and _NULL.match(text):
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

    def construct_other_tag(self, node: Node) -> None:
        raise YamlProblem(
            f"the value tagged `{str(node.tag).replace('tag:yaml.org,2002:', '!!')}` cannot be read: the gate reads text, numbers, true/false, null, "
            "lists and mappings; fix: remove the tag",
            node.start_mark,
        )


# Only the YAML 1.2 core types below: none of PyYAML's YAML 1.1 ones (yes/no/on/off, dates, 0777, 1_000).
_Yaml12Rules.yaml_implicit_resolvers = {}
_Yaml12Rules.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""])
_Yaml12Rules.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
_Yaml12Rules.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_Yaml12Rules.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789"))
# Only the core schema's tags are read: PyYAML's others (`!!timestamp`, `!!binary`, `!!set`, ...)
# make values no field takes, and its timestamp reader fails on text it does not match.
_Yaml12Rules.yaml_constructors = {
    **{tag: SafeConstructor.yaml_constructors[tag] for tag in _CORE_TAGS},
    "tag:yaml.org,2002:int": _Yaml12Rules.construct_yaml_int,
    "tag:yaml.org,2002:float": _Yaml12Rules.construct_yaml_float,
    "tag:yaml.org,2002:bool": _Yaml12Rules.construct_yaml_bool,
    None: _Yaml12Rules.construct_other_tag,
}


class PythonYaml12Loader(_Yaml12Rules, Reader, Scanner, Parser):
    """The rules over PyYAML's own reader, scanner and parser, written in Python."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _Yaml12Rules.__init__(self)


def _fastest_loader() -> Callable[[str], _Yaml12Rules]:
    """The rules over libyaml's scanner and parser, ten times faster, where PyYAML is built with it.

    The composer stays PyYAML's Python one, which the rules extend, so both loaders read alike.
    """
    try:
        from yaml._yaml import CParser
    except ImportError:
        return PythonYaml12Loader

    class LibyamlYaml12Loader(_Yaml12Rules, CParser):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _Yaml12Rules.__init__(self)

    return LibyamlYaml12Loader


Yaml12Loader = _fastest_loader()


def load_yaml12(text: str, loader_class: Callable[[str], _Yaml12Rules] | None = None) -> Any:
    """Parse one YAML document as described in the module docstring; errors are `yaml.YAMLError`.

    `loader_class` picks the parser (`PythonYaml12Loader`); by default the fastest one installed.
    """
    loader = (loader_class or Yaml12Loader)(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        # libyaml stops at 1,000 levels while scanning ahead, before the composer counts to ours.
        if exc.problem == "exceeded maximum nesting depth":
            raise YamlProblem(TOO_DEEP, exc.problem_mark) from None
        raise
    finally:
        loader.dispose()
