"""`margin diff`: two comparable sides, figure by figure, B minus A.

Each figure of both sides with its own interval, and the difference with its interval. Two
run folders give the paired bootstrap (`bootstrap.paired_differences`: each replicate
resamples the prompts once, within class, for both sides), overall and per slice; they also
give, per class and transform family, the share of prompts whose cheapest flip lies in that
family (paired interval the same way), and the prompts that changed. A snapshot has no
per-prompt results, so a side given as a snapshot gives the unpaired interval instead: MOVER
over the two sides' own intervals, wider than the paired one since it ignores that both
sides saw the same prompts (conservative).

Pure: sides come in, one JSON-ready document goes out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from margin.reports.bootstrap import (
    FIGURES,
    BootstrapSpec,
    class_counts,
    paired_differences,
    percentile_interval,
)
from margin.reports.metrics import slice_groups
from margin.reports.sides import Side
from margin.reports.snapshot_schema import Headline
from margin.runfolder import flip_record
from margin.types import LABELS, SearchResult

PAIRED = "paired bootstrap: each replicate resamples the prompts once (within class) for both sides"
UNPAIRED = ("unpaired: MOVER over the two sides' own intervals (a snapshot has no per-prompt results; "
            "wider than the paired interval)")


def unpaired(a: float, a_ci: Sequence[float], b: float, b_ci: Sequence[float]) -> list[float]:
    """MOVER interval of b - a from each side's own interval."""
    d = b - a
    return [d - math.hypot(b - b_ci[0], a_ci[1] - a), d + math.hypot(b_ci[1] - b, a - a_ci[0])]


def _side_figure(rec: Headline, name: str) -> dict[str, Any]:
    return {"value": rec.figure(name), "interval": rec.interval(name)}


