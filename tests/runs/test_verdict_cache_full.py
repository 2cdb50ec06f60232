"""Issue 34, item 8: a full verdict cache (SQLITE_FULL: a full disk, or the file's size limit)
is one warning, and the run goes on without storing verdicts."""

from __future__ import annotations

from margin.serving.verdict_cache import VerdictCache
from margin.types import GuardInfo, Verdict

INFO = GuardInfo(id="g", family="test", checkpoint="g", revision="1", backend="python")


def test_a_full_cache_warns_once_and_keeps_what_it_held(tmp_path, capsys):
    cache = VerdictCache(tmp_path / "verdicts.sqlite", INFO)
    cache.put_many([("kept", Verdict("safe", p_unsafe=0.1, raw="r"))])
    pages = cache._file.db.execute("PRAGMA page_count").fetchone()[0]
    cache._file.db.execute(f"PRAGMA max_page_count = {pages}")  # sqlite's own size limit: a real SQLITE_FULL
    for batch in range(3):
        cache.put_many([(f"t{batch}-{i}-" + "x" * 2000, Verdict("unsafe", raw="r")) for i in range(50)])
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "verdict cache" in warnings[0] and "database or disk is full" in warnings[0]
    assert cache.full and cache.get("kept") == Verdict("safe", p_unsafe=0.1, raw="r") and len(cache) == 1
    cache.close()
