"""A sqlite file that several processes may read at once while one of them writes (WAL mode).

sqlite's connections belong to the thread that opened them, and a caller may use one file
from several threads (a notebook's thread opens the cache, the engine's own thread looks verdicts
up), so `SharedFile` opens one connection per thread, when that thread first uses it.
"""

from __future__ import annotations

import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from margin.errors import InputError

K = TypeVar("K")
V = TypeVar("V")

#: Keys per `IN (...)` query: well under sqlite's limit on bound parameters.
CHUNK = 500


def open_shared(path: Path, schema: str, *, version: int = 1, check_same_thread: bool = True) -> sqlite3.Connection:
    """Open (or create, with its folder) the file and make sure `schema`'s tables exist.

    `version` is the schema's, kept in sqlite's user_version: a file of a later version (a
    newer margin wrote it) is refused; a file without one (0: written before versions were
    kept, or just made) holds the first version's tables and is stamped with `version`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A writer may hold the lock a while: wait, do not fail.
    db = sqlite3.connect(path, timeout=30.0, check_same_thread=check_same_thread)
    found = int(db.execute("PRAGMA user_version").fetchone()[0])
    if found > version:
        db.close()
        raise InputError(f"written by a newer margin (schema version {found}; this margin reads up to "
                         f"{version}): move the file away or set MARGIN_CACHE_DIR to another folder", path=path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(schema)  # one or more CREATE ... IF NOT EXISTS statements
    if found < version:
        db.execute(f"PRAGMA user_version={int(version)}")
    db.commit()
    return db


class SharedFile:
    """One sqlite file, a connection per thread that uses it; `close` closes them all."""

    def __init__(self, path: Path, schema: str, version: int = 1) -> None:
        self.path = path
        self._schema = schema
        self._version = version
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
            db = open_shared(self.path, self._schema, version=self._version, check_same_thread=False)
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


class SqliteCache(ABC, Generic[K, V]):
    """A cache of completed outputs in one sqlite file that runs and studies share: the
    file (WAL mode, a connection per thread, `SharedFile`), its tables (`SCHEMA`) and their
    version (`VERSION`), and what every such cache does with them. A subclass says how its
    rows read and write (`get_many`, `put_many`)."""

    SCHEMA: ClassVar[str]  # CREATE TABLE IF NOT EXISTS statements
    TABLE: ClassVar[str]  # the table whose rows are the cache's entries
    #: raise it when older margins must not read the file any more; an older file gains new
    #: tables by SCHEMA's CREATE ... IF NOT EXISTS and is stamped with the new version
    VERSION: ClassVar[int] = 1

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = SharedFile(path, self.SCHEMA, self.VERSION)

    @abstractmethod
    def get_many(self, keys: list[K]) -> dict[K, V]:
        """The entries held for any of `keys`, by key."""

    @abstractmethod
    def put_many(self, items: Iterable[tuple[K, V]]) -> None:
        """Store completed entries."""

    def get(self, key: K) -> V | None:
        return self.get_many([key]).get(key)

    def __len__(self) -> int:
        return int(self._file.db.execute(f"SELECT COUNT(*) FROM {self.TABLE}").fetchone()[0])

    def close(self) -> None:
        self._file.close()
