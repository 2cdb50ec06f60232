"""A sqlite file that several processes may read at once while one of them writes (WAL mode)."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_shared(path: Path, schema: str) -> sqlite3.Connection:
    """Open (or create, with its folder) the file and make sure `schema`'s tables exist."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=30.0)  # a writer may hold the lock a while: wait, do not fail
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(schema)
    db.commit()
    return db
