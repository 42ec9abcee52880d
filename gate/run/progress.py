"""The one observer of a run's judgments: what a person (or a CI log) sees while the gate judges.

On a terminal: a `rich.progress` bar with what is being judged, done/total, errors, money spent and
reserved (for attempts in flight) against the boundary, and the time left. Anywhere else (a CI log,
a pipe): one plain line every ~10% of the judgments or 15 s, so the Action's log stays quiet.
Judgments reused by `--resume` count as done from the start. What happens before the first
judgment (loading the judge, the controls) is said as it starts, so the screen is never blank.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING

from gate.model.escape import styled
from gate.model.textfit import say
from gate.model.wording import plural

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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.clock = clock
        self.phase_label = "judging"
        self.total = total
        self.currency = currency
        self.boundary = boundary
        self.done = reused
        self.reused = reused
        self.errors = 0
        self.stream = stream
        # A redrawn bar on a terminal; plain lines, as in a log, elsewhere and under NO_COLOR.
        self.tty = stream is not None and styled(stream)
        self.started = clock()
        self.judging_since: float | None = None  # when the first judgment was sent: the ETA's rate starts there
        self.last_plain = 0.0
        self.step = max(10, total // 10)
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        self.last_wait = 0.0

    def spend(self, spent: float, reserved: float = 0.0) -> str:
        # Spent counts unanswered attempts at their reservation (see docs/RUN.md), so it can read higher
        # than the cost result.json reports from provider usage. Reserved is what the attempts in
        # flight hold against the boundary: it falls back as they are answered, spent never does.
        of = f" of {self.boundary:g}" if self.boundary is not None else ""
        return f"{spent:.4f} spent + {reserved:.4f} reserved{of} {self.currency}"

    def eta(self) -> str:
        """Time left at the rate of the judgments completed since judging began (not the first few)."""
        fresh = self.done - self.reused
        left = self.total - self.done
        if left <= 0:
            return "0:00:00"
        if fresh <= 0 or self.judging_since is None:
            return "-:--:--"
        elapsed = self.clock() - self.judging_since
        seconds = round(left * elapsed / fresh)
        return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def line(self, budget_used: float, reserved: float = 0.0, *, eta: bool = True) -> str:
        """The plain progress line; `eta=False` once scheduling stopped (nothing more is sent)."""
        reused = f" ({self.reused} reused)" if self.reused else ""
        return (
            f"gate: {self.done}/{self.total} judgments{reused}, {plural(self.errors, 'error')}, "
            f"{self.spend(budget_used, reserved)}, {self.clock() - self.started:.0f}s"
            + (f", ETA {self.eta()}" if eta else "")
        )

    def status(self, text: str) -> None:
        """On a terminal, say what starts now (before the bar): never a blank screen. A CI log gets
        only the progress lines (its timestamps show the wait)."""
        if self.stream is None or not self.tty:
            return
        if self._bar is not None:
            self._bar.console.print(text)
        else:
            self.stream.write(f"{text}\n")
            self.stream.flush()

    def phase(self, what: str, count: int, detail: str = "") -> None:
        """A phase of judging starts: "judging 8 controls" on a terminal, and `what` labels the bar."""
        self.phase_label = what
        if self.judging_since is None:
            self.judging_since = self.clock()
        if self.stream is None or not self.tty:
            return
        self.status(f"judging {count} {what}{detail}")
        bar, task = self._live()
        bar.update(task, description=what)
        bar.refresh()

    def _live(self) -> tuple[RichProgress, TaskID]:
        if self._bar is None or self._task is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, TextColumn
            from rich.progress import Progress as RichProgress

            console = Console(file=self.stream, highlight=False, markup=False, emoji=False)
            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=10),
                MofNCompleteColumn(),
                TextColumn("{task.fields[errors]}"),
                TextColumn("{task.fields[spend]}"),
                TextColumn("{task.fields[eta]}"),
                console=console,
                auto_refresh=False,  # no thread: it redraws on each judgment, and a fork copies no lock
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._task = self._bar.add_task(
                self.phase_label,
                total=self.total,
                completed=self.done,
                errors=plural(0, "error"),
                spend=self.spend(0.0),
                eta=f"ETA {self.eta()}",
            )
            self._bar.start()
        return self._bar, self._task

    def tick(self, judgment: Judgment, budget_used: float, reserved: float = 0.0) -> None:
        if judgment.status == "skipped":  # never sent (the boundary refused it, or cancelled): unrun, not done
            return
        self.advance(self.done + 1, self.errors + (judgment.status == "error"), budget_used, reserved)

    def advance(self, done: int, errors: int, budget_used: float, reserved: float = 0.0) -> None:
        """Show `done` judgments (reused ones included) and `errors` so far: one judgment at a time
        (`tick`), or in steps (the parent of worker processes, from their shared tally).
        `budget_used` is what is spent, `reserved` what attempts in flight hold."""
        before = self.done
        self.done, self.errors = done, errors
        if self.judging_since is None:
            self.judging_since = self.started
        if self.stream is None or done == before:
            return
        now = self.clock()
        if self.tty:
            bar, task = self._live()
            spend = self.spend(budget_used, reserved)
            bar.update(
                task, completed=self.done, errors=plural(self.errors, "error"), spend=spend, eta=f"ETA {self.eta()}"
            )
            bar.refresh()
        elif (
            done // self.step != before // self.step
            or done == self.total
            or now - self.last_plain >= PLAIN_EVERY_SECONDS
        ):
            self.last_plain = now
            self.stream.write(self.line(budget_used, reserved) + "\n")
            self.stream.flush()

    def never_sent(self, stop_reason: str) -> str:
        """The judgments a stop left unsent, named as result.json counts them: after a decided
        verdict or a failed control they are not needed, otherwise they are unrun."""
        left = self.total - self.done
        if left <= 0:
            return ""
        word = "not needed" if stop_reason in ("verdict_decided", "control_failed", "control_error") else "unrun"
        return f"; {left} of {self.total} judgments {word}"

    def waiting(self, status: str | None) -> None:
        """The pacer's state ("waiting 12 s for the token window"), so a slow run is explained: on a
        terminal beside the bar, elsewhere one line at most every PLAIN_EVERY_SECONDS."""
        if self.stream is None or status is None:
            return
        now = time.monotonic()
        if self.tty:
            bar, task = self._live()
            bar.update(task, spend=status)
            bar.refresh()
        elif now - self.last_wait >= PLAIN_EVERY_SECONDS:
            self.last_wait = now
            self.stream.write(f"gate: {self.done}/{self.total} judgments, {status}\n")
            self.stream.flush()

    def close(
        self, stop_reason: str | None, budget_used: float, reserved: float = 0.0, *, signal_name: str | None = None
    ) -> None:
        if self.stream is None:
            return
        shown = self._bar is not None and self._task is not None
        if self._bar is not None and self._task is not None:
            spend = self.spend(budget_used, reserved)
            eta = "" if stop_reason is not None else f"ETA {self.eta()}"  # after a stop nothing more is sent
            self._bar.update(
                self._task,
                description="judged",
                completed=self.done,
                errors=plural(self.errors, "error"),
                spend=spend,
                eta=eta,
            )
            self._bar.refresh()
            self._bar.stop()
            self._bar = None
        if stop_reason is not None:
            why = stop_reason.replace("_", " ") + (f" ({signal_name})" if signal_name else "")
            # On a terminal the bar above already shows the figures; a log gets them on this line.
            figures = "" if shown else f"{self.line(budget_used, reserved, eta=False)}; "
            say(self.stream, f"{figures}scheduling stopped: {why}{self.never_sent(stop_reason)}")
        self.stream.flush()
