"""A latency-bound HTTP endpoint for benchmark (d): an OpenAI-compatible server on 127.0.0.1
that answers every chat completion after a fixed delay, in Llama Guard's output format, so
margin's own OpenAI-compatible guard backend can be measured against it (benchmark (d),
benchmarks/faults.py and tests/studies/test_faults.py).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def hash_label(text: str) -> str:
    """A quarter of all texts unsafe, by hash: the same answer for the same text."""
    return "unsafe" if hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[0] < 64 else "safe"


def keyword_label(text: str) -> str:
    """margin's keyword blocklist: searches as long as a real lexicon guard's."""
    from margin.guards.keyword import KeywordGuard

    verdict = KeywordGuard().classify([text])[0]
    assert verdict is not None
    return verdict.label


LABELS = {"hash": hash_label, "keyword": keyword_label}


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
    label = staticmethod(hash_label)
    protocol_version = "HTTP/1.1"  # keep-alive: the client reuses its connections
    disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart

    def do_POST(self) -> None:  # noqa: N802 (the http.server spelling)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(self.delay_s)
        content = body["messages"][-1]["content"]  # a string, or parts (Llama Guard 4's template)
        text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
        label = self.label(text)
        payload = json.dumps({
            "id": "bench", "object": "chat.completion", "created": 0, "model": body.get("model", "bench"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": label}}],
        }).encode()
        self.reply(payload)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default 5 drops bursts of connections (1 s SYN retries)


def _serve(port: int, ready: Any, delay_s: float, label: str) -> None:
    SlowChatHandler.delay_s = delay_s
    SlowChatHandler.label = staticmethod(LABELS[label])
    server = Server(("127.0.0.1", port), SlowChatHandler)
    ready.put(server.server_address[1])
    server.serve_forever()


def start_server(delay_s: float = 0.05, label: str = "hash") -> tuple[multiprocessing.Process, str]:
    """A server process on a free port of 127.0.0.1 answering `label` ("hash" or "keyword")
    after `delay_s`; returns it and its base URL."""
    context = multiprocessing.get_context("spawn")
    ready = context.Queue()
    process = context.Process(target=_serve, args=(0, ready, delay_s, label), daemon=True)
    process.start()
    port = ready.get(timeout=60)
    return process, f"http://127.0.0.1:{port}/v1"
