"""The judge: a Ragas DiscreteMetric evaluator behind a small interface.

Nothing in this package imports ragas at module import time: `gate validate`, `gate decide` and
the reports must work without paying ragas' ~2 s import. The ragas-backed implementation lives
in `gate.judge.ragas_judge` and is imported only when a model call is due.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from gate.budget import Budget
from gate.cases import Case
from gate.records import Attempt, CacheState, RecordErrorKind, Status


@dataclass
class Judgment:
    """The outcome of one judgment of one case (one repeat)."""

    status: Status
    label: str | None = None
    reason: str | None = None
    error_kind: RecordErrorKind | None = None
    error_message: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cache: CacheState = "off"
    prompt_sha256: str = ""  # sha256 of the rendered prompt the judge saw
    input_sha256: str = ""  # sha256 of the canonical rendered inputs


class Evaluator(Protocol):
    """Judges one case once. Never raises for provider or parse problems: they are Judgments."""

    ragas_version: str

    async def judge(self, case: Case, repeat_index: int, budget: Budget) -> Judgment: ...

    async def aclose(self) -> None: ...
