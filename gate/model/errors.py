"""Errors a user can act on. Each carries a one-paragraph message naming file, field and fix."""

from __future__ import annotations

from gate.model.wording import plural


class GateError(Exception):
    """Base for errors shown to the user as a message, never as a traceback."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(GateError):
    """Bad flags or an unreadable/invalid policy file: exit code 2."""


class PolicyError(UsageError):
    """The policy file (or a file it owns, like the prompt) is invalid.

    Holds every problem found, not only the first, so one edit fixes them all.
    """

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        shown = problems[:MAX_PROBLEMS_SHOWN]
        more = len(problems) - len(shown)
        from gate.model.paths import shown_path

        lines = [f"{shown_path(path)}: the policy file is invalid ({plural(len(problems), 'problem')}):"]
        lines += [f"  - {p}" for p in shown]
        if more:
            lines.append(f"  ... and {more} more")
        super().__init__("\n".join(lines))


MAX_PROBLEMS_SHOWN = 50
