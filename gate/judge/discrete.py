"""ragas' `@discrete_metric` decorator for the code that wraps plain functions as metrics.

The deterministic checks (gate/validate/case_checks.py) and calibration's human-vs-judge comparison
(gate/measure/calibrate/alignment.py) wrap our own functions with ragas so they score like the judge.
This is the one place outside the evaluator that imports ragas, and only when it is called:
`gate validate` loads both callers and must never pay for ragas.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# discrete_metric(name=..., allowed_values=...) returns a decorator from a function to a metric.
DecoratorFactory = Callable[..., Callable[[Callable[..., Any]], Any]]


def discrete_metric_decorator() -> DecoratorFactory:
    """`ragas.metrics.discrete_metric`, with telemetry off and a private data dir set first."""
    from gate.judge.ragas_judge import prepare_ragas_environment

    prepare_ragas_environment(None)
    from ragas.metrics import discrete_metric

    factory: DecoratorFactory = discrete_metric
    return factory
