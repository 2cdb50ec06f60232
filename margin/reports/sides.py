"""One side of a comparison (`margin diff`, `margin check`): a run folder, with its per-prompt
results, or a snapshot file, with its figures only; and the rule for which two sides may be
compared at all.

Two sides compare only when they measured the same thing: the same target turn, protocol,
dataset bytes, suite bytes, budget, cost norm and prompts. A prompt run and a response run are
refused outright: each run's costs are per 100 characters of its own target texts, so their
margins are on different scales. The guard, its defence, the search (cheapest and
exhaustive give the same c_i) and the seed may differ: they are what a comparison is for.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.reports.bootstrap import BootstrapSpec
from margin.reports.protocols import protocol_for
from margin.reports.snapshot import record, snapshot_entry
from margin.reports.snapshot_schema import Evaluation, Provenance, Record, validate_snapshot
from margin.runfolder import RunDir, load_run, read_json
from margin.types import SearchResult

#: What two sides must share, in the order a refusal names them.
TERMS = ("target", "protocol", "dataset", "suite", "budget", "cost_norm", "prompts")


@dataclass(frozen=True)
class Side:
    source: str  # the path as the user gave it
    record: Record  # a snapshot record: figures, intervals, clean accuracy, slices
    terms: dict[str, Any]  # TERMS' values; `prompts` is a count
    results: list[SearchResult] | None = None  # None: a snapshot, which has no per-prompt results
    run: RunDir | None = None

    @property
    def kind(self) -> str:
        return "run" if self.results is not None else "snapshot"

    @property
    def guard_id(self) -> str:
        return self.record.id


def _named(name: str | None, sha256: str | None) -> str:
    """A dataset or suite as `name (sha256 prefix)`: the bytes decide, the name helps."""
    return f"{name} ({str(sha256 or '')[:12]})"


def run_side(path: Path, spec: BootstrapSpec | None = None) -> Side:
    run = load_run(path)
    entry = snapshot_entry(run.guard, run.results, run.budget,
                           Evaluation(search=run.search, seed=run.record.seed), spec)
    rec = run.record
    terms = {"target": rec.target or "prompt", "protocol": rec.protocol or protocol_for(rec.search),
             "dataset": _named(rec.dataset.name, rec.dataset.sha256),
             "suite": _named(rec.suite.name, rec.suite.sha256), "budget": float(rec.budget),
             "cost_norm": rec.cost_norm, "prompts": len(run.results)}
    return Side(str(path), record(entry, 1), terms, list(run.results), run)


def snapshot_side(path: Path, guard_id: str | None = None) -> Side:
    document = read_json(path)
    meta = document.get("meta") if isinstance(document, dict) else None
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(meta, dict) or not isinstance(data, list) or not data:
        raise InputError("not a margin snapshot (expected `meta` and a non-empty `data`)", path=path)
    # The snapshot model, as the site reads it: finite numbers of the right types, string ids.
    snapshot = validate_snapshot(document, path)
    records = snapshot.data
    if len(records) > 1:
        chosen = [r for r in records if r.id == guard_id]
        if len(chosen) != 1:
            ids = ", ".join(r.id for r in records)
            raise InputError(f"holds {len(records)} guards ({ids}): pass a run folder or a snapshot of one "
                             "guard", path=path)
        records = chosen
    provenance: Provenance = snapshot.meta.provenance
    prompts = getattr(provenance, "prompts", None)
    terms = {"target": getattr(provenance, "target", None) or "prompt", "protocol": snapshot.meta.protocol,
             "dataset": _named(provenance.dataset.name, provenance.dataset.sha256),
             "suite": _named(provenance.suite.name, provenance.suite.sha256), "budget": float(provenance.budget),
             "cost_norm": provenance.cost_norm if "cost_norm" in provenance.model_fields_set else "corpus", "prompts": None if prompts is None else int(prompts)}
    return Side(str(path), records[0], terms)


def load_side(path: Path, spec: BootstrapSpec | None = None, *, guard_id: str | None = None) -> Side:
    """A run folder (a folder with run.json) or a snapshot file (`snapshot.json`, or a published one)."""
    if path.is_dir():
        return run_side(path, spec)
    if path.is_file():
        return snapshot_side(path, guard_id)
    raise InputError("no such run folder or snapshot file", path=path)


def require_comparable(a: Side, b: Side) -> None:
    """InputError (one line, exit 2) naming the first term the two sides differ in."""
    for term in TERMS:
        left, right = a.terms.get(term), b.terms.get(term)
        if term == "prompts" and (left is None or right is None):
            continue  # an older snapshot may not count its prompts
        if term == "target" and left != right:
            raise InputError(f"cannot compare {a.source} (target: {left}) with {b.source} (target: {right}): a run's "
                             "costs are per 100 characters of its own target turns, so a prompt run's margins and "
                             "a response run's are on different scales; compare runs of one target")
        if left != right:
            raise InputError(f"cannot compare {a.source} with {b.source}: different {term.replace('_', ' ')} "
                             f"({left} vs {right})")
    if a.results is not None and b.results is not None:
        ids_a, ids_b = {r.prompt_id for r in a.results}, {r.prompt_id for r in b.results}
        if ids_a != ids_b:
            odd = sorted(ids_a ^ ids_b)
            raise InputError(f"cannot compare {a.source} with {b.source}: different prompts "
                             f"({len(odd)} in one only, such as {odd[0]!r})")
