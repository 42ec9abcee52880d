"""The `gate` process around its command: pydantic's plugin loader and the garbage collector.

Start-up time a user waits for on every `gate validate` (issue 12; bench/scale.py `--only startup`).
Nothing heavy is imported here: `gate.cli` and `gate.action` call this before pydantic loads.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import re
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TextIO

# pydantic's own spellings of "no plugin at all" (pydantic/plugin/_loader.py).
_ALL_PLUGINS_OFF = ("__all__", "1", "true")
_PLUGIN_LOADER = "pydantic.plugin._loader"


def _no_plugins() -> tuple[()]:
    return ()


def without_pydantic_plugins() -> None:
    """No pydantic plugin, and no import of `importlib.metadata` only to find none.

    Before building its first model pydantic scans every installed distribution for plugins; the
    gate's models want none, so they are disabled unless the user set PYDANTIC_DISABLE_PLUGINS.
    Even disabled, pydantic's loader imports `importlib.metadata` (~10-15 ms of every start) and
    then answers "no plugins": with every plugin off, that answer is given here instead.
    """
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] not in _ALL_PLUGINS_OFF or _PLUGIN_LOADER in sys.modules:
        return  # some plugins wanted, or the real loader is already there: pydantic decides
    loader = types.ModuleType(_PLUGIN_LOADER, "Every pydantic plugin is disabled (see gate/model/process.py).")
    loader.__dict__["get_plugins"] = _no_plugins
    sys.modules[_PLUGIN_LOADER] = loader


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many long-lived objects."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def exit_process(code: int) -> NoReturn:
    """End the process with `code`, without the interpreter's last full collections.

    Everything still alive lives until exit; those collections would only rescan it (every pydantic
    validator included: ~20 ms of `gate validate`). Python does not promise to finalize objects
    alive at exit anyway; outputs are written and closed before a command returns.
    """
    gc.freeze()
    sys.exit(code)


# ---- the log is not a command channel -------------------------------------------------
_LINE_END = re.compile(r"(\r\n|\r|\n)")


class GuardedOutput:
    """A text stream that passes on whole lines, each through `gate.model.escape.neutral_line`.

    Installed over stdout and stderr by `guarded_output` for the whole command, so no path (a
    report, a progress line, an error, a library's warning carrying a judge reply) can print a
    line the Actions runner reads as a workflow command; the gate's own commands go through
    `command_line`. A reader that went away (`gate decide | head -1`) is not an error: the rest of
    the output is dropped and the command's exit code stands.
    """

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw
        self._partial = ""  # the current line's text so far: held until its end is known
        self.reader_gone = False

    def write(self, text: str) -> int:
        from gate.model.escape import neutral_line

        parts = _LINE_END.split(self._partial + text)
        self._partial = parts.pop()
        if parts:
            whole = "".join(neutral_line(p) if i % 2 == 0 else p for i, p in enumerate(parts))
            self._send(whole)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def command_line(self, line: str) -> None:
        """One workflow command of the gate's own, as written (the caller escapes its data)."""
        self._send(line + "\n")
        self.flush()

    def flush(self) -> None:
        if not self.reader_gone:
            self._quietly(self.raw.flush)

    def finish(self) -> None:
        """Pass on a last line that never got its newline, and flush."""
        from gate.model.escape import neutral_line

        if self._partial:
            self._send(neutral_line(self._partial))
            self._partial = ""
        self.flush()

    def _send(self, text: str) -> None:
        if not self.reader_gone:
            self._quietly(lambda: self.raw.write(text))

    def _quietly(self, action: Callable[[], object]) -> None:
        try:
            action()
        except BrokenPipeError:
            self.reader_gone = True
            # The interpreter flushes the real stream once more at exit: let that land nowhere.
            with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.raw.fileno())
                os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)  # isatty, fileno, encoding ... as the real stream's


def command_line(line: str, stream: TextIO | None = None) -> None:
    """Print one of the gate's own workflow commands on `stream` (stdout), past the guard."""
    target = stream or sys.stdout
    if isinstance(target, GuardedOutput):
        target.command_line(line)
    else:
        print(line, file=target, flush=True)


@contextmanager
def guarded_output() -> Iterator[None]:
    """stdout and stderr through `GuardedOutput` while the command runs (a terminal is not a log)."""
    saved = sys.stdout, sys.stderr
    guards: list[GuardedOutput] = []
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, GuardedOutput) and not _is_terminal(stream):
            guard = GuardedOutput(stream)
            guards.append(guard)
            setattr(sys, name, guard)
    try:
        yield
    finally:
        for guard in guards:
            guard.finish()
        sys.stdout, sys.stderr = saved


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False
