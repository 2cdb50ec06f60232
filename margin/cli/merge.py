"""`margin merge`: join shard and retry folders into one run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from margin.cli import options as o
from margin.cli.app import app, console
from margin.cli.common import check_or_fail, fmt, parse_share
from margin.engine import settings


@app.command()
def merge(
    dirs: Annotated[list[Path], typer.Argument(help="run folders: shards, then retries (a later folder wins)")],
    out: Annotated[Path, typer.Option(help="folder for the merged run")],
    dataset: Annotated[str | None, typer.Option(help="the runs' dataset, if it moved since (checked by SHA-256)")] = None,
    max_missing: o.MaxMissing = settings.MAX_MISSING.flag_default,
) -> None:
    """Join shard and retry run folders into one run (results, receipts, snapshot, curves)."""
    from margin.runs.recording.merge import merge_runs
    from margin.runs.recording.outputs import CoverageError, check_coverage

    share = parse_share(max_missing, "--max-missing")
    outcome = merge_runs(dirs, out, dataset)
    report = outcome.report
    console.print(f"merged {len(dirs)} run folders into {out}/: {len(outcome.results)} prompts, "
                  f"{outcome.replaced} replaced by a later folder, {outcome.absent} in no folder")
    coverage = outcome.snapshot.data[0].coverage
    console.print(f"balanced margin {fmt(report.balanced_margin)}  unsafe {fmt(report.unsafe_margin)}  "
                  f"safe {fmt(report.safe_margin)}  missing {sum(report.missing.values())}"
                  + ("" if coverage.complete else f"  INCOMPLETE: {coverage.describe()}"), markup=False)
    check_or_fail([lambda: check_coverage(outcome.results, share)], CoverageError)
