"""The rendered-input contract: what the judge sees, computed before any call.

Pure (no ragas import) so validators and `gate run --dry-run` reuse it. Rendering is exactly what
ragas 0.4.3 does for a `DiscreteMetric` with a string prompt (`instruction.format(**kwargs)`), so
`prompt_sha256` is the hash of the text the provider receives as the user message.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gate.model.cases import Case
from gate.model.loading import canonical_json, sha256_hex
from gate.model.wording import agree

# Bump when what the judge sees for the same case and template changes (rollback bundle).
RENDERER_VERSION = "1"


class RenderError(Exception):
    """The case cannot be rendered into the prompt; `message` names the field and the fix."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class RenderedInput:
    kwargs: dict[str, str]  # placeholder name -> the case field's text, exactly
    prompt: str  # the rendered prompt (the judge's user message)
    prompt_sha256: str  # sha256 of `prompt`
    input_sha256: str  # sha256 of the canonical JSON of `kwargs`
    field_sha256: dict[str, str]  # placeholder name -> sha256 of its text

    def to_json(self) -> dict[str, object]:
        return {
            "kwargs": self.kwargs,
            "prompt": self.prompt,
            "prompt_sha256": self.prompt_sha256,
            "input_sha256": self.input_sha256,
        }


def template_fields(template: str) -> list[str]:
    """The placeholder names of a `str.format` template, in order of first use."""
    names: list[str] = []
    for _literal, field_name, _spec, _conv in string.Formatter().parse(template):
        if field_name is not None and field_name not in names:
            names.append(field_name)
    return names


@functools.lru_cache(maxsize=64)
def _checked_placeholders(template: str, placeholders: tuple[str, ...]) -> tuple[str, ...]:
    """The template's checks, which do not depend on the case: made once per template, not per judgment."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise RenderError(f"the prompt is not a valid format string ({exc}); fix: double literal braces") from None
    for _literal, field_name, spec, conversion in parsed:
        if field_name is not None and (spec or conversion or not field_name.isidentifier()):
            raise RenderError(
                f"placeholder `{{{field_name}}}` uses a format spec, conversion, index or attribute, which can "
                "alter what the judge sees; fix: write a plain `{name}`"
            )
    used = template_fields(template)
    if sorted(used) != sorted(placeholders):
        raise RenderError(
            f"the prompt's placeholders {sorted(used)} differ from the policy's {sorted(placeholders)}; "
            "fix: reload the policy"
        )
    return placeholders


def render_fields(template: str, placeholders: Sequence[str], fields: Mapping[str, str | None]) -> RenderedInput:
    """Render `template` with `fields`, refusing anything that would change what the judge sees.

    Refused: a placeholder the template uses but `placeholders` does not declare (or the reverse),
    a placeholder whose field is missing or blank, a field given that no placeholder uses, and a
    rendering that does not contain every field's text verbatim (truncation or alteration).
    """
    declared = _checked_placeholders(template, tuple(placeholders))
    unexpected = sorted(set(fields) - set(declared))
    if unexpected:
        n = len(unexpected)
        raise RenderError(
            f"input {agree(n, 'field', 'fields')} {', '.join(unexpected)} {agree(n, 'has', 'have')} no placeholder in "
            "the prompt; fix: remove them"
        )
    kwargs: dict[str, str] = {}
    for name in declared:
        value = fields.get(name)
        if value is None:
            raise RenderError(f"placeholder `{{{name}}}` has no value: the case has no `{name}`; fix: add `{name}`")
        if not isinstance(value, str):
            raise RenderError(f"placeholder `{{{name}}}` needs text, not {type(value).__name__}")
        if not value.strip():
            raise RenderError(f"placeholder `{{{name}}}` would be empty: the case's `{name}` is blank; fix: fill it")
        kwargs[name] = value
    try:
        prompt = template.format(**kwargs)
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise RenderError(
            f"the prompt cannot be rendered ({type(exc).__name__}: {exc}); fix: check its braces"
        ) from None
    for name, value in kwargs.items():
        if value not in prompt:
            raise RenderError(f"the rendered prompt does not contain `{name}` verbatim; fix: use a plain `{{{name}}}`")
    return RenderedInput(
        kwargs=kwargs,
        prompt=prompt,
        prompt_sha256=sha256_hex(prompt),
        input_sha256=sha256_hex(canonical_json(kwargs)),
        field_sha256={name: sha256_hex(value) for name, value in sorted(kwargs.items())},
    )


def render_case(template: str, placeholders: Sequence[str], case: Case) -> RenderedInput:
    """Render one case: each placeholder is filled from the case field of the same name."""
    return render_fields(template, placeholders, {name: case.field_text(name) for name in placeholders})
