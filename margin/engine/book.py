"""The request book: every model call margin makes is asked for, tracked and answered here.

A request is a key (what decides its output: a guard's text, a model's messages), the
request itself, the pool that serves it and the owners waiting for it. The book

- sends each key once: a second ask joins the call queued or in flight, or is answered
  without a call from its memory of recent answers (bounded, so it does not grow with the
  run), a killed run's receipts (resume) or the persistent cache (looked up in bulk: one
  query for all the keys asked since the last look);
- hands requests to pools (`take`), counting attempts, and takes their outcomes back
  (`deliver`): an outcome without output is retried after a jittered exponential backoff
  that honours Retry-After, until the pool's attempt limit, then the key is missing and its
  owners get None. Only attempts that were tried and failed count: an outcome the pool
  marks uncharged (the server asked to wait, the endpoint was down) is retried without
  using one up, and `record` is told which failures used one up (a resumed run counts
  only those);
- lets a pool send a second copy of a slow request (`hedge`) and put back requests that
  never ran (`requeue`, uncharged).

It calls nothing itself and is single-threaded: the engine loop (`margin.engine.loop`) runs
the pools around it. Owners are opaque: `answer(owner, output)` tells one; `record` sees
every attempt's outcome and `record_known` every answer given without a call.
"""

from __future__ import annotations

import heapq
import random
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from margin.engine.recent import ABSENT, Recent
from margin.engine.settings import MAX_ATTEMPTS, RETRY_WAIT

#: Where an answer given without a call came from.
Origin = Literal["memo", "replay", "cache", "joined"]


class Ticket(NamedTuple):
    """One attempt handed to a pool."""

    key: Hashable
    request: Any
    attempt: int


class Outcome(NamedTuple):
    """What a pool reports for one ticket: an output, or None with the error that kept it."""

    key: Hashable
    attempt: int
    output: Any
    latency_s: float
    error: str | None = None
    retry_after_s: float | None = None  # what the server asked us to wait
    retry: bool = True  # False: another attempt cannot help (a bad key)
    # False: not an attempt that was tried and failed (the server asked to wait, the
    # connection was refused, the endpoint was down): retried without using up an attempt.
    charged: bool = True


class Store(Protocol):
    """Completed outputs kept across runs (sqlite caches)."""

    def get_many(self, keys: list[Any]) -> dict[Any, Any]: ...  # the keys it holds
    def put_many(self, items: Iterable[tuple[Any, Any]]) -> None: ...


class Replay(Protocol):
    """What a killed run recorded: its outputs answer the same keys again."""

    def output(self, key: Any) -> Any: ...  # None when it recorded none
    def failed_attempts(self, key: Any) -> int: ...  # the last attempt it made without output (0: none)
    def uncharged(self, key: Any) -> int: ...  # of its attempts without output, those that used up none


def note_failed_attempt(failed: dict[Any, int], waits: dict[Any, int], key: Any, record: Mapping[str, Any]) -> None:
    """Read a receipt line of an attempt without output into what a `Replay` answers: the last
    attempt made for `key` (`failed`) and how many of them used up none (`waits`: lines with
    `"charged": false`; a line written before that field existed counts as charged)."""
    failed[key] = max(failed.get(key, 0), int(record["attempt"]))
    if record.get("charged") is False:
        waits[key] = waits.get(key, 0) + 1


@dataclass(frozen=True)
class Backoff:
    """Wait before retry n (1 = the first retry): "equal jitter" on an exponential ceiling
    (half fixed, half random, so retries of a burst spread out but never come back at once),
    never less than what the server asked (Retry-After), capped at `cap_s`."""

    base_s: float = RETRY_WAIT.default
    cap_s: float = 30.0

    def delay(self, retry: int, retry_after_s: float | None, rng: random.Random) -> float:
        ceiling = min(self.cap_s, self.base_s * 2 ** (retry - 1))
        wait = ceiling / 2 + rng.uniform(0, ceiling / 2)
        if retry_after_s is not None:
            wait = max(wait, min(retry_after_s, self.cap_s))
        return wait


@dataclass(slots=True, eq=False)
class Job:
    pool: str
    key: Hashable
    request: Any
    owners: list[Any]
    limit: int  # the attempt number after which the key is missing
    attempts: int = 0  # attempts started
    inflight: int = 0  # attempts running now (two while hedged)


@dataclass
class BookStats:
    sent: int = 0  # attempts handed to pools (hedges and retries included)
    completed: int = 0  # keys answered by a call
    retries: int = 0  # attempts after one without output
    hedges: int = 0  # second copies of slow requests
    known: dict[str, int] = field(default_factory=dict)  # answers without a call, by origin
    missing: int = 0  # keys without output after every attempt
    waits: int = 0  # retries that used up no attempt (429, refused, endpoint down)


