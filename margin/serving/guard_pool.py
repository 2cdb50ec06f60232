"""Which engine pool serves a guard, and the guard seen as the engine's caller.

- A guard behind a remote endpoint (a remote backend such as `--backend openai`, the
  moderation APIs) streams: the driver's process holds its client and keeps many requests
  in flight (`StreamPool`).
  No actor is involved: async I/O needs no process of its own, and an actor would add a
  hop and a batch barrier.
- Any other guard (transformers, vLLM offline, minilm, keyword, a Python class) runs as
  dynamic batches: on Ray actors (`ActorPool`, each building the guard from its spec) or,
  with `--engine local`, in this process (`LocalPool`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from margin.backends.registry import backend_of
from margin.backends.secrets import public_url
from margin.engine.actors import ActorPool
from margin.engine.limits import EndpointLimits
from margin.engine.local import LocalPool
from margin.engine.pool import OnCall, Pool, _ignore
from margin.engine.settings import MAX_WAIT
from margin.engine.stream import StreamPool
from margin.guards.base import Guard
from margin.guards.make import build_guard
from margin.guards.spec import GuardSpec
from margin.serving.calls import Engine
from margin.serving.driver import POOL
from margin.types import GuardInfo, Verdict


class GuardCaller:
    """A guard as an in-process batch caller."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.max_batch_size = guard.max_batch_size
        self.info: GuardInfo = guard.info

    def call(self, texts: list[str]) -> list[Verdict | Exception | None]:
        return list(self.guard.classify(texts))

    def close(self) -> None:
        self.guard.close()


class RemoteGuardCaller:
    """A guard behind an endpoint as a stream caller."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.request_size = guard.texts_per_request

    async def acall(self, texts: list[str]) -> Sequence[Verdict]:
        return await self.guard.aclassify(texts)

    async def aclose(self) -> None:
        await self.guard.aclose()


@dataclass(frozen=True)
class GuardFactory:
    """Picklable: Ray ships it to each actor, which builds the guard there. A spec is built
    in the actor; a Guard instance (a library user's) is shipped as it is."""

    source: GuardSpec | Guard

    def build(self) -> GuardCaller:
        source = self.source
        return GuardCaller(build_guard(source) if isinstance(source, GuardSpec) else source)


def local_pool(guard: Guard, batch_size: int, *, owns: bool = False, on_call: OnCall = _ignore) -> Pool:
    """A guard instance in this process: streamed when it is remote, else batched."""
    if guard.remote:
        return StreamPool(POOL, RemoteGuardCaller(guard), EndpointLimits(), owns=owns, on_call=on_call)
    return LocalPool(POOL, lambda: GuardCaller(guard), max_batch_size=batch_size, owns=owns, on_call=on_call)


def guard_pool(spec: GuardSpec, guard: Guard | None, *, engine: Engine, batch_size: int, limits: EndpointLimits,
               call_timeout_s: float, max_wait_s: float = MAX_WAIT.default, on_call: OnCall = _ignore) -> Pool:
    """The pool for a run's guard. `guard` is an instance a library user passed (used as it
    is, never closed by margin); else the guard is built from `spec`."""
    if guard is None and is_remote(spec):
        guard = build_guard(spec)
        return StreamPool(POOL, RemoteGuardCaller(guard), limits, owns=True, on_call=on_call, url=endpoint_url(spec))
    if guard is not None and guard.remote:
        return StreamPool(POOL, RemoteGuardCaller(guard), limits, owns=False, on_call=on_call, url=endpoint_url(spec))
    if engine == "local":
        if guard is not None:
            return LocalPool(POOL, lambda: GuardCaller(guard), max_batch_size=batch_size, owns=False,
                             on_call=on_call)
        return LocalPool(POOL, lambda: GuardCaller(build_guard(spec)), max_batch_size=batch_size, on_call=on_call)
    return ActorPool(POOL, GuardFactory(guard if guard is not None else spec), replicas=spec.replicas,
                     num_cpus=spec.num_cpus, num_gpus=spec.num_gpus, max_batch_size=batch_size,
                     max_wait_s=max_wait_s, call_timeout_s=call_timeout_s, on_call=on_call)


def endpoint_url(spec: GuardSpec) -> str:
    """The URL a remote guard's requests go to, for outage reports."""
    from margin.guards.presets import find_preset

    preset = find_preset(spec.name)
    url = spec.base_url or (preset.base_url if preset is not None else None)
    return public_url(url) if url else f"the {spec.name} endpoint"


def is_remote(spec: GuardSpec) -> bool:
    """Whether a guard is served by a remote endpoint, known from its spec alone."""
    from margin.guards.presets import find_preset

    preset = find_preset(spec.name)
    return preset is not None and backend_of(spec.backend or preset.backend).remote
