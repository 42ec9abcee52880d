"""`gate validate` starts fast: on a small suite it imports neither numpy (the near-duplicate search
compares all pairs exactly instead) nor ragas, openai or an HTTP client, nor any module only other
commands use (bench/scale.py `--only startup` measures the time; these tests pin the causes)."""

from __future__ import annotations

import ast
import io
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest
from rich.text import Text

from gate.cli.output import format_findings_text
from gate.model.escape import log_text
from gate.validate.minhash import near_duplicates
from gate.validate.shingles import near_duplicates_exact

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import json, sys
from gate.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def validate_example_modules() -> tuple[str, set[str]]:
    """What `gate validate` on the example prints (piped, as in CI) and the modules it loaded."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, "validate", "--policy", str(ROOT / "policies/example/policy.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ},
    )
    assert proc.returncode == 0, proc.stderr
    *printed, last = proc.stdout.splitlines(keepends=True)
    report = json.loads(last)
    assert report["code"] == 0
    return "".join(printed), set(report["modules"])


def test_validate_on_the_example_loads_no_numpy_nor_the_judge() -> None:
    _, loaded = validate_example_modules()
    for heavy in ("numpy", "ragas", "openai", "instructor", "httpx2", "litellm"):
        assert heavy not in loaded, heavy


def test_validate_loads_nothing_only_other_commands_use() -> None:
    """Each of these is start-up time `gate validate` would pay for nothing (issue 12): the event
    loop (only checks that run await), rich (a clean result off a terminal is two plain lines), the
    judge, the run, the decision and its renderers, and the package-metadata reader pydantic's
    plugin loader imports only to find no plugin."""
    printed, loaded = validate_example_modules()
    assert printed.startswith("valid: "), printed
    assert printed.splitlines()[0].endswith(", 55 cases, no findings"), printed
    unneeded = (
        "asyncio",
        "rich",
        "gate.judge",
        "gate.commands.run",
        "gate.decide.core",
        "gate.model.result",
        "gate.report",
        "gate.model.records",
        "importlib.metadata",  # pydantic's plugin loader, with every plugin off (gate/model/process.py)
        "gate.web",  # the review page, and with it its web stack: only `gate review serve` loads them
        "starlette",
        "uvicorn",
        "jinja2",
    )
    assert sorted(m for m in loaded if any(m == u or m.startswith(f"{u}.") for u in unneeded)) == []


@pytest.mark.parametrize(
    "header",
    [
        "policy.yaml: policy p (1), 3 cases",
        "x" * 250,
        "wide 日本語 " * 20,
        "zero\u200bwidth\tand tab",
        "::warning:: x",
        " ",
    ],
)
def test_clean_validation_off_a_terminal_is_written_as_rich_writes_it(header: str) -> None:
    from gate.report.terminal import make_console, print_findings

    summary = "valid: policy.yaml, 3 cases, no findings"
    plain = io.StringIO()
    format_findings_text([], plain, header, summary)
    with_rich = io.StringIO()
    print_findings([], make_console(with_rich), Text(f"{summary}\n{log_text(header)}"), lint=True)
    assert plain.getvalue() == with_rich.getvalue()
    assert plain.getvalue().startswith(f"{summary}\n")


def test_exact_search_finds_what_minhash_finds() -> None:
    rng = random.Random(5)
    words = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choice(words) for _ in range(40)) for _ in range(120)]
    for i in range(0, 40, 4):  # near copies with two words changed, in another group
        copy = texts[i].split()
        copy[3], copy[17] = "edited", "again"
        texts[i + 1] = " ".join(copy)
    groups = [i % 2 for i in range(len(texts))]

    def skip(i: int, j: int) -> bool:
        return i == 0

    exact = near_duplicates_exact(texts, groups, 0.6, 3, skip=skip)
    assert exact == near_duplicates(texts, groups, 0.6, 3, skip=skip)
    assert len(exact) == 9  # ten planted, the one with case 0 skipped


def test_pydantic_asks_the_plugin_loader_only_what_the_stand_in_answers() -> None:
    """gate/model/process.py answers pydantic's one question ("which plugins?") when all are off: if a
    pydantic upgrade asked its loader anything else, every command would break, so this fails first."""
    package = Path(pydantic.__file__).parent
    asked = {
        alias.name
        for path in package.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_loader")
        for alias in node.names
    }
    assert asked == {"get_plugins"}


def plugin_loader_in_a_fresh_process(setting: str | None) -> dict[str, object]:
    probe = (
        "import json, sys\n"
        "from gate.model.process import without_pydantic_plugins\n"
        "without_pydantic_plugins()\n"
        "from pydantic import BaseModel\n"
        "class M(BaseModel):\n"
        "    x: int\n"
        "loader = sys.modules['pydantic.plugin._loader']\n"
        "print(json.dumps({'real': hasattr(loader, 'entry_points'), 'metadata': 'importlib.metadata' in sys.modules,"
        " 'value': M(x=1).x}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if setting is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = setting
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_every_plugin_off_needs_no_package_metadata() -> None:
    assert plugin_loader_in_a_fresh_process(None) == {"real": False, "metadata": False, "value": 1}
    assert plugin_loader_in_a_fresh_process("true") == {"real": False, "metadata": False, "value": 1}


def test_a_plugin_the_user_keeps_is_looked_up_by_pydantic_itself() -> None:
    # Disabling one named plugin leaves the others on: pydantic's real loader finds them.
    assert plugin_loader_in_a_fresh_process("some_plugin") == {"real": True, "metadata": True, "value": 1}
