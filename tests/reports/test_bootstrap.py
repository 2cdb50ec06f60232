from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from margin.reports.bootstrap import (
    BootstrapSpec,
    bootstrap_intervals,
    counts_from_draws,
    draw_counts,
    paired_differences,
    percentile_interval,
    replicate_accuracy,
    replicate_margins,
)
from margin.reports.headline import compute_figures, compute_slices
from margin.reports.metrics import margin_report, slice_groups, tag_values
from margin.types import SearchResult


def result(pid: str, label: str, cost: float, *, clean: str | None = None, type_: str = "t",
           extra: tuple[tuple[str, str], ...] = ()) -> SearchResult:
    if clean is None:
        clean = label if cost > 0 else "invalid"
    return SearchResult(prompt_id=pid, label=label, type=type_, clean_verdict=clean,  # type: ignore[arg-type]
                        flip_cost=cost, capped=cost == 100, flip=None, guard_calls=1, extra=extra)


def test_replicate_figures_from_explicit_draws_by_hand():
    # Two prompts with costs 0 and 50 (budget 100); replicates draw (0,0), (0,1), (1,1).
    counts = counts_from_draws(np.array([[0, 0], [0, 1], [1, 1]]), 2)
    assert counts.tolist() == [[2, 0], [1, 1], [0, 2]]
    costs = np.array([0.0, 50.0])
    assert replicate_margins(counts, costs, 100.0).tolist() == [0.0, 25.0, 50.0]
    assert replicate_accuracy(counts, np.array([0.0, 1.0])).tolist() == [0.0, 50.0, 100.0]


def test_costs_above_budget_are_capped_in_replicates():
    counts = counts_from_draws(np.array([[0]]), 1)
    assert replicate_margins(counts, np.array([150.0]), 100.0).tolist() == [100.0]


def test_percentile_interval_by_hand():
    interval = percentile_interval(np.arange(101, dtype=float), 0.95)
    assert (interval.low, interval.high) == (2.5, 97.5)
    interval = percentile_interval(np.arange(11, dtype=float), 0.80)
    assert (interval.low, interval.high) == pytest.approx((1.0, 9.0))


def toy() -> list[SearchResult]:
    return [
        result("u1", "unsafe", 0.0), result("u2", "unsafe", 30.0), result("u3", "unsafe", 60.0),
        result("u4", "unsafe", 5.0), result("s1", "safe", 10.0), result("s2", "safe", 100.0),
        result("s3", "safe", 0.0), result("s4", "safe", 80.0), result("s5", "safe", 40.0),
    ]


def test_intervals_equal_an_independent_loop_over_the_same_draws():
    """The fixed seed draws the unsafe class first, then the safe class, each sorted by id."""
    spec = BootstrapSpec(replicates=200, seed=7)
    got = bootstrap_intervals(toy(), 100.0, spec=spec)
    rng = np.random.default_rng(7)
    unsafe = sorted((r for r in toy() if r.label == "unsafe"), key=lambda r: r.prompt_id)
    safe = sorted((r for r in toy() if r.label == "safe"), key=lambda r: r.prompt_id)
    draws_u = rng.integers(0, len(unsafe), size=(200, len(unsafe)))
    draws_s = rng.integers(0, len(safe), size=(200, len(safe)))
    balanced = []
    for du, ds in zip(draws_u, draws_s, strict=True):
        mu = 100 * sum(unsafe[i].flip_cost / 100 for i in du) / len(du)
        ms = 100 * sum(safe[i].flip_cost / 100 for i in ds) / len(ds)
        balanced.append((mu + ms) / 2)
    b = got.figures["balanced_margin"]
    assert b is not None
    assert (b.low, b.high) == pytest.approx(tuple(np.percentile(balanced, [2.5, 97.5])), abs=1e-9)


def test_bootstrap_is_deterministic_and_order_free():
    a = bootstrap_intervals(toy(), 100.0, budgets=[0, 10, 50])
    shuffled = toy()
    random.Random(3).shuffle(shuffled)
    b = bootstrap_intervals(shuffled, 100.0, budgets=[0, 10, 50])
    assert a == b
    assert bootstrap_intervals(toy(), 100.0, spec=BootstrapSpec(seed=1)) != bootstrap_intervals(toy(), 100.0)


