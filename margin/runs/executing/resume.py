"""Starting or resuming a run in its folder: a new one claimed (run.json written), or a killed
one checked against this run (`check_same_run`) and its receipts loaded for replay
(`margin.serving.replay`). Nothing is written before the folder is known to be right.
`margin.runs.recording.folder` says what a folder that recorded nothing yet holds.
"""

from __future__ import annotations

from pathlib import Path

from margin.errors import InputError
from margin.runfolder import read_run_record, write_run_record
from margin.runrecord import RunRecord, flags_of
from margin.runs.preparing.prepare import PreparedRun
from margin.runs.recording.folder import START_FILES, check_out_dir, claim_out_dir, unstarted
from margin.serving.driver import VerdictReplay
from margin.serving.replay import cut_torn_tail, load_replay
from margin.util.safefiles import refuse_link


def check_same_run(run_dir: Path, saved: RunRecord, current: RunRecord) -> None:
    """Refuse to resume when anything that decides results differs from the killed run."""
    changed = saved.differences(current)
    if changed:
        flags = flags_of(changed)
        details = saved.describe(current, changed, "run.json has", "this command gives")
        raise InputError(f"cannot resume: {flags} changed since the run began ({details})",
                         path=run_dir / "run.json")


def check_run_dir(prepared: PreparedRun, out_dir: Path, resume: bool) -> bool:
    """Refuse a used --out, or a --resume folder of another run, before anything starts.
    Returns whether there is a run to resume: False for a new run, and for a --resume
    folder whose run recorded nothing (killed before writing run.json, say), which starts
    afresh. Asked under the folder's lock (and before it, for a folder that does not exist);
    `open_run_dir` acts on its answer."""
    if not resume:
        check_out_dir(out_dir)
        return False
    if not out_dir.is_dir():
        raise InputError("no such run folder (a run stopped before it recorded anything leaves none: "
                         "start it again with --out)", path=out_dir, field="--resume")
    for name in START_FILES:  # a resumed run reads, cuts and appends to them: never through a link
        refuse_link(out_dir / name)
    if unstarted(out_dir) and not (out_dir / "run.json").is_file():
        return False
    check_same_run(out_dir, read_run_record(out_dir), prepared.record)
    return True


def open_run_dir(prepared: PreparedRun, out_dir: Path, resuming: bool) -> VerdictReplay:
    """Claim a new run folder (writing run.json), or load what a killed run recorded;
    `resuming` is what `check_run_dir` answered."""
    if not resuming:
        claim_out_dir(out_dir)
        write_run_record(out_dir, prepared.record)
        return VerdictReplay()
    receipts = out_dir / "receipts.jsonl"
    cut_torn_tail(receipts)
    return load_replay(receipts)
