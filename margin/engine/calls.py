"""The one place a model is called: in-process batches and remote requests.

Whatever goes wrong inside a call becomes "no output" with an error text for the requests
it hit, never an exception out of the engine: the book decides whether to try again.

- `BatchCaller`: a model in this process or in an actor (transformers, vLLM offline,
  minilm, keyword, a user's Python guard) answers a batch at once.
- `StreamCaller`: a remote endpoint (an OpenAI-compatible server, a moderation API)
  answers one request at a time; the engine keeps many in flight. It raises
  `TransportError` when the endpoint gave no usable answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from margin.errors import TransportError, UnanswerableInput


class BatchCaller(Protocol):
    max_batch_size: int

    def call(self, requests: list[Any]) -> Sequence[Any]:
        """One item per request: its output, None (no output) or the Exception that kept it
        (`margin.errors.UnanswerableInput`: one no retry can change)."""
        ...

    def close(self) -> None: ...


class StreamCaller(Protocol):
    request_size: int  # requests that travel in one HTTP request (moderation APIs take lists)

    async def acall(self, requests: list[Any]) -> Sequence[Any]:
        """One output per request (an Exception for one that failed alone); raises
        TransportError when the endpoint gave no usable answer."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class CallResult:
    """One call: an output or None per request, why any are None, and how long it took."""

    outputs: list[Any]
    errors: list[str | None]
    seconds: float
    status: int | None = None  # the HTTP status of a failed remote call
    retry_after_s: float | None = None
    retry: bool = True
    reached: bool = True  # False: the request never reached the server (not tried)
    # per request, True where no retry can change its missing output (an input over the
    # model's window); empty when none is
    lasting: tuple[bool, ...] = ()

    def retry_at(self, index: int) -> bool:
        """Whether another attempt could give request `index` an output."""
        return not (self.lasting and self.lasting[index])

    @property
    def overload(self) -> bool:
        return self.status in (429, 503)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _per_request(outputs: Sequence[Any], n: int, started: float) -> CallResult:
    if len(outputs) != n:
        raise RuntimeError(f"model returned {len(outputs)} outputs for {n} requests")
    values: list[Any] = []
    errors: list[str | None] = []
    for item in outputs:
        if isinstance(item, BaseException):
            values.append(None)
            errors.append(_error(item))
        else:
            values.append(item)
            errors.append(None if item is not None else "no output")
    lasting = tuple(isinstance(item, UnanswerableInput) for item in outputs)
    return CallResult(values, errors, time.perf_counter() - started, lasting=lasting if any(lasting) else ())


def call_batch(caller: BatchCaller, requests: Sequence[Any]) -> CallResult:
    """A batch through an in-process model: a raise is no output for the whole batch."""
    started = time.perf_counter()
    try:
        return _per_request(caller.call(list(requests)), len(requests), started)
    except Exception as exc:
        return CallResult([None] * len(requests), [_error(exc)] * len(requests), time.perf_counter() - started)


async def call_remote(caller: StreamCaller, requests: Sequence[Any], timeout_s: float) -> CallResult:
    """One request to a remote endpoint, bounded by `timeout_s`."""
    started = time.perf_counter()
    n = len(requests)
    try:
        async with asyncio.timeout(timeout_s):
            outputs = await caller.acall(list(requests))
        return _per_request(outputs, n, started)
    except TimeoutError:
        message = f"timeout: no answer within {timeout_s:g} s"
        return CallResult([None] * n, [message] * n, time.perf_counter() - started)
    except TransportError as exc:
        return CallResult([None] * n, [str(exc)[:500]] * n, time.perf_counter() - started, status=exc.status,
                          retry_after_s=exc.retry_after_s, retry=exc.retry, reached=exc.reached)
    except Exception as exc:
        return CallResult([None] * n, [_error(exc)] * n, time.perf_counter() - started)
