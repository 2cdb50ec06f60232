"""A sqlite file that several processes may read at once while one of them writes (WAL mode).

sqlite's connections belong to the thread that opened them, and a caller may use one file
from several threads (a notebook's thread opens the cache, the engine's own thread looks verdicts
up), so `SharedFile` opens one connection per thread, when that thread first uses it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

#: Keys per `IN (...)` query: well under sqlite's limit on bound parameters.
CHUNK = 500


def open_shared(path: Path, schema: str, *, check_same_thread: bool = True) -> sqlite3.Connection:
    """Open (or create, with its folder) the file and make sure `schema`'s tables exist."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A writer may hold the lock a while: wait, do not fail.
    db = sqlite3.connect(path, timeout=30.0, check_same_thread=check_same_thread)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(schema)  # one or more CREATE ... IF NOT EXISTS statements
    db.commit()
    return db


class SharedFile:
    """One sqlite file, a connection per thread that uses it; `close` closes them all."""

    def __init__(self, path: Path, schema: str) -> None:
        self.path = path
        self._schema = schema
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[sqlite3.Connection] = []
        self.db  # noqa: B018 (open it now: a bad path fails here, not in the middle of a run)

    @property
    def db(self) -> sqlite3.Connection:
        """This thread's connection."""
        db = getattr(self._local, "db", None)
        if db is None:
            # Only this thread queries it; another may close it once every thread is done.
            db = open_shared(self.path, self._schema, check_same_thread=False)
            self._local.db = db
            with self._lock:
                self._open.append(db)
        return db

    def close(self) -> None:
        """Close every thread's connection; call it once no thread uses the file any more."""
        with self._lock:
            connections, self._open = self._open, []
        for db in connections:
            db.close()
        self._local = threading.local()


def rows_for_keys(db: sqlite3.Connection, select: str, keys: Sequence[Any]) -> Iterator[tuple[Any, ...]]:
    """The rows of `select` (ending `WHERE key IN`) for `keys`, a few hundred keys a query."""
    for start in range(0, len(keys), CHUNK):
        chunk = keys[start:start + CHUNK]
        yield from db.execute(f"{select} ({','.join('?' * len(chunk))})", chunk)
