"""Deterministic stratified bootstrap: intervals for margins, clean accuracy and RA curves.

Prompts are resampled with replacement within their class, so every replicate keeps the
class sizes and weights the two classes as the point estimates do. One numpy Generator with
a fixed seed draws every replicate, class by class (unsafe, then safe), after sorting each
class by prompt id: the same results give the same intervals whatever their order on disk.
An interval is the percentile interval of the replicate figures. Proportions (clean accuracy,
robust-accuracy points) get Wilson score intervals instead (proportions.py): the bootstrap of
a share that is 0% or 100% in the sample has zero width. Paired differences stay bootstrap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from margin.reports.proportions import Bounds, mean_of_two, wilson, wilson_bands
from margin.types import HEADLINE_FIGURES, LABELS, SearchResult

REPLICATES = 500
#: How the shares get their intervals (the bootstrap's collapse at 0% and 100%: proportions.py).
PROPORTIONS_METHOD = ("clean accuracy per class and robust-accuracy bands: Wilson score intervals; "
                      "clean balanced accuracy: MOVER over the two classes' Wilson intervals")
SEED = 0
LEVEL = 0.95

#: The figures that get an interval: the headline and the clean accuracy of each class.
FIGURES = (*HEADLINE_FIGURES, "clean_unsafe_accuracy", "clean_safe_accuracy")


@dataclass(frozen=True, slots=True)
class BootstrapSpec:
    replicates: int = REPLICATES
    seed: int = SEED
    level: float = LEVEL

    def describe(self) -> dict[str, object]:
        return {"method": "stratified percentile bootstrap: prompts resampled with replacement "
                          "within their class", "proportions": PROPORTIONS_METHOD,
                "replicates": self.replicates, "seed": self.seed, "level": self.level}


@dataclass(frozen=True, slots=True)
class Interval:
    low: float
    high: float

    def as_list(self) -> list[float]:
        return [self.low, self.high]


@dataclass(frozen=True, slots=True)
class Intervals:
    """`figures[name]` is None where the figure itself is undefined (an empty class).
    `bands[label]` holds the low and high RA at each of the curve's budgets."""

    figures: dict[str, Interval | None]
    bands: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClassSample:
    """One class's scored prompts, sorted by id: flip costs and whether the original was right."""

    costs: np.ndarray
    correct: np.ndarray

    @property
    def size(self) -> int:
        return len(self.costs)


def class_samples(results: Sequence[SearchResult]) -> dict[str, ClassSample]:
    samples: dict[str, ClassSample] = {}
    for label in LABELS:
        rows = sorted((r for r in results if r.status == "scored" and r.label == label),
                      key=lambda r: r.prompt_id)
        samples[label] = ClassSample(
            costs=np.array([r.flip_cost for r in rows], dtype=float),
            correct=np.array([r.clean_verdict == r.label for r in rows], dtype=float),
        )
    return samples


def counts_from_draws(draws: np.ndarray, size: int) -> np.ndarray:
    """(replicates, k) drawn indices -> (replicates, size): how often each prompt was drawn."""
    counts = np.zeros((draws.shape[0], size), dtype=np.int64)
    rows = np.repeat(np.arange(draws.shape[0]), draws.shape[1])
    np.add.at(counts, (rows, draws.ravel()), 1)
    return counts


#: Replicates drawn at a time. The whole (replicates, n) draw and its index arrays took
#: 0.8 GB for a 100,000-prompt run; drawn in rows, the draws are the same numbers.
DRAW_ROWS = 50


def class_counts(rng: np.random.Generator, n: int, replicates: int) -> np.ndarray:
    """A (replicates, n) array of floats: how often each prompt appears in each replicate
    (what `counts_from_draws(rng.integers(0, n, size=(replicates, n)), n)` gives, with the
    same numbers drawn, in a few rows at a time)."""
    counts = np.empty((replicates, n), dtype=float)
    for start in range(0, replicates, DRAW_ROWS):
        for row, draws in enumerate(rng.integers(0, n, size=(min(DRAW_ROWS, replicates - start), n)), start):
            counts[row] = np.bincount(draws, minlength=n)
    return counts


def draw_counts(sizes: Mapping[str, int], spec: BootstrapSpec) -> dict[str, np.ndarray]:
    """Per class, a (replicates, n) array: how often each prompt appears in each replicate."""
    rng = np.random.default_rng(spec.seed)
    return {label: class_counts(rng, sizes[label], spec.replicates) for label in LABELS if sizes.get(label, 0)}


def replicate_margins(counts: np.ndarray, costs: np.ndarray, budget: float) -> np.ndarray:
    """100 * mean(c_i / B) in each replicate."""
    return 100.0 * (counts @ (np.minimum(costs, budget) / budget)) / counts.shape[1]


