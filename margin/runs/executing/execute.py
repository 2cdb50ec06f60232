"""Executing a prepared run: search every prompt (on one driver, or split over several), then
write the outputs (results, snapshot, curves)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from margin.runs.executing.resume import check_run_dir
from margin.runs.executing.single import search
from margin.runs.preparing.prepare import PreparedRun
from margin.runs.recording.outputs import RunOutcome, finish
from margin.types import GuardCall, SearchResult
from margin.util.folderlock import hold


def execute(
    prepared: PreparedRun,
    out_dir: Path,
    *,
    resume: bool = False,
    on_call: Callable[[GuardCall], None] = lambda _: None,
    on_result: Callable[[SearchResult], None] = lambda _: None,
    on_batch: Callable[[int, int, float], None] = lambda *_: None,
    on_progress: Callable[[int, int], None] = lambda *_: None,
) -> RunOutcome:
    """`on_progress(prompts done, guard calls)`: with several drivers, as they go (their
    results reach `on_result` only once all are joined). The run folder is locked from its
    check to its last output: a second writer is refused (`margin.util.folderlock`)."""
    if not out_dir.is_dir():  # a --resume of no folder fails here, and no folder is made for it
        check_run_dir(prepared, out_dir, resume)
    with hold(out_dir, what="run folder"):
        if prepared.config.drivers > 1:
            from margin.runs.executing.drivers import execute_drivers

            return execute_drivers(prepared, out_dir, resume=resume, on_result=on_result, on_batch=on_batch,
                                   on_progress=on_progress)
        searched = search(prepared, out_dir, resume=resume, on_call=on_call, on_result=on_result, on_batch=on_batch)
        outcome = finish(prepared, out_dir, searched.results, guard_calls=searched.guard_calls,
                         cache_hits=searched.cache_hits)
        outcome.figures = searched.figures
        return outcome
