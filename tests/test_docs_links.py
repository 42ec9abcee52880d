"""The README and docs/ stand together (issue 29, item 6): every relative link resolves, and the
README's workflow is the example workflow file, byte for byte."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "policies" / "example" / "README.md"]


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)  # code is not a link
    return [m for m in LINK.findall(text) if not re.match(r"[a-z]+:", m) and not m.startswith("#")]


def test_every_relative_link_resolves() -> None:
    broken = [
        f"{doc.relative_to(ROOT)} -> {link}"
        for doc in DOCS
        for link in relative_links(doc)
        if not (doc.parent / link.split("#")[0]).exists()
    ]
    assert broken == []
    assert sum(len(relative_links(d)) for d in DOCS) > 10  # the check reached the links


def test_the_readme_workflow_is_the_example_file() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("\n## Use it in your workflow\n") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    assert block.group(1) == (ROOT / "examples" / "workflows" / "ragas-gate.yml").read_text(encoding="utf-8")


def test_the_docs_a_team_needs_are_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in (
        "POLICY.md",
        "CASES.md",
        "EVIDENCE.md",
        "OVERRIDES.md",
        "CERTIFICATION.md",
        "PRODUCT_GATE.md",
        "WORKFLOW.md",
        "LOCAL_MODEL.md",
    ):
        assert f"(docs/{page})" in readme, page