def _nothing(*_: Any) -> None:
    return None


class Book:
    def __init__(
        self,
        *,
        answer: Callable[[Any, Any], None],
        record: Callable[[Any, Job, Outcome], None] = _nothing,
        record_known: Callable[[Any, Any, Origin], None] = _nothing,
        max_attempts: int | dict[str, int] = MAX_ATTEMPTS.default,
        backoff: Backoff | None = None,
        store: Store | None = None,
        replay: Replay | None = None,
        refill: Callable[[], None] | None = None,
        delivered: Callable[[], None] = _nothing,
        clock: Callable[[], float] = time.monotonic,
        seed: int = 0,
        memory: int = 1 << 16,
    ) -> None:
        """`delivered` runs after each batch of outcomes is recorded (writers flush there);
        `memory`: answers remembered for asks that come later (twice as many at most)."""
        limits = max_attempts.values() if isinstance(max_attempts, dict) else [max_attempts]
        if any(n < 1 for n in limits):
            raise ValueError("max_attempts must be at least 1")
        self.answer = answer
        self.record = record
        self.record_known = record_known
        self.max_attempts = max_attempts
        self.backoff = backoff or Backoff()
        self.store = store
        self.replay = replay
        self.refill = refill
        self.delivered = delivered
        self.clock = clock
        self.rng = random.Random(seed)  # jitter only: it changes when, never what
        self.stats = BookStats()
        self.jobs: dict[Hashable, Job] = {}  # queued, backing off or in flight
        self.fresh: dict[str, deque[Job]] = {}
        self.waiting: list[tuple[float, int, Job]] = []  # backing off: (due, tiebreak, job)
        self.memo = Recent(memory)  # recent answers (None: missing after every attempt)
        self.unchecked: dict[Hashable, Job] = {}  # asked for, not yet looked up in the store
        self.pending: deque[tuple[Any, Any]] = deque()  # answered without a call, owners not yet told
        self.sealed: set[str] = set()  # pools that will be asked nothing new
        self._to_store: list[tuple[Any, Any]] = []
        self._tiebreak = 0

    # -- asking -------------------------------------------------------------------------

    def ask(self, pool: str, key: Hashable, request: Any, owner: Any) -> None:
        """Ask for `key`'s output on behalf of `owner`; it is told through `answer`."""
        job = self.jobs.get(key)
        if job is not None:
            job.owners.append(owner)
            return
        found, output, origin = self._known(key)
        if found:
            self._tell(owner, output, origin)
            return
        limit = self.max_attempts if isinstance(self.max_attempts, int) else self._limit(pool)
        job = Job(pool, key, request, [owner], limit)
        if self.replay is not None and (last := self.replay.failed_attempts(key)):
            # Continue the killed run's attempt numbers with the attempts it had left (waits
            # used up none); a key it gave up on gets a fresh set.
            used = last - self.replay.uncharged(key)
            job.attempts = last
            job.limit = last + (limit if used >= limit else limit - used)
        self.jobs[key] = job  # later asks join it, looked up or not
        if self.store is not None:
            self.unchecked[key] = job
        else:
            queue = self.fresh.get(pool)
            (queue if queue is not None else self._queue(pool)).append(job)

    def seal(self, pool: str) -> None:
        self.sealed.add(pool)

    def pump(self) -> None:
        """Let the refill hook ask for more, look the new keys up in the store, and tell
        owners answered without a call, until nothing is left to do."""
        while True:
            if self.refill is not None:
                self.refill()
            if self.unchecked:
                self._look_up()
            if not self.pending:
                return
            while self.pending:
                owner, output = self.pending.popleft()
                self.answer(owner, output)

    # -- what pools call -----------------------------------------------------------------

    def take(self, pool: str, limit: int) -> list[Ticket]:
        """Up to `limit` requests for `pool` to send now."""
        self.pump()
        self._wake(self.clock())
        queue = self.fresh.get(pool)
        out: list[Ticket] = []
        while queue and len(out) < limit:
            job = queue.popleft()
            job.attempts += 1
            job.inflight += 1
            out.append(Ticket(job.key, job.request, job.attempts))
        self.stats.sent += len(out)
        return out

    def hedge(self, key: Hashable) -> Ticket | None:
        """One more attempt at a request still in flight (its first copy is slow); None when
        it is answered already. A hedge raises the key's attempt limit by one, so the copy
        never takes an attempt a failure would need."""
        job = self.jobs.get(key)
        if job is None:
            return None
        job.attempts += 1
        job.limit += 1
        job.inflight += 1
        self.stats.sent += 1
        self.stats.hedges += 1
        return Ticket(job.key, job.request, job.attempts)

    def requeue(self, tickets: Iterable[Ticket]) -> None:
        """Tickets taken but never run (their actor was replaced): send again, uncharged."""
        for ticket in tickets:
            job = self.jobs[ticket.key]
            job.attempts -= 1
            job.inflight -= 1
            self.stats.sent -= 1
            self._queue(job.pool).appendleft(job)

    def deliver(self, outcomes: Iterable[Outcome]) -> None:
        for outcome in outcomes:
            job = self.jobs.get(outcome.key)
            if job is None:
                continue  # a late copy of a request answered already
            job.inflight -= 1
            if job.inflight and outcome.output is None and outcome.charged:
                outcome = outcome._replace(charged=False)  # another copy may answer: nothing used up
            self.record(job.owners[0], job, outcome)
            if outcome.output is None:
                self._failed(job, outcome)
            else:
                self._completed(job, outcome.output)
        if self.store is not None and self._to_store:
            self.store.put_many(self._to_store)
        self._to_store = []
        self.delivered()

    # -- state ---------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        self.pump()
        return not self.jobs

    def queued(self, pool: str) -> int:
        self.pump()
        self._wake(self.clock())
        return len(self.fresh.get(pool, ()))

    def backlog(self, pool: str) -> int:
        """Requests for `pool` waiting to be sent or looked up, without pumping (for the
        refill hook, which pumping calls)."""
        return len(self.fresh.get(pool, ())) + len(self.unchecked)

    def busy(self, pool: str) -> bool:
        """Whether `pool` has requests queued, backing off or in flight."""
        self.pump()
        return any(job.pool == pool for job in self.jobs.values())

    def next_due(self) -> float | None:
        """When the next request backing off may be sent (None: none is)."""
        return self.waiting[0][0] if self.waiting else None

    # -- inside --------------------------------------------------------------------------

    def _limit(self, pool: str) -> int:
        if isinstance(self.max_attempts, dict):
            return self.max_attempts.get(pool, 3)
        return self.max_attempts

    def _queue(self, pool: str) -> deque[Job]:
        queue = self.fresh.get(pool)
        if queue is None:
            queue = self.fresh[pool] = deque()
        return queue

    def _wake(self, now: float) -> None:
        while self.waiting and self.waiting[0][0] <= now:
            job = heapq.heappop(self.waiting)[2]
            self._queue(job.pool).appendleft(job)

    def _known(self, key: Hashable) -> tuple[bool, Any, Origin]:
        output = self.memo.young.get(key, ABSENT)  # Recent.get, inline: every ask comes here
        if output is ABSENT:
            output = self.memo.old.get(key, ABSENT)
        if output is not ABSENT:
            return True, output, "memo"
        if self.replay is not None and (output := self.replay.output(key)) is not None:
            self.memo[key] = output
            return True, output, "replay"
        return False, None, "memo"

    def _tell(self, owner: Any, output: Any, origin: Origin) -> None:
        self.stats.known[origin] = self.stats.known.get(origin, 0) + 1
        self.record_known(owner, output, origin)
        self.pending.append((owner, output))

    def _look_up(self) -> None:
        """One store query for every key asked since the last: hits are answered, the rest
        queued for their pools in the order they were asked."""
        assert self.store is not None
        unchecked, self.unchecked = self.unchecked, {}
        found = self.store.get_many(list(unchecked))
        for key, job in unchecked.items():
            output = found.get(key)
            if output is None:
                self._queue(job.pool).append(job)
                continue
            del self.jobs[key]
            self.memo[key] = output
            for owner in job.owners:
                self._tell(owner, output, "cache")

    def _failed(self, job: Job, outcome: Outcome) -> None:
        if job.inflight:
            return  # another copy is still running: it may answer
        if outcome.retry and not outcome.charged:
            job.limit += 1  # a wait, not a failed attempt
            self.stats.waits += 1
        if outcome.retry and job.attempts < job.limit:
            self.stats.retries += 1
            due = self.clock() + self.backoff.delay(job.attempts, outcome.retry_after_s, self.rng)
            self._tiebreak += 1
            heapq.heappush(self.waiting, (due, self._tiebreak, job))
            return
        del self.jobs[job.key]
        self.memo[job.key] = None
        self.stats.missing += 1
        for owner in job.owners:
            self.answer(owner, None)

    def _completed(self, job: Job, output: Any) -> None:
        del self.jobs[job.key]
        self.memo[job.key] = output
        self._to_store.append((job.key, output))
        self.stats.completed += 1
        for owner in job.owners[1:]:  # asked for while the call was in flight
            self.stats.known["joined"] = self.stats.known.get("joined", 0) + 1
            self.record_known(owner, output, "joined")
        for owner in job.owners:
            self.answer(owner, output)
