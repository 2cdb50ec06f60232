"""`margin report`: a run folder's tables, or the same as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from margin.cli.app import app, console
from margin.cli.common import families, print_tables


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="a run folder")],
    flips: Annotated[int, typer.Option(help="cheapest flips to list")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="print the figures and analyses as JSON")] = False,
) -> None:
    """Margins with CIs, slices, coverage, cheapest flips; invariance, effectiveness and the
    threshold sweep for exhaustive runs."""
    from margin.reports.analyses import analyse
    from margin.reports.completeness import Coverage, missing_reason
    from margin.reports.observations import coverage, from_receipts, read_calls
    from margin.reports.protocols import observes_all
    from margin.reports.snapshot import record, snapshot_entry
    from margin.reports.snapshot_schema import Evaluation
    from margin.reports.tables import run_tables
    from margin.runfolder import load_run

    run = load_run(run_dir)
    receipts = list(run.receipts()) if run.receipts_path.is_file() else []
    entry = snapshot_entry(run.guard, run.results, run.budget,
                           Evaluation.model_validate({"search": run.search, "seed": run.record.seed,
                                                      **({"target": run.record.target} if run.record.target else {})}),
                           coverage=Coverage.of(run.results, missing_reason(receipts, run.results)))
    rec = record(entry, 1 if entry.coverage.complete else None)
    calls = read_calls(receipts)
    observations = from_receipts(calls, run.results)
    exhaustive = observes_all(run.search) and all(o.complete for o in observations)
    analyses = analyse(observations, run.budget, exhaustive=exhaustive, families=families())
    covered = coverage(calls) if receipts else None
    if as_json:
        from margin.reports.metrics import outcome_counts
        from margin.reports.tables import cheapest_flips, coverage_record
        from margin.runfolder import flip_record

        cheapest = [{"prompt_id": r.prompt_id, "label": r.label, **(flip_record(r.flip) or {})}
                    for r in cheapest_flips(run.results, flips)]
        document = {"guard": rec.document(), "coverage": coverage_record(run.results, covered).document(),
                    "outcomes": outcome_counts(run.results), "cheapest_flips": cheapest, **analyses.records()}
        sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
        return
    print_tables(run_tables(rec, run.results, covered, analyses, flips=flips))
    if not observes_all(run.search):
        console.print("invariance, per-transform effectiveness and the threshold sweep need --search exhaustive")
