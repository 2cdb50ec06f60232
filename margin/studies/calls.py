"""Model and judge calls: each distinct request sent once, answered from memory where it can.

`Calls` owns the bookkeeping, as the search engine's driver does for guard verdicts: a
request is keyed by its model's identity and its exact messages; a second request for the
same key joins the one queued or in flight, or is answered from this study's memory, the
killed study's receipts (resume) or the response cache. A request without output is retried
with exponential backoff; after `max_attempts` it is missing and its owners get None.
Executors (`margin.studies.executors`) take requests per pool (one pool per model), call the
model and hand outputs back with `deliver`. Every attempt is recorded through `on_record`.

An owner's callback may make new requests (a judge request once both responses are in):
the executor keeps going until no pool has work left.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from margin.hashing import canonical_json, sha256_text
from margin.studies.models import Messages, Reply

OnDone = Callable[[Reply | None], None]
OnRecord = Callable[[dict[str, Any]], None]


def request_key(model_key: str, messages: Messages) -> str:
    return sha256_text(canonical_json({"model": model_key, "messages": messages}))


@dataclass
class Job:
    pool: str
    key: str
    messages: Messages
    tag: dict[str, Any]  # what the receipt says about the first owner (role, prompt, transform)
    owners: list[OnDone] = field(default_factory=list)
    attempts: int = 0
    limit: int = 1


class ReplyStore:
    """What answers a request without a call (the response cache, or nothing)."""

    def get(self, key: str) -> Reply | None:
        return None

    def put_many(self, items: Iterable[tuple[str, Reply]]) -> None:
        pass


@dataclass
class CallStats:
    sent: int = 0
    completed: int = 0
    cached: int = 0  # answered from memory, the cache or a join
    replayed: int = 0  # answered from the killed study's receipts
    missing: int = 0


class Calls:
    def __init__(self, pools: Iterable[str], *, max_attempts: int = 3, retry_wait_s: float = 0.5,
                 store: ReplyStore | None = None, replay: dict[str, Reply] | None = None,
                 failed: dict[str, int] | None = None, on_record: OnRecord = lambda _: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.pools = list(pools)
        self.max_attempts = max_attempts
        self.retry_wait_s = retry_wait_s
        self.store = store if store is not None else ReplyStore()
        self.replay = replay or {}
        self.failed = failed or {}
        self.on_record = on_record
        self.clock = clock
        self.stats = CallStats()
        self.jobs: dict[str, Job] = {}  # queued, backing off or in flight
        self.fresh: dict[str, deque[str]] = {p: deque() for p in self.pools}
        self.backoff: list[tuple[float, int, str]] = []
        self.memo: dict[str, Reply | None] = {}
        self.sealed: set[str] = set()  # pools that will get no new requests
        self._pending_done: deque[tuple[list[OnDone], Reply | None]] = deque()
        self._to_store: list[tuple[str, Reply]] = []
        self._tiebreak = 0

    # -- asking -------------------------------------------------------------------------

    def request(self, pool: str, model_key: str, messages: Messages, tag: dict[str, Any], on_done: OnDone) -> None:
        key = request_key(model_key, messages)
        if key in self.jobs:
            self.jobs[key].owners.append(on_done)
            self._record(pool, key, tag, reply=None, attempt=0, cached=True, joined=True)
            return
        known, reply = self._known(key)
        if known:
            replayed = key in self.replay
            self._record(pool, key, tag, reply=reply, attempt=0, cached=True, replayed=replayed,
                         error=None if reply is not None else "no output after every attempt")
            self._pending_done.append(([on_done], reply))
            return
        job = Job(pool, key, messages, tag, [on_done], limit=self.max_attempts)
        if failed := self.failed.get(key, 0):  # continue the killed study's attempts
            job.attempts = failed
            job.limit = failed + self.max_attempts if failed >= self.max_attempts else self.max_attempts
        self.jobs[key] = job
        self.fresh[pool].append(key)

    def seal(self, pool: str) -> None:
        self.sealed.add(pool)

    def flush(self) -> None:
        """Run the callbacks of requests answered without a call (they may ask for more)."""
        while self._pending_done:
            owners, reply = self._pending_done.popleft()
            for owner in owners:
                owner(reply)

    # -- what executors call -----------------------------------------------------------

    def take(self, pool: str, limit: int) -> list[tuple[str, Messages, int]]:
        self.flush()
        now = self.clock()
        while self.backoff and self.backoff[0][0] <= now:
            key = heapq.heappop(self.backoff)[2]
            self.fresh[self.jobs[key].pool].appendleft(key)
        out: list[tuple[str, Messages, int]] = []
        queue = self.fresh[pool]
        while queue and len(out) < limit:
            job = self.jobs[queue.popleft()]
            job.attempts += 1
            out.append((job.key, job.messages, job.attempts))
        self.stats.sent += len(out)
        return out

    def queued(self, pool: str) -> int:
        self.flush()
        return len(self.fresh[pool])

    def busy(self, pool: str) -> bool:
        """Whether the pool has requests queued, backing off or in flight."""
        self.flush()
        return any(job.pool == pool for job in self.jobs.values())

    @property
    def finished(self) -> bool:
        self.flush()
        return not self.jobs

    def next_due(self) -> float | None:
        return self.backoff[0][0] if self.backoff else None

    def requeue(self, keys: Iterable[str]) -> None:
        """Taken but never run (their actor was replaced): send again, uncharged."""
        for key in keys:
            job = self.jobs[key]
            job.attempts -= 1
            self.stats.sent -= 1
            self.fresh[job.pool].appendleft(key)

    def deliver(self, outputs: Iterable[tuple[str, int, Reply | None, float, str | None]]) -> None:
        """(key, attempt, reply or None, latency_s, error) for requests taken earlier."""
        for key, attempt, reply, latency_s, error in outputs:
            self._deliver(key, attempt, reply, latency_s, error)
        if self._to_store:
            self.store.put_many(self._to_store)
            self._to_store = []
        self.flush()

    # -- inside ------------------------------------------------------------------------

    def _deliver(self, key: str, attempt: int, reply: Reply | None, latency_s: float, error: str | None) -> None:
        job = self.jobs[key]
        self._record(job.pool, key, job.tag, reply=reply, attempt=attempt, latency_s=latency_s,
                     error=None if reply is not None else (error or "no output"))
        if reply is None and job.attempts < job.limit:
            due = self.clock() + self.retry_wait_s * 2 ** (job.attempts - 1)
            self._tiebreak += 1
            heapq.heappush(self.backoff, (due, self._tiebreak, key))
            return
        del self.jobs[key]
        self.memo[key] = reply
        if reply is None:
            self.stats.missing += 1
        else:
            self.stats.completed += 1
            self._to_store.append((key, reply))
        self._pending_done.append((job.owners, reply))

    def _known(self, key: str) -> tuple[bool, Reply | None]:
        if key in self.memo:
            return True, self.memo[key]
        if key in self.replay:
            self.memo[key] = self.replay[key]
            return True, self.memo[key]
        hit = self.store.get(key)
        if hit is not None:
            self.memo[key] = hit
            return True, hit
        return False, None

    def _record(self, pool: str, key: str, tag: dict[str, Any], *, reply: Reply | None, attempt: int,
                latency_s: float = 0.0, error: str | None = None, cached: bool = False,
                replayed: bool = False, joined: bool = False) -> None:
        if replayed:
            self.stats.replayed += 1
            return  # the killed study wrote this output already
        if cached:
            self.stats.cached += 1
            if joined:
                return  # the call it joined records the output
        self.on_record({
            "kind": "call", **tag, "pool": pool, "key": key,
            "output": reply.text if reply else None, "truncated": reply.truncated if reply else None,
            "attempt": attempt, "cached": cached, "latency_s": round(latency_s, 6), "error": error,
        })


def load_replay(records: Iterable[dict[str, Any]]) -> tuple[dict[str, Reply], dict[str, int]]:
    """(completed outputs by key, attempts without output by key) from a killed study's receipts."""
    replies: dict[str, Reply] = {}
    failed: dict[str, int] = {}
    for record in records:
        if record.get("kind") != "call":
            continue
        if record.get("output") is not None:
            replies[record["key"]] = Reply(record["output"], bool(record.get("truncated")))
        elif not record.get("cached"):
            failed[record["key"]] = max(failed.get(record["key"], 0), int(record["attempt"]))
    return replies, failed