def test_replicates_keep_class_sizes():
    counts = draw_counts({"unsafe": 4, "safe": 5}, BootstrapSpec(replicates=50))
    assert counts["unsafe"].shape == (50, 4) and counts["safe"].shape == (50, 5)
    assert set(counts["unsafe"].sum(axis=1)) == {4} and set(counts["safe"].sum(axis=1)) == {5}


def test_two_extreme_prompts_span_the_whole_range():
    # Costs 0 and B: a replicate's margin is 0, 50 or 100 with chances 1/4, 1/2, 1/4, so with
    # 500 replicates both tails are reached and the 95% interval is [0, 100].
    results = [result("u1", "unsafe", 0.0), result("u2", "unsafe", 100.0),
               result("s1", "safe", 100.0, clean="safe")]
    interval = bootstrap_intervals(results, 100.0).figures["unsafe_margin"]
    assert interval is not None and (interval.low, interval.high) == (0.0, 100.0)


def test_constant_class_has_a_point_interval_and_empty_class_none():
    results = [result(f"s{i}", "safe", 40.0) for i in range(6)]
    intervals = bootstrap_intervals(results, 100.0, budgets=[0.0, 40.0])
    safe = intervals.figures["safe_margin"]
    assert safe is not None and (safe.low, safe.high) == pytest.approx((40.0, 40.0))
    assert intervals.figures["unsafe_margin"] is None and intervals.figures["balanced_margin"] is None
    # RA is 6 of 6 at b = 0 and 0 of 6 at b = 40: Wilson, not the bootstrap's [1, 1] and [0, 0].
    z2 = 1.959963984540054 ** 2
    low, high = intervals.bands["safe"]
    assert low == pytest.approx((6 / (6 + z2), 0.0)) and high == pytest.approx((1.0, z2 / (6 + z2)))


def test_intervals_hold_the_point_estimate_and_bands_bracket_the_curve():
    figures = compute_figures(toy(), 100.0)
    for name in ("balanced_margin", "unsafe_margin", "safe_margin", "clean_balanced_accuracy"):
        interval = figures.intervals.figures[name]
        value = figures.point(name)
        assert interval is not None and value is not None
        assert interval.low <= value <= interval.high
    for label, (low, high) in figures.intervals.bands.items():
        ra = figures.report.curve.ra[label]
        assert len(low) == len(high) == len(ra)
        assert all(lo <= r + 1e-12 and r <= hi + 1e-12 for lo, r, hi in zip(low, ra, high, strict=True))


def test_missing_prompts_are_not_resampled():
    missing = SearchResult(prompt_id="u9", label="unsafe", type="t", clean_verdict=None, flip_cost=None,
                           capped=False, flip=None, guard_calls=1, status="missing")
    assert bootstrap_intervals([*toy(), missing], 100.0) == bootstrap_intervals(toy(), 100.0)


def test_tag_values_read_json_lists_and_skip_empty_cells():
    assert tag_values("plain") == ["plain"]
    assert tag_values('["clitic", "chain"]') == ["clitic", "chain"]
    assert tag_values("  ") == []
    assert tag_values("[not json") == ["[not json"]


def test_slices_by_type_and_tag_columns():
    results = [
        result("u1", "unsafe", 10.0, type_="a", extra=(("lang", "en"), ("tags", '["x", "y"]'))),
        result("u2", "unsafe", 30.0, type_="b", extra=(("lang", "fr"), ("tags", '["y"]'))),
        result("s1", "safe", 50.0, type_="a", extra=(("lang", "en"), ("tags", ""))),
    ]
    groups = slice_groups(results)
    assert list(groups) == ["type", "lang", "tags"]
    assert {k: [r.prompt_id for r in v] for k, v in groups["type"].items()} == {"a": ["u1", "s1"], "b": ["u2"]}
    assert {k: [r.prompt_id for r in v] for k, v in groups["tags"].items()} == {"x": ["u1"], "y": ["u1", "u2"]}
    slices = compute_slices(results, 100.0)
    assert slices["type"]["a"].report == margin_report([results[0], results[2]], 100.0)
    assert slices["type"]["a"].report.balanced_margin == pytest.approx(30.0)
    assert slices["lang"]["fr"].report.safe_margin is None
    assert slices["tags"]["y"].report.unsafe_margin == pytest.approx(20.0)


