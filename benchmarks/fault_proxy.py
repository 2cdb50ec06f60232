"""A fault-injecting HTTP proxy on 127.0.0.1: a shared inference server's bad minutes.

It forwards POSTs to an upstream OpenAI-compatible server. The first attempt at each
distinct request (its path and body) may fail, chosen by a hash of the request, so a run
and its rerun meet the same faults; every later attempt passes through:

- `http_5xx` (default 20%): an HTTP 500 or 503 (half each);
- `hang` (10%): the answer comes only after `hang_s` seconds (the client may give up first);
- `garbage` (5%): a 200 whose body is not JSON;
- `drop` (3%): the connection is closed without an answer.

Two faults that hit every request alike, for the endpoint's worst minutes:

- a `Storm` of rate limits: for `seconds` after the `after`-th request, a `share` of all
  requests (first attempts and retries alike) is answered 429 with Retry-After;
- an `Outage`: after the `after`-th request the proxy goes down as a crashed server does
  (requests in flight and on connections already open are dropped, new connections
  refused) for `seconds`, or until `up()` when `seconds` is None.

    python -m benchmarks.fault_proxy --upstream http://127.0.0.1:8011 --port 8012 --hang-s 20

Used by tests/studies/test_faults.py (short hangs) and benchmarks/faults.py (the full-size mix).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import http.client
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

GARBAGE = b'{"choices": [ this is not json'


@dataclass(frozen=True)
class FaultMix:
    http_5xx: float = 0.20
    hang: float = 0.10
    garbage: float = 0.05
    drop: float = 0.03

    def pick(self, digest: bytes) -> str | None:
        """The fault for a request whose hash is `digest` (None: it passes)."""
        u = int.from_bytes(digest[:8], "big") / 2**64
        for kind, share in (("http_5xx", self.http_5xx), ("hang", self.hang), ("garbage", self.garbage),
                            ("drop", self.drop)):
            if u < share:
                if kind == "http_5xx":
                    return "500" if digest[8] % 2 else "503"
                return kind
            u -= share
        return None


@dataclass(frozen=True)
class Storm:
    share: float = 0.4
    retry_after_s: float = 2.0
    seconds: float | None = 30.0  # None: to the end
    after: int = 0  # requests before it begins


@dataclass(frozen=True)
class Outage:
    after: int = 100  # requests before it begins
    seconds: float | None = 45.0  # None: until up()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default 5 drops bursts of connections (1 s SYN retries)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up on a hung answer, or a connection we dropped on purpose


class FaultProxy:
    def __init__(self, upstream: str, *, mix: FaultMix | None = None, hang_s: float = 20.0, port: int = 0,
                 storm: Storm | None = None, outage: Outage | None = None) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.mix = mix or FaultMix()
        self.hang_s = hang_s
        self.seen: set[bytes] = set()
        self.faults: Counter[str] = Counter()
        self.requests = 0
        self.lock = threading.Lock()
        self.storm = storm
        self.outage = outage
        self.storm_began: float | None = None
        self.down_at: float | None = None  # when the outage began (None: not down)
        self.downs = 0  # outages so far
        self.tries: Counter[bytes] = Counter()  # attempts per distinct request
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (the http.server spelling)
                proxy._handle(self)

        self.handler = Handler
        self.httpd: _Server | None = _Server(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The proxy's root URL (append the upstream's path, e.g. /v1)."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._close()

    def down(self) -> None:
        """Stop listening: new connections are refused, requests on open ones dropped."""
        with self.lock:
            if self.down_at is not None:
                return
            self._mark_down()
        self._close()

    def _mark_down(self) -> None:
        self.down_at = time.monotonic()
        self.downs += 1

    def up(self) -> None:
        """Listen again, on the same port."""
        with self.lock:
            if self.down_at is None:
                return
            self.httpd = _Server(("127.0.0.1", self.port), self.handler)
            self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
            self.thread.start()
            self.down_at = None

    def _close(self) -> None:
        httpd, self.httpd = self.httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def _begin_outage(self) -> None:
        assert self.outage is not None
        self._close()
        if self.outage.seconds is not None:
            timer = threading.Timer(self.outage.seconds, self.up)
            timer.daemon = True
            timer.start()

    def _rate_limited(self, digest: bytes) -> bool:
        """In a storm, whether this attempt at the request is answered 429 (by its hash)."""
        storm = self.storm
        if storm is None or self.requests <= storm.after:
            return False
        now = time.monotonic()
        if self.storm_began is None:
            self.storm_began = now
        if storm.seconds is not None and now - self.storm_began > storm.seconds:
            return False
        self.tries[digest] += 1
        mixed = hashlib.sha256(digest + self.tries[digest].to_bytes(4, "big")).digest()
        return int.from_bytes(mixed[:8], "big") / 2**64 < storm.share

    def _fault(self, path: str, body: bytes) -> str | None:
        digest = hashlib.sha256(path.encode() + b"\0" + body).digest()
        with self.lock:
            if self.down_at is not None:
                return "down"
            self.requests += 1
            if self.outage is not None and self.requests == self.outage.after + 1 and not self.downs:
                self._mark_down()  # from now on every request is dropped
                threading.Thread(target=self._begin_outage, daemon=True).start()
                return "down"
            if self._rate_limited(digest):
                self.faults["429"] += 1
                return "429"
            if digest in self.seen:
                return None  # a retry: passes through
            self.seen.add(digest)
            fault = self.mix.pick(digest)
            if fault is not None:
                self.faults[fault] += 1
            return fault

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length", 0)))
        fault = self._fault(handler.path, body)
        if fault == "429":
            assert self.storm is not None
            self._send(handler, 429, b'{"error": {"message": "rate limited"}}',
                       headers={"Retry-After": f"{self.storm.retry_after_s:g}"})
            return
        if fault in ("drop", "down"):
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault in ("500", "503"):
            self._send(handler, int(fault), b'{"error": {"message": "injected fault"}}')
            return
        if fault == "garbage":
            self._send(handler, 200, GARBAGE)
            return
        if fault == "hang":
            time.sleep(self.hang_s)
        downs = self.downs
        try:
            status, payload, kind = self._forward(handler, body)
        except OSError as exc:  # the upstream refused or broke: what a gateway says then
            status, payload, kind = 502, f'{{"error": {{"message": "bad gateway: {exc}"}}}}'.encode(), "application/json"
        if self.downs != downs or self.down_at is not None:  # it went down meanwhile: no answer
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        try:
            self._send(handler, status, payload, kind)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True  # the client stopped waiting

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes, str]:
        connection = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=600)
        try:
            headers = {k: v for k, v in handler.headers.items()
                       if k.lower() in ("content-type", "authorization", "accept")}
            connection.request("POST", handler.path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read(), response.getheader("Content-Type", "application/json")
        finally:
            connection.close()

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: bytes, kind: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", required=True, help="the server's root URL, e.g. http://127.0.0.1:8011")
    parser.add_argument("--port", type=int, default=8012)
    parser.add_argument("--hang-s", type=float, default=20.0)
    args = parser.parse_args()
    with FaultProxy(args.upstream, hang_s=args.hang_s, port=args.port) as proxy:
        print(f"proxy on {proxy.url} -> {args.upstream} (hangs {args.hang_s:g} s); Ctrl-C to stop", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            proxy.thread.join()


if __name__ == "__main__":
    main()