def replicate_accuracy(counts: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Share of the replicate's prompts whose original verdict was right, in percent."""
    return 100.0 * (counts @ correct) / counts.shape[1]


def percentile_interval(values: np.ndarray, level: float) -> Interval:
    tail = (100.0 - 100.0 * level) / 2.0  # 2.5 exactly for 0.95
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return Interval(float(low), float(high))


def _replicates(samples: Mapping[str, ClassSample], counts: Mapping[str, np.ndarray],
                budget: float) -> dict[str, np.ndarray | None]:
    """Every figure in FIGURES in each replicate (None: undefined, an empty class)."""
    margins = {label: replicate_margins(c, samples[label].costs, budget) for label, c in counts.items()}
    accuracy = {label: replicate_accuracy(c, samples[label].correct) for label, c in counts.items()}
    return _figures(margins, accuracy)


def _figures(margins: Mapping[str, np.ndarray], accuracy: Mapping[str, np.ndarray]) -> dict[str, np.ndarray | None]:
    reps: dict[str, np.ndarray | None] = {
        "unsafe_margin": margins.get("unsafe"),
        "safe_margin": margins.get("safe"),
        "clean_unsafe_accuracy": accuracy.get("unsafe"),
        "clean_safe_accuracy": accuracy.get("safe"),
        "balanced_margin": None,
        "clean_balanced_accuracy": None,
    }
    if len(margins) == len(LABELS):
        reps["balanced_margin"] = (margins["unsafe"] + margins["safe"]) / 2
    if len(accuracy) == len(LABELS):
        reps["clean_balanced_accuracy"] = (accuracy["unsafe"] + accuracy["safe"]) / 2
    return reps


def proportion_intervals(samples: Mapping[str, ClassSample], level: float) -> dict[str, Interval | None]:
    """Clean accuracy per class (Wilson) and balanced (MOVER-Wilson), in percent: score
    intervals, which the bootstrap's collapse at 0% and 100% does not touch (proportions.py)."""
    shares: dict[str, tuple[float, Bounds]] = {}
    for label in LABELS:
        sample = samples[label]
        if sample.size:
            right = int(sample.correct.sum())
            shares[label] = (right / sample.size, wilson(right, sample.size, level))
    out: dict[str, Interval | None] = {
        f"clean_{label}_accuracy": _percent(shares[label][1]) if label in shares else None for label in LABELS}
    out["clean_balanced_accuracy"] = None
    if len(shares) == len(LABELS):
        (p1, b1), (p2, b2) = shares["unsafe"], shares["safe"]
        out["clean_balanced_accuracy"] = _percent(mean_of_two(p1, b1, p2, b2))
    return out


def _percent(bounds: Bounds) -> Interval:
    return Interval(100.0 * bounds[0], 100.0 * bounds[1])


def bootstrap_intervals(results: Sequence[SearchResult], budget: float,
                        budgets: Sequence[float] | None = None,
                        spec: BootstrapSpec | None = None) -> Intervals:
    """Intervals for every figure in FIGURES, and RA bands at `budgets` when given: the
    margins by the bootstrap, the proportions (clean accuracies, RA points) by Wilson."""
    spec = spec or BootstrapSpec()
    samples = class_samples(results)
    rng = np.random.default_rng(spec.seed)
    margins: dict[str, np.ndarray] = {}
    for label in LABELS:  # one class's counts at a time (the same draws as draw_counts): they are the big arrays
        sample = samples[label]
        if not sample.size:
            continue
        counts = class_counts(rng, sample.size, spec.replicates)
        margins[label] = replicate_margins(counts, sample.costs, budget)
        del counts
    reps = _figures(margins, {})
    proportions = proportion_intervals(samples, spec.level)
    figures: dict[str, Interval | None] = {}
    for name in FIGURES:
        if name in proportions:
            figures[name] = proportions[name]
            continue
        values = reps[name]
        figures[name] = None if values is None else percentile_interval(values, spec.level)
    bands = {} if budgets is None else {
        label: wilson_bands(samples[label].costs, budgets, spec.level) for label in margins}
    return Intervals(figures=figures, bands=bands)


@dataclass(frozen=True, slots=True)
class Difference:
    """`other - base` for one figure, over the prompts both scored, with its paired interval."""

    value: float
    interval: Interval

    @property
    def moves(self) -> bool:
        """Whether the interval leaves out zero: the figure changed beyond resampling noise."""
        return self.interval.low > 0 or self.interval.high < 0


def paired_differences(base: Sequence[SearchResult], other: Sequence[SearchResult], budget: float,
                       spec: BootstrapSpec | None = None) -> dict[str, Difference | None]:
    """Per figure in FIGURES, other minus base with a paired bootstrap interval: each replicate
    draws one resample of the prompts (within class, as `bootstrap_intervals` does, from the
    same seed) and takes the difference of both figures on it. Only prompts scored in both
    count, so a missing prompt on either side leaves the pair."""
    spec = spec or BootstrapSpec()
    both = ({r.prompt_id for r in base if r.status == "scored"}
            & {r.prompt_id for r in other if r.status == "scored"})
    samples_a = class_samples([r for r in base if r.prompt_id in both])
    samples_b = class_samples([r for r in other if r.prompt_id in both])
    sizes = {label: s.size for label, s in samples_a.items()}
    counts = draw_counts(sizes, spec)
    once = {label: np.ones((1, n), dtype=np.int64) for label, n in sizes.items() if n}
    reps_a, reps_b = _replicates(samples_a, counts, budget), _replicates(samples_b, counts, budget)
    point_a, point_b = _replicates(samples_a, once, budget), _replicates(samples_b, once, budget)
    out: dict[str, Difference | None] = {}
    for name in FIGURES:
        a, b, pa, pb = reps_a[name], reps_b[name], point_a[name], point_b[name]
        if a is None or b is None or pa is None or pb is None:
            out[name] = None
            continue
        out[name] = Difference(float(pb[0] - pa[0]), percentile_interval(b - a, spec.level))
    return out
