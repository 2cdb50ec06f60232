"""The in-process driver: many prompts' searches at once, their requests batched together.

Each round collects requests from every active search (so the guard sees full batches
while each search still stops at its first flip), resolves them through a verdict source
and hands the verdicts back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from margin.search.source import OnCall
from margin.search.strategies import PromptSearch
from margin.types import Candidate, SearchResult, Verdict


class Source(Protocol):
    def resolve(self, requests: Sequence[Candidate], on_call: OnCall) -> dict[Candidate, Verdict | None]: ...


def drive(
    searches: Sequence[PromptSearch],
    source: Source,
    *,
    batch_size: int,
    on_call: OnCall,
    on_result: Callable[[SearchResult], None] = lambda _: None,
) -> list[SearchResult]:
    """Run every search to completion; results come back in the order of `searches`."""
    results: dict[int, SearchResult] = {}
    active = list(range(len(searches)))
    while active:
        share = max(1, batch_size // len(active))
        batch: list[tuple[int, Candidate]] = []
        for index in active:
            room = batch_size - len(batch)
            if room <= 0:
                break
            batch.extend((index, c) for c in searches[index].next_requests(min(share, room)))
        if not batch:
            raise RuntimeError("searches are waiting but none asked for a verdict")
        verdicts = source.resolve([c for _, c in batch], on_call)
        for index, candidate in batch:
            searches[index].receive(candidate, verdicts[candidate])
        still = []
        for index in active:
            if searches[index].done:
                results[index] = searches[index].result()
                on_result(results[index])
            else:
                still.append(index)
        active = still
    return [results[i] for i in range(len(searches))]
