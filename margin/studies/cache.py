"""The response cache: completed model and judge outputs, shared across studies.

Keyed by `margin.studies.calls.request_key`: the SHA-256 of the model's identity (backend, checkpoint,
revision, server, system prompt, token limit, template kwargs, request options; greedy) and
the exact messages. Only completed outputs are stored. sqlite in WAL mode, one file beside
the verdict cache in margin's cache folder.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from margin.datasets import cache_dir
from margin.studies.models import ModelReply
from margin.util.sqlitefile import SqliteCache, rows_for_keys

SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    truncated INTEGER NOT NULL
)
"""


def default_cache_path() -> Path:
    return cache_dir() / "replies.sqlite"


class ReplyCache(SqliteCache[str, ModelReply]):
    SCHEMA = SCHEMA
    TABLE = "replies"

    def get_many(self, keys: list[str]) -> dict[str, ModelReply]:
        rows = rows_for_keys(self._file.db, "SELECT key, text, truncated FROM replies WHERE key IN", keys)
        return {key: ModelReply(text, bool(truncated)) for key, text, truncated in rows}

    def put_many(self, items: Iterable[tuple[str, ModelReply]]) -> None:
        rows = [(key, reply.text, int(reply.truncated)) for key, reply in items]
        if rows:
            with self._file.db:
                self._file.db.executemany("INSERT OR REPLACE INTO replies VALUES (?, ?, ?)", rows)
