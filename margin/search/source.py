"""Verdict sources: where a driver gets verdicts for candidates.

`InProcessSource` calls a Guard in this process, in batches of unique texts, retrying
texts that produced no output. A text is never sent twice in one run: later requests for
it are answered from memory and recorded as cached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from margin.guards.base import Guard
from margin.types import Candidate, GuardCall, Verdict

OnCall = Callable[[GuardCall], None]


class InProcessSource:
    def __init__(self, guard: Guard, *, max_attempts: int = 3, retry_wait_s: float = 0.5) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.guard = guard
        self.max_attempts = max_attempts
        self.retry_wait_s = retry_wait_s
        self.memo: dict[str, Verdict] = {}
        self.calls = 0  # texts sent to the guard, attempts included

    def resolve(self, requests: Sequence[Candidate], on_call: OnCall) -> dict[Candidate, Verdict | None]:
        finals: dict[Candidate, Verdict | None] = {}
        fresh: dict[str, list[Candidate]] = {}
        for candidate in requests:
            if candidate.text in self.memo:
                finals[candidate] = self.memo[candidate.text]
                on_call(GuardCall(candidate, finals[candidate], attempt=0, latency_s=0.0, cached=True))
            else:
                fresh.setdefault(candidate.text, []).append(candidate)
        pending = list(fresh)
        for attempt in range(1, self.max_attempts + 1):
            if not pending:
                break
            if attempt > 1 and self.retry_wait_s > 0:
                time.sleep(self.retry_wait_s * 2 ** (attempt - 2))
            failed: list[str] = []
            for start in range(0, len(pending), self.guard.max_batch_size):
                chunk = pending[start : start + self.guard.max_batch_size]
                failed.extend(self._call(chunk, attempt, fresh, on_call))
            pending = failed
        for text, candidates in fresh.items():
            verdict = self.memo.get(text)
            for candidate in candidates:
                finals[candidate] = verdict
        return finals

    def _call(self, texts: list[str], attempt: int, owners: dict[str, list[Candidate]], on_call: OnCall) -> list[str]:
        """One guard call; returns the texts that produced no output."""
        started = time.perf_counter()
        error: str | None = None
        try:
            outputs = self.guard.classify(texts)
            if len(outputs) != len(texts):
                raise RuntimeError(f"guard returned {len(outputs)} outputs for {len(texts)} texts")
        except Exception as exc:  # any failure of the guard is "no output", retried
            outputs = [None] * len(texts)
            error = f"{type(exc).__name__}: {exc}"[:500]
        latency = (time.perf_counter() - started) / len(texts)
        self.calls += len(texts)
        failed = []
        for text, verdict in zip(texts, outputs, strict=True):
            if verdict is not None:
                self.memo[text] = verdict
            else:
                failed.append(text)
            first, *others = owners[text]
            on_call(GuardCall(first, verdict, attempt, latency, error if verdict is None else None))
            for candidate in others:  # the same text asked for twice in one batch
                if verdict is not None:
                    on_call(GuardCall(candidate, verdict, attempt=0, latency_s=0.0, cached=True))
        return failed
