"""Running the deterministic checks: each team function wrapped as a ragas `@discrete_metric`.

What a check is, how it is loaded and what its values mean live in gate/validate/case_checks.py
(`gate validate` reads them without ragas); running them needs ragas' wrapper, so it lives here
with the judge, the one package that may import ragas.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gate.model.cases import Case
from gate.model.policy import LoadedPolicy
from gate.validate.case_checks import (
    NO_CHECKS,
    CheckResults,
    CheckValue,
    LoadedCheck,
    checked,
    checks_ran,
    load_checks,
    short_error,
)


def evaluate_checks(loaded: LoadedPolicy, cases: Sequence[Case]) -> CheckResults:
    """Load and run the policy's checks on `cases`: their values and the blockers they raise (`findings`)."""
    return run_checks(load_checks(loaded), cases)


def run_checks(checks: Sequence[LoadedCheck], cases: Sequence[Case]) -> CheckResults:
    """Run every check on every case through `ragas.metrics.discrete_metric` (imports ragas)."""
    if not checks:
        return NO_CHECKS
    import asyncio  # here, not at the top: `gate validate` loads this module and never awaits

    from gate.judge.discrete import discrete_metric_decorator

    discrete_metric = discrete_metric_decorator()
    metrics = {
        c.name: _input_model_once(discrete_metric(name=c.name, allowed_values=list(c.spec.allowed_values))(c.func))
        for c in checks
    }
    runnable = {c.name for c in checks if not c.signature_problems()}

    async def score_all() -> dict[str, dict[str, CheckValue]]:
        values: dict[str, dict[str, CheckValue]] = {}
        for case in cases:
            row: dict[str, CheckValue] = {}
            for check in checks:
                if check.name not in runnable:
                    row[check.name] = CheckValue(None, "the check's signature cannot be filled", unfillable=True)
                    continue
                row[check.name] = await _score(check, metrics[check.name], case)
            values[case.case_id] = row
        return values

    return checks_ran(checks, asyncio.run(score_all()), cases)


def _input_model_once(metric: Any) -> Any:
    """Build the wrapper's input-validation model once instead of on every call.

    ragas 0.4.3 rebuilds a pydantic model from the function's signature inside every `ascore`
    (~0.4 ms, nearly all of a check's time: ~40 s per 100,000 case-checks). The signature never
    changes, so one model validates every call. Without that attribute (another ragas) the wrapper
    is left as it is.
    """
    build = getattr(metric, "_create_pydantic_model", None)
    if callable(build):
        try:
            model = build()
        except Exception:  # ragas then warns and validates nothing: keep its own behaviour
            return metric
        metric._create_pydantic_model = lambda: model
    return metric


async def _score(check: LoadedCheck, metric: Any, case: Case) -> CheckValue:
    kwargs, missing = check.inputs(case)
    if missing is not None:
        return CheckValue(None, f"the case has no `{missing}`", unfillable=True)
    try:
        result = await metric.ascore(**kwargs)
    except (Exception, SystemExit) as exc:  # ragas raises on inputs it rejects; team code may exit
        return CheckValue(None, f"{type(exc).__name__}: {short_error(exc)}")
    return checked(check, getattr(result, "value", None), getattr(result, "reason", None))
