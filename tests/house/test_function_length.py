"""No function in gate/ is over 80 lines (a house rule; issue 28, defect 10: the Action's
publish_and_report had grown to 89). Counted from the `def` line to the last line of the body,
decorators aside, as a reader scrolls it."""

from __future__ import annotations

import ast
from pathlib import Path

GATE = Path(__file__).resolve().parents[2] / "gate"
MAX_LINES = 80


def long_functions(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines() -> None:
    assert long_functions(GATE) == []


def test_the_rule_sees_a_long_function(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "long.py").write_text(f"def too_long() -> None:\n{body}", encoding="utf-8")
    (tmp_path / "pkg" / "short.py").write_text("def fine() -> None:\n    pass\n", encoding="utf-8")
    assert long_functions(tmp_path / "pkg") == ["pkg/long.py:1 too_long (81 lines)"]
