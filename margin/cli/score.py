"""`margin score`: recompute a run from recorded verdicts, calling no guard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from margin.cli.app import app, console, err
from margin.cli.common import families, print_tables
from margin.runrecord import DEFAULT_BUDGET, DEFAULT_COST_NORM, DEFAULT_SEED


@app.command()
def score(
    inputs: Annotated[list[Path], typer.Argument(help="run folders and/or receipts or verdict JSONL files; "
                                                      "a later file wins on a collision")],
    out: Annotated[Path | None, typer.Option(help="write results, snapshot, curves and analyses here")] = None,
    dataset: Annotated[str | None, typer.Option(help="dataset the verdicts were made on (default: run.json's)")] = None,
    suite: Annotated[str | None, typer.Option(help="suite the verdicts were made with (default: run.json's)")] = None,
    budget: Annotated[float | None, typer.Option(help=f"budget B (default: run.json's, else {DEFAULT_BUDGET:g})")] = None,
    cost_norm: Annotated[str | None, typer.Option(help=f"corpus | prompt (default: run.json's, else {DEFAULT_COST_NORM})")] = None,
    seed: Annotated[int | None, typer.Option(help=f"transform seed (default: run.json's, else {DEFAULT_SEED})")] = None,
    search: Annotated[str | None, typer.Option(help="cheapest | exhaustive (default: run.json's)")] = None,
    limit: Annotated[int | None, typer.Option(help="a stratified sample of N prompts, as run --limit (default: run.json's)")] = None,
    guard_id: Annotated[str | None, typer.Option(help="guard id for verdicts made elsewhere")] = None,
    flips: Annotated[int, typer.Option(help="cheapest flips to list")] = 10,
) -> None:
    """Recompute results, snapshot and analyses from recorded verdicts, calling no guard."""
    from margin.reports.analyses import analyse
    from margin.reports.observations import coverage, read_calls
    from margin.reports.tables import run_tables
    from margin.runfolder import read_records
    from margin.runs.recording.score import ScoreOptions, rescore, write_rescore

    options = ScoreOptions(dataset=dataset, suite=suite, budget=budget, cost_norm=cost_norm, seed=seed,
                           search=search, limit=limit, guard_id=guard_id)
    rescored = rescore(inputs, options)
    analyses = analyse(rescored.observations, rescored.prepared.config.budget,
                       exhaustive=rescored.exhaustive, families=families())
    receipts = [line for path in inputs for line in read_records(path / "receipts.jsonl" if path.is_dir() else path)]
    calls = coverage(read_calls(receipts))
    print_tables(run_tables(rescored.snapshot.data[0], rescored.results, calls if calls.candidates else None,
                             analyses, flips=flips))
    if rescored.unmatched:
        err.print(f"note: {len(rescored.unmatched)} recorded verdicts match no rebuilt candidate "
                  f"(first at {rescored.unmatched[0].where}): another dataset, suite, seed or limit?")
    if rescored.differs_from_run is not None:
        same = not rescored.differs_from_run
        console.print("rescored results match the run's results.jsonl" if same else
                      f"rescored results differ from the run's for {len(rescored.differs_from_run)} prompts, "
                      f"e.g. {rescored.differs_from_run[:5]}")
    if out is not None:
        written = write_rescore(rescored, out, analyses.files())
        if analyses.effectiveness is not None:
            from margin.reports.plots import heatmap_figure, save
            from margin.reports.publish import effectiveness_grid

            rows, columns, values = effectiveness_grid({rescored.guard.id: analyses.effectiveness.transforms})
            written += save(heatmap_figure(rows, columns, values, f"{rescored.guard.id}: flip rate per transform"),
                            out / "effectiveness")
        console.print(f"wrote {out}/ ({', '.join(p.name for p in written)})")
