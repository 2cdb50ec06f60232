"""The Ray runtime: guard actors that batch dynamically, and the source that drives them.

A `GuardActor` holds one guard (a model or an HTTP client), built inside the actor from a
picklable GuardSpec, so the driver never loads a model. Calls queue inside the actor; it
runs them as batches of up to `max_batch_size` texts, waiting at most `max_wait_s` for a
batch to fill, and reports each batch's compute time. `replicas` actors give data
parallelism.

`RaySource` keeps every actor busy with a bounded number of calls in flight (`ray.wait`),
feeds outputs back to the driver, and survives failures: scoring is read-only, so a dead
actor is restarted by Ray (`max_restarts=-1`) and its calls are retried by the driver; a
call past `call_timeout_s` is treated as a hang: its actor is killed and restarted, its
texts charged one attempt, the other calls on that actor sent again uncharged.

Ray is imported lazily: `import margin` never pays for it.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from margin.batching import Batcher
from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.make import build_guard
from margin.guards.spec import GuardSpec
from margin.search.driver import Driver, OnBatch
from margin.search.source import call_guard
from margin.types import GuardInfo, Verdict

GuardSource = GuardSpec | Guard  # a spec is built in the actor; a Guard instance is shipped as is


@dataclass(frozen=True, slots=True)
class BatchReport:
    actor: str  # one id per actor incarnation
    number: int
    size: int
    compute_s: float


@dataclass(frozen=True, slots=True)
class Reply:
    verdicts: list[Verdict | None]
    errors: list[str | None]
    batches: list[BatchReport]


class GuardActor:
    """Wrapped with `ray.remote` by `RaySource`; async, so calls queue while a batch runs."""

    def __init__(self, source: GuardSource, max_batch_size: int, max_wait_s: float) -> None:
        self.guard = build_guard(source) if isinstance(source, GuardSpec) else source
        self.max_batch_size = max(1, min(max_batch_size, self.guard.max_batch_size))
        self.id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.batches = 0
        self.batcher = Batcher(self._run, self.max_batch_size, max_wait_s)

    async def ready(self) -> tuple[GuardInfo, int]:
        return self.guard.info, self.max_batch_size

    async def classify(self, texts: list[str]) -> Reply:
        return await self.batcher.submit(texts)

    def _run(self, calls: list[list[str]]) -> list[Reply]:
        output = call_guard(self.guard, [t for texts in calls for t in texts])
        self.batches += 1
        report = BatchReport(self.id, self.batches, sum(map(len, calls)), output.compute_s)
        replies = []
        start = 0
        for texts in calls:
            end = start + len(texts)
            replies.append(Reply(output.verdicts[start:end], output.errors[start:end], [report]))
            start = end
        return replies


def wait_ready(refs: list[Any], timeout: float) -> list[Any]:
    """Wait up to `timeout` seconds for one ref, then take every ref that is ready by now."""
    import ray

    ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
    if ready:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
    return ready


@dataclass(eq=False)  # compared by identity
class Call:
    ref: Any
    taken: list[tuple[str, int]]


@dataclass
class Slot:
    """One guard actor and the calls in flight on it."""

    name: str
    actor: Any
    inflight: deque[Call] = field(default_factory=deque)
    head_since: float = 0.0  # when the oldest call in flight became the actor's work
    # While Ray restarts the actor it gets no work (and no deadline) until it answers a ping.
    restarting_since: float | None = None
    ping: Any = None
    ping_at: float | None = None  # when to send the next ping
    deaths: int = 0  # restarts that failed in a row

    @property
    def restarting(self) -> bool:
        return self.restarting_since is not None


@dataclass
class EngineStats:
    restarts: int = 0  # actors that died under a call (Ray restarts them)
    timeouts: int = 0  # calls past the timeout (their actor was killed and restarted)


class RaySource:
    """Guard actors on the current Ray cluster, driven with a bounded number of calls in flight."""

    def __init__(
        self,
        guard: GuardSource,
        *,
        replicas: int = 1,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        max_batch_size: int = 64,
        max_wait_s: float = 0.005,
        max_attempts: int = 3,
        retry_wait_s: float = 0.5,
        calls_per_actor: int = 2,
        call_timeout_s: float = 300.0,
        restart_timeout_s: float = 600.0,
        name: str | None = None,
    ) -> None:
        if replicas < 1:
            raise ValueError("replicas must be at least 1")
        self.guard = guard
        self.replicas = replicas
        self.num_cpus = num_cpus
        self.num_gpus = num_gpus
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.max_attempts = max_attempts
        self.retry_wait_s = retry_wait_s
        self.calls_per_actor = max(1, calls_per_actor)
        self.call_timeout_s = call_timeout_s
        self.restart_timeout_s = restart_timeout_s
        self.name = name or f"margin-guard-{secrets.token_hex(4)}"
        self.slots: list[Slot] = []
        self.capacity = max_batch_size
        self.info: GuardInfo | None = None
        self.stats = EngineStats()
        self._seen: dict[str, set[int]] = {}  # batches already reported, per actor incarnation

    def start(self) -> GuardInfo:
        """Create the actors and wait until each has built its guard."""
        import ray

        remote = ray.remote(num_cpus=self.num_cpus, num_gpus=self.num_gpus, max_restarts=-1,
                            max_task_retries=0)(GuardActor)
        for i in range(self.replicas):
            name = f"{self.name}-{i}"
            actor = remote.options(name=name).remote(self.guard, self.max_batch_size, self.max_wait_s)
            self.slots.append(Slot(name, actor))
        try:
            answers = ray.get([slot.actor.ready.remote() for slot in self.slots], timeout=self.restart_timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise RuntimeError(
                f"{self.replicas} guard actor(s) with num_cpus={self.num_cpus:g}, num_gpus={self.num_gpus:g} "
                f"did not start within {self.restart_timeout_s:g} s: does the cluster have those resources?"
            ) from None
        except ray.exceptions.RayActorError as exc:
            self.close()
            raise RuntimeError(f"a guard actor could not start: {exc}") from None
        infos = {info for info, _ in answers}
        if len(infos) != 1:
            self.close()
            raise RuntimeError(f"guard actors disagree on the guard's identity: {sorted(map(str, infos))}")
        self.info = infos.pop()
        self.capacity = min(size for _, size in answers)
        return self.info

    def close(self) -> None:
        import ray

        for slot in self.slots:
            ray.kill(slot.actor, no_restart=True)
        self.slots = []

    def run(self, driver: Driver, batch_size: int, on_batch: OnBatch | None = None) -> None:

        if not self.slots:
            self.start()
        size = max(1, min(batch_size, self.capacity))
        while not driver.finished:
            self._ping(driver)
            self._dispatch(driver, size)
            waiting: dict[Any, tuple[Slot, Call | None]] = {}
            for slot in self.slots:
                if slot.ping is not None:
                    waiting[slot.ping] = (slot, None)
                waiting.update((call.ref, (slot, call)) for call in slot.inflight)
            if not waiting:
                due = driver.next_due()
                if due is None:
                    raise RuntimeError("searches are waiting but nothing is queued or in flight")
                time.sleep(max(0.0, due - driver.clock()))
                continue
            for ref in wait_ready(list(waiting), self._wait_s(driver)):
                slot, call = waiting[ref]
                if call is None:
                    self._pinged(driver, slot)
                else:
                    self._receive(driver, slot, call, size, on_batch)
            self._expire(driver)

    # -- inside ---------------------------------------------------------------------------

    def _dispatch(self, driver: Driver, size: int) -> None:
        now = time.monotonic()
        for slot in sorted(self.slots, key=lambda s: len(s.inflight)):
            while not slot.restarting and len(slot.inflight) < self.calls_per_actor:
                taken = driver.take(size)
                if not taken:
                    return
                if not slot.inflight:
                    slot.head_since = now
                ref = slot.actor.classify.remote([text for text, _ in taken])
                slot.inflight.append(Call(ref, taken))

    def _wait_s(self, driver: Driver) -> float:
        now = time.monotonic()
        limits = [slot.head_since + self.call_timeout_s - now for slot in self.slots if slot.inflight]
        limits += [slot.ping_at - now for slot in self.slots if slot.ping_at is not None]
        if (due := driver.next_due()) is not None:
            limits.append(due - driver.clock())
        return max(0.0, min(limits)) if limits else self.call_timeout_s

    def _restarting(self, slot: Slot) -> None:
        """Hold work back from an actor Ray is restarting until it answers a ping."""
        if not slot.restarting:
            slot.restarting_since = time.monotonic()
            slot.ping_at = slot.restarting_since

    def _ping(self, driver: Driver) -> None:
        now = time.monotonic()
        for slot in list(self.slots):
            if slot.restarting_since is not None and now - slot.restarting_since > self.restart_timeout_s:
                self._drop(driver, slot, f"it did not restart within {self.restart_timeout_s:g} s")
            elif slot.ping_at is not None and slot.ping_at <= now and slot.ping is None:
                slot.ping, slot.ping_at = slot.actor.ready.remote(), None

    def _pinged(self, driver: Driver, slot: Slot) -> None:
        import ray

        ref, slot.ping = slot.ping, None
        try:
            ray.get(ref)
        except ray.exceptions.ActorUnavailableError:
            slot.ping_at = time.monotonic() + 0.2  # still restarting: ask again shortly
            return
        except ray.exceptions.RayActorError as exc:
            slot.deaths += 1
            if slot.deaths >= self.max_attempts:
                self._drop(driver, slot, f"it died {slot.deaths} times while restarting ({type(exc).__name__})")
                return
            slot.ping_at = time.monotonic() + 0.5
            return
        slot.restarting_since = None
        slot.deaths = 0

    def _drop(self, driver: Driver, slot: Slot, why: str) -> None:
        """Carry on with the other actors; with none left the run cannot finish."""
        self.slots.remove(slot)
        for call in slot.inflight:
            driver.requeue(text for text, _ in call.taken)
        slot.inflight.clear()
        if not self.slots:
            raise RuntimeError(f"every guard actor is gone; the last one because {why}")

    def _receive(self, driver: Driver, slot: Slot, call: Call, size: int, on_batch: OnBatch | None) -> None:
        import ray

        if call not in slot.inflight:
            return  # already settled when its actor was replaced
        slot.inflight.remove(call)
        slot.head_since = time.monotonic()
        try:
            reply: Reply = ray.get(call.ref)
        except ray.exceptions.RayActorError as exc:
            # The actor died with this call in it: any of its calls may have killed it, so each
            # is charged an attempt. Ray restarts the actor.
            if not slot.restarting:
                self.stats.restarts += 1
                self._restarting(slot)
            message = f"guard actor died: {type(exc).__name__}"
            driver.deliver_many((text, attempt, None, 0.0, message) for text, attempt in call.taken)
            return
        for report in reply.batches:
            if on_batch is not None and report.number not in self._seen.setdefault(report.actor, set()):
                self._seen[report.actor].add(report.number)
                on_batch(report.size, size, report.compute_s)
        per_text = reply.batches[0].compute_s / max(reply.batches[0].size, 1) if reply.batches else 0.0
        driver.deliver_many(
            (text, attempt, verdict, per_text, error)
            for (text, attempt), verdict, error in zip(call.taken, reply.verdicts, reply.errors, strict=True)
        )

    def _expire(self, driver: Driver) -> None:
        """A call that has been the actor's work for longer than the timeout is a hang."""
        import ray

        now = time.monotonic()
        for slot in self.slots:
            if not slot.inflight or now - slot.head_since < self.call_timeout_s:
                continue
            hung, *others = slot.inflight
            slot.inflight.clear()
            self.stats.timeouts += 1
            ray.kill(slot.actor, no_restart=False)  # Ray restarts it
            self._restarting(slot)
            message = f"timeout: no output within {self.call_timeout_s:g} s; guard actor restarted"
            driver.deliver_many((text, attempt, None, 0.0, message) for text, attempt in hung.taken)
            for call in others:
                driver.requeue(text for text, _ in call.taken)


def connect(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Join `address` (`auto`, `HOST:PORT`, `ray://HOST:PORT`; default $RAY_ADDRESS, which a
    Ray job's driver has) or start a small local Ray.

    Returns whether this call connected or started Ray, i.e. whether the caller should shut
    it down. A Ray already initialised in this process (a library user's) is used as is.
    """
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        if address.startswith("ray://"):
            try:
                ray.init(address=address, logging_level=logging.ERROR)
            except ValueError as exc:
                if "ray[client]" not in str(exc):
                    raise
                raise InputError(
                    "ray:// addresses need Ray Client: pip install 'margin[cluster]' (or 'ray[client]'), "
                    "or run margin on a cluster node with --ray-address auto", field="--ray-address",
                ) from None
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
        return True
    # A local, private cluster: no auth token written into the home folder, no dashboard.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
             log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
    return True


def disconnect(started: bool) -> None:
    if started:
        import ray

        ray.shutdown()
