"""Wilson and MOVER-Wilson intervals for shares (clean accuracy, robust-accuracy points),
checked against values worked by hand and against scipy's own Wilson interval."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from margin.reports.bootstrap import bootstrap_intervals
from margin.reports.proportions import mean_of_two, wilson, wilson_bands, z_value
from margin.types import SearchResult

Z2 = 3.841459  # 1.959964 ** 2


def test_z_for_95_percent():
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)


def test_wilson_by_hand():
    # 0 of 10: [0, z²/(n + z²)] = [0, 3.841459 / 13.841459]
    assert wilson(0, 10, 0.95) == pytest.approx((0.0, 0.277533), abs=1e-6)
    # 10 of 10: [n/(n + z²), 1]: never the bootstrap's [1, 1]
    assert wilson(10, 10, 0.95) == pytest.approx((0.722467, 1.0), abs=1e-6)
    # 5 of 10: centre 0.5, half = z/(1 + z²/10) * sqrt(0.025 + z²/400) = 1.416010 * 0.186021
    assert wilson(5, 10, 0.95) == pytest.approx((0.236593, 0.763407), abs=1e-6)


@pytest.mark.parametrize(("k", "n"), [(0, 1), (1, 1), (0, 7), (3, 7), (7, 7), (19, 200), (250, 250)])
@pytest.mark.parametrize("level", [0.8, 0.95, 0.99])
def test_wilson_equals_scipys(k, n, level):
    ci = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    assert wilson(k, n, level) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_wilson_refuses_impossible_counts():
    with pytest.raises(ValueError):
        wilson(0, 0, 0.95)
    with pytest.raises(ValueError):
        wilson(4, 3, 0.95)


def test_mover_mean_of_two_by_hand():
    # 10 of 10 and 5 of 10: θ = 0.75; down = hypot(1 - 0.722467, 0.5 - 0.236593) / 2 = 0.191316,
    # up = hypot(0, 0.763407 - 0.5) / 2 = 0.131704.
    low, high = mean_of_two(1.0, wilson(10, 10, 0.95), 0.5, wilson(5, 10, 0.95))
    assert (low, high) == pytest.approx((0.558684, 0.881704), abs=1e-6)


def test_bands_count_the_prompts_above_each_budget():
    costs = [0.0, 10.0, 10.0, 100.0]
    low, high = wilson_bands(costs, [0.0, 10.0, 50.0, 100.0], 0.95)
    expected = [wilson(k, 4, 0.95) for k in (3, 1, 1, 0)]
    assert list(zip(low, high, strict=True)) == expected


def result(pid: str, label: str, cost: float, clean: str) -> SearchResult:
    return SearchResult(prompt_id=pid, label=label, type="t", clean_verdict=clean,  # type: ignore[arg-type]
                        flip_cost=cost, capped=False, flip=None, guard_calls=1)


def test_a_class_all_right_keeps_an_honest_interval():
    """Every unsafe original right (4 of 4), half the safe ones (2 of 4): the percentile bootstrap
    gave the unsafe accuracy [100, 100]; Wilson gives [100 * 4 / (4 + z²), 100]."""
    results = [result(f"u{i}", "unsafe", 5.0, "unsafe") for i in range(4)]
    results += [result("s0", "safe", 5.0, "safe"), result("s1", "safe", 5.0, "safe"),
                result("s2", "safe", 0.0, "unsafe"), result("s3", "safe", 0.0, "unsafe")]
    figures = bootstrap_intervals(results, 100.0).figures
    unsafe, safe, balanced = (figures[f"clean_{k}_accuracy"] for k in ("unsafe", "safe", "balanced"))
    assert unsafe is not None and safe is not None and balanced is not None
    assert (unsafe.low, unsafe.high) == pytest.approx((100 * 4 / (4 + Z2), 100.0), abs=1e-4)
    assert (safe.low, safe.high) == pytest.approx(tuple(100 * v for v in wilson(2, 4, 0.95)))
    expected = mean_of_two(1.0, wilson(4, 4, 0.95), 0.5, wilson(2, 4, 0.95))
    assert (balanced.low, balanced.high) == pytest.approx(tuple(100 * v for v in expected))
    assert balanced.low < 75.0 < balanced.high
