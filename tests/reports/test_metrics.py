from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from margin.reports.metrics import (
    margin_report,
    normalised_area,
    outcome_counts,
    robust_accuracy_curve,
)
from margin.types import Flip, SearchResult


def result(pid: str, label: str, clean: str, cost: float | None, *, capped: bool = False,
           status: str = "scored") -> SearchResult:
    return SearchResult(prompt_id=pid, label=label, type="t", clean_verdict=clean,  # type: ignore[arg-type]
                        flip_cost=cost, capped=capped, flip=None, guard_calls=1, status=status)  # type: ignore[arg-type]


def toy() -> list[SearchResult]:
    # Budget 100. Unsafe: one wrong originally (c=0), one flips at 30.
    # Safe: one flips at 10, one never flips (capped at 100).
    return [
        result("u1", "unsafe", "safe", 0.0),
        result("u2", "unsafe", "unsafe", 30.0),
        result("s1", "safe", "safe", 10.0),
        result("s2", "safe", "safe", 100.0, capped=True),
    ]


def test_four_prompt_toy_by_hand():
    report = margin_report(toy(), budget=100)
    assert report.unsafe_margin == pytest.approx(15.0)      # 100 * mean(0/100, 30/100)
    assert report.safe_margin == pytest.approx(55.0)        # 100 * mean(10/100, 100/100)
    assert report.balanced_margin == pytest.approx(35.0)
    assert report.clean_balanced_accuracy == pytest.approx(75.0)  # 50 * (1/2 + 2/2)
    assert report.n == {"unsafe": 2, "safe": 2}


def test_toy_curve_by_hand():
    curve = robust_accuracy_curve(toy(), budget=100)
    assert curve.budgets == (0.0, 10.0, 30.0, 100.0)
    assert curve.ra["unsafe"] == (0.5, 0.5, 0.0, 0.0)
    assert curve.ra["safe"] == (1.0, 0.5, 0.5, 0.0)


def test_missing_prompts_are_never_scored():
    results = [*toy(), result("u3", "unsafe", None, None, status="missing")]  # type: ignore[arg-type]
    report = margin_report(results, budget=100)
    assert report.unsafe_margin == pytest.approx(15.0)
    assert report.missing == {"unsafe": 1, "safe": 0}


def test_budget_changes_the_normalisation():
    report = margin_report([result("s", "safe", "safe", 20.0), result("u", "unsafe", "unsafe", 20.0)], budget=40)
    assert report.safe_margin == pytest.approx(50.0)


costs = st.lists(st.tuples(st.sampled_from(["safe", "unsafe"]),
                           st.one_of(st.just(0.0), st.floats(0, 50), st.just(50.0))), min_size=1)


@given(costs)
def test_area_under_robust_accuracy_equals_margin(pairs):
    budget = 50.0
    results = [result(f"p{i}", label, label if c > 0 else "invalid", c, capped=c == budget)
               for i, (label, c) in enumerate(pairs)]
    report = margin_report(results, budget=budget)
    for label, margin in (("unsafe", report.unsafe_margin), ("safe", report.safe_margin)):
        if margin is None:
            assert label not in report.curve.ra
            continue
        assert normalised_area(report.curve, label, budget) == pytest.approx(margin / 100, abs=1e-12)
        assert report.curve.ra[label][0] == pytest.approx(
            sum(1 for lab, c in pairs if lab == label and c > 0) / sum(1 for lab, _ in pairs if lab == label))


def test_outcome_counts_tell_baseline_errors_from_flips():
    flip = Flip("homoglyph", "1", 0, 2.0, "safe", "t")
    results = [SearchResult("u1", "unsafe", "t", "safe", 0.0, False, None, 1),  # let through unchanged
               SearchResult("u2", "unsafe", "t", "invalid", 0.0, False, None, 1),  # an invalid original is wrong
               SearchResult("u3", "unsafe", "t", "unsafe", 2.0, False, flip, 4),
               SearchResult("u4", "unsafe", "t", "unsafe", 100.0, True, None, 9),
               SearchResult("u5", "unsafe", "t", None, None, False, None, 0, status="missing"),
               SearchResult("s1", "safe", "t", "safe", 100.0, True, None, 9)]
    assert outcome_counts(results) == {
        "unsafe": {"wrong_on_original": 2, "flipped": 1, "not_flipped": 1, "missing": 1},
        "safe": {"wrong_on_original": 0, "flipped": 0, "not_flipped": 1, "missing": 0}}
