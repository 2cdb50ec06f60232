"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests, with scripted faults.

It serves /v1/chat/completions, /v1/completions and /v1/moderations, answers in a guard
family's format (`answer(text) -> output text`), gives per-token logprobs, checks the
bearer key, and injects faults per (text, attempt): 500 (echoing the caller's
Authorization header, as careless servers do), 429 with Retry-After, a timeout (it stalls
past the client's limit) and an unreadable body.
"""

from __future__ import annotations

import json
import math
import re
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SWAP = {"safe": "unsafe", "unsafe": "safe", "yes": "no", "no": "yes", "Yes": "No", "No": "Yes", "0": "1", "1": "0"}


#: The request fields OpenAI's own chat and completion APIs take (a strict server's whole list).
OPENAI_FIELDS = frozenset({"model", "messages", "prompt", "temperature", "max_tokens", "logprobs", "top_logprobs",
                           "stop", "seed", "top_p", "n", "response_format", "input"})


def tokens(text: str) -> list[str]:
    return re.findall(r"\s*[\w/]+|\s*[^\w\s]|\s+", text)


def top_logprobs(token: str) -> list[tuple[str, float]]:
    core = token.strip()
    if core in SWAP:
        lead = token[: len(token) - len(core)]
        return [(token, math.log(0.8)), (lead + SWAP[core], math.log(0.2))]
    return [(token, math.log(0.9))]


class FakeOpenAI:
    def __init__(self, answer: Callable[[str], str], *, key: str | None = None,
                 fault: Callable[[str, int], str | None] = lambda text, attempt: None,
                 stall_s: float = 1.0, moderate: Callable[[str], dict[str, Any]] | None = None,
                 strict: bool = False) -> None:
        self.answer = answer
        self.strict = strict  # 400 on a field OpenAI's own API does not take, as strict servers do
        self.key = key
        self.fault = fault
        self.stall_s = stall_s
        self.moderate = moderate
        self.attempts: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    server.handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout we injected)
                finally:
                    if not getattr(self, "released", False):
                        with server.lock:
                            server.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.httpd.request_queue_size = 1024  # the engine opens many connections at once; 5 refuses bursts
        self.httpd.server_bind()
        self.httpd.server_activate()
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def send(self, handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.end_headers()
        handler.wfile.write(body)

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.loads(handler.rfile.read(int(handler.headers.get("Content-Length", 0))) or b"{}")
        auth = handler.headers.get("Authorization", "")
        with self.lock:
            self.requests.append({"path": handler.path, "body": body})
        unknown = sorted(set(body) - OPENAI_FIELDS) if self.strict else []
        if unknown:
            message = f"Unrecognized request argument supplied: {unknown[0]}"
            self.send(handler, 400, json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode())
            return
        if self.key is not None and auth != f"Bearer {self.key}":
            self.send(handler, 401, json.dumps({"error": {"message": "bad key"}}).encode())
            return
        if handler.path.endswith("/chat/completions"):
            content = body["messages"][-1]["content"]
            text = content if isinstance(content, str) else "".join(p["text"] for p in content)
        elif handler.path.endswith("/completions"):
            text = body["prompt"]
        else:
            text = body["input"][0]
        with self.lock:
            self.attempts[text] += 1
            attempt = self.attempts[text]
        kind = self.fault(text, attempt)
        if kind is not None:
            with self.lock:
                self.faults[kind] += 1
        if kind in ("drop", "reset"):  # the connection closed with no answer (reset: an RST)
            handler.close_connection = True
            if kind == "reset":
                handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                handler.connection.close()
            else:
                handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if kind == "500":
            self.send(handler, 500, json.dumps({"error": {"message": f"upstream failed for {auth}"}}).encode())
            return
        if kind == "template":  # llama.cpp's server: a chat template that fails to render is a 500
            message = "TypeError: can only concatenate str (not \"list\") to str"
            self.send(handler, 500, json.dumps({"error": {"code": 500, "message": message, "type": "server_error"}}).encode())
            return
        if kind == "context":
            message = "request (3031 tokens) exceeds the available context size (2048 tokens), try increasing it"
            self.send(handler, 400, json.dumps({"error": {"code": 400, "message": message,
                                                          "type": "exceed_context_size_error"}}).encode())
            return
        if kind == "429":
            self.send(handler, 429, json.dumps({"error": {"message": "slow down"}}).encode(), {"Retry-After": "2"})
            return
        if kind == "timeout":
            with self.lock:  # the client stops waiting: no longer one of its calls in flight
                self.in_flight -= 1
            handler.released = True  # type: ignore[attr-defined]
            time.sleep(self.stall_s)
        if kind == "badjson":
            self.send(handler, 200, b'{"choices": [ this is not json')
            return
        if handler.path.endswith("/moderations"):
            assert self.moderate is not None
            results = [self.moderate(t) for t in body["input"]]
            self.send(handler, 200, json.dumps({"id": "m", "model": body["model"], "results": results}).encode())
            return
        output = self.answer(text).replace("{auth}", auth)
        toks = tokens(output)
        if handler.path.endswith("/chat/completions"):
            logprobs = {"content": [{"token": t, "logprob": top_logprobs(t)[0][1], "bytes": None,
                                     "top_logprobs": [{"token": a, "logprob": b, "bytes": None}
                                                      for a, b in top_logprobs(t)]} for t in toks]}
            choice = {"index": 0, "message": {"role": "assistant", "content": output},
                      "finish_reason": "stop", "logprobs": logprobs if body.get("logprobs") else None}
            payload = {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                       "choices": [choice]}
        else:
            logprobs = {"tokens": toks, "token_logprobs": [top_logprobs(t)[0][1] for t in toks],
                        "top_logprobs": [dict(top_logprobs(t)) for t in toks], "text_offset": [0] * len(toks)}
            payload = {"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
                       "choices": [{"index": 0, "text": output, "finish_reason": "stop", "logprobs": logprobs}]}
        self.send(handler, 200, json.dumps(payload).encode())
