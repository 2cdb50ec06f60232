"""How hard margin may push one remote endpoint, and the two controllers that enforce it.

`EndpointLimits` are per endpoint (guard files' and study models' `backend_options`, or
CLI flags): requests in flight, a per-request timeout, attempts per request, an optional
request rate and when to hedge; their defaults are in `margin.engine.settings`. They suit a
vLLM server: it batches whatever arrives, so a few dozen requests in flight keep it busy
without flooding a shared one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from margin.engine.settings import (
    CALL_TIMEOUT,
    HEDGE_AFTER,
    LIMIT_OPTIONS,
    MAX_ATTEMPTS,
    MAX_CONCURRENCY,
    MAX_OUTAGE,
    REQUESTS_PER_SECOND,
)


@dataclass(frozen=True)
class EndpointLimits:
    """Field names are the `backend_options` keys; what each means is `margin.engine.settings`'s."""

    max_concurrency: int = MAX_CONCURRENCY.default
    timeout_s: float = CALL_TIMEOUT.default  # a guard's request (study models: a longer one)
    max_attempts: int = MAX_ATTEMPTS.default
    requests_per_second: float | None = REQUESTS_PER_SECOND.default  # None: no rate limit
    hedge_after_s: float | str | None = HEDGE_AFTER.default  # None: never
    # Until this passes, an endpoint's requests wait, using up no attempts.
    max_outage_s: float = MAX_OUTAGE.default

    def __post_init__(self) -> None:
        if self.max_concurrency < 1 or self.max_attempts < 1:
            raise ValueError("max_concurrency and max_attempts must be at least 1")
        if self.timeout_s <= 0 or self.max_outage_s <= 0:
            raise ValueError("timeout_s and max_outage_s must be positive")
        if self.requests_per_second is not None and self.requests_per_second <= 0:
            raise ValueError("requests_per_second must be positive")
        hedge = self.hedge_after_s
        if hedge is not None and hedge != "auto" and (isinstance(hedge, str) or hedge <= 0):
            raise ValueError("hedge_after_s must be a positive number of seconds, auto, or off")

    @classmethod
    def from_options(cls, options: Mapping[str, Any], base: EndpointLimits | None = None,
                     **overrides: Any) -> EndpointLimits:
        """`base` (default: the defaults), then `backend_options` (other keys ignored), then
        non-None `overrides` (CLI flags)."""
        given = {k: options[k] for k in LIMIT_OPTIONS if k in options}
        given.update({k: v for k, v in overrides.items() if v is not None})
        if given.get("hedge_after_s") in ("off", "none", False):
            given["hedge_after_s"] = None
        if isinstance(given.get("max_outage_s"), str):
            given["max_outage_s"] = parse_duration(given["max_outage_s"])
        names = {f.name for f in fields(cls)}
        return replace(base or cls(), **{k: v for k, v in given.items() if k in names})


def parse_duration(text: str | float) -> float:
    """Seconds from `600`, `45s`, `10m` or `1h`; ValueError when it is none of those."""
    if isinstance(text, int | float):
        return float(text)
    value = text.strip().lower()
    scale = {"s": 1.0, "m": 60.0, "h": 3600.0}.get(value[-1:])
    number = value[:-1] if scale is not None else value
    try:
        seconds = float(number) * (scale or 1.0)
    except ValueError:
        raise ValueError(f"expected seconds or a duration such as 45s, 10m or 1h, got {text!r}") from None
    if seconds <= 0:
        raise ValueError(f"must be positive, got {text!r}")
    return seconds


class ConcurrencyLimit:
    """Additive increase, multiplicative decrease: each 429 / 503 takes 10% off the limit;
    each success while the limit is in use adds one back, up to the maximum. Random errors
    at a modest rate leave it at the maximum; a server that keeps refusing is backed off to
    what it accepts."""

    def __init__(self, maximum: int, minimum: int = 1, backoff: float = 0.9) -> None:
        self.maximum = maximum
        self.minimum = minimum
        self.backoff = backoff
        self.limit = float(maximum)
        self.lowest = float(maximum)

    def room(self, inflight: int) -> int:
        return int(self.limit) - inflight

    def succeeded(self, inflight: int) -> None:
        if inflight + 1 >= self.limit / 2:  # +1: the request that just finished was in use
            self.limit = min(float(self.maximum), self.limit + 1)

    def reset(self) -> None:
        """Back to the maximum (an endpoint answering again after an outage)."""
        self.limit = float(self.maximum)

    def overloaded(self) -> None:
        self.limit = max(float(self.minimum), self.limit * self.backoff)
        self.lowest = min(self.lowest, self.limit)


class RateLimit:
    """A token bucket: `rate` requests a second on average, bursts of up to one second's worth."""

    def __init__(self, rate: float | None, now: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate or 1.0)
        self.tokens = self.capacity
        self.at = now

    def _fill(self, now: float) -> None:
        if self.rate is not None:
            self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
            self.at = now

    def take(self, now: float) -> bool:
        if self.rate is None:
            return True
        self._fill(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def next_at(self, now: float) -> float | None:
        """When the next token is there (None: no limit, or one is there now)."""
        if self.rate is None:
            return None
        self._fill(now)
        return None if self.tokens >= 1 else now + (1 - self.tokens) / self.rate
