"""`margin publish`: one ranked leaderboard snapshot from several runs, and the pairings
snapshot from paired studies, each written once under a name made of its date and content
hash, with `meta.snapshot_url` pointing at that name.

Margins are comparable only within one protocol: the runs must share dataset (bytes), suite
(bytes), budget, cost norm, prompt set and defence (`--normalize`, with its version), or
publish refuses and says what differs.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.reports.bootstrap import BootstrapSpec
from margin.reports.completeness import Coverage, missing_reason
from margin.reports.documents import content_hash, pinned_url
from margin.reports.effectiveness import Effect, Effects, effectiveness
from margin.reports.observations import PromptObservations, from_receipts, read_calls
from margin.reports.pairings import Pairings, load_pairings, mark_provisional, merge_pairings
from margin.reports.protocols import ADAPTIVE_PROTOCOL, observes_all, protocol_for
from margin.reports.snapshot import SnapshotEntry, build_snapshot, measured_on, snapshot_entry
from margin.reports.snapshot_schema import Evaluation, Provenance, Record, Snapshot
from margin.runfolder import RunDir, dumps, load_run
from margin.util.hashing import sha256_text
from margin.util.safefiles import atomic_write_text, check_date


def _prompt_set(run: RunDir) -> str:
    ids = sorted(r.prompt_id for r in run.results)
    return f"{len(ids)} prompts (ids sha256 {sha256_text(chr(10).join(ids))[:12]})"


def _named(run: RunDir, key: str) -> str:
    named = run.record.value(key)
    return f"{named.name} (sha256 {named.sha256[:12]})"


def _defence(run: RunDir) -> str:
    """The pre-processing in front of the guard (`--normalize`), with its version where recorded."""
    params = dict(run.guard.params)
    version = params.get("normalize_version")
    return params.get("normalize", "none") + (f" ({version})" if version else "")


#: What must match for margins to be ranked together: (name, the run record's fields that
#: decide it, or None for what the record does not hold, and how to show a run's value).
COMPARABLE: tuple[tuple[str, tuple[str, ...] | None, Callable[[RunDir], str]], ...] = (
    ("dataset", ("dataset.name", "dataset.sha256"), lambda run: _named(run, "dataset")),
    ("suite", ("suite.name", "suite.sha256"), lambda run: _named(run, "suite")),
    ("budget", ("budget",), lambda run: f"{run.budget:g}"),
    ("cost norm", ("cost_norm",), lambda run: run.record.cost_norm),
    # a response run's costs and margins are its responses': never ranked with prompts'
    ("target (--target)", ("target",), lambda run: run.record.target_name),
    ("policies (--policies)", ("policies",), lambda run: _named(run, "policies") if run.record.policies else "none"),
    ("prompt set", None, _prompt_set),
    # A defence changes what is measured: guards behind different pre-processing are not ranked together.
    ("defence (--normalize)", None, _defence),
)


def differences(runs: Sequence[RunDir]) -> list[str]:
    """One line per property on which the runs disagree, naming each run's value."""
    out = []
    for name, fields, show in COMPARABLE:
        values = {str(run.path): show(run) for run in runs}
        if fields is not None:
            differ = any(runs[0].record.differences(run.record, fields) for run in runs[1:])
        else:
            differ = len(set(values.values())) > 1
        if differ:
            out.append(f"{name} differs: " + "; ".join(f"{path}: {value}" for path, value in values.items()))
    return out


def check_publishable(runs: Sequence[RunDir]) -> None:
    for run in runs:
        if protocol_for(run.search) == ADAPTIVE_PROTOCOL:
            raise InputError("an adaptive run's cost is an upper bound, never ranked with standard-suite margins",
                             path=run.path)
    diffs = differences(runs)
    if diffs:
        raise InputError("runs are not comparable, refusing to rank them: " + " | ".join(diffs))
    seen: dict[str, RunDir] = {}
    for run in runs:
        gid = run.guard.id
        if gid in seen:
            raise InputError(same_id(seen[gid], run), path=run.path)
        seen[gid] = run


def same_id(first: RunDir, second: RunDir) -> str:
    """Why two runs cannot be published under one id, and the remedy that applies."""
    gid, a, b = first.guard.id, first.guard, second.guard
    differ = [f.name for f in dataclasses.fields(a) if f.name not in ("id", "caveats", "scope")
              and getattr(a, f.name) != getattr(b, f.name)]
    if differ:
        return (f"two different guards are both named {gid!r} ({', '.join(differ)} differ) in {first.path} and "
                f"{second.path}; give each its own `id:` in a guard file")
    return (f"guard {gid!r} appears in {first.path} and {second.path}; publish one run per guard "
            "(join shards or retries with `margin merge` first)")


@dataclass(frozen=True)
class RunEvidence:
    """What publish reads of one run beyond its record and results, each read once: its
    coverage (with the reason its receipts give for a missing prompt) and, for a search that
    asks about every candidate, its observations (for the effectiveness figures)."""

    run: RunDir
    coverage: Coverage
    observations: list[PromptObservations] | None  # None: a search that does not observe all


