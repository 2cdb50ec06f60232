"""A walk of one CLI command: the calls that climb back up the layers while it runs.

`tests/test_layers.py` reads imports, so it cannot see a function handed down and called from
below (a callback, a generator consumed by a lower module). This profiles the command in this
process and lists each call whose callee sits in a higher layer (or a later phase of
`margin/runs/`) than the margin function that called it, library frames in between skipped.
Imports (`<module>` frames) and the package root, which re-exports the API, are left out."""

from __future__ import annotations

import gc
import sys
import threading
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

from margin.cli import main
from tests.support.paths import REPO
from tests.test_layers import RUN_PHASES, level, unit

ROOT = str(REPO / "margin")


def module_of(filename: str) -> str | None:
    if not filename.startswith(ROOT):
        return None
    parts = filename[len(str(REPO)) + 1:].removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def rank(module: str) -> tuple[int, int]:
    """The layer, then (inside `margin/runs/`) the phase: a higher rank may import a lower one."""
    phase = ".".join(module.split(".")[:3])
    inside = RUN_PHASES.index(phase) if phase in RUN_PHASES else len(RUN_PHASES)
    return level(module), inside if unit(module) == "margin.runs" else 0


def climbs(argv: list[str]) -> Counter[tuple[str, str]]:
    """`margin ARGV` run here; each upward call edge ("module.function" caller and callee) counted."""
    return climbs_in(lambda: main(argv))


def climbs_in(run: Callable[[], object]) -> Counter[tuple[str, str]]:
    modules: dict[str, str | None] = {}
    found: Counter[tuple[str, str]] = Counter()

    def module(frame: FrameType) -> str | None:
        name = frame.f_code.co_filename
        if name not in modules:
            modules[name] = module_of(name)
        return modules[name]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name == "<module>" or (callee := module(frame)) in (None, "margin"):
            return
        back = frame.f_back
        while back is not None and module(back) is None:  # through library frames to margin's caller
            back = back.f_back
        caller = None if back is None else module(back)
        if back is not None and caller not in (None, "margin", "margin.__main__") and rank(callee) > rank(caller):
            found[f"{caller}.{back.f_code.co_name}", f"{callee}.{frame.f_code.co_name}"] += 1

    gc.collect()  # a generator left by earlier code, closed by a collection mid-walk, is not a call
    gc.disable()
    threading.setprofile(profile)
    sys.setprofile(profile)
    try:
        run()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        gc.enable()
    return found
