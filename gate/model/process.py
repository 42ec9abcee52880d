"""The `gate` process around its command: pydantic's plugin loader and the garbage collector.

Start-up time a user waits for on every `gate validate` (issue 12; bench/scale.py `--only startup`).
Nothing heavy is imported here: `gate.cli` and `gate.action` call this before pydantic loads.
"""

from __future__ import annotations

import gc
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

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
