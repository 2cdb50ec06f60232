"""Executors: where model and judge calls run. In this process, or on Ray actors.

`RayExecutor` mirrors the search engine's guard actors: one `ModelActor` per model replica
holds the model (an HTTP client, a vLLM engine or a transformers model), built inside the
actor from a picklable spec; calls queue inside the actor, which runs them as batches of up
to `max_batch_size`, waiting at most `max_wait_s` for a batch to fill. The driver keeps a
bounded number of calls in flight per actor. A pool's actors start when it first has work
and are released once it is sealed and idle, so a cluster too small to hold every model at
once runs them in turn. A dead actor is restarted by Ray and its calls are charged an
attempt; a call past `call_timeout_s` is a hang: its actor is killed and restarted.

Ray is imported lazily: `import margin` never pays for it.
"""

from __future__ import annotations

import os
import secrets
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from margin.batching import Batcher
from margin.search.runtime import wait_ready
from margin.studies.calls import Calls
from margin.studies.models import ChatModel, Messages, ModelSpec, Reply

OnBatch = Callable[[str, int, float], None]  # (pool, texts, compute seconds)
Output = tuple[str | None, bool, str | None]  # (text or None, truncated, error)


@dataclass(frozen=True)
class PoolSpec:
    spec: ModelSpec
    max_tokens: int


def run_batch(model: ChatModel, conversations: Sequence[Messages]) -> tuple[list[Output], float]:
    """The one place a model is called: any failure is "no output" for the texts it hit."""
    started = time.perf_counter()
    try:
        replies = model.generate(list(conversations))
        if len(replies) != len(conversations):
            raise RuntimeError(f"model returned {len(replies)} outputs for {len(conversations)} requests")
        out: list[Output] = [(r.text, r.truncated, None) if isinstance(r, Reply)
                             else (None, False, f"{type(r).__name__}: {r}"[:500]) for r in replies]
    except Exception as exc:
        out = [(None, False, f"{type(exc).__name__}: {exc}"[:500])] * len(conversations)
    return out, time.perf_counter() - started


def _deliver(calls: Calls, taken: list[tuple[str, Messages, int]], outputs: list[Output], compute_s: float) -> None:
    per = compute_s / max(len(taken), 1)
    calls.deliver((key, attempt, Reply(text, truncated) if text is not None else None, per, error)
                  for (key, _, attempt), (text, truncated, error) in zip(taken, outputs, strict=True))


class LocalExecutor:
    """Every pool's model in this process, one batch at a time."""

    def __init__(self, pools: Mapping[str, PoolSpec], on_batch: OnBatch = lambda *_: None) -> None:
        self.pools = dict(pools)
        self.models: dict[str, ChatModel] = {}
        self.on_batch = on_batch

    def run(self, calls: Calls) -> None:
        try:
            while not calls.finished:
                progressed = False
                for name, pool in self.pools.items():
                    taken = calls.take(name, pool.spec.max_batch_size)
                    if taken:
                        model = self.models.get(name) or self.models.setdefault(name, ChatModel(pool.spec, pool.max_tokens))
                        outputs, compute_s = run_batch(model, [m for _, m, _ in taken])
                        _deliver(calls, taken, outputs, compute_s)
                        self.on_batch(name, len(taken), compute_s)
                        progressed = True
                    elif name in calls.sealed and name in self.models and not calls.busy(name):
                        self.models.pop(name).close()
                if not progressed and not calls.finished:
                    due = calls.next_due()
                    if due is None:
                        raise RuntimeError("calls are waiting but nothing is queued")
                    time.sleep(max(0.0, due - calls.clock()))
        finally:
            for model in self.models.values():
                model.close()
            self.models.clear()


