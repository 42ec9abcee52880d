"""The rollback bundle (rollback.json): what it takes to restore the configuration of a run.

Written beside every result (to calibrate against people and test metric migrations:
the prior lock file reference, metric definition hash, input renderer version and result
schema). `gate compare` prints both sides' bundles when they differ. Reads package metadata
only: ragas is never imported here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate import __version__
from gate.judge import installed_version
from gate.judge.render import RENDERER_VERSION
from gate.model.loading import FileProblem, read_json, sha256_hex

if TYPE_CHECKING:
    from gate.model.result import Result

ROLLBACK_FILE = "rollback.json"
ROLLBACK_SCHEMA_VERSION = 1
# The packages whose versions shape a verdict: the judge library, its client stack, the parser.
JUDGE_PACKAGES = ("ragas", "instructor", "openai", "httpx2", "langchain-core", "langchain-community", "pydantic")
_LOCK = Path(__file__).resolve().parents[2] / "requirements.lock"


def lock_sha256() -> str | None:
    """sha256 of the requirements.lock this gate was installed from, when it ships beside it."""
    try:
        return sha256_hex(_LOCK.read_bytes())
    except OSError:
        return None


def rollback_bundle(result: Result) -> dict[str, Any]:
    """The bundle for a result: its lineage hashes plus this environment's lock and versions."""
    from gate.decide.core import RESULT_SCHEMA_VERSION
    from gate.model.records import SCHEMA_VERSION

    lineage = result.lineage
    return {
        "schema_version": ROLLBACK_SCHEMA_VERSION,
        "lock_sha256": lock_sha256(),
        "packages": {name: installed_version(name) for name in JUDGE_PACKAGES},
        "metric_definition_sha256": (lineage.metric_definition_sha256 or None) if lineage else None,
        "prompt_sha256": (lineage.prompt_sha256 or None) if lineage else None,
        "renderer_version": RENDERER_VERSION,
        "result_schema_version": RESULT_SCHEMA_VERSION,
        "records_schema_version": SCHEMA_VERSION,
        "gate_version": __version__,
    }


def write_rollback(out_dir: Path, result: Result) -> None:
    (out_dir / ROLLBACK_FILE).write_text(json.dumps(rollback_bundle(result), indent=2) + "\n", encoding="utf-8")


def read_rollback(run_dir: Path) -> dict[str, Any] | None:
    """A run's bundle, or None when the run predates it or the file is unreadable."""
    try:
        data = read_json(run_dir / ROLLBACK_FILE, "rollback bundle")
    except FileProblem:
        return None
    return data if isinstance(data, dict) else None


def bundle_rows(base: Mapping[str, Any] | None, head: Mapping[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """(key, base value, head value) for every bundle entry, packages flattened; [] when equal."""

    def flat(bundle: Mapping[str, Any] | None) -> dict[str, Any]:
        if bundle is None:
            return {}
        out = {k: v for k, v in bundle.items() if k != "packages"}
        packages = bundle.get("packages")
        if isinstance(packages, dict):
            out.update({f"packages.{k}": v for k, v in packages.items()})
        return out

    a, b = flat(base), flat(head)
    if a == b:
        return []
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b))]
