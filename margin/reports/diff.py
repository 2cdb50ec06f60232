"""`margin diff`: two comparable sides, figure by figure, B minus A.

Each figure of both sides with its own interval, and the difference with its interval. Two
run folders give the paired bootstrap (`bootstrap.paired_differences`: each replicate
resamples the prompts once, within class, for both sides), overall and per slice; they also
give, per class and transform family, the share of prompts whose cheapest flip lies in that
family (paired interval the same way), and the prompts that changed. A snapshot has no
per-prompt results, so a side given as a snapshot gives the unpaired interval instead: MOVER
over the two sides' own intervals, wider than the paired one since it ignores that both
sides saw the same prompts (conservative).

Pure: sides come in, one `DiffDocument` goes out; `dataclasses.asdict` of it is the JSON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from margin.reports.bootstrap import (
    FIGURES,
    BootstrapSpec,
    Difference,
    class_counts,
    paired_differences,
    percentile_interval,
)
from margin.reports.metrics import slice_groups
from margin.reports.sides import Side
from margin.reports.snapshot_schema import Headline
from margin.types import LABELS, Flip, Label, SearchResult, VerdictLabel

PAIRED = "paired bootstrap: each replicate resamples the prompts once (within class) for both sides"
UNPAIRED = ("unpaired: MOVER over the two sides' own intervals (a snapshot has no per-prompt results; "
            "wider than the paired interval)")


def unpaired(a: float, a_ci: Sequence[float], b: float, b_ci: Sequence[float]) -> list[float]:
    """MOVER interval of b - a from each side's own interval."""
    d = b - a
    return [d - math.hypot(b - b_ci[0], a_ci[1] - a), d + math.hypot(b_ci[1] - b, a - a_ci[0])]


@dataclass(frozen=True)
class SideFigure:
    """One side's figure with its own interval."""

    value: float | None
    interval: list[float] | None


@dataclass(frozen=True)
class FigureChange:
    """A figure on both sides and B - A with its interval (None where undefined on a side);
    `moves`: the interval leaves out 0."""

    a: SideFigure
    b: SideFigure
    difference: float | None = None
    interval: list[float] | None = None
    moves: bool | None = None


def _side_figure(rec: Headline, name: str) -> SideFigure:
    return SideFigure(rec.figure(name), rec.interval(name))


def figure_rows(rec_a: Headline, rec_b: Headline,
                paired: Mapping[str, Difference | None] | None) -> dict[str, FigureChange]:
    """Per figure: both sides and B - A, from `paired` (paired_differences) when given."""
    rows: dict[str, FigureChange] = {}
    for name in FIGURES:
        a, b = _side_figure(rec_a, name), _side_figure(rec_b, name)
        row = FigureChange(a, b)
        if paired is not None:
            diff = paired.get(name)
            if diff is not None:
                row = FigureChange(a, b, diff.value, diff.interval.as_list(), diff.moves)
        elif a.value is not None and b.value is not None and a.interval and b.interval:
            interval = unpaired(a.value, a.interval, b.value, b.interval)
            row = FigureChange(a, b, b.value - a.value, interval, interval[0] > 0 or interval[1] < 0)
        rows[name] = row
    return rows


SliceChanges = dict[str, dict[str, dict[str, FigureChange]]]  # dimension -> value -> figure -> change


def slice_rows(a: Side, b: Side, budget: float, spec: BootstrapSpec) -> SliceChanges:
    """Per slice dimension and value, the figures of both sides and B - A."""
    out: SliceChanges = {}
    slices_a, slices_b = a.record.slices, b.record.slices
    groups_a = slice_groups(a.results) if a.results is not None else None
    groups_b = slice_groups(b.results) if b.results is not None else None
    for dimension in sorted(set(slices_a) & set(slices_b), key=lambda d: (d != "type", d)):
        values = sorted(set(slices_a[dimension]) & set(slices_b[dimension]))
        rows: dict[str, dict[str, FigureChange]] = {}
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


@dataclass(frozen=True)
class FamilyShare:
    """Prompts of a class (scored on both sides) whose cheapest flip `family` holds, on each
    side; B - A as a share of `prompts`, with its paired interval."""

    family: str
    a: int
    b: int
    prompts: int
    difference: float
    interval: list[float]


