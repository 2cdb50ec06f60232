"""A latency-bound HTTP endpoint for benchmark (d): an OpenAI-compatible server on 127.0.0.1
that answers every chat completion after a fixed delay, in Llama Guard's output format, so
margin's own OpenAI-compatible guard backend can be measured against it.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet handler that answers with one JSON body (the benchmarks' local servers)."""

    def reply(self, payload: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


class SlowChatHandler(JsonHandler):
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
        self.reply(payload)


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
