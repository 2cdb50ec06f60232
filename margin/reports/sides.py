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
from margin.reports.protocols import protocol_of
from margin.reports.snapshot import record, snapshot_entry
from margin.reports.snapshot_schema import validate_snapshot
from margin.runfolder import RunDir, load_run, read_json
from margin.types import SearchResult

#: What two sides must share, in the order a refusal names them.
TERMS = ("target", "protocol", "dataset", "suite", "budget", "cost_norm", "prompts")


@dataclass(frozen=True)
class Side:
    source: str  # the path as the user gave it
    record: dict[str, Any]  # a snapshot record: figures, intervals, clean accuracy, slices
    terms: dict[str, Any]  # TERMS' values; `prompts` is a count
    results: list[SearchResult] | None = None  # None: a snapshot, which has no per-prompt results
    run: RunDir | None = None

    @property
    def kind(self) -> str:
        return "run" if self.results is not None else "snapshot"

    @property
    def guard_id(self) -> str:
        return str(self.record.get("id", ""))


def _named(value: Any) -> str:
    """A dataset or suite as `name (sha256 prefix)`: the bytes decide, the name helps."""
    if isinstance(value, dict):
        return f"{value.get('name')} ({str(value.get('sha256') or '')[:12]})"
    return str(value)


def _terms(protocol: str, provenance: dict[str, Any], prompts: int | None) -> dict[str, Any]:
    """TERMS' values; a record without `target` (every prompt run's) judged the prompt."""
    budget = provenance.get("budget")
    return {"target": provenance.get("target") or "prompt", "protocol": protocol, "dataset": _named(provenance.get("dataset")),
            "suite": _named(provenance.get("suite")),
            "budget": None if budget is None else float(budget),
            "cost_norm": provenance.get("cost_norm", "corpus"), "prompts": prompts}


def run_side(path: Path, spec: BootstrapSpec | None = None) -> Side:
    run = load_run(path)
    entry = snapshot_entry(run.guard, run.results, run.budget,
                           {"search": run.search, "seed": run.record.seed}, spec)
    terms = _terms(protocol_of(run.manifest), run.manifest, len(run.results))
    return Side(str(path), record(entry, 1), terms, list(run.results), run)


def snapshot_side(path: Path, guard_id: str | None = None) -> Side:
    document = read_json(path)
    meta = document.get("meta") if isinstance(document, dict) else None
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(meta, dict) or not isinstance(data, list) or not data:
        raise InputError("not a margin snapshot (expected `meta` and a non-empty `data`)", path=path)
    # The snapshot model, as the site reads it: finite numbers of the right types, string ids.
    validate_snapshot(document, path)
    records = [r for r in data if isinstance(r, dict)]
    if len(records) > 1:
        chosen = [r for r in records if r.get("id") == guard_id]
        if len(chosen) != 1:
            ids = ", ".join(str(r.get("id")) for r in records)
            raise InputError(f"holds {len(records)} guards ({ids}): pass a run folder or a snapshot of one "
                             "guard", path=path)
        records = chosen
    found = meta.get("provenance")
    provenance: dict[str, Any] = found if isinstance(found, dict) else {}
    prompts = provenance.get("prompts")
    return Side(str(path), records[0], _terms(protocol_of(document), provenance,
                                              None if prompts is None else int(prompts)))


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