class ModelActor:
    """Wrapped with `ray.remote` by `RayExecutor`; async, so calls queue while a batch runs."""

    def __init__(self, spec: ModelSpec, max_tokens: int, max_batch_size: int, max_wait_s: float) -> None:
        self.model = ChatModel(spec, max_tokens)
        self.id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.batcher = Batcher(self._run, max_batch_size, max_wait_s)

    async def ready(self) -> str:
        return self.id

    async def generate(self, conversations: list[Messages]) -> tuple[list[Output], float]:
        return await self.batcher.submit(conversations)

    def _run(self, calls: list[list[Messages]]) -> list[tuple[list[Output], float]]:
        """Each call gets its outputs and its share of the batch's compute time."""
        size = sum(map(len, calls))
        outputs, compute_s = run_batch(self.model, [c for part in calls for c in part])
        shares = []
        start = 0
        for part in calls:
            shares.append((outputs[start:start + len(part)], compute_s * len(part) / max(size, 1)))
            start += len(part)
        return shares


@dataclass(eq=False)
class Flight:
    ref: Any
    taken: list[tuple[str, Messages, int]]
    since: float


@dataclass(eq=False)
class Slot:
    pool: str
    actor: Any
    ping: Any = None  # a `ready` call in flight: the actor gets work once it answers
    ping_at: float | None = None
    deaths: int = 0
    inflight: deque[Flight] = field(default_factory=deque)

    @property
    def ready(self) -> bool:
        return self.ping is None and self.ping_at is None


