"""Replaying what a killed run's or study's receipts recorded, so a resume makes no completed call twice.

The receipts are the run's memory. Every completed output they hold answers the same request
again (the strategies are deterministic state machines, so replaying verdicts rebuilds every
search exactly), attempts without output continue from where they stopped with the
attempts the text had left (its waits, lines with `"charged": false`, used up none; a line
written before that field existed counts as charged), and no completed guard call is made
twice; texts it gave up on (no output after every attempt) get a fresh set of attempts, so
resuming is also how lost coverage is retried. A killed writer leaves at most one torn last
line; it is cut off before new lines are appended.
"""

from __future__ import annotations

import os
from pathlib import Path

from margin.engine.book import note_failed_attempt
from margin.runfolder import read_jsonl
from margin.serving.driver import VerdictReplay
from margin.types import Verdict
from margin.util.safefiles import open_nofollow, refuse_link


def cut_torn_tail(path: Path) -> None:
    """Drop a partial last line (no newline yet) so appended lines start on their own line.
    A link at `path` is refused (InputError), its target never cut."""
    refuse_link(path)
    if not path.exists():
        return
    with os.fdopen(open_nofollow(path, os.O_RDWR), "rb+") as handle:
        data = handle.read()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())


def load_replay(receipts: Path) -> VerdictReplay:
    replay = VerdictReplay()
    if not receipts.exists():
        return replay
    for record in read_jsonl(receipts):
        replay.run_id = replay.run_id or record.get("run_id")
        if record.get("kind") == "result":
            replay.results.add(record["prompt_id"])
            continue
        if record.get("kind") != "call":
            continue
        key = (record["prompt_id"], record["transform"], record["strength"], record["seed"])
        sha = record.get("input_sha256") or record["text_sha256"]  # the key a whole case was asked by
        if record["verdict"] is not None:
            replay.verdicts[sha] = Verdict(record["verdict"], p_unsafe=record["p_unsafe"], raw=record["raw"] or "",
                                           reply=record.get("reply"))
            replay.recorded.add(key)
        elif not record.get("cached"):
            note_failed_attempt(replay.failed, replay.waits, sha, record)
    return replay
