"""`margin integral`: one score across datasets."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from margin.cli.app import app, console, err
from margin.errors import InputError


@app.command()
def integral(
    inputs: Annotated[list[Path], typer.Argument(help="run folders: one per guard and dataset")],
    group: Annotated[list[str] | None, typer.Option(help="NAME=DATASET,DATASET (repeatable); other datasets "
                                                         "are groups of their own")] = None,
    at_budget: Annotated[float, typer.Option(help="read FPR/FNR at this budget (0: original prompts)")] = 0.0,
    out: Annotated[Path | None, typer.Option(help="write integral.json and the FPR vs FNR scatter here")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print integral.json's record instead of the table")] = False,
) -> None:
    """The integral score across datasets (harmonic per dataset and group, geometric overall)."""
    from margin.reports.integral import integral_from_runs, integral_record, parse_groups
    from margin.reports.tables import integral_table
    from margin.runfolder import load_run

    if not (math.isfinite(at_budget) and at_budget >= 0):
        raise InputError("must be a finite number, at least 0", field="--at-budget")
    table = integral_from_runs([load_run(p) for p in inputs], parse_groups(group or []), at_budget)
    if as_json:
        from margin.runfolder import dumps

        sys.stdout.write(dumps(integral_record(table)) + "\n")
    else:
        console.print(integral_table(table.scores, table.datasets, table.groups, at_budget))
    if out is not None:
        from margin.reports.plots import fpr_fnr_figure, save
        from margin.runfolder import dumps
        from margin.util.safefiles import atomic_write_text

        atomic_write_text(out / "integral.json", dumps(integral_record(table)) + "\n")
        files = save(fpr_fnr_figure([(s.guard_id, s.fpr_avg, s.fnr_avg) for s in table.scores]), out / "fpr_fnr")
        (err if as_json else console).print(f"wrote {out / 'integral.json'}, {', '.join(str(f) for f in files)}")
