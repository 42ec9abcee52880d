"""One judgment per case, at most `concurrency` in flight, stopping at the cost boundary.

For the judgments beside the gate's verdicts (the rubric trend, the drift lane): no repeats, no
controls, no pairs; the evaluator still does the retries, metering and budget reservations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from gate.judge import Evaluator, Judgment
from gate.judge.budget import Budget
from gate.judge.journal import CURRENT as JOURNAL_CONTEXT
from gate.judge.journal import AttemptJournal, JournalContext
from gate.model.cases import Case


async def judge_each(
    evaluator: Evaluator,
    cases: Sequence[Case],
    budget: Budget,
    concurrency: int,
    emit: Callable[[Case, Judgment], None],
    journal: tuple[AttemptJournal, str] | None = None,
) -> None:
    """Judge each case once in order; after a budget refusal nothing new is scheduled.

    With `journal` (the attempt journal and this sweep's stream), each attempt is written ahead
    before it is sent, as the verdicts' are: a killed run's bill still names it."""
    queue = list(reversed(cases))
    stopped = False

    async def worker() -> None:
        nonlocal stopped
        while queue and not stopped:
            case = queue.pop()
            token = None
            if journal is not None:
                token = JOURNAL_CONTEXT.set(JournalContext(journal[0], case.case_id, 0, journal[1]))
            try:
                judgment = await evaluator.judge(case, 0, budget)
            finally:
                if token is not None:
                    JOURNAL_CONTEXT.reset(token)
            emit(case, judgment)
            if judgment.error_kind == "budget":
                stopped = True

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, min(concurrency, len(cases))))))
    finally:
        await evaluator.aclose()
