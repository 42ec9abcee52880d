"""The README and docs/ stand together (issue 29): every relative link resolves, the README's
workflow is the example workflow file byte for byte, the README links every page of docs/ and stays
short, and every `make` target the pages name is one the Makefile has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def test_the_readme_links_every_page_of_docs_and_stays_short() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f"(docs/{p.name})" not in readme]
    assert unlinked == []
    # Quickstart, the two gates, the workflow, links: the rest lives in docs/.
    assert len(readme.splitlines()) <= 300


def test_every_make_target_the_pages_name_is_in_the_makefile() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w.-]+):", makefile, re.M))
    named = {
        f"{doc.relative_to(ROOT)}: make {target}"
        for doc in DOCS
        for target in re.findall(r"`make ([a-z][\w-]*)", doc.read_text(encoding="utf-8"))
        if target not in targets
    }
    assert named == set()
