"""A model in this process (`--engine local`): one batch at a time, in a worker thread so
the loop keeps working (receiving, recording, asking for more) while the model computes.

The worker's future tells the loop when a batch is done; the loop also looks at it once a
second, so a wake-up that never arrives costs a second, not the run (one 100,000-prompt run
here once waited forever, its worker idle and its last batch done).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from margin.engine.book import Book, Outcome, Ticket
from margin.engine.calls import BatchCaller, CallResult, call_batch
from margin.engine.pool import OnCall, Pool, _ignore

#: Seconds between looks at a running batch's future, in case its wake-up was lost.
LOOK_EVERY_S = 1.0


class LocalPool(Pool):
    def __init__(self, name: str, build: Callable[[], BatchCaller], *, max_batch_size: int = 64,
                 owns: bool = True, on_call: OnCall = _ignore) -> None:
        """`build` makes the model when the pool first has work; `owns`: close it at the end
        (False for a model the caller made and keeps)."""
        super().__init__(name, "local", on_call)
        self._build = build
        self.owns = owns
        self.caller: BatchCaller | None = None
        self.max_batch_size = max_batch_size
        self.figures.capacity = max(1, max_batch_size)  # until the model says it takes fewer
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"margin-{name}")
        self.running: tuple[list[Ticket], Future[CallResult]] | None = None
        self.since = 0.0  # when the running batch was started

    def start(self) -> BatchCaller:
        if self.caller is None:
            self.caller = self._build()
        self.figures.capacity = max(1, min(self.max_batch_size, self.caller.max_batch_size))
        return self.caller

    @property
    def inflight(self) -> int:
        return self.running is not None

    def dispatch(self, book: Book, now: float) -> None:
        if self.running is not None:
            return
        if self.caller is None:
            if not book.queued(self.name):
                return
            self.start()
        tickets = book.take(self.name, self.figures.capacity)
        if not tickets:
            return
        future = self.worker.submit(call_batch, self.caller, [t.request for t in tickets])  # type: ignore[arg-type]
        self.running = (tickets, future)
        self.since = now
        self.watch(future, future)

    def tick(self, book: Book, now: float) -> None:
        if self.running is not None and self.running[1].done() and now - self.since >= LOOK_EVERY_S:
            self.notify(self.running[1])  # done, and no word of it: a lost wake-up

    def next_timer(self, book: Book, now: float) -> float | None:
        return self.since + LOOK_EVERY_S if self.running is not None else None

    def complete(self, book: Book, token: Any, now: float) -> None:
        if self.running is None or self.running[1] is not token:
            return  # a second word of a batch already completed
        tickets, future = self.running
        self.running = None
        result = future.result()
        per = result.seconds / len(tickets)
        book.deliver(Outcome(t.key, t.attempt, out, per, err, retry=result.retry_at(i))
                     for i, (t, out, err) in enumerate(zip(tickets, result.outputs, result.errors, strict=True)))
        self.figures.calls += 1
        self.figures.requests += len(tickets)
        self.figures.call_s += result.seconds
        self.on_call(len(tickets), self.figures.capacity, result.seconds)

    def close(self) -> None:
        self.worker.shutdown(wait=True)
        if self.caller is not None and self.owns:
            self.caller.close()
