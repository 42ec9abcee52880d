"""A fresh interpreter in which importing one package (ragas) takes a long time: a test can then
signal `gate run` while its judge is loading, at a moment it knows, not by racing a poll.

    shim = slow_import(tmp_path, "ragas")
    env["PYTHONPATH"] = os.pathsep.join([str(shim.directory), str(ROOT)])
    ... start `python -m gate.cli run ...` with env ...
    shim.wait_started(proc)   # the import has begun: nothing after the judge's load has run

It is a `sitecustomize` on PYTHONPATH (Python imports it at start) that puts a finder first on
`sys.meta_path`: the first `import ragas` touches a marker file and sleeps, then the real package
is imported as usual. Nothing of gate is replaced; the interpreter must be fresh (`subprocess`),
since a warm one (tests/gate_process.py) has imported ragas already.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SITECUSTOMIZE = '''
import os, sys, time


class _SlowImport:
    """The first import of {name!r} marks its start, then waits {seconds} s before going on."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == {name!r}:
            sys.meta_path.remove(self)
            with open({marker!r}, "w"):
                pass
            time.sleep({seconds})
        return None


sys.meta_path.insert(0, _SlowImport())
'''


@dataclass(frozen=True)
class SlowImport:
    directory: Path  # put first on PYTHONPATH
    marker: Path  # exists once the slow import has begun

    def wait_started(self, proc: Any, limit_s: float = 120.0) -> None:
        deadline = time.monotonic() + limit_s
        while not self.marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert self.marker.exists() and proc.poll() is None, "the run never began to import the judge"


def slow_import(tmp_path: Path, name: str, seconds: float = 60.0) -> SlowImport:
    directory = tmp_path / f"slow-{name}"
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / "import-started"
    (directory / "sitecustomize.py").write_text(
        _SITECUSTOMIZE.format(name=name, marker=str(marker), seconds=seconds), encoding="utf-8"
    )
    return SlowImport(directory, marker)
