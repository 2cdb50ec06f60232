"""A run's outputs from its record and finished results: results.jsonl, snapshot.json and
the curves; `margin run`, `margin merge` and `margin score` all build them here, so a rescore
or a merge matches a run exactly. And the coverage rule that fails a run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.errors import CoverageError
from margin.reports.completeness import Coverage, missing_reason
from margin.reports.plots import CurveSeries, curves_figure, save
from margin.reports.protocols import ADAPTIVE_PROTOCOL, protocol_for
from margin.reports.snapshot import SnapshotEntry, build_snapshot, measured_on, snapshot_entry
from margin.reports.snapshot_schema import Evaluation, Provenance, Snapshot
from margin.runfolder import dumps, read_jsonl, write_results
from margin.runrecord import RunRecord
from margin.runs.preparing.prepare import PreparedRun
from margin.serving.calls import EngineFigures
from margin.types import MarginReport, SearchResult
from margin.util.safefiles import atomic_write_text


@dataclass
class RunOutcome:
    out_dir: Path
    results: list[SearchResult]
    report: MarginReport
    snapshot: Snapshot
    guard_calls: int
    cache_hits: int = 0
    missing: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    figures: EngineFigures = field(default_factory=EngineFigures)


def provenance(record: RunRecord, prompts: int) -> Provenance:
    """A run's `meta.provenance`: what it measured, then how (its seed, search, prompts ...)."""
    return measured_on(record).model_copy(update={
        "seed": record.seed,
        "search": record.search,
        "prompts": prompts,
        **({"shard": list(record.shard)} if record.shard else {}),
        "protocol": protocol_for(record.search),
    })


def reason_from(receipts: list[Path], results: list[SearchResult]) -> str | None:
    """Why prompts are missing, from the receipts that recorded their attempts (read only
    when something is missing: a complete run's receipts are never read again)."""
    if not any(r.status == "missing" for r in results):
        return None
    lines = (line for path in receipts if path.is_file() for line in read_jsonl(path))
    return missing_reason(lines, results)


def snapshot_for(record: RunRecord, results: list[SearchResult],
                 reason: str | None = None) -> tuple[Snapshot, SnapshotEntry]:
    """A run's snapshot from its record and results; `margin run`, `margin merge` and
    `margin score` all build it here, so a rescore or a merge matches a run exactly."""
    guard = record.guard
    evaluation = Evaluation.model_validate({"search": record.search, "seed": record.seed,
                                            "normalize": dict(guard.params).get("normalize", "none"),
                                            **({"target": record.target} if record.target else {})})
    entry = snapshot_entry(guard, results, float(record.budget), evaluation, coverage=Coverage.of(results, reason))
    snapshot = build_snapshot([entry], provenance(record, len(results)), protocol=protocol_for(record.search))
    return snapshot, entry


def write_curves(stem: Path, snapshot: Snapshot) -> None:
    """RA curves with Wilson bands, as PNG and SVG."""
    meta = snapshot.meta.provenance
    record = snapshot.data[0]
    how = (f"{getattr(meta, 'search', None)} search: upper bounds" if snapshot.meta.protocol == ADAPTIVE_PROTOCOL
           else f"{meta.suite.name} suite")
    title = f"{record.id} on {meta.dataset.name} ({how})"
    save(curves_figure([CurveSeries.from_record(record)], title), stem)


def write_outputs(out_dir: Path, record: RunRecord,
                  results: list[SearchResult]) -> tuple[MarginReport, Snapshot]:
    """results.jsonl, snapshot.json and curves (PNG, SVG) from a run's record and finished
    results (the reason for any missing prompt from the folder's receipts)."""
    reason = reason_from([out_dir / "receipts.jsonl"], results)
    snapshot, entry = snapshot_for(record, results, reason)
    write_results(out_dir / "results.jsonl", results)
    atomic_write_text(out_dir / "snapshot.json", dumps(snapshot.document()) + "\n")
    write_curves(out_dir / "curves", snapshot)
    return entry.report, snapshot


def finish(prepared: PreparedRun, out_dir: Path, results: list[SearchResult], *,
           guard_calls: int, cache_hits: int = 0) -> RunOutcome:
    """Write results, snapshot and curves for finished searches."""
    report, snapshot = write_outputs(out_dir, prepared.record, results)
    return RunOutcome(out_dir, results, report, snapshot, guard_calls, cache_hits,
                      missing=sum(1 for r in results if r.status == "missing"))


def check_coverage(results: list[SearchResult], max_missing: float) -> None:
    """Fail a run whose lost coverage is above `max_missing` (a share of its prompts)."""
    missing = sum(1 for r in results if r.status == "missing")
    if results and missing / len(results) > max_missing:
        raise CoverageError(
            f"{missing} of {len(results)} prompts ({100 * missing / len(results):.1f}%) have no verdict "
            f"after every retry, above --max-missing {100 * max_missing:g}%; their errors are in "
            f"receipts.jsonl (rerun with --resume to retry them, or raise --max-attempts)"
        )
