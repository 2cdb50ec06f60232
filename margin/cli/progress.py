"""A run's progress on stderr: on a terminal a live bar with the time left (rich); otherwise
(a log file, a CI job) a plain line each time another tenth of the prompts is done and at
least every `every_s` seconds, so a slow start (Ray, a model loading) is never silent for long."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: Seconds between plain lines at most, and the share of prompts between two of them.
EVERY_S = 10.0
STEP = 0.1


def clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class RunProgress:
    """`update(done=..., info=...)` as the run goes; a bar or plain lines, as stderr allows."""

    def __init__(self, total: int, console: Console, *, every_s: float = EVERY_S, step: float = STEP) -> None:
        self.total = total
        self.console = console
        self.every_s = every_s
        self.step = step
        self.done = 0
        self.info = "starting the guard"
        self.started = time.monotonic()
        self._bar: Progress | None = None
        self._task: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._last_step = 0
        self._last_line = self.started

    def __enter__(self) -> RunProgress:
        if self.console.is_interactive:  # a terminal that redraws (not TERM=dumb)
            self._bar = Progress(TextColumn("[bold]prompts"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[info]}"), TimeElapsedColumn(), TextColumn("eta"),
                                 TimeRemainingColumn(), console=self.console, transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task("prompts", total=self.total, info=self.info)
        else:
            self._ticker = threading.Thread(target=self._tick, name="margin-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self._bar is not None:
            self._bar.__exit__(kind, error, trace)

    def update(self, *, done: int | None = None, info: str | None = None) -> None:
        """`done`: prompts finished so far (never goes back)."""
        with self._lock:
            advance = max(0, (done or 0) - self.done)
            self.done += advance
            self.info = info if info is not None else self.info
            if self._bar is not None:
                self._bar.update(self._task, completed=self.done, info=self.info)
                return
            reached = int(self.done / self.total / self.step) if self.total else 0
            if advance and reached > self._last_step:
                self._last_step = reached
                self._line()

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        share = self.done / self.total if self.total else 1.0
        eta = f"  eta {clock(elapsed / self.done * (self.total - self.done))}" if 0 < self.done < self.total else ""
        return (f"prompts {self.done:,}/{self.total:,} ({100 * share:.0f}%)  {self.info}  "
                f"elapsed {clock(elapsed)}{eta}")

    def _line(self) -> None:
        self._last_line = time.monotonic()
        self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)

    def _tick(self) -> None:
        while not self._stop.wait(max(0.0, self._last_line + self.every_s - time.monotonic())):
            with self._lock:
                if time.monotonic() - self._last_line >= self.every_s:
                    self._line()
