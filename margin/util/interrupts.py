"""Ctrl-C for a command line program: the first SIGINT raises KeyboardInterrupt, except inside
a `deferred()` block, which it waits for; every later one is ignored, so the clean-up the first
one starts is never itself interrupted (a second Ctrl-C inside a library's shutdown can leave
a traceback or crash the process).

Nothing here runs unless `install()` is called: importing this module changes nothing, and a
process that never called it (a test runner, a notebook) keeps its own SIGINT handling."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_state = {"depth": 0, "pending": False, "seen": False}


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _state["seen"]:
        return  # Ctrl-C again, while the first one's clean-up runs
    _state["seen"] = True
    if _state["depth"]:
        _state["pending"] = True  # raised when the deferred block ends
        return
    raise KeyboardInterrupt


def install() -> None:
    """From now on, in this process, Ctrl-C as this module says (main thread only)."""
    _state.update(depth=0, pending=False, seen=False)
    signal.signal(signal.SIGINT, _on_sigint)


def installed() -> bool:
    return signal.getsignal(signal.SIGINT) is _on_sigint


@contextmanager
def deferred() -> Iterator[None]:
    """A Ctrl-C that arrives inside the block is raised when the block ends: for what an
    interruption half way through breaks (importing a package leaves it half-imported in
    `sys.modules`; starting or stopping Ray leaves its processes half started or stopped).
    Without `install()`, or off the main thread, the block runs as it is."""
    if not installed() or threading.current_thread() is not threading.main_thread():
        yield
        return
    _state["depth"] += 1
    try:
        yield
    finally:
        _state["depth"] -= 1
        if not _state["depth"] and _state["pending"]:
            _state["pending"] = False
            raise KeyboardInterrupt
