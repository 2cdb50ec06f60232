"""The run folder of a run about to start: a new one claimed (run.json written), or a killed
one checked against this run and its receipts loaded for replay. Nothing is written before
the folder is known to be right."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from margin.errors import InputError
from margin.runfolder import (
    atomic_write_text,
    dumps,
    read_jsonl,
)
from margin.runs.driver import Replay
from margin.runs.prepare import PreparedRun
from margin.runs.resume import check_manifest, cut_torn_tail, load_replay


def default_out_dir(guard_id: str) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in guard_id)
    return Path("runs") / f"{safe}-{stamp}"


def check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InputError("output folder exists and is not empty; choose another --out (or --resume it)",
                         path=out_dir)


def claim_out_dir(out_dir: Path) -> None:
    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def check_run_dir(prepared: PreparedRun, out_dir: Path, resume: bool) -> None:
    """Refuse a used --out, or a --resume folder of another run, before anything starts."""
    if not resume:
        check_out_dir(out_dir)
        return
    saved_path = out_dir / "run.json"
    if not saved_path.is_file():
        raise InputError("not a run folder (no run.json)", path=out_dir, field="--resume")
    saved = next(iter(read_jsonl(saved_path)), None) if saved_path.stat().st_size else None
    if not isinstance(saved, dict):
        raise InputError("run.json is empty or not a JSON object", path=saved_path)
    check_manifest(out_dir, saved, prepared.manifest())


def open_run_dir(prepared: PreparedRun, out_dir: Path, resume: bool) -> Replay:
    """Claim a new run folder (writing run.json), or load what a killed run recorded."""
    check_run_dir(prepared, out_dir, resume)
    if not resume:
        claim_out_dir(out_dir)
        atomic_write_text(out_dir / "run.json", dumps(prepared.manifest()) + "\n")
        return Replay()
    receipts = out_dir / "receipts.jsonl"
    cut_torn_tail(receipts)
    return load_replay(receipts)
