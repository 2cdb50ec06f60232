"""Calls to HTTP endpoints through the `openai` client, from synchronous code.

The client is async and lives on its own event loop thread, so `classify` can be called
from anywhere (a plain script, a Ray actor). Concurrency per endpoint is bounded by a
semaphore. 429, 408/409, 5xx, timeouts, connection errors and unreadable bodies are retried
with exponential backoff and full jitter, waiting at least what Retry-After asks (capped).
Every error text passes through `redact`, so the API key never leaves in a message.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from margin.guards.secrets import read_api_key, redact

T = TypeVar("T")

# Tests replace this to keep backoff waits short while checking what was asked for.
sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


class CallFailed(RuntimeError):
    """A call that produced no output after its retries (message already redacted)."""


def retry_after_seconds(headers: Any, now: float | None = None) -> float | None:
    """Seconds a server asked to wait: `retry-after-ms`, `Retry-After` seconds or HTTP date."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value.strip() else None
        if parsed is None:
            return None
        return max(parsed.timestamp() - (time.time() if now is None else now), 0.0)


def backoff_delay(attempt: int, *, base_s: float, cap_s: float, retry_after_s: float | None,
                  rng: random.Random) -> float:
    """Wait before retry number `attempt` (1 = the first retry): full jitter on an
    exponential ceiling, never less than Retry-After (which is capped at `cap_s` too)."""
    ceiling = min(cap_s, base_s * 2 ** (attempt - 1))
    delay = rng.uniform(0, ceiling)
    if retry_after_s is not None:
        delay = max(delay, min(retry_after_s, cap_s))
    return delay


def classify_error(exc: BaseException) -> tuple[bool, float | None]:
    """(retry?, Retry-After seconds) for an exception from the openai client."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        wait = retry_after_seconds(getattr(exc.response, "headers", None))
        return (status in (408, 409, 429) or status >= 500), wait
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError | asyncio.TimeoutError):
        return True, None
    # An unreadable body (openai.APIResponseValidationError, a JSON error, a malformed
    # structure): the endpoint produced no usable output this time.
    return True, None


class AsyncEndpoint:
    """One endpoint: an AsyncOpenAI client on a private loop, with bounded concurrency."""

    def __init__(self, base_url: str, api_key_env: str | None, *, concurrency: int = 8,
                 timeout_s: float = 60.0, max_attempts: int = 6, backoff_base_s: float = 0.5,
                 backoff_cap_s: float = 30.0, seed: int = 0) -> None:
        import openai

        if concurrency < 1 or max_attempts < 1:
            raise ValueError("concurrency and max_attempts must be at least 1")
        key = read_api_key(api_key_env)
        self.base_url = base_url
        self.max_attempts = max_attempts
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.rng = random.Random(seed)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="margin-http", daemon=True)
        self.thread.start()

        async def setup() -> tuple[Any, asyncio.Semaphore]:
            # Local servers often need no key; the client insists on a non-empty one.
            client = openai.AsyncOpenAI(api_key=key or "unused", base_url=base_url, max_retries=0,
                                        timeout=timeout_s)
            return client, asyncio.Semaphore(concurrency)

        self.client, self.semaphore = self.run(setup())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def call(self, make: Callable[[], Awaitable[T]]) -> T:
        """`make()` with retries; raises CallFailed (redacted) when no attempt produced output."""
        last = ""
        for attempt in range(1, self.max_attempts + 1):
            async with self.semaphore:
                try:
                    return await make()
                except Exception as exc:
                    retry, wait = classify_error(exc)
                    last = redact(f"{type(exc).__name__}: {exc}")[:500]
            if not retry:
                raise CallFailed(last)
            if attempt < self.max_attempts:
                await sleep(backoff_delay(attempt, base_s=self.backoff_base_s, cap_s=self.backoff_cap_s,
                                          retry_after_s=wait, rng=self.rng))
        raise CallFailed(f"no output after {self.max_attempts} attempts: {last}")

    def gather(self, coros: list[Coroutine[Any, Any, T]]) -> list[T | BaseException]:
        async def all_of() -> list[T | BaseException]:
            return list(await asyncio.gather(*coros, return_exceptions=True))

        return self.run(all_of())

    def close(self) -> None:
        if self.loop.is_closed():
            return
        try:
            self.run(self.client.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=5)
            self.loop.close()
