"""How a guard's calls are made (`CallSettings`: which engine, batch size, attempts and limits)
and how they went (`EngineFigures`). CLI flags and study `runtime` keys map onto the settings;
None falls back to the guard file's `backend_options`, then to the engine's defaults
(`margin.engine.settings`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from margin.engine import settings as defaults
from margin.engine.limits import EndpointLimits

Engine = Literal["ray", "local"]
OnBatch = Callable[[int, int, float], None]  # (texts, capacity, seconds) per guard call

#: An in-process guard's batch past this many seconds is a hang (its actor is restarted).
BATCH_TIMEOUT_S: float = defaults.CALL_TIMEOUT.case("batch")


@dataclass(frozen=True)
class CallSettings:
    """`margin.engine.settings` says what each means; None: the guard file's `backend_options`,
    else the default there."""

    engine: Engine = defaults.ENGINE.default
    ray_address: str | None = None
    batch_size: int = defaults.BATCH_SIZE.default
    max_wait_s: float = defaults.MAX_WAIT.default
    retry_wait_s: float = defaults.RETRY_WAIT.default
    max_attempts: int | None = None
    call_timeout_s: float | None = None
    max_concurrency: int | None = None
    requests_per_second: float | None = None
    hedge_after_s: float | str | None = None
    max_outage_s: float | None = None

    @classmethod
    def of_runtime(cls, runtime: Any, **given: Any) -> CallSettings:
        """A study's `runtime:` block (`margin.studies.config.Runtime`) as call settings: each
        of its keys the table names a call setting, with `given` (engine, ray_address)."""
        names = {f.name for f in fields(cls)}
        keys = {s.name: getattr(runtime, s.runtime) for s in defaults.SETTINGS if s.runtime and s.name in names}
        return cls(**keys, **given)

    @property
    def batch_timeout_s(self) -> float:
        """How long an in-process guard's batch on a Ray actor may run before the actor is
        restarted as hung."""
        return self.call_timeout_s or BATCH_TIMEOUT_S

    def timeout_cannot_apply(self, in_process: bool) -> bool:
        """A call timeout asked of a model in this process (`--engine local`), whose batch
        cannot be stopped: every command refuses it rather than ignore it. (On Ray actors a
        batch past it restarts the actor; an endpoint's request is cancelled.)"""
        return self.call_timeout_s is not None and self.engine == "local" and in_process

    def limits(self, options: dict[str, Any], base: EndpointLimits | None = None) -> EndpointLimits:
        """An endpoint's limits: these settings over its `backend_options` over `base` (the
        defaults)."""
        return EndpointLimits.from_options(
            options, base, max_concurrency=self.max_concurrency, timeout_s=self.call_timeout_s,
            max_attempts=self.max_attempts, requests_per_second=self.requests_per_second,
            hedge_after_s=self.hedge_after_s, max_outage_s=self.max_outage_s)


@dataclass
class EngineFigures:
    """How the guard's calls went, for the summary and the benchmarks (never part of the results)."""

    engine: str = "local"
    replicas: int = 1
    capacity: int = 0  # texts per guard call
    batches: int = 0
    batch_texts: int = 0
    steady_batches: int = 0
    steady_texts: int = 0
    compute_s: float = 0.0  # summed guard compute time over batches (request time when streamed)
    search_s: float = 0.0  # wall time from the first call to the last result
    restarts: int = 0
    timeouts: int = 0
    retries: int = 0  # attempts after one without output
    hedges: int = 0  # second copies of slow requests
    # Streamed (remote endpoint) guards only:
    streamed: bool = False
    overloads: int = 0  # answers 429 / 503
    lowest_concurrency: float | None = None
    pauses: int = 0  # times the endpoint stopped answering and was paused
    waits: int = 0  # retries that used up no attempt (429, refused, endpoint down)
    latencies: list[float] = field(default_factory=list)

    @property
    def mean_fill(self) -> float | None:
        return self.batch_texts / (self.batches * self.capacity) if self.batches and self.capacity else None

    @property
    def steady_fill(self) -> float | None:
        if not self.steady_batches or not self.capacity:
            return None
        return self.steady_texts / (self.steady_batches * self.capacity)

    def latency(self, q: float) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
