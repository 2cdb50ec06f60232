"""`margin site --serve`: the built folder over HTTP on 127.0.0.1, for previews and tests.

A static host needs nothing of this; here the API endpoints (files without an extension)
are served as `application/json`, which a plain file server would not know.
"""

from __future__ import annotations

import functools
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

JSON = "application/json; charset=utf-8"


class SiteHandler(SimpleHTTPRequestHandler):
    def guess_type(self, path: Any) -> str:
        relative = Path(path).resolve().relative_to(Path(self.directory).resolve()).as_posix()
        if relative.startswith("api/") or relative.endswith(".json"):
            return JSON
        return super().guess_type(path)

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")  # a rebuilt preview shows at once
        if self.path.startswith("/api/"):
            self.send_header("Access-Control-Allow-Origin", "*")  # free to fetch from any page
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


def make_server(site_dir: Path, port: int = 8000) -> ThreadingHTTPServer:
    """Bound (port 0: any free port) but not yet serving; `server.serve_forever()` serves."""
    handler = functools.partial(SiteHandler, directory=str(site_dir))
    return ThreadingHTTPServer(("127.0.0.1", port), handler)
