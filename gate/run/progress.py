"""The one observer of a run's judgments: what a person (or a CI log) sees while the gate judges.

On a terminal: a `rich.progress` bar with done/total, errors, budget used against the boundary and
the time left. Anywhere else (a CI log, a pipe): one plain line every ~10% of the judgments or 15 s,
so the Action's log stays quiet. Judgments reused by `--resume` count as done from the start.
"""

from __future__ import annotations

import time
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

    from gate.judge import Judgment

PLAIN_EVERY_SECONDS = 15


class Progress:
    def __init__(
        self,
        total: int,
        stream: IO[str] | None,
        currency: str = "USD",
        *,
        boundary: float | None = None,
        reused: int = 0,
    ) -> None:
        self.total = total
        self.currency = currency
        self.boundary = boundary
        self.done = reused
        self.reused = reused
        self.errors = 0
        self.stream = stream
        self.tty = bool(stream is not None and stream.isatty())
        self.started = time.monotonic()
        self.last_plain = 0.0
        self.step = max(10, total // 10)
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None

    def spend(self, budget_used: float) -> str:
        # "budget used" counts unanswered attempts at their reservation (see README), so it can
        # read higher than the cost result.json reports from provider usage.
        of = f" of {self.boundary:g}" if self.boundary is not None else ""
        return f"{budget_used:.4f}{of} {self.currency} budget used"

    def line(self, budget_used: float) -> str:
        reused = f" ({self.reused} reused)" if self.reused else ""
        return (
            f"gate: {self.done}/{self.total} judgments{reused}, {self.errors} errors, "
            f"{self.spend(budget_used)}, {time.monotonic() - self.started:.0f}s"
        )

    def _live(self) -> tuple[RichProgress, TaskID]:
        if self._bar is None or self._task is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            console = Console(file=self.stream, highlight=False, markup=True, emoji=False)
            self._bar = RichProgress(
                TextColumn("judging"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[errors]} errors"),
                TextColumn("{task.fields[spend]}"),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=console,
                auto_refresh=False,  # no thread: it redraws on each judgment, and a fork copies no lock
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = self._bar.add_task("judging", total=self.total, completed=self.done, errors=0, spend="")
            self._bar.start()
        return self._bar, self._task

    def tick(self, judgment: Judgment, budget_used: float) -> None:
        self.advance(self.done + 1, self.errors + (judgment.status == "error"), budget_used)

    def advance(self, done: int, errors: int, budget_used: float) -> None:
        """Show `done` judgments (reused ones included) and `errors` so far: one judgment at a time
        (`tick`), or in steps (the parent of worker processes, from their shared tally)."""
        before = self.done
        self.done, self.errors = done, errors
        if self.stream is None or done == before:
            return
        now = time.monotonic()
        if self.tty:
            bar, task = self._live()
            bar.update(task, completed=self.done, errors=self.errors, spend=self.spend(budget_used))
            bar.refresh()
        elif (
            done // self.step != before // self.step
            or done == self.total
            or now - self.last_plain >= PLAIN_EVERY_SECONDS
        ):
            self.last_plain = now
            self.stream.write(self.line(budget_used) + "\n")
            self.stream.flush()

    def close(self, stop_reason: str | None, budget_used: float) -> None:
        if self.stream is None:
            return
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done, errors=self.errors, spend=self.spend(budget_used))
            self._bar.refresh()
            self._bar.stop()
            self._bar = None
        if stop_reason is not None:
            why = stop_reason.replace("_", " ")
            self.stream.write(f"{self.line(budget_used)}; scheduling stopped: {why}\n")
        self.stream.flush()
