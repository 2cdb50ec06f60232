"""The verdict cache: completed guard outputs, content-addressed, shared across runs.

A key is the SHA-256 of the canonical JSON of the guard's identity (the GuardInfo fields that
decide verdicts: never runtime settings such as replicas or batch size) and the exact text, or,
for a guard that sees whole cases, the whole case (every turn, the target, policy and context).
The text is never normalised: a homoglyph or a zero-width character *is* the input, and
canonical JSON (ASCII escapes) keeps even a lone surrogate apart from its escaped spelling.
Only completed outputs are stored; a call with no output is never cached.

sqlite in WAL mode, one file under `margin.datasets.cache_dir()`: several runs may read it
at once, and each run's driver is its only writer.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterable
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from margin.datasets import cache_dir
from margin.datasets.cases import RequestKey, case_json
from margin.types import GuardInfo, Verdict
from margin.util.hashing import canonical_json, sha256_text
from margin.util.sqlitefile import SqliteCache, rows_for_keys

SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    guard TEXT NOT NULL,
    label TEXT NOT NULL,
    p_unsafe REAL,
    raw TEXT NOT NULL
);
-- A verdict the threshold decided against its reply's text: the reply's label (a table of
-- its own, so cache files written before it existed read as they were).
CREATE TABLE IF NOT EXISTS reply_labels (
    key TEXT PRIMARY KEY,
    reply TEXT NOT NULL
);
"""


def guard_identity(info: GuardInfo) -> dict[str, Any]:
    """The fields of a guard's identity that can change a verdict."""
    return {
        "id": info.id,
        "family": info.family,
        "checkpoint": info.checkpoint,
        "revision": info.revision,
        "backend": info.backend,
        "template_sha256": info.template_sha256,
        "threshold": info.threshold,
        "params": sorted([k, v] for k, v in info.params),
    }


def guard_key(info: GuardInfo) -> str:
    return sha256_text(canonical_json(guard_identity(info)))


def verdict_key(guard: str, text: RequestKey) -> str:
    """`guard` is a `guard_key`; the text goes in exactly as it was sent: the SHA-256 of
    `canonical_json({"guard": guard, "text": text})`, written out without building the dict
    (the same bytes; a run looks up every candidate). A whole case (`Exchange`) is keyed by all
    of it, `{"guard": guard, "case": case_json(...)}`: never by its target text alone."""
    if not isinstance(text, str):
        return sha256_text(f'{{"case":{encode_basestring_ascii(case_json(text))},"guard":{encode_basestring_ascii(guard)}}}')
    return sha256_text(f'{{"guard":{encode_basestring_ascii(guard)},"text":{encode_basestring_ascii(text)}}}')


def default_cache_path() -> Path:
    return cache_dir() / "verdicts.sqlite"


class VerdictCache(SqliteCache[RequestKey, Verdict]):
    SCHEMA = SCHEMA
    TABLE = "verdicts"

    def __init__(self, path: Path, info: GuardInfo) -> None:
        super().__init__(path)
        self.guard = guard_key(info)
        self.full = False  # set once a write found the file or its disk full: later verdicts go unstored

    def get_many(self, texts: list[RequestKey]) -> dict[RequestKey, Verdict]:
        """The verdicts held for any of `texts`, by text (one query per few hundred)."""
        by_key = {verdict_key(self.guard, text): text for text in texts}
        rows = rows_for_keys(self._file.db, "SELECT v.key, label, p_unsafe, raw, r.reply FROM verdicts v "
                                            "LEFT JOIN reply_labels r ON r.key = v.key WHERE v.key IN", list(by_key))
        return {by_key[key]: Verdict(label, p_unsafe=p_unsafe, raw=raw, reply=reply)
                for key, label, p_unsafe, raw, reply in rows}

    def put_many(self, items: Iterable[tuple[RequestKey, Verdict]]) -> None:
        """Store completed verdicts. A full disk or cache (SQLITE_FULL) is not the run's failure:
        one warning, and the run goes on uncached (its results do not depend on the cache)."""
        keyed = [(verdict_key(self.guard, text), v) for text, v in items]
        rows = [(key, self.guard, v.label, v.p_unsafe, v.raw) for key, v in keyed]
        if rows and not self.full:
            try:
                with self._file.db:
                    self._file.db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)", rows)
                    self._file.db.executemany("DELETE FROM reply_labels WHERE key = ?",
                                              [(k,) for k, v in keyed if v.reply is None])
                    self._file.db.executemany("INSERT OR REPLACE INTO reply_labels VALUES (?, ?)",
                                              [(k, v.reply) for k, v in keyed if v.reply is not None])
            except sqlite3.OperationalError as exc:
                if "full" not in str(exc):
                    raise
                self.full = True
                print(f"warning: the verdict cache {self.path} is full ({exc}); "
                      "the run goes on without storing verdicts", file=sys.stderr, flush=True)
