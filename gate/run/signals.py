"""The stop signals a command received, kept where a dropped exception cannot lose them.

Outside the judging loop a stop signal (Ctrl-C's SIGINT, a cancelled job's SIGTERM, the SIGHUP the
docker CLI forwards) interrupts by raising from its handler. Python runs a handler between any two
bytecodes, also inside code whose exceptions it prints and drops: a weakref callback, a `__del__`, a
garbage-collector callback (an import runs them, a team's check file can hold one). So the handler
writes the signal down here first; the runner reads it before it judges and the command when it
ends, and each stops as the signal asked.
"""

from __future__ import annotations

import signal

# The signals that stop a run and still write its result.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_received: list[str] = []


def forget() -> None:
    """A new command starts: no signal received yet (tests run many commands in one process)."""
    _received.clear()


def note(signal_name: str) -> None:
    _received.append(signal_name)


def take() -> str | None:
    """The first stop signal received and not yet acted on, if any; it is acted on now."""
    first = _received[0] if _received else None
    _received.clear()
    return first


def pending() -> bool:
    return bool(_received)
