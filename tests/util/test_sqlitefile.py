from margin.util.sqlitefile import open_shared

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
