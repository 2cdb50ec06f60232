"""`margin export RUN --format F --out FILE`: a run in a format another tool reads."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from margin.cli.app import app, console
from margin.cli.common import families
from margin.errors import InputError
from margin.runrecord import RunRecord

FORMATS = ("inspect", "garak", "jbb", "sarif", "junit")


def prompt_texts(record: RunRecord, dataset: Path | None) -> dict[str, str]:
    """The run's prompts by id, from its dataset (checked against the SHA-256 the run recorded)."""
    from margin.datasets import load_dataset

    loaded = load_dataset(str(dataset) if dataset is not None else record.dataset_spec, record.target_name,
                          record.policies.source if record.policies else None)
    if loaded.sha256 != record.dataset.sha256:
        raise InputError(f"not the run's dataset (SHA-256 {loaded.sha256[:12]}, the run recorded "
                         f"{record.dataset.sha256[:12]}): pass the run's own file", field="--dataset")
    return {p.id: p.text for p in loaded.prompts}


def snapshot_time(run_dir: Path) -> str:
    """When the run's snapshot was made (its date), so the same run exports the same bytes."""
    try:
        date = json.loads((run_dir / "snapshot.json").read_text("utf-8"))["meta"]["snapshot_date"]
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError("no readable snapshot.json: is the run finished?", path=run_dir / "snapshot.json") from None
    return f"{date}T00:00:00+00:00"


def inspect_folder(out: Path | None) -> Path | None:
    """The folder an inspect log goes into when --out names one (a folder, or a path with no
    suffix) or is not given (inspect's own log folder, $INSPECT_LOG_DIR or logs/); None when
    --out names a file."""
    if out is None:
        return Path(os.environ.get("INSPECT_LOG_DIR") or "logs")
    return out if out.is_dir() or not out.suffix else None


@app.command()
def export(
    run_dir: Annotated[Path, typer.Argument(help="a run folder")],
    fmt: Annotated[str, typer.Option("--format", help="inspect, garak, jbb, sarif or junit")],
    out: Annotated[Path | None, typer.Option("--out", help="the file to write; for inspect a folder may be named "
                                             "(default $INSPECT_LOG_DIR, else logs/): the log gets inspect's "
                                             "own kind of name there, which `inspect view` lists")] = None,
    dataset: Annotated[Path | None, typer.Option(help="the run's dataset file, if not where run.json says")] = None,
) -> None:
    """An inspect_ai eval log, garak report JSONL, JailbreakBench-style artifact, SARIF 2.1.0
    or JUnit XML of a run."""
    from margin.reports.exports import garak, inspect_log, jbb, junit, sarif
    from margin.reports.exports.bundle import ExportRun, family_outcomes
    from margin.reports.observations import from_receipts
    from margin.reports.protocols import observes_all
    from margin.reports.snapshot import record, snapshot_entry
    from margin.runfolder import load_run
    from margin.util.safefiles import atomic_write_text
    from margin.util.suggest import did_you_mean

    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)}){did_you_mean(fmt, FORMATS)}",
                         field="--format")
    if out is None and fmt != "inspect":
        raise InputError(f"name the file to write (--out FILE) for --format {fmt}", field="--out")
    folder = inspect_folder(out) if fmt == "inspect" else None
    if folder is None and out is not None and fmt == "inspect" and out.suffix != ".json":
        raise InputError("inspect_ai reads a log by its extension: name the file *.json, or a folder", field="--out")
    run = load_run(run_dir)
    created = snapshot_time(run_dir)
    texts = prompt_texts(run.record, dataset)
    observations = from_receipts(run.receipts(), run.results) if run.receipts_path.is_file() else []
    exhaustive = observes_all(run.search) and bool(observations) and all(o.complete for o in observations)
    fams = families()
    outcomes, method = family_outcomes(run.results, observations, fams, exhaustive=exhaustive)
    entry = snapshot_entry(run.guard, run.results, run.budget, {"search": run.search, "seed": run.record.seed})
    bundle = ExportRun(run, str(run_dir), record(entry, 1), texts, fams, outcomes, method, created)
    module = {"inspect": inspect_log, "garak": garak, "jbb": jbb, "sarif": sarif, "junit": junit}[fmt]
    target = folder / inspect_log.file_name(bundle) if folder is not None else out
    assert target is not None
    text = module.render(bundle)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    note = ""
    if fmt == "inspect" and not inspect_log.listed(target.name):
        note = (f"; `inspect view` lists only logs named like {inspect_log.file_name(bundle)}: "
                f"--out {target.parent} names it so")
    console.print(f"wrote {target} ({fmt}: {module.holds(text)}){note}", markup=False, highlight=False,
                  soft_wrap=True)
