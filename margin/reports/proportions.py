"""Score intervals for proportions: Wilson's for one share, MOVER-Wilson for the mean of two.

Why not the bootstrap: resampling a class whose prompts all agree (every original right, or
every prompt still right at budget b) gives the same share in every replicate, so the
percentile interval is [1, 1] or [0, 0], claiming certainty from a handful of prompts. The
Wilson score interval inverts the binomial score test instead: for k of n it is never empty,
stays inside [0, 1], and at k = n still reaches down to n / (n + z²).

Formulas (z the normal quantile of the level, 1.959964 for 95%; p = k / n):

    centre    = (p + z²/(2n)) / (1 + z²/n)
    half      = z / (1 + z²/n) * sqrt(p(1 - p)/n + z²/(4n²))
    Wilson    = [centre - half, centre + half]

The mean of two independent shares, θ = (p1 + p2) / 2 (clean balanced accuracy, the classes
being sampled apart), takes the method of variance estimates recovery (MOVER, Zou & Donner
2008) over the two Wilson intervals [l_j, u_j]:

    low  = θ - sqrt((p1 - l1)² + (p2 - l2)²) / 2
    high = θ + sqrt((u1 - p1)² + (u2 - p2)²) / 2
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

#: [low, high]
Bounds = tuple[float, float]


def z_value(level: float) -> float:
    """The two-sided normal quantile: 1.959964 for 0.95."""
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def wilson(successes: int, n: int, level: float) -> Bounds:
    """Wilson score interval of the share successes / n, as fractions 0..1."""
    if n <= 0:
        raise ValueError("a share needs at least one trial")
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes out of {n} trials")
    z = z_value(level)
    p = successes / n
    scale = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z / scale * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # The exact ends at k = 0 and k = n; rounding would put them a hair outside [0, 1].
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def mean_of_two(p1: float, bounds1: Bounds, p2: float, bounds2: Bounds) -> Bounds:
    """MOVER interval of (p1 + p2) / 2 from each share's own interval (same units)."""
    theta = (p1 + p2) / 2.0
    down = math.hypot(p1 - bounds1[0], p2 - bounds2[0]) / 2.0
    up = math.hypot(bounds1[1] - p1, bounds2[1] - p2) / 2.0
    return theta - down, theta + up


def wilson_bands(costs: Sequence[float] | np.ndarray, budgets: Sequence[float],
                 level: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Pointwise Wilson intervals of robust accuracy RA(b) = share with c_i > b, at each b
    (counted by a sorted search: a large run's curve has a breakpoint per distinct cost)."""
    ordered = np.sort(np.asarray(costs, dtype=float))
    above = len(ordered) - np.searchsorted(ordered, np.asarray(budgets, dtype=float), side="right")
    bounds = [wilson(int(k), len(ordered), level) for k in above]
    return tuple(low for low, _ in bounds), tuple(high for _, high in bounds)
