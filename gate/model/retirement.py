"""When the judge's model retires: the shutdown date the provider or the policy gives, and what it means today.

Every calibration, certification and audit correction is tied to one judge model, and providers shut
models down on dates they announce (OpenAI: `shutdown_date` on `GET /v1/models/{model}`, `YYYY-MM-DD`
or null). `gate.judge.models_endpoint` asks the provider once per run; `resolve` weighs its answer
against the policy's pin (`evaluator.shutdown_date`): the provider's date wins, a disagreement is a
note. The result goes into the lineage (`judge_shutdown_date`, `judge_shutdown_source`) and into every
record, so `gate decide`, `gate merge` and the crash path read the same date without asking anyone.

Pure: no I/O, no clock (today is an argument).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal

from gate.model.wording import plural

Source = Literal["provider", "policy"]
AnswerKind = Literal["date", "none", "unknown", "not_found"]
# The lineage's and the records' fields, and what `judge_shutdown_date` says when the provider
# announces no date.
DATE_FIELD = "judge_shutdown_date"
SOURCE_FIELD = "judge_shutdown_source"
NONE_ANNOUNCED = "none"
# The command that moves a judge with evidence, as messages name it.
MIGRATION = "gate calibrate --candidate-model NEW"


@dataclass(frozen=True)
class ProviderAnswer:
    """What the provider's models endpoint said of the judge's model.

    `date`: it announces a shutdown date; `none`: it answers and announces none (`shutdown_date: null`);
    `unknown`: no endpoint, no field, no answer, or not asked (`detail` says which); `not_found`: it
    answers 404 `model_not_found` (retired, misspelt, or not served to this key)."""

    kind: AnswerKind
    date: dt.date | None = None
    detail: str = ""


NOT_ASKED = ProviderAnswer("unknown", detail="not asked")


@dataclass(frozen=True)
class Retirement:
    """The judge model's shutdown date as the gate uses it, and where it comes from.

    `date` None with `source` "provider": the provider announces none; `source` None: nobody says."""

    model: str
    date: dt.date | None = None
    source: Source | None = None
    notes: tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        """Someone said something: a date, or the provider's "none announced"."""
        return self.source is not None

    def days_left(self, today: dt.date) -> int | None:
        """Days from `today` to the shutdown date (0 on the day, negative after); None without a date."""
        return None if self.date is None else (self.date - today).days

    def retired(self, today: dt.date) -> bool:
        """On or after the shutdown date: the provider no longer serves the model."""
        left = self.days_left(today)
        return left is not None and left <= 0

    def lineage(self) -> dict[str, str]:
        """The lineage's fields (also each record's): nothing when nobody says."""
        if self.source is None:
            return {}
        return {DATE_FIELD: self.date.isoformat() if self.date else NONE_ANNOUNCED, SOURCE_FIELD: self.source}

    def said(self) -> str:
        """`the provider's date` / `the policy's evaluator.shutdown_date`: where the date comes from, in words."""
        return "the provider's date" if self.source == "provider" else "the policy's evaluator.shutdown_date"


def resolve(model: str, answer: ProviderAnswer, pinned: dt.date | None) -> Retirement:
    """The date the gate uses: the provider's when it gives one, else the policy's pin; a
    disagreement, and a provider that does not know the model, are notes."""
    if answer.kind == "date" and answer.date is not None:
        notes: tuple[str, ...] = ()
        if pinned is not None and pinned != answer.date:
            notes = (
                f"the provider shuts {model} down on {answer.date.isoformat()}, the policy pins "
                f"evaluator.shutdown_date {pinned.isoformat()}: the provider's date counts; fix: correct or remove "
                "the pin",
            )
        return Retirement(model, answer.date, "provider", notes)
    notes = ()
    if answer.kind == "not_found":
        notes = (
            f"the provider's models endpoint does not know {model} (404 model_not_found): it may have retired it, "
            "the name may be wrong, or the key may have no access to it",
        )
    if pinned is not None:
        if answer.kind == "none":
            notes = (*notes, f"the provider announces no shutdown date for {model}; the policy's pin counts")
        return Retirement(model, pinned, "policy", notes)
    if answer.kind == "none":
        return Retirement(model, None, "provider", notes)
    return Retirement(model, None, None, notes)


def source_of(text: str | None) -> Source | None:
    """A recorded source, read back (None: none, or not one the gate writes)."""
    return "provider" if text == "provider" else "policy" if text == "policy" else None


def recorded(model: str, date: str | None, source: str | None) -> Retirement | None:
    """The retirement a lineage or a record wrote (`lineage()`), None when it wrote none or cannot be read."""
    said = source_of(source)
    if said is None or not date:
        return None
    if date == NONE_ANNOUNCED:
        return Retirement(model, None, said) if said == "provider" else None
    try:
        day = dt.date.fromisoformat(date)
    except ValueError:
        return None
    return Retirement(model, day, said)


def days_text(days: int) -> str:
    """`38 days left`, `the last day`, `2 days ago`."""
    if days > 0:
        return f"{plural(days, 'day')} left"
    if days == 0:
        return "today"
    return f"{plural(-days, 'day')} ago"


def in_words(retirement: Retirement, answer: ProviderAnswer, today: dt.date, blocks_within_days: int) -> str:
    """What `gate validate --lane` and `gate init` say of the judge model's shutdown, one sentence."""
    model = retirement.model
    if retirement.date is not None:
        left = retirement.days_left(today)
        assert left is not None
        verb = "shuts" if left > 0 else "shut"
        blocks = (
            f"; a release lane blocks from {plural(blocks_within_days, 'day')} before"
            if left > 0 and blocks_within_days
            else ""
        )
        return (
            f"{model} {verb} down on {retirement.date.isoformat()} ({retirement.said()}, {days_text(left)}){blocks}; "
            "dates change: the provider's deprecations page has the current ones"
        )
    if answer.kind == "none":
        return f"the provider announces no shutdown date for {model} (yet); each run asks again"
    if answer.kind == "not_found":
        return (
            f"the provider's models endpoint does not know {model} (404 model_not_found): it may have retired it, the "
            "name may be wrong, or the key may have no access to it"
        )
    return (
        f"nobody says when {model} shuts down (the provider: {answer.detail or 'unknown'}); where the provider "
        "announces dates elsewhere, pin the day in evaluator.shutdown_date"
    )
