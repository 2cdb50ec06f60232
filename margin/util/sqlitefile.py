"""A sqlite file that several processes may read at once while one of them writes (WAL mode)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

#: Keys per `IN (...)` query: well under sqlite's limit on bound parameters.
CHUNK = 500


def open_shared(path: Path, schema: str) -> sqlite3.Connection:
    """Open (or create, with its folder) the file and make sure `schema`'s tables exist."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=30.0)  # a writer may hold the lock a while: wait, do not fail
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(schema)
    db.commit()
    return db


def rows_for_keys(db: sqlite3.Connection, select: str, keys: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of `select` (ending `WHERE key IN`) for `keys`, a few hundred keys a query."""
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start:start + CHUNK]
        yield from db.execute(f"{select} ({','.join('?' * len(chunk))})", chunk)
