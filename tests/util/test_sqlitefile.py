import sqlite3
import threading

import pytest

from margin.util.sqlitefile import SharedFile, open_shared

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
