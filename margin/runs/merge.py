"""`margin merge`: join shard and retry run folders into one run.

Every input must be the same run apart from its shard (same dataset, suite, guard, budget,
search, seed: their run.json files are compared). Results are keyed by prompt id and a later
folder wins on a collision, so a retry listed after the run it repairs replaces its results.
A folder whose run was killed contributes the results its receipts recorded. Prompts of the
dataset that no input covers are missing (lost coverage), never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from margin.datasets import XSTEST_URL, load_dataset
from margin.errors import InputError
from margin.runfolder import atomic_file, atomic_write_text, dumps, read_jsonl, result_from_record
from margin.runs.folder import claim_out_dir
from margin.runs.outputs import write_outputs
from margin.runs.resume import check_manifest
from margin.runs.subset import limit_prompts, method_of
from margin.types import MarginReport, Prompt, SearchResult


@dataclass
class MergeOutcome:
    out_dir: Path
    results: list[SearchResult]
    report: MarginReport
    snapshot: dict[str, Any]
    absent: int  # prompts no input covered
    replaced: int  # prompts a later input overrode


def read_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "run.json"
    if not path.is_file():
        raise InputError("not a run folder (no run.json)", path=run_dir)
    records = list(read_jsonl(path))
    if len(records) != 1 or not isinstance(records[0], dict):
        raise InputError("run.json must hold one JSON object", path=path)
    return records[0]


def read_results(run_dir: Path) -> list[SearchResult]:
    results = run_dir / "results.jsonl"
    try:
        if results.is_file():
            return [result_from_record(r) for r in read_jsonl(results)]
        receipts = run_dir / "receipts.jsonl"
        if receipts.is_file():  # a killed run: the results it reached
            return [result_from_record(r) for r in read_jsonl(receipts) if r.get("kind") == "result"]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"unreadable results ({type(exc).__name__}: {exc})", path=run_dir) from None
    return []


def dataset_spec(manifest: dict[str, Any]) -> str:
    dataset = manifest["dataset"]
    if dataset["source"] == XSTEST_URL:
        return "xstest"
    if dataset["name"] == "sample" and dataset["source"] == "margin/data/sample.csv":
        return "sample"
    return str(dataset["source"])


def merge_runs(dirs: list[Path], out_dir: Path, dataset: str | None = None) -> MergeOutcome:
    if not dirs:
        raise InputError("give at least one run folder", field="DIRS")
    manifests = [read_manifest(d) for d in dirs]
    base = {**manifests[0], "shard": None}
    for run_dir, manifest in zip(dirs[1:], manifests[1:], strict=True):
        check_manifest(run_dir, base, {**manifest, "shard": None})
    loaded = load_dataset(dataset or dataset_spec(base))
    if loaded.sha256 != base["dataset"]["sha256"]:
        raise InputError(f"the dataset's SHA-256 is {loaded.sha256}, the runs used {base['dataset']['sha256']}",
                         path=loaded.source, field="--dataset")
    prompts = limit_prompts(loaded.prompts, base["limit"], int(base.get("seed", 0)), method_of(base))
    results, absent, replaced = join_results(dirs, prompts)
    claim_out_dir(out_dir)
    atomic_write_text(out_dir / "run.json", dumps(base) + "\n")
    join_receipts(dirs, out_dir / "receipts.jsonl")
    report, snapshot = write_outputs(out_dir, base, results)
    return MergeOutcome(out_dir, results, report, snapshot, absent, replaced)


def join_results(dirs: list[Path], prompts: Sequence[Prompt]) -> tuple[list[SearchResult], int, int]:
    """The folders' results in `prompts` order (a later folder wins a prompt; one that no
    folder covers is missing), with how many were absent and how many replaced."""
    known = {p.id for p in prompts}
    merged: dict[str, SearchResult] = {}
    replaced = 0
    for run_dir in dirs:
        for result in read_results(run_dir):
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
