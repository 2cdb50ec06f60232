"""Agreement between two raters of the same cases: accuracy and Cohen's kappa, with intervals.

Kappa = (p_o - p_e) / (1 - p_e): p_o the share of cases on which they agree, p_e the share
expected by chance from each rater's own class shares. The raters' class sets may differ
(a judge's `invalid` is a class no person used: it counts against agreement, never as one).
Where p_e is 1 (both raters gave one and the same class everywhere) kappa is undefined: None.

Intervals: a percentile bootstrap over cases (`REPLICATES` resamples with replacement, one
numpy Generator seeded `SEED`, level 0.95). Cases are taken in the order given, so callers
sort them (by file and id) to make the interval independent of how the files were read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

REPLICATES = 2000
SEED = 0
LEVEL = 0.95
METHOD = (f"percentile bootstrap over cases: {REPLICATES} resamples with replacement, numpy seed {SEED}, "
          f"level {LEVEL}")


@dataclass(frozen=True, slots=True)
class Figure:
    estimate: float | None
    low: float | None
    high: float | None

    def as_dict(self) -> dict[str, float | None]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)
        return {"estimate": r(self.estimate), "low": r(self.low), "high": r(self.high)}


def _codes(a: Sequence[str], b: Sequence[str]) -> tuple[np.ndarray, np.ndarray, int]:
    classes = sorted(set(a) | set(b))
    index = {c: i for i, c in enumerate(classes)}
    return (np.array([index[x] for x in a], dtype=np.int64), np.array([index[x] for x in b], dtype=np.int64),
            len(classes))


def _kappa_rows(x: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """Kappa of each row of two (replicates, n) code arrays; NaN where undefined."""
    n = x.shape[1]
    observed = (x == y).mean(axis=1)
    expected = np.zeros(x.shape[0])
    for c in range(k):
        expected += (x == c).sum(axis=1) * (y == c).sum(axis=1) / (n * n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (observed - expected) / (1 - expected)
    out[np.isclose(expected, 1.0)] = np.nan
    return out


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    if len(a) != len(b):
        raise ValueError("both raters must rate the same cases")
    if not a:
        return None
    x, y, k = _codes(a, b)
    value = float(_kappa_rows(x[None, :], y[None, :], k)[0])
    return None if np.isnan(value) else value


def accuracy(a: Sequence[str], b: Sequence[str]) -> float | None:
    return sum(p == q for p, q in zip(a, b, strict=True)) / len(a) if a else None


def _interval(values: np.ndarray) -> tuple[float | None, float | None]:
    kept = values[~np.isnan(values)]
    if kept.size == 0:
        return None, None
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(kept, [tail, 100 - tail])
    return float(low), float(high)


def agreement(truth: Sequence[str], judged: Sequence[str], *, replicates: int = REPLICATES,
              seed: int = SEED) -> dict[str, Figure]:
    """`accuracy` and `kappa` of `judged` against `truth`, each with its bootstrap interval."""
    if len(truth) != len(judged):
        raise ValueError("both raters must rate the same cases")
    if not truth:
        return {"accuracy": Figure(None, None, None), "kappa": Figure(None, None, None)}
    x, y, k = _codes(truth, judged)
    rows = np.random.default_rng(seed).integers(0, len(x), size=(replicates, len(x)))
    xs, ys = x[rows], y[rows]
    acc = (xs == ys).mean(axis=1)
    kap = _kappa_rows(xs, ys, k)
    return {"accuracy": Figure(accuracy(truth, judged), *_interval(acc)),
            "kappa": Figure(cohen_kappa(truth, judged), *_interval(kap))}


def confusion(truth: Sequence[str], judged: Sequence[str]) -> dict[str, dict[str, int]]:
    """truth class -> judged class -> cases."""
    out: dict[str, dict[str, int]] = {}
    for t, j in zip(truth, judged, strict=True):
        row = out.setdefault(t, {})
        row[j] = row.get(j, 0) + 1
    return {t: dict(sorted(row.items())) for t, row in sorted(out.items())}