def run_evidence(run: RunDir) -> RunEvidence:
    """One pass over the run's receipts, and only when something needs them: a missing
    prompt's reason, or an exhaustive run's observations (a complete cheapest run's receipts
    are never read)."""
    missing = any(r.status == "missing" for r in run.results)
    exhaustive = observes_all(run.search)
    lines = list(run.receipts()) if exhaustive or (missing and run.receipts_path.is_file()) else []
    reason = missing_reason(lines, run.results) if missing and run.receipts_path.is_file() else None
    observations = from_receipts(read_calls(lines), run.results) if exhaustive else None
    return RunEvidence(run, Coverage.of(run.results, reason), observations)


def check_coverage(runs: Sequence[RunEvidence], studies: Sequence[tuple[str, Pairings]],
                   min_coverage: float) -> None:
    """Refuse evidence below `min_coverage`, naming every such run and pair with its coverage."""
    short = [f"{ev.run.path}: {ev.coverage.describe()}" for ev in runs if not ev.coverage.meets(min_coverage)]
    for where, pairings in studies:
        short += [f"{where}: {pair.guard_id} x {pair.model_id}: {pair.coverage_note()}"
                  for pair in pairings.data if not pair.meets(min_coverage)]
    if short:
        below = "incomplete" if min_coverage >= 1 else f"below --min-coverage {100 * min_coverage:g}%"
        raise InputError(f"{below}, refusing to publish: " + " | ".join(short) + " (retry what is missing with "
                         "--resume, or pass --allow-incomplete to publish it marked incomplete and unranked)")


def run_provenance(run: RunDir) -> Provenance | None:
    """The provenance of the run's own snapshot (the margin version and commit that produced
    it), or None where the run has no readable one."""
    try:
        return Snapshot.model_validate(json.loads((run.path / "snapshot.json").read_text(encoding="utf-8"))
                                       ).meta.provenance
    except (OSError, ValueError):  # a missing or unreadable file; pydantic's ValidationError is a ValueError
        return None


def leaderboard_entry(evidence: RunEvidence, spec: BootstrapSpec | None) -> SnapshotEntry:
    run = evidence.run
    made = run_provenance(run)
    return snapshot_entry(run.guard, run.results, run.budget,
                          Evaluation.model_validate({
                              "search": run.search, "seed": run.record.seed,
                              **({"margin_version": made.margin_version, "git_commit": made.git_commit} if made else {}),
                              **({"target": run.record.target} if run.record.target else {})}),
                          spec, coverage=evidence.coverage)


def build_leaderboard(evidence: Sequence[RunEvidence], date: dt.date, spec: BootstrapSpec | None = None,
                      min_coverage: float = 1.0) -> Snapshot:
    entries = [leaderboard_entry(ev, spec) for ev in evidence]
    runs = [ev.run for ev in evidence]
    provenance = measured_on(runs[0].record).model_copy(update={
        "budget": runs[0].budget,  # as a float, as published leaderboards always wrote it
        "prompts": len(runs[0].results),
        "seeds": sorted({run.record.seed for run in runs}, key=str),
    })
    return build_snapshot(entries, provenance, date, spec=spec, min_coverage=min_coverage)


def write_immutable(path: Path, text: str) -> None:
    """Write once; the same content again is a no-op, different content is refused."""
    if path.exists():
        if path.read_text(encoding="utf-8") == text:
            return
        raise InputError("exists with different content; published snapshots are immutable", path=path)
    atomic_write_text(path, text)
    os.chmod(path, 0o444)


def write_latest(path: Path, text: str) -> None:
    atomic_write_text(path, text)
    os.chmod(path, 0o644)


def address(snapshot: dict[str, Any], kind: str, base_url: str | None) -> tuple[str, dict[str, Any]]:
    """(file name, snapshot with meta.snapshot_url set), the name from date and content hash."""
    # The date is checked again here, where it becomes a file name (the schemas check it on reading).
    name = f"margin-{kind}-{check_date(str(snapshot['meta']['snapshot_date']))}-{content_hash(snapshot)[:16]}.json"
    return name, {**snapshot, "meta": {**snapshot["meta"], "snapshot_url": pinned_url(name, base_url)}}


@dataclass
class Published:
    leaderboard: Snapshot | None = None
    pairings: Pairings | None = None
    files: list[Path] = field(default_factory=list)
    effectiveness: dict[str, Effects] = field(default_factory=dict)  # guard id -> per transform, per family


