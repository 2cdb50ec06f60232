"""The driver: many prompts' searches at once, their requests pooled into guard calls.

The driver owns all search state and is the only one that records calls and results. It
asks the engine's request book (`margin.engine.book`) for a verdict per candidate text; a
pool (`margin.serving.guard_pool`) calls the guard, and the book hands each verdict back.

Flat memory: searches are started a few at a time, as the guard's queue runs low (enough
requests waiting to fill every call in flight, `backlog`), and a search is forgotten once
its result is written; a search builds its candidates only as far as it reads them
(`margin.search.candidates.Ladder`). So what the driver holds depends on how much the
guard takes at once, not on the size of the dataset.

Determinism: a search is asked for more candidates only once every verdict it asked for
has arrived, and how many it may ask for (its window) depends only on its own state. So a
prompt's requests, and therefore its result, are the same however calls are batched,
streamed, ordered, retried, hedged, spread over actors, answered from the cache or
replayed after a crash, and whenever its search was started.

A text asked for again joins the call in flight or is answered from the book's memory of
recent answers or the cache (recorded as cached). A text with no output is retried; after
its attempts it is missing and its searches see None.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass, field
from typing import Protocol

from margin.datasets.cases import RequestKey, guard_request, key_sha256
from margin.engine.book import Backoff, Book, Job, Origin, Outcome
from margin.engine.settings import MAX_ATTEMPTS, RETRY_WAIT
from margin.search.strategies import PromptSearch
from margin.types import Candidate, GuardCall, SearchResult, Verdict

OnCall = Callable[[GuardCall], None]
OnResult = Callable[[SearchResult], None]
OnFlush = Callable[[], None]

#: The one pool a run's guard calls go to.
POOL = "guard"
#: Requests kept waiting for the guard unless the pool says how many it takes at once.
BACKLOG = 128


#: Who waits for a verdict: a search's position, its candidate, and the SHA-256 of the whole case
#: the guard was asked about (None when the key is the candidate's text).
Owner = tuple[int, Candidate, str | None]


def candidate_key(c: Candidate) -> tuple[str, str | None, str | None, int]:
    return (c.prompt_id, c.transform, c.strength, c.seed)


class VerdictStore(Protocol):
    """What the verdict cache offers the book (`margin.serving.verdict_cache.VerdictCache`)."""

    def get_many(self, texts: list[RequestKey]) -> dict[RequestKey, Verdict]: ...
    def put_many(self, items: Iterable[tuple[RequestKey, Verdict]]) -> None: ...


@dataclass
class VerdictReplay:
    """What a killed run already recorded: its verdicts answer the same requests again."""

    # Keyed by a request key's SHA-256 (`key_sha256`: a text's, or a whole case's).
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # key sha256 -> completed output
    failed: dict[str, int] = field(default_factory=dict)  # key sha256 -> its last attempt without output
    waits: dict[str, int] = field(default_factory=dict)  # key sha256 -> attempts without output that used up none
    recorded: set[tuple[str, str | None, str | None, int]] = field(default_factory=set)  # candidates with a final line
    results: set[str] = field(default_factory=set)  # prompt ids with a result line
    run_id: str | None = None

    def output(self, key: RequestKey) -> Verdict | None:
        return self.verdicts.get(key_sha256(key))

    def failed_attempts(self, key: RequestKey) -> int:
        return self.failed.get(key_sha256(key), 0)

    def uncharged(self, key: RequestKey) -> int:
        return self.waits.get(key_sha256(key), 0)


@dataclass
class DriverStats:
    done: int = 0
    flips: int = 0
    missing: int = 0  # prompts without a result for lack of a verdict
    cache_hits: int = 0  # requests answered without a call: the cache or this run's memory
    replayed: int = 0  # requests a resumed run answered from the killed run's receipts


class Driver:
    def __init__(
        self,
        searches: Iterable[PromptSearch],
        *,
        total: int | None = None,
        backlog: int = BACKLOG,
        max_attempts: int = MAX_ATTEMPTS.default,
        retry_wait_s: float = RETRY_WAIT.default,
        on_call: OnCall = lambda _: None,
        on_result: OnResult = lambda _: None,
        on_flush: OnFlush = lambda: None,
        cache: VerdictStore | None = None,
        replay: VerdictReplay | None = None,
        clock: Callable[[], float] = time.monotonic,
        whole_cases: bool = False,
    ) -> None:
        """`searches` are started in order as the guard needs work (`total` of them; a
        sized collection says so itself); `backlog`: requests to keep waiting for the guard,
        enough to fill its calls in flight; `on_flush` runs after each batch of outcomes;
        `whole_cases`: the guard sees whole cases, not the target text alone
        (`margin.datasets.cases.guard_request`)."""
        self.whole_cases = whole_cases
        if total is None:
            if not isinstance(searches, Sized):
                raise TypeError("give `total` with an iterator of searches")
            total = len(searches)
        self.total = total
        self.backlog = max(1, backlog)
        self.on_call = on_call
        self.on_result = on_result
        self.replay = replay or VerdictReplay()
        self.stats = DriverStats()
        self.results: dict[int, SearchResult] = {}
        self.searches: dict[int, PromptSearch] = {}  # started and not finished, by position
        self.outstanding: dict[int, int] = {}  # verdicts each of those is waiting for
        self.ready: deque[int] = deque()
        self.started = 0
        self._unstarted = iter(searches)
        self._exhausted = False
        replayed = self.replay if (self.replay.verdicts or self.replay.failed) else None
        self.book = Book(answer=self._answer, record=self._record, record_known=self._record_known,
                         max_attempts=max_attempts, backoff=Backoff(base_s=retry_wait_s), store=cache,
                         replay=replayed, refill=self._refill, delivered=on_flush, clock=clock)

    @property
    def finished(self) -> bool:
        return self.book.finished

    @property
    def remaining(self) -> int:
        """Prompts without a result yet, started or not."""
        return self.total - len(self.results)

    @property
    def sent(self) -> int:
        """Texts sent to the guard, retries and hedges included."""
        return self.book.stats.sent

    def ordered_results(self) -> list[SearchResult]:
        return [self.results[i] for i in range(self.total)]

    # -- the book's hooks -------------------------------------------------------------

    def _record(self, owner: Owner, job: Job, outcome: Outcome) -> None:
        verdict = outcome.output
        error = None if verdict is not None else (outcome.error or "no output")
        self.on_call(GuardCall(owner[1], verdict, outcome.attempt, outcome.latency_s, error, charged=outcome.charged,
                               input_sha256=owner[2]))

    def _record_known(self, owner: Owner, verdict: Verdict | None, origin: Origin) -> None:
        candidate = owner[1]
        if self.replay.recorded and candidate_key(candidate) in self.replay.recorded:
            self.stats.replayed += 1
            return  # the killed run wrote this line already
        self.stats.cache_hits += 1
        error = None if verdict is not None else "no output after every attempt"
        self.on_call(GuardCall(candidate, verdict, attempt=0, latency_s=0.0, error=error, cached=True,
                               input_sha256=owner[2]))

    def _answer(self, owner: Owner, verdict: Verdict | None) -> None:
        index, candidate, _ = owner
        search = self.searches.get(index)
        if search is None:
            return  # decided before this answer came: its result is written
        search.receive(candidate, verdict)
        self.outstanding[index] -= 1
        self._settle(index, search)

    def _settle(self, index: int, search: PromptSearch) -> None:
        if search.done:
            result = search.result()
            self.results[index] = result
            del self.searches[index], self.outstanding[index]  # forget it: memory stays flat
            self.stats.done += 1
            self.stats.flips += result.flip is not None or result.flip_cost == 0
            self.stats.missing += result.status == "missing"
            self.on_result(result)  # replayed ones too: `VerdictReplay.results` says which are recorded
        elif self.outstanding[index] == 0:
            self.ready.append(index)

    def _refill(self) -> None:
        """Ask each search that has all its answers for its next candidates; start more
        searches while the guard's queue is short of `backlog`."""
        while True:
            while self.ready:
                index = self.ready.popleft()
                search = self.searches.get(index)
                if search is None or self.outstanding[index]:
                    continue
                if search.done:
                    self._settle(index, search)
                    continue
                requests = search.next_requests(search.window())
                if not requests:
                    raise RuntimeError(f"search for {search.prompt.id!r} is waiting but asked for nothing")
                self.outstanding[index] += len(requests)
                ask = self.book.ask
                if not self.whole_cases:  # the guard sees the text alone: it is the key and the request
                    for candidate in requests:
                        ask(POOL, candidate.text, candidate.text, (index, candidate, None))
                    continue
                for candidate in requests:
                    key, request = guard_request(search.prompt, candidate, True)
                    # a whole case's key is recorded beside the text's, so a resumed run finds it
                    ask(POOL, key, request, (index, candidate, None if isinstance(key, str) else key_sha256(key)))
            if self._exhausted or self.book.backlog(POOL) >= self.backlog:
                return
            self._start()

    def _start(self) -> None:
        if self.started == self.total:
            self._exhausted = True
            return
        search = next(self._unstarted, None)
        if search is None:
            raise RuntimeError(f"expected {self.total} searches, got {self.started}")
        index = self.started
        self.started += 1
        self.searches[index] = search
        self.outstanding[index] = 0
        self.ready.append(index)


