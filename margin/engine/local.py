"""A model in this process (`--engine local`): one batch at a time, in a worker thread so
the loop keeps working (receiving, recording, asking for more) while the model computes."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from margin.engine.book import Book, Outcome, Ticket
from margin.engine.calls import BatchCaller, CallResult, call_batch
from margin.engine.pool import OnCall, Pool, _ignore


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
        self.watch(future, None)

    def complete(self, book: Book, token: Any, now: float) -> None:
        assert self.running is not None
        tickets, future = self.running
        self.running = None
        result = future.result()
        per = result.seconds / len(tickets)
        book.deliver(Outcome(t.key, t.attempt, out, per, err)
                     for t, out, err in zip(tickets, result.outputs, result.errors, strict=True))
        self.figures.calls += 1
        self.figures.requests += len(tickets)
        self.figures.call_s += result.seconds
        self.on_call(len(tickets), self.figures.capacity, result.seconds)

    def close(self) -> None:
        self.worker.shutdown(wait=True)
        if self.caller is not None and self.owns:
            self.caller.close()
