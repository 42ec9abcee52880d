"""The judge: a Ragas DiscreteMetric evaluator behind a small interface, and what it costs.

What it holds: the evaluator interface and its ragas-backed implementation, the rendering of a
case into the prompt, the reply contract (`outcome`) and record vetting (`vetting`), metering,
budget and cost estimates, the attempt journal, the cache, the deterministic checks' runner.
What it may import: `gate.model`, `gate.validate`, `gate.plan`. The only package that imports ragas.

Nothing in this package imports ragas at module import time: `gate validate`, `gate decide` and
the reports must work without paying ragas' ~2 s import. The ragas-backed implementation lives
in `gate.judge.ragas_judge`, over this module, and imports ragas only when built.

Public API:
- `gate.judge.ragas_judge.make_evaluator(loaded, *, api_key, cache_dir, base_url_env=FROM_ENV,
  timing=None, rng=None, data_dir=None) -> RagasEvaluator` (an `Evaluator`); raises
  `JudgeConfigError` (a UsageError).
- `Evaluator.judge(case, repeat_index, budget) -> Judgment` never raises for provider or parse
  problems; on cancellation it re-raises CancelledError with `partial_judgment(exc)` attached.
- `resolve_base_url`, `ragas_version`, `instructor_version` (package metadata, no import).
- `gate.judge.render.render_case` / `render_fields`: the rendered-input contract (pure).
- `gate.judge.cache.JudgmentCache` / `CacheKeyParts`: the SQLite cache and its key.
- `gate.judge.outcome`: retry kinds, Retry-After, backoff, strict reply reading (pure).
- `gate.judge.metering`: the httpx hooks (budget reservation, usage, per-attempt records).

Accounting rule: an attempt abandoned without a response (timeout, dropped connection,
cancellation) keeps its whole budget reservation as spent, since the provider may have billed it;
its record shows 0 tokens and 0 cost because nothing was reported.
"""

from __future__ import annotations

import enum
import functools
import importlib.metadata
import os
from dataclasses import dataclass, field
from typing import Protocol

from gate.judge.budget import Budget
from gate.model.cases import Case
from gate.model.records import Attempt, CacheState, RecordErrorKind, Status

PROVIDER_DEFAULT_BASE_URL = "https://api.openai.com/v1"


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
    batch_id: str | None = None  # the provider batch that answered it (`gate run --batch`)


class Evaluator(Protocol):
    """Judges one case once. Never raises for provider or parse problems: they are Judgments."""

    ragas_version: str

    async def judge(self, case: Case, repeat_index: int, budget: Budget) -> Judgment: ...

    async def aclose(self) -> None: ...


_PARTIAL_ATTR = "gate_partial_judgment"


def attach_partial_judgment(exc: BaseException, judgment: Judgment) -> None:
    """Attach what a cancelled judgment had done (attempts sent, tokens, cost) to its CancelledError."""
    setattr(exc, _PARTIAL_ATTR, judgment)


def partial_judgment(exc: BaseException) -> Judgment | None:
    """The judgment attached to a CancelledError raised by `Evaluator.judge`, if any.

    Its `error_kind` is "cancelled"; status "skipped" when nothing was sent, else "error", and its
    `attempts` list every request that was sent (abandoned ones included), so they are counted.
    """
    j = getattr(exc, _PARTIAL_ATTR, None)
    return j if isinstance(j, Judgment) else None


@functools.cache  # a run asks often (every evaluator, lineage, calibration); a lookup reads files
def installed_version(dist: str) -> str | None:
    """A distribution's installed version from package metadata (nothing is imported), None if absent."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def ragas_version() -> str:
    """The installed ragas version, read from package metadata (ragas is not imported)."""
    return installed_version("ragas") or "unknown"


def instructor_version() -> str:
    """The installed instructor version, read from package metadata (instructor is not imported)."""
    return installed_version("instructor") or "unknown"


class FromEnv(enum.Enum):
    OPENAI_BASE_URL = "OPENAI_BASE_URL"


FROM_ENV = FromEnv.OPENAI_BASE_URL


def resolve_base_url(policy_base_url: str | None, base_url_env: str | FromEnv | None = FROM_ENV) -> str:
    """Policy `evaluator.base_url`, else OPENAI_BASE_URL (read now unless given), else the provider default."""
    if policy_base_url:
        return policy_base_url
    env = os.environ.get("OPENAI_BASE_URL") if isinstance(base_url_env, FromEnv) else base_url_env
    return env or PROVIDER_DEFAULT_BASE_URL
