"""A run's search on one driver: the run folder claimed (or resumed), the guard started,
receipts written, every prompt searched. `margin.runs.executing.drivers` runs several of these."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from margin.engine.pool import Pool
from margin.runs.executing.resume import check_run_dir, open_run_dir
from margin.runs.preparing.prepare import PreparedRun
from margin.runs.recording.folder import remove_unstarted
from margin.serving.calls import EngineFigures
from margin.serving.session import GuardSession
from margin.serving.verdict_cache import default_cache_path
from margin.types import GuardCall, SearchResult
from margin.util.folderlock import hold


@dataclass
class Searched:
    """A run's search, done: its results, in prompt order, and how its calls went."""

    results: list[SearchResult]
    guard_calls: int
    cache_hits: int
    figures: EngineFigures


def search(
    prepared: PreparedRun,
    out_dir: Path,
    *,
    resume: bool = False,
    run_id: str | None = None,
    pool: Pool | None = None,
    on_call: Callable[[GuardCall], None] = lambda _: None,
    on_result: Callable[[SearchResult], None] = lambda _: None,
    on_batch: Callable[[int, int, float], None] = lambda *_: None,
) -> Searched:
    """The search part of a run: the run folder claimed (or resumed), receipts written, every
    prompt searched; results, snapshot and curves not yet written. `pool`: guard actors made
    elsewhere (`margin.runs.executing.drivers`); `run_id`: the receipts' (default: a new one, or the
    killed run's). The folder's lock is held throughout (`margin.util.folderlock`)."""
    config = prepared.config
    assert prepared.spec is not None and prepared.info is not None, "execute() needs prepare()"
    info = prepared.info
    if not out_dir.is_dir():  # a --resume of no folder fails here, and no folder is made for it
        check_run_dir(prepared, out_dir, resume)
    with hold(out_dir, what="run folder") as held:
        try:
            resuming = check_run_dir(prepared, out_dir, resume)  # again, now that no one else writes it
            session = GuardSession(prepared.spec, info, config.calls, guard=prepared.guard, pool=pool,
                                   on_batch=on_batch)
            with session:
                # Only now, with the guard running, is anything written.
                replay = open_run_dir(prepared, out_dir, resuming)
                driver = session.search_recorded(
                    prepared.searches(), out_dir / "receipts.jsonl", replay.run_id or run_id or secrets.token_hex(8),
                    cache_path=(config.cache_path or default_cache_path()) if config.cache else None, replay=replay,
                    total=len(prepared.prompts), on_call=on_call, on_result=on_result,
                    whole_cases=prepared.shapes.whole_cases, target=prepared.record.target)
        except BaseException:
            if held.made:  # failed (or interrupted) before recording anything: no folder left behind
                remove_unstarted(out_dir)
            raise
    return Searched(driver.ordered_results(), driver.sent, driver.stats.cache_hits, session.figures)