def figure_rows(rec_a: Headline, rec_b: Headline,
                paired: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per figure: both sides and B - A, from `paired` (paired_differences) when given."""
    rows: dict[str, dict[str, Any]] = {}
    for name in FIGURES:
        a, b = _side_figure(rec_a, name), _side_figure(rec_b, name)
        row: dict[str, Any] = {"a": a, "b": b, "difference": None, "interval": None, "moves": None}
        if paired is not None:
            diff = paired.get(name)
            if diff is not None:
                row.update(difference=diff.value, interval=diff.interval.as_list(), moves=diff.moves)
        elif a["value"] is not None and b["value"] is not None and a["interval"] and b["interval"]:
            interval = unpaired(a["value"], a["interval"], b["value"], b["interval"])
            row.update(difference=b["value"] - a["value"], interval=interval,
                       moves=interval[0] > 0 or interval[1] < 0)
        rows[name] = row
    return rows


def slice_rows(a: Side, b: Side, budget: float, spec: BootstrapSpec) -> dict[str, dict[str, Any]]:
    """Per slice dimension and value, the figures of both sides and B - A."""
    out: dict[str, dict[str, Any]] = {}
    slices_a, slices_b = a.record.slices, b.record.slices
    groups_a = slice_groups(a.results) if a.results is not None else None
    groups_b = slice_groups(b.results) if b.results is not None else None
    for dimension in sorted(set(slices_a) & set(slices_b), key=lambda d: (d != "type", d)):
        values = sorted(set(slices_a[dimension]) & set(slices_b[dimension]))
        rows: dict[str, Any] = {}
        for value in values:
            paired = None
            if groups_a is not None and groups_b is not None:
                paired = paired_differences(groups_a[dimension][value], groups_b[dimension][value], budget, spec)
            rows[value] = figure_rows(slices_a[dimension][value], slices_b[dimension][value], paired)
        out[dimension] = rows
    return out


def flip_family(result: SearchResult, families: Mapping[str, str]) -> str:
    """Where a prompt's margin comes from: its cheapest flip's family, `original` (wrong on the
    original) or `none within budget`."""
    if result.flip_cost == 0:
        return "original"
    if result.flip is None:
        return "none within budget"
    return families.get(result.flip.transform, result.flip.transform)


def paired_share(in_a: np.ndarray, in_b: np.ndarray, spec: BootstrapSpec) -> list[float]:
    """Percentile interval of mean(in_b) - mean(in_a) over prompts resampled once for both."""
    counts = class_counts(np.random.default_rng(spec.seed), len(in_a), spec.replicates)
    return percentile_interval(counts @ (in_b - in_a) / len(in_a), spec.level).as_list()


def family_rows(a: Sequence[SearchResult], b: Sequence[SearchResult], families: Mapping[str, str],
                spec: BootstrapSpec) -> dict[str, list[dict[str, Any]]]:
    """Per class: for every family holding a cheapest flip on either side, the share of the
    class's prompts (scored on both sides) whose cheapest flip it holds, and B - A."""
    out: dict[str, list[dict[str, Any]]] = {}
    by_a = {r.prompt_id: r for r in a if r.status == "scored"}
    for label in LABELS:
        pairs = sorted(((by_a[r.prompt_id], r) for r in b
                        if r.status == "scored" and r.label == label and r.prompt_id in by_a),
                       key=lambda pair: pair[0].prompt_id)
        if not pairs:
            continue
        fam_a = [flip_family(x, families) for x, _ in pairs]
        fam_b = [flip_family(y, families) for _, y in pairs]
        rows = []
        for family in sorted(set(fam_a) | set(fam_b)):
            in_a = np.array([f == family for f in fam_a], dtype=float)
            in_b = np.array([f == family for f in fam_b], dtype=float)
            rows.append({"family": family, "a": int(in_a.sum()), "b": int(in_b.sum()), "prompts": len(pairs),
                         "difference": float(in_b.mean() - in_a.mean()),
                         "interval": paired_share(in_a, in_b, spec)})
        out[label] = sorted(rows, key=lambda r: (-abs(r["b"] - r["a"]), r["family"]))
    return out


def state(result: SearchResult) -> str:
    """wrong (on the original), flipped (within the budget) or robust (no flip within it)."""
    if result.flip_cost == 0:
        return "wrong"
    return "robust" if result.flip is None else "flipped"


def _prompt_row(x: SearchResult, y: SearchResult, families: Mapping[str, str]) -> dict[str, Any]:
    side = {"a": x, "b": y}
    return {"prompt_id": x.prompt_id, "label": x.label, "type": x.type,
            **{k: {"state": state(r), "clean_verdict": r.clean_verdict, "flip_cost": r.flip_cost,
                   "family": flip_family(r, families), "flip": flip_record(r.flip)} for k, r in side.items()}}


def prompt_changes(a: Sequence[SearchResult], b: Sequence[SearchResult],
                   families: Mapping[str, str]) -> dict[str, Any]:
    """Prompts scored on both sides: newly broken (no flip within the budget on A, one on B
    or a wrong original), newly robust (the reverse), and how many flip costs moved."""
    by_a = {r.prompt_id: r for r in a if r.status == "scored"}
    pairs = sorted(((by_a[r.prompt_id], r) for r in b if r.status == "scored" and r.prompt_id in by_a),
                   key=lambda pair: pair[0].prompt_id)
    broken = [_prompt_row(x, y, families) for x, y in pairs if state(x) == "robust" != state(y)]
    robust = [_prompt_row(x, y, families) for x, y in pairs if state(x) != "robust" == state(y)]
    costs = {"cheaper": 0, "dearer": 0, "same": 0}
    for x, y in pairs:
        key = "same" if y.flip_cost == x.flip_cost else "cheaper" if (y.flip_cost or 0) < (x.flip_cost or 0) else "dearer"
        costs[key] += 1
    return {"compared": len(pairs), "flip_costs": costs, "newly_broken": broken, "newly_robust": robust}


def target_of(document: Mapping[str, Any]) -> str:
    """The turn both sides of a diff document judged (sides.require_comparable refuses two)."""
    return str((document.get("terms") or {}).get("target") or "prompt")


def diff_document(a: Side, b: Side, families: Mapping[str, str],
                  spec: BootstrapSpec | None = None) -> dict[str, Any]:
    """The whole comparison, B minus A (sides already checked by `sides.require_comparable`)."""
    spec = spec or BootstrapSpec()
    budget = float(a.terms["budget"])
    paired = a.results is not None and b.results is not None
    differences = paired_differences(a.results, b.results, budget, spec) if paired else None  # type: ignore[arg-type]
    document: dict[str, Any] = {
        "a": {"source": a.source, "kind": a.kind, "guard_id": a.guard_id},
        "b": {"source": b.source, "kind": b.kind, "guard_id": b.guard_id},
        "terms": dict(a.terms),
        "difference": "b minus a",
        "method": PAIRED if paired else UNPAIRED,
        "confidence_intervals": spec.describe(),
        "figures": figure_rows(a.record, b.record, differences),
        "slices": slice_rows(a, b, budget, spec),
        "families": None,
        "prompts": None,
    }
    if paired:
        document["families"] = family_rows(a.results, b.results, families, spec)  # type: ignore[arg-type]
        document["prompts"] = prompt_changes(a.results, b.results, families)  # type: ignore[arg-type]
    return document
