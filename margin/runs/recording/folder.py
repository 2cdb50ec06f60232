"""An output folder claimed for writing: a run's (`margin.runs.executing.resume` starts or
resumes one in it), a merge's or a rescore's. Nothing is written before the folder is known
to be right.

A folder whose run recorded nothing yet (killed or failed before its first receipt line:
run.json, an empty receipts file, a temp file of an interrupted atomic write at most) holds
nothing a rerun would lose, so a plain rerun with the same --out or a --resume starts it
afresh; a run that fails before its first result removes such a folder it made itself.

Every step runs under the folder's lock (`margin.util.folderlock`): a second run or `--resume`
of a folder that a live process writes is refused, so what is cleared here is only ever
what a process that is no longer running left, or this process's own start.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

from margin.errors import InputError
from margin.util.folderlock import entries
from margin.util.safefiles import slug

#: What a run writes before its first receipt line; `drivers/` holds one such folder per driver.
START_FILES = ("run.json", "receipts.jsonl")


def default_out_dir(guard_id: str) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("runs") / f"{slug(guard_id)}-{stamp}"


def unstarted(folder: Path) -> bool:
    """Whether a folder holds nothing but what a run writes before recording anything (and
    the lock of the process writing it)."""
    if not folder.is_dir() or folder.is_symlink():
        return False
    for entry in entries(folder):
        if entry.name == "drivers" and entry.is_dir():
            if not all(unstarted(part) for part in entry.iterdir()):
                return False
        elif entry.is_symlink():
            return False
        elif entry.name == "receipts.jsonl" and entry.is_file():
            if b"\n" in entry.read_bytes():  # a complete line: something was recorded
                return False
        elif not (entry.is_file() and (entry.name == "run.json" or _temp_of_start_file(entry.name))):
            return False
    return True


def _temp_of_start_file(name: str) -> bool:
    return any(name.startswith(f".{start}.") for start in START_FILES)


def check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or entries(out_dir)) and not unstarted(out_dir):
        raise InputError("output folder exists and is not empty; choose another --out (or --resume it)",
                         path=out_dir)


def claim_out_dir(out_dir: Path) -> None:
    check_out_dir(out_dir)
    clear_unstarted(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def clear_unstarted(out_dir: Path) -> None:
    """Empty a folder that `unstarted` accepts (a killed or failed start), keeping the folder
    and its lock, which this process holds."""
    if not unstarted(out_dir):
        return
    for entry in entries(out_dir):
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def remove_unstarted(out_dir: Path) -> None:
    """A run that made `out_dir` failed before recording anything: leave no folder behind."""
    if unstarted(out_dir):
        shutil.rmtree(out_dir)
