"""Requests to HTTP endpoints through the `openai` client: one attempt each.

An `AsyncEndpoint` holds the client for one server (connections are reused). It makes one
attempt per call and turns every way an attempt can fail into `TransportError` (with the
HTTP status and what Retry-After asked): the call engine decides about retries, backoff,
concurrency and timeouts, and records every attempt. Every error text passes through
`redact`, so the API key never leaves in a message.

The client belongs to the event loop it was made in; a call from another loop (a library
user's `classify` outside the engine) gets a client of its own. `run_sync` runs a coroutine
from synchronous code.
"""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from margin.backends.secrets import read_api_key, redact, register_url
from margin.backends.server_errors import permanent
from margin.errors import TransportError

T = TypeVar("T")


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


def transport_error(exc: BaseException) -> TransportError:
    """What an exception from the openai client means for the engine."""
    import openai

    message = f"{type(exc).__name__}: {exc}"
    cause = exc.__cause__ or exc.__context__
    if cause is not None and isinstance(exc, openai.APIConnectionError):
        message += f" ({type(cause).__name__}: {cause})"  # what the connection error was
    message = redact(message)[:500]
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        wait = retry_after_seconds(getattr(exc.response, "headers", None))
        lasting = permanent(status, message)
        if lasting is not None:  # one line: what it is and what to do, then the server's words
            return TransportError(redact(f"HTTP {status}, not retried: {lasting} ({message})")[:700],
                                  status=status, retry_after_s=wait, retry=False)
        # 408 timeout, 409 conflict, 429 rate limit and 5xx may pass; other 4xx will not.
        return TransportError(message, status=status, retry_after_s=wait,
                              retry=status in (408, 409, 429) or status >= 500)
    # Timeouts, dropped connections, and bodies that are not JSON or not the API's shape
    # (openai.APIResponseValidationError, json errors): no usable answer this time. A
    # connection that could not be made (refused, unknown host) never reached the server.
    return TransportError(message, reached=not _not_connected(exc))


def _not_connected(exc: BaseException) -> bool:
    """Whether the request failed before a connection to the server was made (by the
    names of the HTTP library's errors, which differ between its versions' modules)."""
    import openai

    if not isinstance(exc, openai.APIConnectionError):
        return False
    cause: BaseException | None = exc.__cause__ or exc.__context__
    for _ in range(4):  # the client wraps httpx's error, which wraps the socket's
        if cause is None:
            return False
        if isinstance(cause, ConnectionRefusedError) or type(cause).__name__ in ("ConnectError", "ConnectTimeout"):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


class AsyncEndpoint:
    """One server: its URL, key and client."""

    def __init__(self, base_url: str, api_key_env: str | None, *, timeout_s: float | None = None) -> None:
        self.base_url = base_url
        register_url(base_url)  # a server that echoes the URL's credentials is redacted too
        self.key = read_api_key(api_key_env)
        # The engine bounds each request itself; the client's own limit only catches a
        # library user's call that would otherwise wait forever.
        self.timeout_s = timeout_s if timeout_s is not None else 600.0
        self._clients: dict[asyncio.AbstractEventLoop, Any] = {}

    @property
    def client(self) -> Any:
        """The client for the running loop."""
        import openai

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            # Local servers often need no key; the client insists on a non-empty one.
            client = openai.AsyncOpenAI(api_key=self.key or "unused", base_url=self.base_url, max_retries=0,
                                        timeout=self.timeout_s)
            self._clients[loop] = client
        return client

    async def attempt(self, make: Callable[[Any], Awaitable[T]]) -> T:
        """`make(client)` once; any failure raises TransportError (redacted)."""
        try:
            return await make(self.client)
        except TransportError:
            raise
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise transport_error(exc) from None

    async def aclose(self) -> None:
        """Close the running loop's client."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def close(self) -> None:
        self._clients.clear()  # clients of loops that are gone hold no live connections


def run_sync(make: Callable[[], Coroutine[Any, Any, T]], endpoint: AsyncEndpoint | None = None) -> T:
    """Run `make()` to completion from synchronous code, on a loop of its own (in a thread
    when this one already runs a loop); closes that loop's client of `endpoint`."""

    async def go() -> T:
        try:
            return await make()
        finally:
            if endpoint is not None:
                await endpoint.aclose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(go())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(go())
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="margin-sync-http")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
