"""Imports point down the data path: each stage imports only the stages before it; the entry
points (`gate.cli`, `gate.action`) sit over everything and nothing imports them.

Read from the source (every `import`, also inside functions, and `importlib.import_module` calls
with a literal name), so a lazy import cannot hide a cycle from the test.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

GATE = Path(__file__).resolve().parents[2] / "gate"
ENTRY_POINTS = {"gate.cli", "gate.action"}  # gate.cli is a package: each command's parser and edge


def is_entry(module: str) -> bool:
    return any(module == e or module.startswith(f"{e}.") for e in ENTRY_POINTS)


# The stages in the order a run's data flows through them (docs/ARCHITECTURE.md draws it):
# policy and cases in -> validate -> plan -> judge -> run -> decide -> report, the lanes that
# measure the judge beside them, publishing, the commands that wire a stage sequence, and the
# review page's web edge.
STAGES = (
    "model", "estimate", "review", "validate", "plan", "judge", "run", "decide", "report", "measure", "github", "commands",
    "web",  # the review page: an edge over gate.review that only `gate review serve` loads
)  # fmt: skip


def module_files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in GATE.rglob("*.py"):
        parts = list(path.relative_to(GATE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = module_files()


def owning_module(name: str) -> str | None:
    """`gate.commands.run.RunOptions` -> `gate.commands.run`: the longest prefix that is one of our modules."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imported_names(module: str, node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
            kept = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*kept, base] if base else kept)
        return [base, *(f"{base}.{alias.name}" for alias in node.names)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "import_module"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ):
        return [node.args[0].value]
    return []


@functools.cache  # parsed once per test process: several tests read the same graph (none changes it)
def import_graph(*, top_level_only: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = tree.body if top_level_only else list(ast.walk(tree))
        targets = {owning_module(n) for node in nodes for n in imported_names(module, node) if n.startswith("gate")}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_lazy_and_importlib_imports() -> None:
    graph = import_graph(top_level_only=False)
    assert "gate.commands.run" in graph["gate.cli.run"]  # imported inside cmd_run
    assert "gate.github.publish" in graph["gate.action"] and "gate.commands.steps" in graph["gate.action"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_no_module_imports_an_entry_point() -> None:
    graph = import_graph(top_level_only=False)
    importers = {
        m: sorted(t for t in graph[m] if is_entry(t)) for m in graph if not is_entry(m) and any(map(is_entry, graph[m]))
    }
    assert importers == {}, "the CLI and the Action are edges over the core (gate.commands.steps, gate.github.publish)"


def test_module_level_imports_point_down() -> None:
    assert cycles(import_graph(top_level_only=True)) == []


def test_no_cycle_not_even_through_imports_inside_functions() -> None:
    assert cycles(import_graph(top_level_only=False)) == []


def stage_of(module: str) -> int:
    """The stage a module belongs to: its package under gate/ (the root package `gate` is below all)."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    if is_entry(module):
        return len(STAGES)
    assert parts[1] in STAGES, f"{module} is in no stage: put it in one of {STAGES} (docs/ARCHITECTURE.md)"
    return STAGES.index(parts[1])


def test_a_stage_imports_only_the_stages_before_it() -> None:
    """Every import counts: inside functions, under TYPE_CHECKING, and importlib's."""
    upward = sorted(
        f"{m} imports {t}"
        for m, targets in import_graph(top_level_only=False).items()
        for t in targets
        if stage_of(t) > stage_of(m)
    )
    assert upward == [], f"move the shared piece down to the earlier stage: {upward}"


def test_the_layering_check_sees_an_upward_import() -> None:
    assert stage_of("gate.model.policy") < stage_of("gate.decide.core") < stage_of("gate.commands.run")
    assert stage_of("gate.cli") > stage_of("gate.commands.run") and stage_of("gate") < stage_of("gate.model.states")


def test_the_tree_reads_as_the_stages() -> None:
    """Only the stages and the two edges at the top; each package opens with what it holds and may import."""
    top = sorted(
        p.name
        for p in GATE.iterdir()
        if p.name != "__init__.py" and (p.suffix == ".py" or (p / "__init__.py").exists())
    )
    assert len(top) <= len(STAGES) + 2, top  # the stages and the two edges
    assert {p.name for p in GATE.iterdir() if (p / "__init__.py").exists()} == {*STAGES, "cli"}
    for init in GATE.rglob("__init__.py"):
        if init.parent == GATE:
            continue
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "may import" in doc, f"{init.relative_to(GATE.parent)}: say what the package holds and may import"


def test_only_the_judge_package_imports_ragas() -> None:
    """ragas stays behind gate/judge/: every other module asks it for what it needs, lazily."""
    outside = []
    for path in sorted(GATE.rglob("*.py")):
        if path.relative_to(GATE).parts[0] == "judge":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "ragas" or n.startswith("ragas.") for n in names):
                outside.append(f"{path.relative_to(GATE)}:{node.lineno}")
    assert outside == []


def test_only_the_review_page_imports_the_web_stack() -> None:
    """starlette, uvicorn and jinja2 load when `gate review serve` serves, never for another command."""
    outside = []
    for path in sorted(GATE.rglob("*.py")):
        if path.relative_to(GATE).parts[0] == "web":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n.split(".")[0] in ("starlette", "uvicorn", "jinja2") for n in names):
                outside.append(f"{path.relative_to(GATE)}:{node.lineno}")
    assert outside == []
