"""Dynamic micro-batching inside one asyncio loop (an async Ray actor's).

Calls queue; one worker takes them as a batch of up to `max_size` items, waiting at most
`max_wait_s` for the batch to fill, and hands the batch to a blocking `run` in a thread, so
the loop keeps accepting calls while it computes. A call is never split across batches: a
call larger than `max_size` is a batch of its own.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class Batcher(Generic[Item, Result]):
    """`run(calls)` gets the items of every call in one batch and returns one result per call."""

    def __init__(self, run: Callable[[list[list[Item]]], list[Result]], max_size: int, max_wait_s: float) -> None:
        self.run = run
        self.max_size = max_size
        self.max_wait_s = max_wait_s
        self.queue: deque[tuple[list[Item], asyncio.Future[Result]]] = deque()
        self.wakeup: asyncio.Event | None = None
        self.worker: asyncio.Task[None] | None = None

    async def submit(self, items: list[Item]) -> Result:
        loop = asyncio.get_running_loop()
        if self.worker is None:  # created here: the loop exists only once the actor runs
            self.wakeup = asyncio.Event()
            self.worker = loop.create_task(self._work())
        assert self.wakeup is not None
        future: asyncio.Future[Result] = loop.create_future()
        self.queue.append((items, future))
        self.wakeup.set()
        return await future

    def _queued(self) -> int:
        return sum(len(items) for items, _ in self.queue)

    async def _work(self) -> None:
        assert self.wakeup is not None
        while True:
            await self.wakeup.wait()
            self.wakeup.clear()
            if not self.queue:
                continue
            deadline = time.monotonic() + self.max_wait_s
            while self._queued() < self.max_size and (left := deadline - time.monotonic()) > 0:
                self.wakeup.clear()
                try:
                    await asyncio.wait_for(self.wakeup.wait(), left)
                except TimeoutError:
                    break
            taken: list[tuple[list[Item], asyncio.Future[Result]]] = []
            size = 0
            while self.queue and (not taken or size + len(self.queue[0][0]) <= self.max_size):
                items, future = self.queue.popleft()
                taken.append((items, future))
                size += len(items)
            try:
                results = await asyncio.to_thread(self.run, [items for items, _ in taken])
                if len(results) != len(taken):
                    raise RuntimeError(f"batch runner returned {len(results)} results for {len(taken)} calls")
            except Exception as exc:  # fail this batch's callers; the worker must live for the next
                for _, future in taken:
                    if not future.done():
                        future.set_exception(exc)
            else:
                for (_, future), result in zip(taken, results, strict=True):
                    if not future.done():
                        future.set_result(result)
            if self.queue:
                self.wakeup.set()
