"""A latency-bound HTTP guard for benchmark (d): a server on 127.0.0.1 that answers every chat
completion after a fixed delay, and a guard that calls it through the `openai` client.

The guard sends one request per text, at most `concurrency` at a time (asyncio), the way an
OpenAI-compatible guard backend does. margin's own OpenAI backend lives with the guards;
this small class stands in for it here so the engine's concurrency is measured on its own.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import multiprocessing
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from margin.guards.base import Guard
from margin.types import GuardInfo, Verdict


class SlowChatHandler(BaseHTTPRequestHandler):
    delay_s = 0.05
    protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connections
    disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart

    def do_POST(self) -> None:  # noqa: N802 (the http.server spelling)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(self.delay_s)
        text = body["messages"][-1]["content"]
        label = "unsafe" if hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[0] < 64 else "safe"
        payload = json.dumps({
            "id": "bench", "object": "chat.completion", "created": 0, "model": body.get("model", "bench"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": label}}],
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default 5 drops bursts of connections (1 s SYN retries)


def _serve(port: int, ready: Any, delay_s: float) -> None:
    SlowChatHandler.delay_s = delay_s
    server = Server(("127.0.0.1", port), SlowChatHandler)
    ready.put(server.server_address[1])
    server.serve_forever()


def start_server(delay_s: float = 0.05) -> tuple[multiprocessing.Process, str]:
    """A server process on a free port of 127.0.0.1; returns it and its base URL."""
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    process = context.Process(target=_serve, args=(0, ready, delay_s), daemon=True)
    process.start()
    port = ready.get(timeout=60)
    return process, f"http://127.0.0.1:{port}/v1"


class HttpChatGuard(Guard):
    """One chat completion per text, `concurrency` in flight at once; the reply is the label.

    One event loop (in a thread) and one client live as long as the guard, so connections
    are reused across batches; both are made on first use, in whichever process that is.
    """

    def __init__(self, base_url: str, concurrency: int = 64, max_batch_size: int = 64) -> None:
        self.base_url = base_url
        self.concurrency = concurrency
        self.max_batch_size = max_batch_size
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None

    def __getstate__(self) -> dict[str, Any]:  # shipped to a Ray actor without loop or client
        return {**self.__dict__, "_loop": None, "_client": None}

    @property
    def info(self) -> GuardInfo:
        return GuardInfo(id="bench-http", family="bench", checkpoint="slow-chat", revision="1", backend="openai")

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        if self._loop is None:
            import openai

            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, daemon=True).start()
            self._client = openai.AsyncOpenAI(api_key="unused", base_url=self.base_url, max_retries=0,
                                              timeout=30.0)
        return asyncio.run_coroutine_threadsafe(self._classify(list(texts)), self._loop).result()

    async def _classify(self, texts: list[str]) -> list[Verdict | None]:
        import openai

        gate = asyncio.Semaphore(self.concurrency)

        async def one(text: str) -> Verdict | None:
            async with gate:
                try:
                    reply = await self._client.chat.completions.create(
                        model="bench", messages=[{"role": "user", "content": text}], temperature=0)
                except openai.APIError:
                    return None  # no output: the engine retries it
            content = (reply.choices[0].message.content or "").strip()
            return Verdict(content, raw=content) if content in ("safe", "unsafe") else Verdict("invalid", raw=content)

        return list(await asyncio.gather(*(one(t) for t in texts)))
