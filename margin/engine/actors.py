"""Models in Ray actors: dynamic batches, a bounded number of calls in flight per actor,
and recovery from actors that die or hang.

A `PoolActor` builds its model inside the actor from a picklable factory (so the driver
never loads a model). Calls queue inside the actor, which runs them as batches of up to
`max_batch_size` requests, waiting at most `max_wait_s` for a batch to fill. `ActorPool`
keeps `calls_per_actor` calls in flight on each of its `replicas` actors, so an actor
always has its next batch queued.

Failures: calls are read-only, so a dead actor is restarted by Ray (`max_restarts=-1`) and
the requests of its calls are charged an attempt (any of them may have killed it). A call
that has been its actor's work for longer than `call_timeout_s` is a hang: the actor is
killed and restarted, that call's requests are charged an attempt and the actor's other
calls are sent again uncharged. A restarted actor gets no work until it answers a ping.

Ray is imported lazily: `import margin` never pays for it.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from margin.engine.batcher import Batcher
from margin.engine.book import Book, Outcome, Ticket
from margin.engine.calls import BatchCaller, call_batch
from margin.engine.pool import OnCall, Pool, _ignore
from margin.engine.settings import BATCH_SIZE, CALL_TIMEOUT, MAX_WAIT
from margin.errors import InputError


class Factory(Protocol):
    """A picklable recipe for a model; `build` runs inside the actor."""

    def build(self) -> BatchCaller: ...


@dataclass(frozen=True, slots=True)
class BatchReport:
    actor: str  # one id per actor incarnation
    number: int
    size: int
    seconds: float


@dataclass(frozen=True, slots=True)
class Reply:
    outputs: list[Any]
    errors: list[str | None]
    batch: BatchReport
    retry: list[bool]  # per request: whether another attempt could give it an output


class PoolActor:
    """Wrapped with `ray.remote` by `ActorPool`; async, so calls queue while a batch runs."""

    def __init__(self, factory: Factory, max_batch_size: int, max_wait_s: float) -> None:
        self.caller = factory.build()
        self.max_batch_size = max(1, min(max_batch_size, self.caller.max_batch_size))
        self.id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.batches = 0
        self.batcher = Batcher(self._run, self.max_batch_size, max_wait_s)

    async def ready(self) -> tuple[Any, int]:
        """The model's identity (for checks against the driver's) and its batch size."""
        return getattr(self.caller, "info", None), self.max_batch_size

    async def call(self, requests: list[Any]) -> Reply:
        return await self.batcher.submit(requests)

    def _run(self, calls: list[list[Any]]) -> list[Reply]:
        result = call_batch(self.caller, [r for requests in calls for r in requests])
        self.batches += 1
        report = BatchReport(self.id, self.batches, sum(map(len, calls)), result.seconds)
        replies = []
        start = 0
        for requests in calls:
            end = start + len(requests)
            replies.append(Reply(result.outputs[start:end], result.errors[start:end], report,
                                 [result.retry_at(i) for i in range(start, end)]))
            start = end
        return replies


@dataclass(eq=False)  # compared by identity
class Flight:
    tickets: list[Ticket]
    future: Any


@dataclass(eq=False)
class Slot:
    """One actor and the calls in flight on it."""

    actor: Any
    inflight: deque[Flight] = field(default_factory=deque)
    head_since: float = 0.0  # when the oldest call in flight became the actor's work
    # While Ray (re)starts the actor it gets no work until it answers a ping.
    starting_since: float | None = None
    ping: Any = None  # a `ready` future in flight
    ping_at: float | None = None  # when to send the next ping
    deaths: int = 0  # failed starts in a row

    @property
    def ready(self) -> bool:
        return self.starting_since is None


class ActorPool(Pool):
    def __init__(self, name: str, factory: Factory, *, replicas: int = 1, num_cpus: float = 1.0,
                 num_gpus: float = 0.0, max_batch_size: int = BATCH_SIZE.default, max_wait_s: float = MAX_WAIT.default,
                 calls_per_actor: int = 2, call_timeout_s: float = CALL_TIMEOUT.case("batch"),
                 start_timeout_s: float = 600.0,
                 max_starts: int = 3, release_when_done: bool = False, on_call: OnCall = _ignore) -> None:
        if replicas < 1:
            raise ValueError("replicas must be at least 1")
        super().__init__(name, "actors", on_call)
        self.factory = factory
        self.replicas = replicas
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.calls_per_actor = max(1, calls_per_actor)
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_starts = max_starts
        # A study's pool frees its CPUs and GPUs once sealed and idle, for the pools still waiting.
        self.release_when_done = release_when_done
        self.slots: list[Slot] = []
        self.started = False
        self.owns = True  # False: actors another pool started (and kills)
        self.tag = secrets.token_hex(4)
        self.figures.capacity = max_batch_size
        self._seen: dict[str, set[int]] = {}  # batches already reported, per actor incarnation

    # -- starting and stopping ------------------------------------------------------------

    @classmethod
    def attach(cls, name: str, actors: list[Any], *, capacity: int, **options: Any) -> ActorPool:
        """A pool over running actors that another pool started and owns (several drivers
        sharing one guard's actors): it sends them work and restarts a hung one as any pool
        would, but never starts them and leaves them running at the end."""
        pool = cls(name, _NoFactory(), replicas=len(actors), max_batch_size=capacity, **options)
        pool.slots = [Slot(actor) for actor in actors]
        pool.started = True
        pool.owns = False
        return pool

    @property
    def actors(self) -> list[Any]:
        return [slot.actor for slot in self.slots]

    def start(self, *, wait: bool = True) -> Any:
        """Create the actors. With `wait`, block until each has built its model and return
        the model's identity (they must agree); else they get work once they answer a ping."""
        import ray

        remote = ray.remote(num_cpus=self.num_cpus, num_gpus=self.num_gpus, max_restarts=-1,
                            max_task_retries=0)(PoolActor)
        now = time.monotonic()
        for i in range(self.replicas):
            actor = remote.options(name=f"margin-{self.name}-{self.tag}-{i}").remote(
                self.factory, self.max_batch_size, self.max_wait_s)
            self.slots.append(Slot(actor, starting_since=now, ping_at=now))
        self.started = True
        if not wait:
            return None
        try:
            answers = ray.get([slot.actor.ready.remote() for slot in self.slots], timeout=self.start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise RuntimeError(
                f"{self.replicas} actor(s) for {self.name} with num_cpus={self.num_cpus:g}, num_gpus={self.num_gpus:g} "
                f"did not start within {self.start_timeout_s:g} s: does the cluster have those resources?"
            ) from None
        except ray.exceptions.RayActorError as exc:
            self.close()
            if exc.actor_init_failed:  # the model could not be built: a setup error, said in one line
                raise InputError(_input_error(exc) or f"the {self.name} could not start in its Ray actor: "
                                                      f"{_cause(exc)}") from None
            raise RuntimeError(f"an actor for {self.name} could not start: {_cause(exc)}") from None
        identities = {repr(identity) for identity, _ in answers}
        if len(identities) != 1:
            self.close()
            raise RuntimeError(f"the actors for {self.name} disagree on the model's identity: {sorted(identities)}")
        for slot in self.slots:
            slot.starting_since = slot.ping_at = None
        self.figures.capacity = min(size for _, size in answers)
        return answers[0][0]

    def close(self) -> None:
        import ray

        if self.owns:
            for slot in self.slots:
                ray.kill(slot.actor, no_restart=True)
        self.slots = []

    # -- the loop's calls -----------------------------------------------------------------

    @property
    def inflight(self) -> int:
        return sum(len(slot.inflight) + (slot.ping is not None) for slot in self.slots)

    @property
    def appetite(self) -> int:
        return self.replicas * self.calls_per_actor * max(1, self.figures.capacity)

    def dispatch(self, book: Book, now: float) -> None:
        if not self.started:
            if not book.queued(self.name):
                return
            self.start(wait=False)
        self._ping(now)
        for slot in sorted(self.slots, key=lambda s: len(s.inflight)):
            while slot.ready and len(slot.inflight) < self.calls_per_actor:
                tickets = book.take(self.name, self.figures.capacity)
                if not tickets:
                    return
                if not slot.inflight:
                    slot.head_since = now
                flight = Flight(tickets, slot.actor.call.remote([t.request for t in tickets]).future())
                slot.inflight.append(flight)
                self.watch(flight.future, (slot, flight))

    def complete(self, book: Book, token: Any, now: float) -> None:
        slot, flight = token
        if flight is None:
            self._pinged(book, slot, now)
        else:
            self._receive(book, slot, flight, now)

    def tick(self, book: Book, now: float) -> None:
        self._expire(book, now)
        for slot in list(self.slots):
            if slot.starting_since is not None and now - slot.starting_since > self.start_timeout_s:
                self._drop(book, slot, f"it did not start within {self.start_timeout_s:g} s: does the cluster "
                                       f"have the CPUs and GPUs it asks for (num_cpus, num_gpus, replicas)?")
        if self.release_when_done and self.slots and self.name in book.sealed and not book.busy(self.name):
            self.close()  # done for good

    def next_timer(self, book: Book, now: float) -> float | None:
        times = [slot.head_since + self.call_timeout_s for slot in self.slots if slot.inflight]
        times += [slot.ping_at for slot in self.slots if slot.ping_at is not None]
        times += [slot.starting_since + self.start_timeout_s for slot in self.slots if slot.starting_since is not None]
        return min(times) if times else None

    # -- inside ---------------------------------------------------------------------------

    def _ping(self, now: float) -> None:
        for slot in self.slots:
            if slot.ping is None and slot.ping_at is not None and slot.ping_at <= now:
                slot.ping, slot.ping_at = slot.actor.ready.remote().future(), None
                self.watch(slot.ping, (slot, None))

    def _restarting(self, slot: Slot, now: float) -> None:
        """Hold work back from an actor Ray is restarting until it answers a ping."""
        if slot.ready:
            slot.starting_since = now
            slot.ping_at = now

    def _pinged(self, book: Book, slot: Slot, now: float) -> None:
        import ray

        future, slot.ping = slot.ping, None
        if slot not in self.slots:
            return
        try:
            future.result()
        except ray.exceptions.ActorUnavailableError:
            slot.ping_at = now + 0.2  # still restarting: ask again shortly
            return
        except ray.exceptions.RayActorError as exc:
            slot.deaths += 1
            if slot.deaths >= self.max_starts:
                self._drop(book, slot, f"it died {slot.deaths} times while starting: {_cause(exc)}")
                return
            slot.ping_at = now + 0.5
            return
        slot.starting_since = None
        slot.deaths = 0

    def _drop(self, book: Book, slot: Slot, why: str) -> None:
        """Carry on with the other actors; with none left the pool cannot finish."""
        import ray

        self.slots.remove(slot)
        ray.kill(slot.actor, no_restart=True)
        for flight in slot.inflight:
            book.requeue(flight.tickets)
        slot.inflight.clear()
        if not self.slots:
            raise RuntimeError(f"every actor for {self.name} is gone; the last one because {why}")

    def _receive(self, book: Book, slot: Slot, flight: Flight, now: float) -> None:
        import ray

        if flight not in slot.inflight:
            return  # settled already when its actor was replaced
        slot.inflight.remove(flight)
        slot.head_since = now
        try:
            reply: Reply = flight.future.result()
        except ray.exceptions.RayActorError as exc:
            # The actor died with this call in it: any of its calls may have killed it, so each
            # is charged an attempt. Ray restarts the actor.
            if slot.ready:
                self.figures.restarts += 1
                self._restarting(slot, now)
            message = f"{self.name} actor died: {type(exc).__name__}"
            book.deliver(Outcome(t.key, t.attempt, None, 0.0, message) for t in flight.tickets)
            return
        report = reply.batch
        if report.number not in self._seen.setdefault(report.actor, set()):
            self._seen[report.actor].add(report.number)
            self.figures.calls += 1
            self.figures.requests += report.size
            self.figures.call_s += report.seconds
            self.on_call(report.size, self.figures.capacity, report.seconds)
        per = report.seconds / max(report.size, 1)
        book.deliver(Outcome(t.key, t.attempt, out, per, err, retry=retry)
                     for t, out, err, retry in zip(flight.tickets, reply.outputs, reply.errors, reply.retry,
                                                   strict=True))

    def _expire(self, book: Book, now: float) -> None:
        """A call that has been its actor's work for longer than the timeout is a hang."""
        import ray

        for slot in self.slots:
            if not slot.inflight or now - slot.head_since < self.call_timeout_s:
                continue
            hung, *others = slot.inflight
            slot.inflight.clear()
            self.figures.timeouts += 1
            ray.kill(slot.actor, no_restart=False)  # Ray restarts it
            self._restarting(slot, now)
            message = f"timeout: no output within {self.call_timeout_s:g} s; {self.name} actor restarted"
            book.deliver(Outcome(t.key, t.attempt, None, 0.0, message) for t in hung.tickets)
            for flight in others:
                book.requeue(flight.tickets)


class _NoFactory:
    """An attached pool's: its actors were built elsewhere."""

    def build(self) -> BatchCaller:
        raise RuntimeError("an attached pool does not start actors")


def _input_error(exc: BaseException) -> str | None:
    """The message of an InputError raised where the actor built its model (Ray keeps only
    the traceback's text)."""
    found = re.findall(r"^(?:margin\.errors\.)?InputError: (.+)$", str(exc), flags=re.M)
    return found[-1].strip() if found else None


def _cause(exc: BaseException) -> str:
    text = str(exc)
    for line in reversed(text.splitlines()):
        if line.strip() and ("Error" in line or "error" in line):
            return line.strip()[:300]
    return text.strip().splitlines()[-1][:300] if text.strip() else type(exc).__name__
