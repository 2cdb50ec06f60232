"""One guard, ready to answer searches: the one entry point runs and studies use.

`GuardSession` picks the guard's pool (`margin.serving.guard_pool`), joins or starts Ray when
the guard runs on actors, checks that the guard built there is the one described here, and
runs a driver's searches on it, its calls made as its `CallSettings` say and counted in its
`EngineFigures` (`margin.serving.calls`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from margin.engine import settings as defaults
from margin.engine.actors import ActorPool
from margin.engine.cluster import connect, disconnect
from margin.engine.local import LocalPool
from margin.engine.loop import run_pools
from margin.engine.pool import Pool
from margin.guards.base import Guard
from margin.guards.spec import GuardSpec
from margin.runfolder import ReceiptWriter
from margin.search.strategies import PromptSearch
from margin.serving.calls import CallSettings, EngineFigures, OnBatch
from margin.serving.driver import (
    Driver,
    OnCall,
    OnFlush,
    OnResult,
    VerdictReplay,
    VerdictStore,
)
from margin.serving.guard_pool import guard_pool, is_remote, local_pool
from margin.serving.verdict_cache import VerdictCache
from margin.types import GuardCall, GuardInfo, SearchResult


class GuardSession:
    def __init__(self, spec: GuardSpec, info: GuardInfo, settings: CallSettings, *, guard: Guard | None = None,
                 pool: Pool | None = None, on_batch: OnBatch = lambda *_: None) -> None:
        """`guard`: an instance a library user passed, used as it is (never closed here);
        `pool`: a pool made elsewhere (a driver's share of guard actors another process
        started and checked), used instead of making one."""
        self.spec = spec
        self.info = info
        self.settings = settings
        self.guard = guard
        self.on_batch = on_batch
        self.remote = is_remote(spec) or (guard is not None and guard.remote)
        self.limits = settings.limits(dict(spec.backend_options))
        self.attempts = self.limits.max_attempts if self.remote else (settings.max_attempts or defaults.MAX_ATTEMPTS.default)
        self.figures = EngineFigures(engine=settings.engine)
        self.pool: Pool | None = pool
        self._driver: Driver | None = None
        self._started_ray = False
        self._ran = False

    def __enter__(self) -> GuardSession:
        s = self.settings
        if self.pool is not None:  # made and started elsewhere
            self.pool.on_call = self._record_batch
            if isinstance(self.pool, ActorPool):
                self.figures.replicas = self.pool.replicas
            return self
        batch_size = max(1, min(s.batch_size, self.spec.max_batch_size or s.batch_size))
        self.pool = guard_pool(self.spec, self.guard, engine=s.engine, batch_size=batch_size, limits=self.limits,
                               call_timeout_s=s.batch_timeout_s, max_wait_s=s.max_wait_s,
                               on_call=self._record_batch)
        try:
            if isinstance(self.pool, LocalPool):
                self.pool.start()  # the model loads now, so a guard that cannot load fails before any file is written
            if isinstance(self.pool, ActorPool):
                self.figures.replicas = self.pool.replicas
                self._started_ray = connect(s.ray_address)
                built = self.pool.start()
                if built != self.info:
                    raise RuntimeError(f"the guard built on the cluster is not the guard described here "
                                       f"(is the same margin installed on every node?): {built} != {self.info}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self.pool is not None and not self._ran:
            self.pool.close()  # the loop closes the pools it runs; one that never ran may hold actors
        disconnect(self._started_ray)
        self._started_ray = False

    def search(self, searches: Iterable[PromptSearch], *, total: int | None = None, cache: VerdictStore | None = None,
               replay: VerdictReplay | None = None, on_call: OnCall = lambda _: None,
               on_result: OnResult = lambda _: None, on_flush: OnFlush = lambda: None,
               whole_cases: bool = False) -> Driver:
        """Run every search to completion (started as the guard needs work, `total` of them);
        the driver holds the results and the counts. `whole_cases`: the guard sees whole cases
        (`margin.guards.shapes`)."""
        assert self.pool is not None and not self._ran, "a session runs one search, inside `with`"
        self._driver = driver = Driver(searches, total=total, backlog=self.pool.appetite, max_attempts=self.attempts,
                                       retry_wait_s=self.settings.retry_wait_s, cache=cache, replay=replay,
                                       on_call=on_call, on_result=on_result, on_flush=on_flush,
                                       whole_cases=whole_cases)
        began = time.perf_counter()
        self._ran = True
        run_pools(driver.book, [self.pool])
        self.figures.search_s = time.perf_counter() - began
        self._collect(driver)
        return driver

    def search_recorded(self, searches: Iterable[PromptSearch], receipts: Path, run_id: str, *,
                        cache_path: Path | None, replay: VerdictReplay, total: int | None = None,
                        guard_id: str | None = None, write_results: bool = True,
                        on_call: OnCall = lambda _: None, on_result: OnResult = lambda _: None,
                        whole_cases: bool = False, target: str | None = None) -> Driver:
        """`search`, the one way runs and studies search: every call written to the receipts
        file (and each result, unless a killed run already wrote it), the verdict cache at
        `cache_path` (None: none) open while it runs, both closed however it ends."""
        writer = ReceiptWriter(receipts, run_id, guard_id or self.info.id, target=target)
        cache = VerdictCache(cache_path, self.info) if cache_path is not None else None

        def record_call(call: GuardCall) -> None:
            writer.call(call)
            on_call(call)

        def record_result(result: SearchResult) -> None:
            if write_results and result.prompt_id not in replay.results:
                writer.result(result)
            on_result(result)

        try:
            return self.search(searches, total=total, cache=cache, replay=replay, on_call=record_call,
                               on_result=record_result, on_flush=writer.flush, whole_cases=whole_cases)
        finally:
            writer.close()
            if cache is not None:
                cache.close()

    # -- inside ---------------------------------------------------------------------------

    def _record_batch(self, texts: int, capacity: int, seconds: float) -> None:
        f = self.figures
        f.capacity = capacity
        f.batches += 1
        f.batch_texts += texts
        f.compute_s += seconds
        # Steady state: enough prompts still searching to fill every call that can be in flight.
        slots = self.pool.replicas * self.pool.calls_per_actor if isinstance(self.pool, ActorPool) else 1
        if self._driver is not None and self._driver.remaining >= capacity * slots:
            f.steady_batches += 1
            f.steady_texts += texts
        self.on_batch(texts, capacity, seconds)

    def _collect(self, driver: Driver) -> None:
        assert self.pool is not None
        f, pool = self.figures, self.pool.figures
        f.restarts, f.timeouts = pool.restarts, pool.timeouts
        f.retries, f.hedges = driver.book.stats.retries, driver.book.stats.hedges
        if pool.kind == "stream":
            f.streamed = True
            f.overloads = pool.overloads
            f.lowest_concurrency = pool.lowest_limit
            f.pauses, f.waits = pool.pauses, driver.book.stats.waits
            f.latencies = pool.latencies


def drive(searches: Sequence[PromptSearch], guard: Guard, *, batch_size: int = defaults.BATCH_SIZE.default,
          on_call: OnCall = lambda _: None, max_attempts: int = defaults.MAX_ATTEMPTS.default,
          **options: Any) -> list[SearchResult]:
    """Run every search to completion against a guard instance in this process; results in
    the order of `searches`. (Runs use `margin.runs.executing.execute`; this is the small form for tests
    and notebooks.)"""
    pool = local_pool(guard, batch_size)
    driver = Driver(searches, max_attempts=max_attempts, retry_wait_s=0.0, on_call=on_call,
                    backlog=max(pool.appetite, batch_size), **options)
    run_pools(driver.book, [pool])
    return driver.ordered_results()
