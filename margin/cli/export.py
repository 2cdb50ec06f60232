"""`margin export RUN --format F --out FILE`: a run in a format another tool reads."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from margin.cli.app import app, console
from margin.reports.exports import EXPORTERS


@app.command()
def export(
    run_dir: Annotated[Path, typer.Argument(help="a run folder")],
    fmt: Annotated[str, typer.Option("--format", help=", ".join(EXPORTERS))],
    out: Annotated[Path | None, typer.Option("--out", help="the file to write; for inspect a folder may be named "
                                             "(default $INSPECT_LOG_DIR, else logs/): the log gets inspect's "
                                             "own kind of name there, which `inspect view` lists")] = None,
    dataset: Annotated[Path | None, typer.Option(help="the run's dataset file, if not where run.json says")] = None,
) -> None:
    """An inspect_ai eval log, garak report JSONL, JailbreakBench-style artifact, SARIF 2.1.0
    or JUnit XML of a run."""
    from margin.reports.exports.write import export_run

    done = export_run(run_dir, fmt, out, dataset)
    note = f"; {done.note}" if done.note else ""
    console.print(f"wrote {done.path} ({fmt}: {done.holds}){note}", markup=False, highlight=False, soft_wrap=True)
