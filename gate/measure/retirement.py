"""What `gate validate --lane` says of the judge model's shutdown, as `gate run` would find it.

It asks the provider (`GET {base_url}/models/{model}`, through the base URL and key the judge uses)
once, weighs the answer against the policy's pin, and says the date in a note; a release lane within
`retirement_blocks_within_days` gets the run's `judge_retiring`, and a model past its date the run's
`judge_retired` (a run would send nothing). Without a key nothing is asked: the pin alone counts.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from gate.decide.retirement import retired_message, retiring_finding, shut_down_detail
from gate.judge import resolve_base_url
from gate.judge.models_endpoint import ask_shutdown_date
from gate.model.cases import Dataset
from gate.model.policy import LoadedPolicy
from gate.model.retirement import NOT_ASKED, in_words, resolve
from gate.model.states import JUDGE_RETIRED, Finding, State
from gate.plan.selection import make_plan


@dataclass(frozen=True)
class RetirementCheck:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def lane_retirement_check(
    loaded: LoadedPolicy, dataset: Dataset, lane: str, env: Mapping[str, str], today: dt.date
) -> RetirementCheck:
    """The judge model's shutdown date for `lane`, from the provider (with the policy's key) or the pin."""
    ev = loaded.policy.evaluator
    key = env.get(ev.api_key_env, "").strip()
    base_url = resolve_base_url(ev.base_url, env.get("OPENAI_BASE_URL"))
    answer = ask_shutdown_date(base_url, key, ev.model) if key else NOT_ASKED
    retirement = resolve(ev.model, answer, ev.shutdown_date)
    said = in_words(retirement, answer, today, ev.retirement_blocks_within_days)
    asked = "" if key else f" (not asked: no key in ${ev.api_key_env})"
    notes = [f"judge model: {said}{asked}", *retirement.notes]
    if retirement.retired(today):
        scheduled = make_plan(loaded, dataset, lane).scheduled
        message = retired_message(ev.model, shut_down_detail(retirement), len(scheduled))
        ids = tuple(c.case_id for c in scheduled)
        return RetirementCheck([Finding(State.EVALUATION_INCOMPLETE, JUDGE_RETIRED, message, ids)], notes)
    found = retiring_finding(retirement, loaded.policy.lanes[lane], ev, today)
    return RetirementCheck([found] if found is not None else [], notes)
