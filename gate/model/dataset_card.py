"""The dataset card a policy names (`dataset_card:`): what the cases are fit to judge, and what not.

A card is a Markdown file with one heading per section (`## Intended use`) or a YAML mapping with
one key per section (`intended_use: ...`). Every section in `CARD_SECTIONS` must be present and
say something: a verdict on cases nobody described cannot be weighed by the people it blocks.
Headings match case-insensitively, ignoring punctuation; a section's text runs to the next heading
of the same or a higher level (so it may hold sub-headings).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from gate.model.escape import visible
from gate.model.loading import FileProblem, read_text, sha256_hex
from gate.model.yaml12 import load_yaml12

# (YAML key, Markdown heading) of every section a card must fill.
CARD_SECTIONS: tuple[tuple[str, str], ...] = (
    ("intended_use", "Intended use"),
    ("excluded_tasks", "Excluded tasks"),
    ("language_and_domain_coverage", "Language and domain coverage"),
    ("collection_window", "Collection window"),
    ("source_authority", "Source authority"),
    ("redaction", "Redaction"),
    ("sampling_design", "Sampling design"),
    ("reviewer_qualifications", "Reviewer qualifications"),
    ("known_gaps", "Known gaps"),
)

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def _norm(title: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", title.lower()).split())


@dataclass(frozen=True)
class DatasetCard:
    """A card as read: its file, the sha256 of its bytes, and the text of each section found."""

    path: Path
    sha256: str
    sections: dict[str, str]  # YAML key -> text ("" when the heading is there but says nothing)

    def missing(self) -> list[tuple[str, str, str]]:
        """(key, heading, "missing" | "empty") of every required section that is not filled."""
        out: list[tuple[str, str, str]] = []
        for key, heading in CARD_SECTIONS:
            text = self.sections.get(key)
            if text is None:
                out.append((key, heading, "missing"))
            elif not text.strip():
                out.append((key, heading, "empty"))
        return out


def markdown_sections(text: str) -> dict[str, str]:
    """The required sections of a Markdown card, by key; headings inside code fences do not count."""
    wanted = {_norm(heading): key for key, heading in CARD_SECTIONS}
    lines = text.splitlines()
    headings: list[tuple[int, int, str]] = []  # (line index, level, title)
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else _HEADING.match(line)
        if m:
            headings.append((i, len(m.group(1)), m.group(2)))
    found: dict[str, str] = {}
    for n, (start, level, title) in enumerate(headings):
        key = wanted.get(_norm(title))
        if key is None or key in found:
            continue
        end = next((i for i, lv, _ in headings[n + 1 :] if lv <= level), len(lines))
        body = _COMMENT.sub("", "\n".join(lines[start + 1 : end]))
        found[key] = body.strip()
    return found


def yaml_sections(text: str, path: Path) -> dict[str, str]:
    """The required sections of a YAML card: each a non-empty string or list of strings."""
    try:
        data = load_yaml12(text)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        problem = visible(str(exc).splitlines()[0] if str(exc) else type(exc).__name__, 200)
        raise FileProblem(
            f"{path}: the dataset card is not valid YAML ({problem}); fix: correct the YAML syntax"
        ) from None
    if not isinstance(data, dict):
        raise FileProblem(
            f"{path}: the dataset card must be a YAML mapping of section to text, not {type(data).__name__}; "
            "fix: write `intended_use: ...` lines"
        )
    found: dict[str, str] = {}
    for key, _heading in CARD_SECTIONS:
        if key not in data:
            continue
        value = data[key]
        if isinstance(value, list):
            value = "\n".join(str(v) for v in value if v is not None)
        found[key] = value.strip() if isinstance(value, str) else ""
    return found


def read_card(path: Path) -> DatasetCard:
    """Read a card through the safe reader (regular file, size-capped, UTF-8); FileProblem if unreadable."""
    text = read_text(path, "dataset card (`dataset_card`)")
    is_yaml = path.suffix.lower() in (".yaml", ".yml")
    sections = yaml_sections(text, path) if is_yaml else markdown_sections(text)
    return DatasetCard(path=path, sha256=sha256_hex(text), sections=sections)