def family_rows(a: Sequence[SearchResult], b: Sequence[SearchResult], families: Mapping[str, str],
                spec: BootstrapSpec) -> dict[str, list[FamilyShare]]:
    """Per class: for every family holding a cheapest flip on either side, the share of the
    class's prompts (scored on both sides) whose cheapest flip it holds, and B - A."""
    out: dict[str, list[FamilyShare]] = {}
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
            rows.append(FamilyShare(family, int(in_a.sum()), int(in_b.sum()), len(pairs),
                                    float(in_b.mean() - in_a.mean()), paired_share(in_a, in_b, spec)))
        out[label] = sorted(rows, key=lambda r: (-abs(r.b - r.a), r.family))
    return out


def state(result: SearchResult) -> str:
    """wrong (on the original), flipped (within the budget) or robust (no flip within it)."""
    if result.flip_cost == 0:
        return "wrong"
    return "robust" if result.flip is None else "flipped"


@dataclass(frozen=True)
class PromptSide:
    """A prompt's outcome on one side: its state, clean verdict, flip cost, the family of its
    cheapest flip and that flip."""

    state: str
    clean_verdict: VerdictLabel | None
    flip_cost: float | None
    family: str
    flip: Flip | None


@dataclass(frozen=True)
class PromptChange:
    prompt_id: str
    label: Label
    type: str
    a: PromptSide
    b: PromptSide


@dataclass(frozen=True)
class FlipCosts:
    cheaper: int
    dearer: int
    same: int


@dataclass(frozen=True)
class PromptChanges:
    compared: int  # prompts scored on both sides
    flip_costs: FlipCosts
    newly_broken: list[PromptChange]
    newly_robust: list[PromptChange]


def _prompt_side(result: SearchResult, families: Mapping[str, str]) -> PromptSide:
    return PromptSide(state(result), result.clean_verdict, result.flip_cost, flip_family(result, families),
                      result.flip)


def _prompt_row(x: SearchResult, y: SearchResult, families: Mapping[str, str]) -> PromptChange:
    return PromptChange(x.prompt_id, x.label, x.type, _prompt_side(x, families), _prompt_side(y, families))


def prompt_changes(a: Sequence[SearchResult], b: Sequence[SearchResult],
                   families: Mapping[str, str]) -> PromptChanges:
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
    return PromptChanges(len(pairs), FlipCosts(**costs), broken, robust)


@dataclass(frozen=True)
class DiffSide:
    source: str  # the path as the user gave it
    kind: str  # run or snapshot
    guard_id: str


@dataclass(frozen=True)
class DiffDocument:
    """The whole comparison, B minus A; `dataclasses.asdict` of it is `margin diff --json`
    (fields in the order it prints them). `families` and `prompts` need two run folders."""

    a: DiffSide
    b: DiffSide
    terms: dict[str, Any]  # what both sides share (sides.TERMS)
    difference: str
    method: str
    confidence_intervals: dict[str, Any]
    figures: dict[str, FigureChange]
    slices: SliceChanges
    families: dict[str, list[FamilyShare]] | None = None
    prompts: PromptChanges | None = None

    @property
    def target(self) -> str:
        """The turn both sides judged (sides.require_comparable refuses two)."""
        return str(self.terms.get("target") or "prompt")


def _diff_side(side: Side) -> DiffSide:
    return DiffSide(side.source, side.kind, side.guard_id)


def diff_document(a: Side, b: Side, families: Mapping[str, str],
                  spec: BootstrapSpec | None = None) -> DiffDocument:
    """The whole comparison, B minus A (sides already checked by `sides.require_comparable`)."""
    spec = spec or BootstrapSpec()
    budget = float(a.terms["budget"])
    if a.results is None or b.results is None:
        return DiffDocument(_diff_side(a), _diff_side(b), dict(a.terms), "b minus a", UNPAIRED, spec.describe(),
                            figure_rows(a.record, b.record, None), slice_rows(a, b, budget, spec))
    return DiffDocument(_diff_side(a), _diff_side(b), dict(a.terms), "b minus a", PAIRED, spec.describe(),
                        figure_rows(a.record, b.record, paired_differences(a.results, b.results, budget, spec)),
                        slice_rows(a, b, budget, spec), family_rows(a.results, b.results, families, spec),
                        prompt_changes(a.results, b.results, families))
