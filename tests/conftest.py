"""Shared fixtures.

- `fake_openai`: a started `FakeOpenAI` (tests/fake_openai.py) on 127.0.0.1, stopped after the
  test. Unmatched requests get the oracle (`[[judge:pass]]` / `[[judge:fail]]` markers in the
  prompt, else "pass"); script cases with `fake_openai.script("case-id", reply("fail"), ...)`.
  Point the judge at it with `evaluator.base_url: <fake_openai.base_url>` or OPENAI_BASE_URL.
- `fake_openai_env`: the same server, plus OPENAI_BASE_URL set to it and telemetry off
  (`RAGAS_DO_NOT_TRACK=true`) for the test, for code paths (`gate run` in-process or as a
  subprocess inheriting os.environ) that resolve the base URL from the environment.
- Under pytest-xdist, on the whole suite, the controller starts the warm process server of
  tests/gate_process.py once, for every worker.
- Every test starts in an empty directory of its own (autouse `_own_working_directory`), so
  nothing a test writes by default (`.gate-cache/`, `gate-out/`, `.hypothesis/`) lands in the
  checkout, where another test, or another pytest-xdist worker (`make test` runs `-n`), reads it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The tests live in a folder per package of gate (tests/README.md); the shared harness (the fakes,
# the suite builders) stays here. A test may import a helper of another folder's test module by name.
_TESTS = Path(__file__).resolve().parent
for _folder in sorted(p for p in _TESTS.iterdir() if p.is_dir() and p.name not in {"fixtures", "__pycache__"}):
    if str(_folder) not in sys.path:
        sys.path.append(str(_folder))

from fake_openai import FakeOpenAI  # noqa: E402

# selenium (the browser test's, `make ui-test`) brings trio, whose hypothesis plugin would import
# trio into every test process that imports hypothesis; no test here needs it.
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, on the whole suite (`make test`), one warm gate process server
    (tests/gate_process.py) for all workers, started by the controller before it starts them. A run
    of files named on the command line may not need one: each worker starts its own when it does."""
    whole_suite = config.args_source != pytest.Config.ArgsSource.ARGS
    if whole_suite and not hasattr(config, "workerinput") and config.getoption("dist", default="no") != "no":
        import gate_process

        gate_process.share_server()


@pytest.fixture(autouse=True)
def _own_working_directory(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture(autouse=True)
def _outside_a_workflow_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """A product run's order seed is the workflow run's in GitHub Actions (gate/run/order_seed.py): a
    suite run there must not hand every test the same one. Tests of the Action set them themselves."""
    for name in ("GITHUB_ACTIONS", "GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_gate_process_left() -> Iterator[None]:
    """A `gate_process` child a test left running (a failed assertion, a timeout) ends with the test."""
    yield
    started = sys.modules.get("gate_process")
    if started is not None:
        started.reap()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake_openai_env(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> FakeOpenAI:
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("RAGAS_DO_NOT_TRACK", "true")
    return fake_openai
