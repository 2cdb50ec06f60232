"""`margin merge`: join shard and retry run folders into one run.

Every input must be the same run apart from its shard (same dataset, suite, guard, budget,
search, seed: their run.json files are compared). Results are keyed by prompt id and a later
folder wins on a collision, so a retry listed after the run it repairs replaces its results.
A folder whose run was killed contributes the results its receipts recorded. Prompts of the
dataset that no input covers are missing (lost coverage), never silently dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from margin.datasets import load_dataset
from margin.errors import InputError
from margin.reports.snapshot_schema import Snapshot
from margin.runfolder import folder_results, read_run_record, write_run_record
from margin.runrecord import DECIDING, RunRecord, flags_of
from margin.runs.preparing.subset import limit_prompts
from margin.runs.recording.folder import claim_out_dir
from margin.runs.recording.outputs import write_outputs
from margin.types import MarginReport, Prompt, SearchResult
from margin.util.safefiles import atomic_file


@dataclass
class MergeOutcome:
    out_dir: Path
    results: list[SearchResult]
    report: MarginReport
    snapshot: Snapshot
    absent: int  # prompts no input covered
    replaced: int  # prompts a later input overrode


def merge_runs(dirs: list[Path], out_dir: Path, dataset: str | None = None) -> MergeOutcome:
    if not dirs:
        raise InputError("give at least one run folder", field="DIRS")
    base = dataclasses.replace(read_run_record(dirs[0]), shard=None)
    for run_dir in dirs[1:]:
        check_same_part(dirs[0], base, run_dir, dataclasses.replace(read_run_record(run_dir), shard=None))
    loaded = load_dataset(dataset or base.dataset_spec, base.target_name,
                          base.policies.source if base.policies else None)
    if loaded.sha256 != base.dataset.sha256:
        raise InputError(f"the dataset's SHA-256 is {loaded.sha256}, the runs used {base.dataset.sha256}",
                         path=loaded.source, field="--dataset")
    if base.policies is not None and (loaded.policies is None or loaded.policies.sha256 != base.policies.sha256):
        raise InputError(f"the policies file is not the one the runs used (SHA-256 {base.policies.sha256})",
                         path=base.policies.source, field="--policies")
    prompts = limit_prompts(loaded.prompts, base.limit, base.seed, base.limit_method)
    results, absent, replaced = join_results(dirs, prompts)
    claim_out_dir(out_dir)
    write_run_record(out_dir, base)
    join_receipts(dirs, out_dir / "receipts.jsonl")
    report, snapshot = write_outputs(out_dir, base, results)
    return MergeOutcome(out_dir, results, report, snapshot, absent, replaced)


def check_same_part(first_dir: Path, first: RunRecord, run_dir: Path, record: RunRecord) -> None:
    """Every folder must be a part of one run: the same record but for its shard."""
    changed = first.differences(record, [name for name in DECIDING if name != "shard"])
    if changed:
        flags = flags_of(changed)
        details = first.describe(record, changed, f"{first_dir} has", "this folder has")
        raise InputError(f"cannot merge: this folder's run differs from {first_dir}'s in {flags} ({details})",
                         path=run_dir / "run.json")


def join_results(dirs: list[Path], prompts: Sequence[Prompt]) -> tuple[list[SearchResult], int, int]:
    """The folders' results in `prompts` order (a later folder wins a prompt; one that no
    folder covers is missing), with how many were absent and how many replaced."""
    known = {p.id for p in prompts}
    merged: dict[str, SearchResult] = {}
    replaced = 0
    for run_dir in dirs:
        for result in folder_results(run_dir):
            if result.prompt_id not in known:
                raise InputError(f"result for prompt {result.prompt_id!r}, which is not in the dataset",
                                 path=run_dir)
            replaced += result.prompt_id in merged
            merged[result.prompt_id] = result
    absent = [p for p in prompts if p.id not in merged]
    for p in absent:
        merged[p.id] = SearchResult(p.id, p.label, p.type, None, None, False, None, 0, "missing", p.extra)
    return [merged[p.id] for p in prompts], len(absent), replaced


def join_receipts(dirs: list[Path], path: Path) -> None:
    """Every whole line of the folders' receipts, in folder order, into `path` (written to a
    temporary file and renamed over it; streamed: a big run's receipts run to gigabytes)."""
    with atomic_file(path, "wb") as out:
        for run_dir in dirs:
            source = run_dir / "receipts.jsonl"
            if source.is_file():
                copy_whole_lines(source, out)


def copy_whole_lines(source: Path, out: IO[bytes], chunk: int = 1 << 22) -> None:
    """`source` up to its last newline (a killed writer's torn last line stays behind)."""
    with open(source, "rb") as handle:
        pending = b""
        while block := handle.read(chunk):
            block = pending + block
            end = block.rfind(b"\n") + 1
            out.write(block[:end])
            pending = block[end:]