def split_publish_inputs(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """(run folders, pairings files): a study output is a folder with pairings.json or the file."""
    runs, studies = [], []
    for path in paths:
        if path.is_dir() and (path / "run.json").is_file():
            runs.append(path)
        elif path.is_dir() and (path / "pairings.json").is_file():
            studies.append(path / "pairings.json")
        elif path.is_file() and path.suffix == ".json":
            studies.append(path)
        elif path.is_dir() and (path / "study.json").is_file():
            raise InputError("a study that did not finish (no pairings.json): finish it with margin study CONFIG "
                             f"--out {path} --resume", path=path)
        else:
            raise InputError("neither a run folder (run.json) nor a study output (pairings.json)", path=path)
    return runs, studies


def publish(paths: Sequence[Path], out_dir: Path, *, base_url: str | None = None, date: dt.date | None = None,
            families: dict[str, str] | None = None, plots: bool = True, min_coverage: float = 1.0,
            allow_incomplete: bool = False) -> Published:
    """`min_coverage`: the share of each class (of each pair's outputs) below which a run (a
    pair) is refused, or, with `allow_incomplete`, published marked incomplete and unranked."""
    date = date or dt.datetime.now(dt.UTC).date()
    run_paths, study_paths = split_publish_inputs(paths)
    runs = [load_run(p) for p in run_paths]
    pairings_in = [(str(p), load_pairings(p)) for p in study_paths]  # validate everything before writing
    if runs:
        check_publishable(runs)
    evidence = [run_evidence(run) for run in runs]
    if not allow_incomplete:
        check_coverage(evidence, pairings_in, min_coverage)
    published = Published()
    if runs:
        built = build_leaderboard(evidence, date, min_coverage=min_coverage)
        name, snapshot = built.file_name(), built.at(base_url)
        text = dumps(snapshot.document()) + "\n"
        write_immutable(out_dir / name, text)
        write_latest(out_dir / "guardrails.json", text)  # the latest, as the API serves it
        published.leaderboard = snapshot
        published.files += [out_dir / name, out_dir / "guardrails.json"]
        for ev in evidence:
            if ev.observations is not None:
                published.effectiveness[ev.run.guard.id] = effectiveness(ev.observations, families)
        if plots:
            published.files += leaderboard_plots(snapshot, published.effectiveness, out_dir / name[:-5])
    if pairings_in:
        merged = mark_provisional(merge_pairings(pairings_in, date))
        name, pairings = merged.file_name(), merged.at(base_url)
        text = dumps(pairings.document()) + "\n"
        write_immutable(out_dir / name, text)
        write_latest(out_dir / "pairings.json", text)
        published.pairings = pairings
        published.files += [out_dir / name, out_dir / "pairings.json"]
        if plots:
            published.files += pairings_plots(pairings, out_dir / name[:-5])
    return published


def leaderboard_plots(snapshot: Snapshot, effects: Mapping[str, Effects], stem: Path) -> list[Path]:
    from margin.reports.plots import (
        CurveSeries,
        curves_figure,
        fpr_fnr_figure,
        heatmap_figure,
        save,
    )

    prov = snapshot.meta.provenance
    title = f"{prov.dataset.name} · {prov.suite.name} suite · budget {prov.budget:g}"
    files = save(curves_figure([CurveSeries.from_record(r) for r in snapshot.data], title),
                 stem.with_name(stem.name + "-curves"))
    points = [(r.id, _error(r, "safe"), _error(r, "unsafe")) for r in snapshot.data]
    files += save(fpr_fnr_figure(points, f"original prompts of {prov.dataset.name}"),
                  stem.with_name(stem.name + "-fpr-fnr"))
    if effects:
        rows, columns, values = effectiveness_grid({gid: per_transform for gid, (per_transform, _) in effects.items()})
        files += save(heatmap_figure(rows, columns, values, "flip rate per transform (exhaustive runs)"),
                      stem.with_name(stem.name + "-effectiveness"))
    return files


def _error(record: Record, label: str) -> float | None:
    acc = record.clean_accuracy.get(label)
    return None if acc is None else 1.0 - acc / 100.0


def effectiveness_grid(effects: Mapping[str, Sequence[Effect]]
                       ) -> tuple[list[str], list[str], list[list[float | None]]]:
    """Rows: transforms (or families); columns: guard x class; cells: flip rate. `effects`:
    per guard id, its effects at one level (`effectiveness`'s per transform or per family)."""
    names = sorted({effect.name for found in effects.values() for effect in found})
    columns = [f"{gid} · {label}" for gid in effects for label in ("unsafe", "safe")]
    values = []
    for name in names:
        row: list[float | None] = []
        for found in effects.values():
            effect = next((e for e in found if e.name == name), None)
            row += [None if effect is None else effect.by_class[label].flip_rate for label in ("unsafe", "safe")]
        values.append(row)
    return names, columns, values


def pairings_plots(pairings: Pairings, stem: Path) -> list[Path]:
    from margin.reports.plots import capability_ladder_figure, pairing_matrix_figure, save

    return (save(pairing_matrix_figure(pairings), stem.with_name(stem.name + "-matrix"))
            + save(capability_ladder_figure(pairings), stem.with_name(stem.name + "-ladder")))
