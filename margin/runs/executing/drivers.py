"""`margin run --drivers N`: the prompts split over N drivers, Ray actors that share one guard.

One driver (one Python process) feeds a guard at some tens of thousands of candidates a
second; a guard on several GPUs can take more. Then the prompts are split round-robin, as
`--shard j/N` splits them, over N driver actors. The guard's actors are started once, here,
and every driver sends its calls to those same actors through a pool of its own (an
endpoint's drivers each keep 1/N of its `max_concurrency` in flight). Each driver makes its
own candidates, book and receipts in DIR/drivers/J-of-N/; when all are done their results
and receipts are joined as `margin merge` joins shards, so `results.jsonl` and the snapshot
are the one driver's, byte for byte (a prompt's result never depends on who searched it).

`--resume DIR` resumes every driver's folder (with the same N) and joins them again.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from margin.engine.actors import ActorPool
from margin.engine.cluster import connect, disconnect, import_ray
from margin.errors import EndpointDown, InputError
from margin.runfolder import write_run_record
from margin.runs.executing.resume import check_run_dir
from margin.runs.executing.single import search
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import PreparedRun
from margin.runs.preparing.shards import select_shard
from margin.runs.recording.folder import claim_out_dir, remove_unstarted
from margin.runs.recording.merge import join_receipts, join_results
from margin.runs.recording.outputs import RunOutcome, finish
from margin.serving.calls import EngineFigures
from margin.serving.session import GuardSession
from margin.types import SearchResult
from margin.util.folderlock import hold

#: How often the driver's progress is asked for, seconds.
POLL_S = 0.5


def driver_dirs(out_dir: Path, drivers: int) -> list[Path]:
    return [out_dir / "drivers" / f"{j}-of-{drivers}" for j in range(1, drivers + 1)]


def shard_run(prepared: PreparedRun, j: int, drivers: int) -> PreparedRun:
    """Driver j's part of the run: every `drivers`-th prompt from the j-th, its own run
    (a shard of the whole, one driver, an endpoint's share of the concurrency)."""
    c = prepared.config
    calls = c.calls
    if calls.max_concurrency is not None:
        calls = dataclasses.replace(calls, max_concurrency=max(1, calls.max_concurrency // drivers))
    if calls.requests_per_second is not None:
        calls = dataclasses.replace(calls, requests_per_second=calls.requests_per_second / drivers)
    config = dataclasses.replace(c, shard=(j, drivers), drivers=1, calls=calls)
    return dataclasses.replace(prepared, config=config, prompts=select_shard(prepared.prompts, (j, drivers)))


def shared_guard_pool(config: RunConfig, actors: list[Any], capacity: int) -> ActorPool:
    """A driver's pool over the guard's actors: it restarts one whose batch runs past
    `--call-timeout`, as a one-driver run's pool does."""
    settings = config.calls
    return ActorPool.attach("guard", actors, capacity=capacity, call_timeout_s=settings.batch_timeout_s,
                            max_wait_s=settings.max_wait_s)


class DriverActor:
    """One of the N driver actors: a Ray actor (threaded, so progress can be asked while it
    searches) that runs one shard of the run to its results (`margin.serving.driver.Driver` is
    the search loop inside it)."""

    def __init__(self) -> None:
        self.done = 0
        self.calls = 0

    def run(self, prepared: PreparedRun, folder: Path, resume: bool, run_id: str,
            actors: list[Any] | None, capacity: int) -> dict[str, Any]:
        from margin.runfolder import write_results

        # The guard's actors, started and checked by the main process (None: an endpoint).
        pool = shared_guard_pool(prepared.config, actors, capacity) if actors is not None else None

        def on_result(_: SearchResult) -> None:
            self.done += 1

        def on_batch(texts: int, *_: Any) -> None:
            self.calls += texts

        searched = search(prepared, folder, resume=resume, run_id=run_id, pool=pool, on_result=on_result,
                          on_batch=on_batch)
        write_results(folder / "results.jsonl", searched.results)
        return {"guard_calls": searched.guard_calls, "cache_hits": searched.cache_hits,
                "figures": dataclasses.asdict(searched.figures)}

    def progress(self) -> tuple[int, int]:
        return self.done, self.calls


def execute_drivers(prepared: PreparedRun, out_dir: Path, *, resume: bool = False,
                    on_result: Callable[[SearchResult], None] = lambda _: None,
                    on_batch: Callable[[int, int, float], None] = lambda *_: None,
                    on_progress: Callable[[int, int], None] = lambda *_: None) -> RunOutcome:
    """Run `prepared` on `config.drivers` driver actors and join their results in `out_dir`
    (the layout of a one-driver run, plus drivers/). `on_progress(prompts done, guard calls)`
    is called as they go; `on_result` gets every result once all are joined."""
    if prepared.guard is not None:
        raise InputError("several drivers build the guard from its spec; pass a guard name or file, not an instance",
                         field="--drivers")
    assert prepared.spec is not None and prepared.info is not None, "execute() needs prepare()"
    if not out_dir.is_dir():  # a --resume of no folder fails here, and no folder is made for it
        check_run_dir(prepared, out_dir, resume)
    with hold(out_dir, what="run folder") as held:
        return _execute_drivers(prepared, out_dir, resume=check_run_dir(prepared, out_dir, resume), made=held.made,
                                on_result=on_result, on_batch=on_batch, on_progress=on_progress)


def _execute_drivers(prepared: PreparedRun, out_dir: Path, *, resume: bool, made: bool,
                     on_result: Callable[[SearchResult], None], on_batch: Callable[[int, int, float], None],
                     on_progress: Callable[[int, int], None]) -> RunOutcome:
    """`execute_drivers` with the folder locked and checked (`resume`: False when nothing was
    recorded yet, so it starts afresh; `made`: this process made the folder)."""
    ray = import_ray()

    config = prepared.config
    n = config.drivers
    folders = driver_dirs(out_dir, n)
    if resume:
        _check_same_drivers(out_dir, folders)
    started = connect(config.calls.ray_address)
    figures = EngineFigures(engine="ray")
    began = time.perf_counter()
    try:
        # The guard's actors once, for every driver (a remote endpoint has none: each driver
        # streams to it with its share of the concurrency).
        with GuardSession(prepared.spec, prepared.info, config.calls) as session:
            actors = session.pool.actors if isinstance(session.pool, ActorPool) else None
            capacity = session.pool.figures.capacity if session.pool is not None else config.calls.batch_size
            if not resume:
                claim_out_dir(out_dir)
                write_run_record(out_dir, prepared.record)
            for folder in folders:
                folder.parent.mkdir(parents=True, exist_ok=True)
            run_id = secrets.token_hex(8)
            remote: Any = ray.remote(DriverActor).options(num_cpus=config.driver_cpus, max_concurrency=2)
            handles: list[Any] = [remote.remote() for _ in range(n)]
            runs = [h.run.remote(shard_run(prepared, j, n), folder, resume and folder.is_dir(), run_id, actors,
                                 capacity)
                    for j, (h, folder) in enumerate(zip(handles, folders, strict=True), start=1)]
            reports = _wait(runs, handles, on_progress)
            for handle in handles:
                ray.kill(handle)
            if actors is not None:
                figures.replicas = len(actors)
    except BaseException:
        if made:  # failed (or interrupted) before any driver recorded anything: no folder left behind
            remove_unstarted(out_dir)
        raise
    finally:
        disconnect(started)
    figures.search_s = time.perf_counter() - began
    _add_up(figures, [r["figures"] for r in reports])
    results, _, _ = join_results(folders, prepared.prompts)
    join_receipts(folders, out_dir / "receipts.jsonl")
    for result in results:
        on_result(result)
    outcome = finish(prepared, out_dir, results, guard_calls=sum(r["guard_calls"] for r in reports),
                     cache_hits=sum(r["cache_hits"] for r in reports))
    outcome.figures = figures
    if figures.batches:
        on_batch(figures.batch_texts, figures.capacity, figures.compute_s)
    return outcome


def _wait(runs: list[Any], handles: list[Any], on_progress: Callable[[int, int], None]) -> list[dict[str, Any]]:
    """Every driver's report, polling their progress meanwhile; a driver's error is raised."""
    import ray

    pending = list(runs)
    while pending:
        _, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
        counts = ray.get([h.progress.remote() for h in handles])
        on_progress(sum(d for d, _ in counts), sum(c for _, c in counts))
    reports, failed = [], []
    for run in runs:
        try:
            reports.append(ray.get(run))
        except ray.exceptions.RayTaskError as exc:
            failed.append(exc)
    if not failed:
        return reports
    # A driver that starts once the endpoint is already down is refused at its first call and
    # takes the endpoint for one never there; another driver, answered before, knows it went
    # down: the run says what that one says (and how to resume), whichever finished first.
    down = [error for error in failed if isinstance(error.cause, EndpointDown)]
    chosen = (down or failed)[0]
    # A driver's own error (its endpoint down past max_outage, bad input) as one driver
    # raises it, so the command says it in one line, not inside Ray's traceback.
    if isinstance(chosen.cause, (EndpointDown, InputError)):
        raise chosen.cause from None
    raise chosen


def _add_up(figures: EngineFigures, parts: list[dict[str, Any]]) -> None:
    """The drivers' call figures as one run's (an actor batch that held calls of two drivers
    counts for each: rare, as each driver fills its calls)."""
    for part in parts:
        figures.capacity = part["capacity"] or figures.capacity
        for name in ("batches", "batch_texts", "steady_batches", "steady_texts", "restarts", "timeouts",
                     "retries", "hedges", "overloads"):
            setattr(figures, name, getattr(figures, name) + part[name])
        figures.compute_s += part["compute_s"]
        figures.streamed = figures.streamed or part["streamed"]
        figures.latencies.extend(part["latencies"])
        lows = [x for x in (figures.lowest_concurrency, part["lowest_concurrency"]) if x is not None]
        figures.lowest_concurrency = min(lows) if lows else None


def _check_same_drivers(out_dir: Path, folders: list[Path]) -> None:
    """A run resumes with the number of drivers it started with (each owns its prompts)."""
    others = sorted(p.name for p in (out_dir / "drivers").glob("*-of-*") if p not in folders)
    if others:
        raise InputError(f"this run's drivers were {others[0].split('-of-')[1]} (found drivers/{others[0]}); "
                         f"resume with the same --drivers", path=out_dir, field="--drivers")
