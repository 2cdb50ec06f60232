"""margin from Python: run a guard, run a study, and read what they wrote.

    import margin

    outcome = margin.run("keyword", dataset="sample", suite="quick", out="runs/kw")
    run = margin.load_run("runs/kw")            # results and receipts as polars frames
    lines = pl.read_ndjson("runs/kw/receipts.jsonl", schema=margin.receipts_schema())
    table = margin.load_snapshots("runs/*/snapshot.json")
    study = margin.study("studies/local.yaml", out="runs/study-local", engine="local")
    path = margin.export("runs/kw", "sarif", out="kw.sarif")   # any of margin.EXPORT_FORMATS

These are the commands' library paths (`margin run`, `margin study`), with the same
validation (bad input raises `margin.errors.InputError` naming the field) and the same
outputs on disk. docs/api.md has the columns of every frame.
"""

from __future__ import annotations

import glob
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from margin.engine.settings import ENGINE
from margin.errors import InputError
from margin.reports.exports import EXPORTERS
from margin.types import HEADLINE_FIGURES

if TYPE_CHECKING:
    import polars as pl

    from margin.guards.base import Guard
    from margin.guards.spec import GuardSpec
    from margin.runs.recording.outputs import RunOutcome
    from margin.studies.results import StudyOutcome
    from margin.types import GuardInfo

FIGURES = HEADLINE_FIGURES
EXPORT_FORMATS = tuple(EXPORTERS)


def run(guard: str | GuardSpec | Guard, *, out: str | Path | None = None, resume: bool = False,
        **options: Any) -> RunOutcome:
    """Search every prompt for its cheapest flip; writes the run folder and returns its
    results, report and snapshot. `guard` names one as `--guard` does (or is a GuardSpec, or a
    Guard instance of your own); `options` are `margin.runs.preparing.config.RunConfig`'s fields
    (dataset, suite, budget, search, seed, limit, cache, ...) with its `CallSettings`' (engine,
    batch_size, the call limits) flat beside them, as `RunConfig.of` takes them."""
    from margin.guards.base import Guard as GuardClass
    from margin.runs.executing.execute import execute
    from margin.runs.preparing.config import RunConfig
    from margin.runs.preparing.prepare import prepare
    from margin.runs.recording.folder import default_out_dir

    instance = guard if isinstance(guard, GuardClass) else None
    name = instance.info.id if instance is not None else guard
    prepared = prepare(RunConfig.of(guard=name, **options), guard=instance)  # type: ignore[arg-type]
    assert prepared.info is not None
    return execute(prepared, Path(out) if out is not None else default_out_dir(prepared.info.id), resume=resume)


def study(config: str | Path, *, out: str | Path | None = None, resume: bool = False, engine: str = ENGINE.default,
          ray_address: str | None = None, cache: bool = True) -> StudyOutcome:
    """A paired study from its YAML config; writes pairings.json and the evidence."""
    from margin.studies.plan import plan_study
    from margin.studies.runner import default_out_dir, run_study

    ENGINE.check_choice(engine, "engine")
    plan = plan_study(Path(config))
    folder = Path(out) if out is not None else default_out_dir(plan)
    return run_study(plan, folder, resume=resume, engine=engine, ray_address=ray_address,  # type: ignore[arg-type]
                     cache=cache)


def export(run_dir: str | Path, format: str, *, out: str | Path | None = None,
           dataset: str | Path | None = None) -> Path:
    """Write a finished run for another tool, as `margin export` does; returns the file written.
    `format` is one of `EXPORT_FORMATS`; an inspect log may go into a folder (`out` a folder, or
    none: $INSPECT_LOG_DIR, else logs/) under the kind of name `inspect view` lists."""
    from margin.reports.exports.write import export_run

    return export_run(Path(run_dir), format, Path(out) if out is not None else None,
                      Path(dataset) if dataset is not None else None).path


@dataclass(frozen=True)
class LoadedRun:
    """A finished run folder: what decided it, its guard, and its records as frames."""

    path: Path
    manifest: dict[str, Any]
    guard: GuardInfo
    results: pl.DataFrame  # one row per prompt (results.jsonl; the flip's fields flattened)
    snapshot: dict[str, Any]

    def receipts(self) -> pl.DataFrame:
        """One row per call attempt (receipts.jsonl's call lines), read when asked for."""
        import polars as pl

        lines = pl.read_ndjson(self.path / "receipts.jsonl", schema=receipts_schema())
        return lines.filter(pl.col("kind") == "call").select(CALL_COLUMNS)


#: receipts.jsonl's columns: a call line's (`margin.runfolder.call_record`), then the fields
#: only a result line has (`result_record`, less `tags`, whose keys are each dataset's own).
CALL_COLUMNS = ("kind", "run_id", "guard_id", "prompt_id", "transform", "strength", "seed", "cost", "text_sha256",
                "verdict", "p_unsafe", "raw", "latency_s", "attempt", "cached", "error", "charged", "target",
                "input_sha256")


