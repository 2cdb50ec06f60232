"""The verdict source in this process: one guard, called in batches.

`call_guard` is the one place a Guard is called; guard actors on Ray use it too, so a
guard behaves the same wherever it runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from margin.guards.base import Guard
from margin.search.driver import Driver, OnBatch
from margin.types import Verdict


@dataclass(frozen=True, slots=True)
class BatchOutput:
    """One guard call: an output or None per text, why any are None, and compute time."""

    verdicts: list[Verdict | None]
    errors: list[str | None]
    compute_s: float


def call_guard(guard: Guard, texts: Sequence[str]) -> BatchOutput:
    started = time.perf_counter()
    try:
        outputs = list(guard.classify(list(texts)))
        if len(outputs) != len(texts):
            raise RuntimeError(f"guard returned {len(outputs)} outputs for {len(texts)} texts")
        errors: list[str | None] = [None if v is not None else "no output" for v in outputs]
    except Exception as exc:  # any failure of the guard is "no output", retried
        message = f"{type(exc).__name__}: {exc}"[:500]
        outputs, errors = [None] * len(texts), [message] * len(texts)
    return BatchOutput(outputs, errors, time.perf_counter() - started)


class InProcessSource:
    """Calls a Guard in this process, one batch at a time."""

    def __init__(self, guard: Guard, *, max_attempts: int = 3, retry_wait_s: float = 0.5) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.guard = guard
        self.max_attempts = max_attempts
        self.retry_wait_s = retry_wait_s
        self.calls = 0  # texts sent to the guard, attempts included
        self.batches: list[tuple[int, float]] = []  # (texts, compute seconds) per guard call

    def run(self, driver: Driver, batch_size: int, on_batch: OnBatch | None = None) -> None:
        size = max(1, min(batch_size, self.guard.max_batch_size))
        while not driver.finished:
            taken = driver.take(size)
            if not taken:
                due = driver.next_due()
                if due is None:
                    raise RuntimeError("searches are waiting but nothing is queued")
                time.sleep(max(0.0, due - driver.clock()))
                continue
            output = call_guard(self.guard, [text for text, _ in taken])
            self.calls += len(taken)
            self.batches.append((len(taken), output.compute_s))
            latency = output.compute_s / len(taken)
            driver.deliver_many(
                (text, attempt, verdict, latency, error)
                for (text, attempt), verdict, error in zip(taken, output.verdicts, output.errors, strict=True)
            )
            if on_batch is not None:
                on_batch(len(taken), size, output.compute_s)

