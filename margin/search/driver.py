"""The driver: many prompts' searches at once, their requests pooled into guard batches.

The driver owns all search state and is the only one that records calls and results. A
verdict source (the guard in this process, or guard actors on Ray) takes texts from it
with `take`, calls the guard and hands each output back with `deliver_many`.

Determinism: a search is asked for more candidates only once every verdict it asked for
has arrived, and how many it may ask for (its window) depends only on its own state. So a
prompt's requests, and therefore its result, are the same however calls are batched,
ordered, retried, spread over actors, answered from the cache or replayed after a crash.

A text is sent at most once per run: a second request for it joins the call in flight or
is answered from memory (recorded as cached). A text with no output is retried with
exponential backoff; after `max_attempts` it is missing and its searches see None.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from margin.hashing import sha256_text
from margin.search.strategies import CheapestSearch, PromptSearch
from margin.types import Candidate, GuardCall, SearchResult, Verdict

OnCall = Callable[[GuardCall], None]
OnResult = Callable[[SearchResult], None]
OnBatch = Callable[[int, int, float], None]  # (texts, capacity, compute seconds) per guard batch

#: `cheapest` asks for max(1, GROWTH * verdicts so far) candidates at a time: its last round
#: passes the first flip by at most that share of the calls before it.
WINDOW_GROWTH = 1 / 16
MAX_WINDOW = 64


def window(search: PromptSearch) -> int:
    if isinstance(search, CheapestSearch):
        return max(1, min(MAX_WINDOW, int(len(search.verdicts) * WINDOW_GROWTH)))
    return MAX_WINDOW  # exhaustive needs every candidate; adaptive queues only what it plans


def candidate_key(c: Candidate) -> tuple[str, str | None, str | None, int]:
    return (c.prompt_id, c.transform, c.strength, c.seed)


class Source(Protocol):
    max_attempts: int
    retry_wait_s: float

    def run(self, driver: Driver, batch_size: int, on_batch: OnBatch | None = None) -> None: ...


class VerdictStore(Protocol):
    def get(self, text: str) -> Verdict | None: ...
    def put_many(self, items: Iterable[tuple[str, Verdict]]) -> None: ...


@dataclass
class Replay:
    """What a killed run already recorded: its verdicts answer the same requests again."""

    verdicts: dict[str, Verdict] = field(default_factory=dict)  # text sha256 -> completed output
    failed: dict[str, int] = field(default_factory=dict)  # text sha256 -> attempts without output
    recorded: set[tuple[str, str | None, str | None, int]] = field(default_factory=set)  # candidates with a final line
    results: set[str] = field(default_factory=set)  # prompt ids with a result line
    run_id: str | None = None


@dataclass
class TextJob:
    text: str
    owners: list[tuple[int, Candidate]]
    attempts: int = 0
    limit: int = 1  # the attempt number after which it is missing


@dataclass
class DriverStats:
    sent: int = 0  # texts sent to the guard, retries included
    completed: int = 0  # of those, with an output
    cache_hits: int = 0  # requests answered without a call: the cache or this run's memory
    replayed: int = 0  # requests a resumed run answered from the killed run's receipts
    done: int = 0
    flips: int = 0
    missing: int = 0


class Driver:
    def __init__(
        self,
        searches: Sequence[PromptSearch],
        *,
        max_attempts: int = 3,
        retry_wait_s: float = 0.5,
        on_call: OnCall = lambda _: None,
        on_result: OnResult = lambda _: None,
        cache: VerdictStore | None = None,
        replay: Replay | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.searches = list(searches)
        self.max_attempts = max_attempts
        self.retry_wait_s = retry_wait_s
        self.on_call = on_call
        self.on_result = on_result
        self.cache = cache
        self.replay = replay or Replay()
        self.clock = clock
        self.stats = DriverStats()
        self.results: dict[int, SearchResult] = {}
        self.outstanding = [0] * len(self.searches)
        self.ready: deque[int] = deque(range(len(self.searches)))
        self.jobs: dict[str, TextJob] = {}  # texts queued, backing off or in flight
        self.fresh: deque[str] = deque()  # texts to send now
        self.backoff: list[tuple[float, int, str]] = []  # (due, tiebreak, text)
        self.memo: dict[str, Verdict] = {}
        self.lost: set[str] = set()  # texts still without output after every attempt
        self._to_cache: list[tuple[str, Verdict]] = []
        self._tiebreak = 0

    # -- what sources call ------------------------------------------------------------

    @property
    def finished(self) -> bool:
        self._refill()
        return len(self.results) == len(self.searches)

    @property
    def active(self) -> int:
        return len(self.searches) - len(self.results)

    def take(self, limit: int) -> list[tuple[str, int]]:
        """Up to `limit` texts to send now, each with its attempt number."""
        self._refill()
        now = self.clock()
        while self.backoff and self.backoff[0][0] <= now:
            self.fresh.appendleft(heapq.heappop(self.backoff)[2])
        out: list[tuple[str, int]] = []
        while self.fresh and len(out) < limit:
            job = self.jobs[self.fresh.popleft()]
            job.attempts += 1
            out.append((job.text, job.attempts))
        self.stats.sent += len(out)
        return out

    def next_due(self) -> float | None:
        """When the next text backing off may be sent (None: nothing is backing off)."""
        return self.backoff[0][0] if self.backoff else None

    def has_work(self) -> bool:
        """Whether anything is queued or backing off (in-flight texts are the source's)."""
        self._refill()
        return bool(self.fresh or self.backoff)

    def requeue(self, texts: Iterable[str]) -> None:
        """Texts taken but never run (their actor was replaced): send again, uncharged."""
        for text in texts:
            self.jobs[text].attempts -= 1
            self.stats.sent -= 1
            self.fresh.appendleft(text)

    def deliver_many(self, outputs: Iterable[tuple[str, int, Verdict | None, float, str | None]]) -> None:
        """(text, attempt, verdict or None, latency_s, error) for texts taken earlier."""
        for text, attempt, verdict, latency_s, error in outputs:
            self._deliver(text, attempt, verdict, latency_s, error)
        if self.cache is not None and self._to_cache:
            self.cache.put_many(self._to_cache)
        self._to_cache = []

    def ordered_results(self) -> list[SearchResult]:
        return [self.results[i] for i in range(len(self.searches))]

    # -- inside -------------------------------------------------------------------------

    def _deliver(self, text: str, attempt: int, verdict: Verdict | None, latency_s: float,
                 error: str | None) -> None:
        job = self.jobs[text]
        (_, first), *others = job.owners
        if verdict is None:
            self.on_call(GuardCall(first, None, attempt, latency_s, error or "no output"))
            if job.attempts < job.limit:
                due = self.clock() + self.retry_wait_s * 2 ** (job.attempts - 1)
                self._tiebreak += 1
                heapq.heappush(self.backoff, (due, self._tiebreak, text))
                return
            del self.jobs[text]
            self.lost.add(text)
            self._answer(job.owners, None)
            return
        self.stats.completed += 1
        self.on_call(GuardCall(first, verdict, attempt, latency_s))
        for _, candidate in others:  # asked for while the call was in flight
            self._record_cached(candidate, verdict)
        del self.jobs[text]
        self.memo[text] = verdict
        self._to_cache.append((text, verdict))
        self._answer(job.owners, verdict)

    def _record_cached(self, candidate: Candidate, verdict: Verdict | None) -> None:
        if candidate_key(candidate) in self.replay.recorded:
            self.stats.replayed += 1
            return  # the killed run wrote this line already
        self.stats.cache_hits += 1
        error = None if verdict is not None else "no output after every attempt"
        self.on_call(GuardCall(candidate, verdict, attempt=0, latency_s=0.0, error=error, cached=True))

    def _answer(self, owners: list[tuple[int, Candidate]], verdict: Verdict | None) -> None:
        for index, candidate in owners:
            self.searches[index].receive(candidate, verdict)
            self.outstanding[index] -= 1
            self._settle(index)

    def _settle(self, index: int) -> None:
        if index in self.results:
            return
        search = self.searches[index]
        if search.done:
            result = search.result()
            self.results[index] = result
            self.stats.done += 1
            self.stats.flips += result.flip is not None or result.flip_cost == 0
            self.stats.missing += result.status == "missing"
            self.on_result(result)  # replayed ones too: `Replay.results` says which are recorded
        elif self.outstanding[index] == 0:
            self.ready.append(index)

    def _known(self, text: str) -> tuple[bool, Verdict | None]:
        """An answer without a call: this run's memory, the killed run's receipts, the cache."""
        if text in self.memo:
            return True, self.memo[text]
        if text in self.lost:
            return True, None
        if self.replay.verdicts:
            sha = sha256_text(text)
            if sha in self.replay.verdicts:
                self.memo[text] = self.replay.verdicts[sha]
                return True, self.memo[text]
        if self.cache is not None and (hit := self.cache.get(text)) is not None:
            self.memo[text] = hit
            return True, hit
        return False, None

    def _refill(self) -> None:
        while self.ready:
            index = self.ready.popleft()
            search = self.searches[index]
            if index in self.results or self.outstanding[index]:
                continue
            if search.done:
                self._settle(index)
                continue
            requests = search.next_requests(window(search))
            if not requests:
                raise RuntimeError(f"search for {search.prompt.id!r} is waiting but asked for nothing")
            self.outstanding[index] += len(requests)
            for candidate in requests:
                self._request(index, candidate)

    def _request(self, index: int, candidate: Candidate) -> None:
        text = candidate.text
        if text in self.jobs:
            self.jobs[text].owners.append((index, candidate))
            return
        known, verdict = self._known(text)
        if known:
            self._record_cached(candidate, verdict)
            self._answer([(index, candidate)], verdict)
            return
        job = TextJob(text, [(index, candidate)], limit=self.max_attempts)
        if self.replay.failed and (failed := self.replay.failed.get(sha256_text(text), 0)):
            # Continue the killed run's attempts; a text it gave up on gets a fresh set.
            job.attempts = failed
            job.limit = failed + self.max_attempts if failed >= self.max_attempts else self.max_attempts
        self.jobs[text] = job
        self.fresh.append(text)


def drive(
    searches: Sequence[PromptSearch],
    source: Source,
    *,
    batch_size: int,
    on_call: OnCall,
    on_result: OnResult = lambda _: None,
    cache: VerdictStore | None = None,
    replay: Replay | None = None,
) -> list[SearchResult]:
    """Run every search to completion; results in the order of `searches`."""
    driver = Driver(searches, max_attempts=source.max_attempts, retry_wait_s=source.retry_wait_s,
                    on_call=on_call, on_result=on_result, cache=cache, replay=replay)
    source.run(driver, batch_size)
    return driver.ordered_results()
