"""The engine loop: pools around one book, until every request is answered.

One asyncio loop in one thread runs everything: pools start calls (HTTP requests as tasks,
Ray calls and in-process batches as futures completed on other threads), finished calls
come back through `notify`, and the book — never touched from another thread — records
them and hands out what is asked next. The loop sleeps until a call finishes or a timer is
due (a retry's backoff, a hedge, a hung call, a ping).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from margin.engine.book import Book
from margin.engine.pool import Pool
from margin.engine.stream import share_breakers

#: Allocations between young-generation collections while the engine runs (Python's default
#: is 700). A run makes millions of short-lived tuples (candidates, requests, outcomes) and
#: few cycles; collecting every 700 made the collector a fifth of a driver's time.
YOUNG_COLLECTION_EVERY = 20_000


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect garbage less often, and never scan what existed before (frozen), while the
    engine runs; the process's settings come back after."""
    thresholds = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def run_pools(book: Book, pools: Sequence[Pool], *, clock: Callable[[], float] = time.monotonic) -> None:
    """Run until the book has nothing left to ask; raises what a pool raised."""
    with fewer_collections():
        _run_pools(book, pools, clock)


def _run_pools(book: Book, pools: Sequence[Pool], clock: Callable[[], float]) -> None:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_run(book, pools, clock))
        return
    # This thread already runs a loop (a notebook's): run the engine in a thread of its own.
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(_run(book, pools, clock))
        except BaseException as exc:  # handed to the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target, name="margin-engine")
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


async def _run(book: Book, pools: Sequence[Pool], clock: Callable[[], float]) -> None:
    finished: deque[tuple[Pool, Any]] = deque()
    wake = asyncio.Event()

    def notify(pool: Pool, token: Any) -> None:
        finished.append((pool, token))
        wake.set()

    share_breakers(pools)
    for pool in pools:
        pool.bind(notify)
    try:
        while not book.finished:
            now = clock()
            for pool in pools:
                pool.dispatch(book, now)
            if not finished:
                timers = [t for pool in pools if (t := pool.next_timer(book, now)) is not None]
                if (due := book.next_due()) is not None:
                    timers.append(due)
                if not timers and not any(pool.inflight for pool in pools):
                    stuck = sorted({job.pool for job in book.jobs.values()})
                    raise RuntimeError(f"requests for {', '.join(stuck)} are waiting but no pool is working on them")
                wake.clear()
                timeout = max(0.0, min(timers) - clock()) if timers else None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), timeout)
            now = clock()
            while finished:
                pool, token = finished.popleft()
                pool.complete(book, token, now)
            for pool in pools:
                pool.tick(book, now)
    finally:
        for pool in pools:
            await pool.aclose()
