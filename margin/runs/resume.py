"""Resuming a killed run: check it is the same run, then replay what its receipts recorded.

The receipts are the run's memory. Every completed output they hold answers the same request
again (the strategies are deterministic state machines, so replaying verdicts rebuilds every
search exactly), attempts without output continue from where they stopped, and no completed
guard call is made twice; texts it gave up on (no output after every attempt) get a fresh
set of attempts, so resuming is also how lost coverage is retried. A killed writer leaves at most one torn last line; it is cut off
before new lines are appended.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.runfolder import read_jsonl
from margin.runs.driver import Replay
from margin.types import Verdict

#: Manifest fields a resumed run must share with the killed one, with the flag that sets each.
FLAGS = {
    "dataset": "--dataset", "suite": "--suite", "guard": "--guard", "budget": "--budget",
    "cost_norm": "--cost-norm", "corpus_mean_length": "--dataset", "search": "--search",
    "seed": "--seed", "limit": "--limit", "limit_sample": "--limit", "shard": "--shard", "protocol": "--search",
    "max_calls": "--max-calls", "incumbents": "--incumbents", "one_edit": "--one-edit",
}


def check_manifest(run_dir: Path, saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Refuse to resume when anything that decides results differs from the killed run."""
    changed = sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k))
    if changed:
        details = "; ".join(f"{k}: run.json has {_short(saved.get(k))}, this command gives "
                            f"{_short(current.get(k))}" for k in changed)
        flags = ", ".join(sorted({FLAGS.get(k, k) for k in changed}))
        raise InputError(f"cannot resume: {flags} changed since the run began ({details})",
                         path=run_dir / "run.json")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def cut_torn_tail(path: Path) -> None:
    """Drop a partial last line (no newline yet) so appended lines start on their own line."""
    if not path.exists():
        return
    with open(path, "rb+") as handle:
        data = handle.read()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            handle.truncate(end)
            handle.flush()
            os.fsync(handle.fileno())


def load_replay(receipts: Path) -> Replay:
    replay = Replay()
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
        sha = record["text_sha256"]
        if record["verdict"] is not None:
            replay.verdicts[sha] = Verdict(record["verdict"], p_unsafe=record["p_unsafe"], raw=record["raw"] or "")
            replay.recorded.add(key)
        elif not record.get("cached"):
            replay.failed[sha] = max(replay.failed.get(sha, 0), int(record["attempt"]))
    return replay
