"""Every figure of a set of results: point estimates, intervals (the bootstrap's; Wilson's for
shares), RA bands and slices.

One place composes them, so the run's snapshot, `margin score`, `margin publish` and
`margin report` show the same numbers from the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from margin.reports.bootstrap import BootstrapSpec, Intervals, bootstrap_intervals
from margin.reports.metrics import class_accuracy, margin_report, slice_groups
from margin.types import MarginReport, SearchResult


@dataclass(frozen=True, slots=True)
class Figures:
    report: MarginReport
    accuracy: dict[str, float | None]  # clean accuracy per class, percent
    intervals: Intervals

    def point(self, name: str) -> float | None:
        """A figure by its snapshot name (the names in bootstrap.FIGURES)."""
        r = self.report
        return {
            "balanced_margin": r.balanced_margin,
            "unsafe_margin": r.unsafe_margin,
            "safe_margin": r.safe_margin,
            "clean_balanced_accuracy": r.clean_balanced_accuracy,
            "clean_unsafe_accuracy": self.accuracy.get("unsafe"),
            "clean_safe_accuracy": self.accuracy.get("safe"),
        }[name]

    def interval(self, name: str) -> list[float] | None:
        """A figure's interval as `[low, high]` (None where the figure is undefined)."""
        interval = self.intervals.figures.get(name)
        return None if interval is None else interval.as_list()


def compute_figures(results: Sequence[SearchResult], budget: float, *, bands: bool = True,
                    spec: BootstrapSpec | None = None) -> Figures:
    report = margin_report(results, budget)
    intervals = bootstrap_intervals(results, budget, report.curve.budgets if bands else None, spec)
    return Figures(report=report, accuracy=class_accuracy(results), intervals=intervals)


def compute_slices(results: Sequence[SearchResult], budget: float, *, bands: bool = False,
                   spec: BootstrapSpec | None = None) -> dict[str, dict[str, Figures]]:
    """Figures per XSTest `type` and per extra tag column: {dimension: {value: Figures}}."""
    return {
        dimension: {value: compute_figures(rs, budget, bands=bands, spec=spec) for value, rs in values.items()}
        for dimension, values in slice_groups(results).items()
    }
