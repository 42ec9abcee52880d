"""Report sections for the optional policy features (deterministic checks, the rubric trend).

Pure, like `gate.report.markdown`, whose escaping they use; each returns no lines when the result
has nothing to show, so a result without these features renders exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.report.markdown import code_id, escape, id_list


def checks_section(result: Mapping[str, Any]) -> list[str]:
    checks: Mapping[str, Mapping[str, Any]] = result.get("checks") or {}
    if not checks:
        return []
    lines = [
        "### Deterministic checks",
        "| check | gates | values | failed (not labelled fail) | errors |",
        "|---|---|---|---|---|",
    ]
    for name, c in checks.items():
        counts: Mapping[str, int] = c.get("counts") or {}
        values = ", ".join(f"{escape(k)} {n}" for k, n in counts.items() if k != "error")
        failed = list(c.get("failed_case_ids") or [])
        errors = list(c.get("error_case_ids") or [])
        lines.append(
            f"| {code_id(name)} | {'yes' if c.get('gate') else 'no (reported)'} | {values} | "
            f"{id_list(failed, 10) if failed else '0'} | {id_list(errors, 10) if errors else '0'} |"
        )
    lines.append("")
    return lines
