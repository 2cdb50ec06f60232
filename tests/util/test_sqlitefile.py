import sqlite3
import threading

import pytest

from margin.errors import InputError
from margin.util.sqlitefile import SharedFile, SqliteCache, open_shared, rows_for_keys

SCHEMA = "CREATE TABLE IF NOT EXISTS items (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def test_creates_the_folder_and_table_in_wal_mode_and_keeps_rows_across_openings(tmp_path):
    path = tmp_path / "deep" / "folder" / "store.sqlite"
    db = open_shared(path, SCHEMA)
    assert path.is_file()
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with db:
        db.execute("INSERT INTO items VALUES ('a', 'x')")
    reader = open_shared(path, SCHEMA)  # a second process's view: the schema is not re-created over the rows
    assert reader.execute("SELECT value FROM items WHERE key = 'a'").fetchone() == ("x",)
    reader.close()
    db.close()


def test_a_shared_file_serves_each_thread_its_own_connection_and_closes_them_all(tmp_path):
    shared = SharedFile(tmp_path / "store.sqlite", SCHEMA)
    with shared.db:
        shared.db.execute("INSERT INTO items VALUES ('a', 'x')")
    seen: list[object] = []

    def other_thread() -> None:  # opened in this thread, used in that one: no ProgrammingError
        seen.append(shared.db.execute("SELECT value FROM items").fetchone())
        seen.append(shared.db)

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert seen[0] == ("x",) and seen[1] is not shared.db
    shared.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        seen[1].execute("SELECT 1")  # type: ignore[attr-defined]


def test_a_file_is_stamped_with_its_schema_version_and_a_newer_one_is_refused(tmp_path):
    path = tmp_path / "store.sqlite"
    old = sqlite3.connect(path)  # a file written before versions were kept: user_version 0
    old.executescript(SCHEMA + "; INSERT INTO items VALUES ('a', 'x')")
    old.close()
    db = open_shared(path, SCHEMA, version=2)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert db.execute("SELECT value FROM items").fetchone() == ("x",)  # read as it was
    db.close()
    with pytest.raises(InputError, match=r"store.sqlite: written by a newer margin \(schema version 2; "
                                         r"this margin reads up to 1\)"):
        open_shared(path, SCHEMA, version=1)


class Items(SqliteCache[str, str]):
    SCHEMA = SCHEMA
    TABLE = "items"

    def get_many(self, keys: list[str]) -> dict[str, str]:
        return dict(rows_for_keys(self._file.db, "SELECT key, value FROM items WHERE key IN", keys))

    def put_many(self, items) -> None:
        with self._file.db:
            self._file.db.executemany("INSERT OR REPLACE INTO items VALUES (?, ?)", list(items))


def test_a_cache_on_the_base_gets_one_or_many_counts_and_closes(tmp_path):
    cache = Items(tmp_path / "items.sqlite")
    cache.put_many([("a", "x"), ("b", "y")])
    assert cache.get("a") == "x" and cache.get("c") is None and len(cache) == 2
    assert cache.get_many(["b", "c"]) == {"b": "y"}
    assert sqlite3.connect(cache.path).execute("PRAGMA user_version").fetchone()[0] == Items.VERSION == 1
    cache.close()
    assert len(Items(tmp_path / "items.sqlite")) == 2  # kept across openings


def test_the_verdict_and_reply_caches_stand_on_the_one_base():
    from margin.serving.verdict_cache import VerdictCache
    from margin.studies.cache import ReplyCache

    assert issubclass(VerdictCache, SqliteCache) and issubclass(ReplyCache, SqliteCache)
