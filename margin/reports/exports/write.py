"""Writing a run as one of the `EXPORTERS` formats: what `margin export` and `margin.export` do."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from margin.errors import InputError
from margin.reports.exports import EXPORTERS, exporter
from margin.reports.exports.bundle import load_bundle


@dataclass(frozen=True)
class Exported:
    path: Path
    format: str
    holds: str  # what the file holds, counted from the file itself
    note: str = ""  # a hint for the reader, e.g. why `inspect view` would not list the file


def export_run(run_dir: Path, fmt: str, out: Path | None = None, dataset: Path | None = None) -> Exported:
    """Write the finished run in `run_dir` as `fmt` to the file `out`. For inspect, `out` may be
    a folder (or be left out: $INSPECT_LOG_DIR, else logs/), where the log gets inspect's own
    kind of name, which `inspect view` lists."""
    from margin.util.safefiles import atomic_write_text
    from margin.util.suggest import did_you_mean

    if fmt not in EXPORTERS:
        raise InputError(f"unknown format {fmt!r} (one of {', '.join(EXPORTERS)}){did_you_mean(fmt, EXPORTERS)}",
                         field="--format")
    if out is None and fmt != "inspect":
        raise InputError(f"name the file to write (--out FILE) for --format {fmt}", field="--out")
    folder = inspect_folder(out) if fmt == "inspect" else None
    if folder is None and out is not None and fmt == "inspect" and out.suffix != ".json":
        raise InputError("inspect_ai reads a log by its extension: name the file *.json, or a folder", field="--out")
    bundle = load_bundle(run_dir, dataset)
    module = exporter(fmt)
    target = folder / module.file_name(bundle) if folder is not None else out  # folder: inspect only
    assert target is not None
    text = module.render(bundle)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    note = ""
    if fmt == "inspect" and not module.listed(target.name):
        note = (f"`inspect view` lists only logs named like {module.file_name(bundle)}: "
                f"--out {target.parent} names it so")
    return Exported(target, fmt, module.holds(text), note)


def inspect_folder(out: Path | None) -> Path | None:
    """The folder an inspect log goes into when `out` names one (a folder, or a path with no
    suffix) or is not given (inspect's own log folder, $INSPECT_LOG_DIR or logs/); None when
    `out` names a file."""
    if out is None:
        return Path(os.environ.get("INSPECT_LOG_DIR") or "logs")
    return out if out.is_dir() or not out.suffix else None
