"""Paths as a person reads them in messages: relative to the working directory when under it.

A PR comment, a log or an error then says `evals/cases.jsonl`, never `/github/workspace/evals/...`;
a path outside the working directory stays as it is (absolute), so it is never ambiguous.
"""

from __future__ import annotations

import os
from pathlib import Path


def shown_path(path: Path | str) -> str:
    p = Path(path)
    try:
        return str(Path(os.path.abspath(p)).relative_to(Path.cwd().resolve())) or "."
    except (ValueError, OSError):
        return str(p)