# -- paired differences (margin ablate's change against no defence) ------------------------

def shifted(results: list[SearchResult], label: str, by: float) -> list[SearchResult]:
    return [replace(r, flip_cost=min(r.flip_cost + by, 100.0)) if r.label == label else r for r in results]


def test_paired_difference_equals_an_independent_loop_over_shared_draws():
    """One draw per replicate (unsafe class, then safe, each sorted by id) serves both runs."""
    spec = BootstrapSpec(replicates=200, seed=7)
    base = toy()
    new_costs = dict(zip([r.prompt_id for r in base], (10.0, 30.0, 0.0, 5.0, 10.0, 40.0, 70.0, 80.0, 40.0), strict=True))
    other = [replace(r, flip_cost=new_costs[r.prompt_id]) for r in base]
    got = paired_differences(base, other, 100.0, spec)["balanced_margin"]
    assert got is not None
    rng = np.random.default_rng(7)
    unsafe = sorted(r.prompt_id for r in base if r.label == "unsafe")
    safe = sorted(r.prompt_id for r in base if r.label == "safe")
    cost_a = {r.prompt_id: r.flip_cost for r in base}
    draws_u = rng.integers(0, len(unsafe), size=(200, len(unsafe)))
    draws_s = rng.integers(0, len(safe), size=(200, len(safe)))

    def balanced(costs: dict, du: np.ndarray, ds: np.ndarray) -> float:
        return (sum(costs[unsafe[i]] for i in du) / len(du) + sum(costs[safe[i]] for i in ds) / len(ds)) / 2

    diffs = [balanced(new_costs, du, ds) - balanced(cost_a, du, ds) for du, ds in zip(draws_u, draws_s, strict=True)]
    everyone = (np.arange(len(unsafe)), np.arange(len(safe)))
    assert got.value == pytest.approx(balanced(new_costs, *everyone) - balanced(cost_a, *everyone))
    assert (got.interval.low, got.interval.high) == pytest.approx(tuple(np.percentile(diffs, [2.5, 97.5])), abs=1e-9)


def test_a_uniform_shift_has_a_point_interval_only_when_resamples_are_shared():
    base = toy()
    other = shifted(base, "safe", 0.0)  # the same results ...
    assert all(d is not None and d.value == 0 and d.interval.as_list() == [0.0, 0.0] and not d.moves
               for d in paired_differences(base, other, 100.0).values())
    low = [replace(r, flip_cost=min(r.flip_cost, 40.0)) for r in base]  # costs all <= 40
    other = shifted(low, "unsafe", 10.0)  # ... every unsafe prompt 10 dearer
    diffs = paired_differences(low, other, 100.0)
    unsafe, balanced, safe = diffs["unsafe_margin"], diffs["balanced_margin"], diffs["safe_margin"]
    assert unsafe is not None and balanced is not None and safe is not None
    assert unsafe.interval.low == pytest.approx(10.0) and unsafe.interval.high == pytest.approx(10.0) and unsafe.moves
    assert balanced.value == pytest.approx(5.0) and balanced.interval.high - balanced.interval.low < 1e-9
    assert safe.interval.as_list() == [0.0, 0.0]
    # unpaired intervals of the two runs overlap widely: pairing is what makes the change visible
    a, b = bootstrap_intervals(low, 100.0), bootstrap_intervals(other, 100.0)
    assert a.figures["unsafe_margin"].high > b.figures["unsafe_margin"].low  # type: ignore[union-attr]


def test_paired_difference_keeps_only_prompts_scored_in_both():
    base = toy()
    other = [replace(r, status="missing", flip_cost=None) if r.prompt_id == "u3" else r for r in base]
    other = shifted(other, "safe", 0.0)
    d = paired_differences(base, other, 100.0)["unsafe_margin"]
    assert d is not None and d.value == 0.0  # u3 (cost 60) left out of both sides, not of one
    only_base = paired_differences(base, [r for r in base if r.label == "unsafe"], 100.0)
    assert only_base["safe_margin"] is None and only_base["balanced_margin"] is None
