"""What every pool is to the engine loop: something that takes requests from the book,
calls a model with them and hands the outcomes back.

A pool starts calls in `dispatch`, is told through `notify` (in the loop's thread) when one
of them has finished, and turns it into outcomes in `complete`. `tick` and `next_timer` let
it act on time (hung calls, hedges, pings). Three kinds: `LocalPool` (a model in this
process), `ActorPool` (models in Ray actors) and `StreamPool` (a remote endpoint).
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from margin.engine.book import Book

#: (requests in the call, the most a call takes, seconds it took), per finished call
OnCall = Callable[[int, int, float], None]


def _ignore(*_: Any) -> None:
    return None


@dataclass
class PoolFigures:
    """How a pool's calls went, for summaries and benchmarks (never part of any result)."""

    kind: str
    capacity: int = 0  # requests per call at most
    calls: int = 0
    requests: int = 0  # requests carried by those calls
    call_s: float = 0.0  # summed time of the calls (compute time for batches)
    restarts: int = 0  # actors that died under a call
    timeouts: int = 0  # calls past their time limit
    hedges: int = 0  # second copies of slow requests
    overloads: int = 0  # answers 429 / 503
    latencies: list[float] = field(default_factory=list)  # per remote request
    lowest_limit: float | None = None  # the adaptive concurrency's lowest point
    pauses: int = 0  # times an endpoint that stopped answering was paused (its breaker opened)
    canaries: int = 0  # health probes of a paused endpoint: a request it answered before, sent again

    @property
    def mean_fill(self) -> float | None:
        return self.requests / (self.calls * self.capacity) if self.calls and self.capacity else None

    def latency(self, q: float) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Pool(ABC):
    def __init__(self, name: str, kind: str, on_call: OnCall = _ignore) -> None:
        self.name = name
        self.on_call = on_call
        self.figures = PoolFigures(kind)
        self._notify: Callable[[Pool, Any], None] | None = None

    def bind(self, notify: Callable[[Pool, Any], None]) -> None:
        """How a finished call reaches the loop: `notify(pool, token)`, in the loop's thread."""
        self._notify = notify

    def notify(self, token: Any) -> None:
        assert self._notify is not None, "a pool runs inside the engine loop"
        self._notify(self, token)

    def watch(self, future: Future[Any], token: Any) -> None:
        """Be told in the loop's thread when `future` (completed on another thread) is done."""
        loop = asyncio.get_running_loop()

        def wake(_: Future[Any]) -> None:
            # A call that ends after the loop has (Ctrl-C, an error elsewhere) has no one to tell.
            with contextlib.suppress(RuntimeError):  # "Event loop is closed"
                loop.call_soon_threadsafe(self.notify, token)

        future.add_done_callback(wake)

    @abstractmethod
    def dispatch(self, book: Book, now: float) -> None:
        """Start as many calls as the pool has room for."""

    @abstractmethod
    def complete(self, book: Book, token: Any, now: float) -> None:
        """A call the pool started has finished: deliver its outcomes."""

    @property
    @abstractmethod
    def inflight(self) -> int:
        """Calls running now."""

    @property
    def appetite(self) -> int:
        """Requests one round of calls takes: a driver keeps this many waiting, so that no
        call goes out short while there is work."""
        return max(1, self.figures.capacity)

    def tick(self, book: Book, now: float) -> None:  # noqa: B027 (optional hook)
        """Act on time: hung calls, hedges, restarts."""

    def next_timer(self, book: Book, now: float) -> float | None:
        """When `tick` next has something to do (None: nothing timed)."""
        return None

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Release models, actors and connections."""

    async def aclose(self) -> None:
        self.close()