def receipts_schema() -> dict[str, Any]:
    """receipts.jsonl's columns and types for polars: `pl.read_ndjson(path, schema=...)` (or
    `scan_ndjson`) reads every line, call and result alike, one row each. Without it polars
    guesses types from the first 100 lines and fails where a column is null that far (a
    flip, a p_unsafe)."""
    import polars as pl

    text, number = pl.String, pl.Float64
    flip = pl.Struct({"transform": text, "strength": text, "seed": pl.Int64, "cost": number, "verdict": text,
                      "text": text})
    return {"kind": text, "run_id": text, "guard_id": text, "prompt_id": text, "transform": text, "strength": text,
            "seed": pl.Int64, "cost": number, "text_sha256": text, "verdict": text, "p_unsafe": number, "raw": text,
            "latency_s": number, "attempt": pl.Int64, "cached": pl.Boolean, "error": text, "charged": pl.Boolean,
            "target": text, "input_sha256": text,
            "label": text, "type": text, "status": text, "clean_verdict": text, "flip_cost": number,
            "capped": pl.Boolean, "flip": flip, "guard_calls": pl.Int64}


def load_run(path: str | Path) -> LoadedRun:
    """A run folder `margin run` (or merge, or score --out) wrote."""
    import polars as pl

    from margin.runfolder import load_run as read_folder

    folder = read_folder(Path(path))
    rows = []
    for r in folder.results:
        flip = r.flip
        rows.append({"prompt_id": r.prompt_id, "label": r.label, "type": r.type, "status": r.status,
                     "clean_verdict": r.clean_verdict, "flip_cost": r.flip_cost, "capped": r.capped,
                     "guard_calls": r.guard_calls, "flip_transform": flip.transform if flip else None,
                     "flip_strength": flip.strength if flip else None, "flip_verdict": flip.verdict if flip else None,
                     "flip_text": flip.text if flip else None})
    snapshot_path = folder.path / "snapshot.json"
    snapshot = json.loads(snapshot_path.read_text("utf-8")) if snapshot_path.is_file() else {}
    return LoadedRun(folder.path, folder.manifest, folder.guard, pl.DataFrame(rows, infer_schema_length=None), snapshot)


def load_snapshots(paths: str | Path | list[str | Path]) -> pl.DataFrame:
    """One row per guard per snapshot, from snapshot files (`margin run`'s or `margin publish`'s):
    its figures with their 95% intervals, the protocol columns that say which rows may be
    compared (protocol, dataset and suite with SHA-256s, budget, cost norm, search, defence),
    and `name`, unique across the rows (the guard's id, with its run where several share it).
    `paths`: a glob, a path, or a list of them."""
    import polars as pl

    files = _expand(paths)
    if not files:
        raise InputError(f"no snapshot matches {paths!r}", field="paths")
    rows = []
    for file in files:
        try:
            snapshot = json.loads(Path(file).read_text("utf-8"))
            meta, records = snapshot["meta"], snapshot["data"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"not a margin snapshot ({type(exc).__name__}: {exc})", path=file) from None
        rows += [_snapshot_row(str(file), meta, record) for record in records]
    for row, name in zip(rows, _names(rows), strict=True):
        row["name"] = name
    return pl.DataFrame(rows, infer_schema_length=None)


def _names(rows: list[dict[str, Any]]) -> list[str]:
    """A name per row for tables and plots: the guard's id, or where several rows share it (two
    runs of one guard) the id with its run folder's name (a published file's stem), then a count."""
    def source(file: str) -> str:
        path = Path(file)
        return path.parent.name if path.name == "snapshot.json" else path.stem

    shared = Counter(str(row["guard"]) for row in rows)
    names = [str(row["guard"]) if shared[str(row["guard"])] == 1 else f"{row['guard']} ({source(row['snapshot'])})"
             for row in rows]
    seen: Counter[str] = Counter()
    out = []
    for name in names:
        seen[name] += 1
        out.append(name if names.count(name) == 1 else f"{name} #{seen[name]}")
    return out


def _expand(paths: str | Path | list[str | Path]) -> list[str]:
    items = paths if isinstance(paths, list) else [paths]
    out: list[str] = []
    for item in items:
        text = str(item)
        out += sorted(glob.glob(text)) if any(ch in text for ch in "*?[") else [text]
    return out


def _snapshot_row(file: str, meta: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    provenance = meta.get("provenance", {})
    evaluation = record.get("evaluation", {})
    row: dict[str, Any] = {
        "snapshot": file, "snapshot_date": meta.get("snapshot_date"), "protocol": meta.get("protocol"),
        "guard": record.get("id"), "rank": record.get("rank"),
        "dataset": provenance.get("dataset", {}).get("name"), "dataset_sha256": provenance.get("dataset", {}).get("sha256"),
        "suite": provenance.get("suite", {}).get("name"), "suite_sha256": provenance.get("suite", {}).get("sha256"),
        "budget": provenance.get("budget"), "cost_norm": provenance.get("cost_norm"),
        "search": evaluation.get("search", provenance.get("search")), "defence": evaluation.get("normalize", "none"),
        "complete": (record.get("coverage") or {}).get("complete"),  # None in snapshots older than the field
    }
    intervals = record.get("confidence_intervals", {})
    for name in FIGURES:
        low, high = intervals.get(name) or (None, None)
        row |= {name: record.get(name), f"{name}_low": low, f"{name}_high": high}
    return row
