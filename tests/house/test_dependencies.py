"""What gate imports is what it declares: every third-party module the package imports (at the top
of a module or inside a function) comes from a distribution named in pyproject.toml's dependencies
and in requirements.in, pinned in requirements.lock; and every runtime dependency declared is
imported by gate, or is listed below with why it is declared anyway. A dependency that only arrives
through another (scipy through ragas) vanishes the day that one drops it; one declared and never
imported (krippendorff, once) is installed in every image for nothing."""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Declared for the runtime without gate importing them, and why.
DECLARED_UNIMPORTED = {
    "langchain-community": "a pin ragas needs: 0.4.2 breaks `import ragas.metrics`",
    "httpx": "the openai client's transport; gate's own clients are httpx2",
}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str) -> str | None:
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-"):
        return None
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
    return canonical(match.group(0)) if match else None


@functools.cache
def imported_distributions() -> dict[str, set[str]]:
    """Each distribution gate imports, with the modules that import it (read once: ~1 s)."""
    modules: dict[str, set[str]] = {}
    for path in sorted((ROOT / "gate").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top != "gate" and top not in sys.stdlib_module_names:
                    modules.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    owners = md.packages_distributions()
    found: dict[str, set[str]] = {}
    for top, where in modules.items():
        for dist in owners.get(top, [top]):
            found.setdefault(canonical(dist), set()).update(where)
    return found


def declared_in_pyproject() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {name for name in (requirement_name(d) for d in project["dependencies"]) if name}


def lines_of(name: str) -> list[str]:
    return (ROOT / name).read_text(encoding="utf-8").splitlines()


def declared_in(name: str) -> set[str]:
    return {n for n in (requirement_name(line) for line in lines_of(name)) if n}


def locked() -> dict[str, str]:
    pins = (re.match(r"([A-Za-z0-9._-]+)==([^ \\]+)", line) for line in lines_of("requirements.lock"))
    return {canonical(m.group(1)): m.group(2) for m in pins if m}


def test_every_distribution_gate_imports_is_declared_and_locked() -> None:
    imported = imported_distributions()
    pyproject, requirements, lock = declared_in_pyproject(), declared_in("requirements.in"), locked()
    undeclared = {d: sorted(w) for d, w in imported.items() if d not in pyproject or d not in requirements}
    assert not undeclared, f"imported by gate, not declared in pyproject.toml and requirements.in: {undeclared}"
    assert not set(imported) - set(lock), "imported by gate and not pinned in requirements.lock"


def test_every_runtime_dependency_declared_is_imported_by_gate() -> None:
    imported = set(imported_distributions())
    for declared in (declared_in_pyproject(), declared_in("requirements.in")):
        unused = declared - imported - set(DECLARED_UNIMPORTED)
        assert not unused, f"declared for the runtime, never imported by gate: {sorted(unused)}"


def test_requirements_in_pins_are_the_locked_versions() -> None:
    """A version requirements.in pins exactly is the one the lock holds (the lock was compiled from it)."""
    lock = locked()
    for line in lines_of("requirements.in"):
        m = re.match(r"([A-Za-z0-9._-]+)==([0-9][^ #*]*)\s*(#|$)", line)
        if m:
            assert lock.get(canonical(m.group(1))) == m.group(2), line
