"""Incumbents: a finished standard-suite run's flips, to seed adaptive search with.

Seeded, adaptive search asks for the suite's flip first and only ever improves on it, so
its cost never exceeds the suite's for any prompt.
"""

from __future__ import annotations

from pathlib import Path

from margin.errors import InputError
from margin.runfolder import read_results, read_run_record
from margin.runrecord import SAME_UNITS, RunRecord
from margin.types import Flip


def load_incumbents(run_dir: str | Path, expect: RunRecord) -> dict[str, Flip]:
    """Flips by prompt id from `run_dir`'s results, refusing a run whose dataset, guard, cost
    norm or corpus length differ from `expect` (the adaptive run's record: units would differ)."""
    folder = Path(run_dir)
    manifest_path, results_path = folder / "run.json", folder / "results.jsonl"
    for path in (manifest_path, results_path):
        if not path.is_file():
            raise InputError("not a finished margin run (missing file)", path=path, field="--incumbents")
    theirs = read_run_record(folder)
    changed = theirs.differences(expect, SAME_UNITS)
    if changed:
        raise InputError("incumbent run differs in " + theirs.describe(expect, changed, "it has", "this run"),
                         path=manifest_path, field="--incumbents")
    return {r.prompt_id: r.flip for r in read_results(results_path) if r.status == "scored" and r.flip is not None}