class RayExecutor:
    def __init__(self, pools: Mapping[str, PoolSpec], *, calls_per_actor: int = 2, max_wait_s: float = 0.005,
                 call_timeout_s: float = 600.0, start_timeout_s: float = 900.0, max_starts: int = 3,
                 on_batch: OnBatch = lambda *_: None) -> None:
        self.pools = dict(pools)
        self.calls_per_actor = max(1, calls_per_actor)
        self.max_wait_s = max_wait_s
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_starts = max_starts
        self.on_batch = on_batch
        self.slots: dict[str, list[Slot]] = {}
        self.restarts = 0
        self.timeouts = 0
        self.tag = secrets.token_hex(4)

    def run(self, calls: Calls) -> None:

        stalled_since: float | None = None
        try:
            while not calls.finished:
                self._start_and_stop(calls)
                self._ping()
                self._dispatch(calls)
                waiting: dict[Any, tuple[Slot, Flight | None]] = {}
                for slots in self.slots.values():
                    for slot in slots:
                        if slot.ping is not None:
                            waiting[slot.ping] = (slot, None)
                        waiting.update((f.ref, (slot, f)) for f in slot.inflight)
                calls_in_flight = any(f is not None for _, f in waiting.values())
                now = time.monotonic()
                stalled_since = None if calls_in_flight else (stalled_since or now)
                if stalled_since is not None and now - stalled_since > self.start_timeout_s:
                    raise RuntimeError(
                        f"no model actor could take work for {self.start_timeout_s:g} s: does the cluster have "
                        f"the CPUs and GPUs the models ask for (num_cpus, num_gpus, replicas)?")
                if not waiting:
                    due = calls.next_due()
                    pause = 0.05 if due is None else max(0.0, due - calls.clock())
                    time.sleep(min(pause, 0.2))
                    continue
                for ref in wait_ready(list(waiting), self._wait_s(calls)):
                    slot, flight = waiting[ref]
                    if flight is None:
                        self._pinged(slot)
                    else:
                        self._receive(calls, slot, flight)
                self._expire(calls)
        finally:
            self.close()

    def close(self) -> None:
        import ray

        for slots in self.slots.values():
            for slot in slots:
                ray.kill(slot.actor, no_restart=True)
        self.slots.clear()

    # -- inside ---------------------------------------------------------------------------

    def _start_and_stop(self, calls: Calls) -> None:
        import ray

        for name, pool in self.pools.items():
            slots = self.slots.get(name)
            if slots is None and calls.queued(name):
                remote = ray.remote(num_cpus=pool.spec.cpus, num_gpus=pool.spec.num_gpus, max_restarts=-1,
                                    max_task_retries=0)(ModelActor)
                self.slots[name] = [
                    Slot(name, remote.options(name=f"margin-model-{self.tag}-{len(self.slots)}-{i}").remote(
                        pool.spec, pool.max_tokens, pool.spec.max_batch_size, self.max_wait_s))
                    for i in range(pool.spec.replicas)]
                for slot in self.slots[name]:
                    slot.ping = slot.actor.ready.remote()
            elif slots and name in calls.sealed and not calls.busy(name):
                for slot in slots:  # done for good: free its CPUs and GPUs for the pools still waiting
                    ray.kill(slot.actor, no_restart=True)
                self.slots[name] = []

    def _ping(self) -> None:
        now = time.monotonic()
        for slots in self.slots.values():
            for slot in slots:
                if slot.ping is None and slot.ping_at is not None and slot.ping_at <= now:
                    slot.ping, slot.ping_at = slot.actor.ready.remote(), None

    def _dispatch(self, calls: Calls) -> None:
        now = time.monotonic()
        for name, slots in self.slots.items():
            size = self.pools[name].spec.max_batch_size
            for slot in sorted(slots, key=lambda s: len(s.inflight)):
                while slot.ready and len(slot.inflight) < self.calls_per_actor:
                    taken = calls.take(name, size)
                    if not taken:
                        break
                    ref = slot.actor.generate.remote([m for _, m, _ in taken])
                    slot.inflight.append(Flight(ref, taken, now))

    def _wait_s(self, calls: Calls) -> float:
        now = time.monotonic()
        limits = [f.since + self.call_timeout_s - now for slots in self.slots.values() for s in slots
                  for f in list(s.inflight)[:1]]
        limits += [s.ping_at - now for slots in self.slots.values() for s in slots if s.ping_at is not None]
        if (due := calls.next_due()) is not None:
            limits.append(due - calls.clock())
        return max(0.0, min(limits)) if limits else 1.0

    def _pinged(self, slot: Slot) -> None:
        import ray

        ref, slot.ping, slot.ping_at = slot.ping, None, None
        try:
            ray.get(ref)
        except ray.exceptions.ActorUnavailableError:
            slot.ping_at = time.monotonic() + 0.2  # still restarting
            return
        except ray.exceptions.RayActorError as exc:
            slot.deaths += 1
            if slot.deaths >= self.max_starts:
                raise RuntimeError(f"the actor for {slot.pool} could not start ({slot.deaths} tries): "
                                   f"{_cause(exc)}") from None
            slot.ping_at = time.monotonic() + 0.5
            return
        slot.ping_at = None
        slot.deaths = 0

    def _restart(self, slot: Slot) -> None:
        if slot.ready:
            slot.ping_at = time.monotonic()

    def _receive(self, calls: Calls, slot: Slot, flight: Flight) -> None:
        import ray

        if flight not in slot.inflight:
            return
        slot.inflight.remove(flight)
        if slot.inflight:
            slot.inflight[0].since = max(slot.inflight[0].since, time.monotonic())
        try:
            outputs, compute_s = ray.get(flight.ref)
        except ray.exceptions.RayActorError as exc:
            self.restarts += 1
            self._restart(slot)
            message = f"model actor died: {type(exc).__name__}"
            calls.deliver((key, attempt, None, 0.0, message) for key, _, attempt in flight.taken)
            return
        _deliver(calls, flight.taken, outputs, compute_s)
        self.on_batch(slot.pool, len(flight.taken), compute_s)

    def _expire(self, calls: Calls) -> None:
        import ray

        now = time.monotonic()
        for slots in self.slots.values():
            for slot in slots:
                if not slot.inflight or now - slot.inflight[0].since < self.call_timeout_s:
                    continue
                hung, *others = slot.inflight
                slot.inflight.clear()
                self.timeouts += 1
                ray.kill(slot.actor, no_restart=False)  # Ray restarts it
                slot.ping, slot.ping_at = None, time.monotonic() + 0.2
                message = f"timeout: no output within {self.call_timeout_s:g} s; model actor restarted"
                calls.deliver((key, attempt, None, 0.0, message) for key, _, attempt in hung.taken)
                calls.requeue(key for f in others for key, _, _ in f.taken)


def _cause(exc: BaseException) -> str:
    text = str(exc)
    for line in reversed(text.splitlines()):
        if line.strip() and ("Error" in line or "error" in line):
            return line.strip()[:300]
    return text.strip().splitlines()[-1][:300] if text.strip() else type(exc).__name__
