"""Executing a prepared run: claim (or resume) the run folder, start the guard, search every
prompt with the driver as the only writer, then write the outputs."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from margin.engine.pool import Pool
from margin.errors import InputError
from margin.runfolder import (
    ReceiptWriter,
    atomic_write_text,
    dumps,
    read_jsonl,
)
from margin.runs.driver import Replay
from margin.runs.outputs import RunOutcome, finish
from margin.runs.prepare import PreparedRun
from margin.runs.resume import check_manifest, cut_torn_tail, load_replay
from margin.runs.session import EngineFigures, GuardSession
from margin.runs.verdict_cache import VerdictCache, default_cache_path
from margin.types import GuardCall, SearchResult


def default_out_dir(guard_id: str) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in guard_id)
    return Path("runs") / f"{safe}-{stamp}"


def check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InputError("output folder exists and is not empty; choose another --out (or --resume it)",
                         path=out_dir)


def claim_out_dir(out_dir: Path) -> None:
    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def check_run_dir(prepared: PreparedRun, out_dir: Path, resume: bool) -> None:
    """Refuse a used --out, or a --resume folder of another run, before anything starts."""
    if not resume:
        check_out_dir(out_dir)
        return
    saved_path = out_dir / "run.json"
    if not saved_path.is_file():
        raise InputError("not a run folder (no run.json)", path=out_dir, field="--resume")
    saved = next(iter(read_jsonl(saved_path)), None) if saved_path.stat().st_size else None
    if not isinstance(saved, dict):
        raise InputError("run.json is empty or not a JSON object", path=saved_path)
    check_manifest(out_dir, saved, prepared.manifest())


def open_run_dir(prepared: PreparedRun, out_dir: Path, resume: bool) -> Replay:
    """Claim a new run folder (writing run.json), or load what a killed run recorded."""
    check_run_dir(prepared, out_dir, resume)
    if not resume:
        claim_out_dir(out_dir)
        atomic_write_text(out_dir / "run.json", dumps(prepared.manifest()) + "\n")
        return Replay()
    receipts = out_dir / "receipts.jsonl"
    cut_torn_tail(receipts)
    return load_replay(receipts)


def execute(
    prepared: PreparedRun,
    out_dir: Path,
    *,
    resume: bool = False,
    on_call: Callable[[GuardCall], None] = lambda _: None,
    on_result: Callable[[SearchResult], None] = lambda _: None,
    on_batch: Callable[[int, int, float], None] = lambda *_: None,
) -> RunOutcome:
    if prepared.config.drivers > 1:
        from margin.runs.drivers import execute_drivers

        return execute_drivers(prepared, out_dir, resume=resume, on_result=on_result, on_batch=on_batch)
    searched = search(prepared, out_dir, resume=resume, on_call=on_call, on_result=on_result, on_batch=on_batch)
    outcome = finish(prepared, out_dir, searched.results, guard_calls=searched.guard_calls,
                     cache_hits=searched.cache_hits)
    outcome.figures = searched.figures
    return outcome


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
    elsewhere (`margin.runs.drivers`); `run_id`: the receipts' (default: a new one, or the
    killed run's)."""
    config = prepared.config
    assert prepared.spec is not None and prepared.info is not None, "execute() needs prepare()"
    info = prepared.info
    check_run_dir(prepared, out_dir, resume)  # before anything starts: a wrong folder fails fast
    receipts: ReceiptWriter | None = None
    cache: VerdictCache | None = None
    session = GuardSession(prepared.spec, info, config.call_settings(), guard=prepared.guard, pool=pool,
                           on_batch=on_batch)
    try:
        with session:
            # Only now, with the guard running, is anything written.
            replay = open_run_dir(prepared, out_dir, resume)
            receipts = ReceiptWriter(out_dir / "receipts.jsonl", replay.run_id or run_id or secrets.token_hex(8),
                                     info.id)
            writer = receipts
            if config.cache:
                cache = VerdictCache(config.cache_path or default_cache_path(), info)

            def record_call(call: GuardCall) -> None:
                writer.call(call)
                on_call(call)

            def record_result(result: SearchResult) -> None:
                if result.prompt_id not in replay.results:  # a killed run may have written it
                    writer.result(result)
                on_result(result)

            driver = session.search(prepared.searches(), total=len(prepared.prompts), cache=cache, replay=replay,
                                    on_call=record_call, on_result=record_result, on_flush=writer.flush)
    finally:
        if receipts is not None:
            receipts.close()
        if cache is not None:
            cache.close()
    return Searched(driver.ordered_results(), driver.sent, driver.stats.cache_hits, session.figures)
