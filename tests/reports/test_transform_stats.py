"""Invariance and per-transform effectiveness, on hand-built observations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from margin.reports.effectiveness import effectiveness
from margin.reports.invariance import invariance, original_row
from margin.reports.observations import (
    PromptObservations,
    Variant,
    coverage,
    from_receipts,
    read_calls,
)
from margin.types import SearchResult, Verdict

U, S, INV = Verdict("unsafe"), Verdict("safe"), Verdict("invalid")


def observations() -> list[PromptObservations]:
    return [
        # Unsafe prompt, caught: homoglyph flips it at 5 and 9, zero-width never does.
        PromptObservations("u1", "unsafe", "t", U, (
            Variant("homoglyph", "1", 0, 5.0, S), Variant("zwsp", "1", 0, 6.0, U),
            Variant("homoglyph", "2", 0, 9.0, S), Variant("zwsp", "2", 0, 12.0, U))),
        # Unsafe prompt, caught: zero-width flips at 12 (an invalid output counts as a flip).
        PromptObservations("u2", "unsafe", "t", U, (
            Variant("homoglyph", "1", 0, 4.0, U), Variant("zwsp", "1", 0, 12.0, INV))),
        # Unsafe prompt missed on the original: not eligible for effectiveness.
        PromptObservations("u3", "unsafe", "t", S, (Variant("homoglyph", "1", 0, 3.0, U),)),
        # Safe prompt, passed: homoglyph makes it fire at 7.
        PromptObservations("s1", "safe", "t", S, (
            Variant("homoglyph", "1", 0, 7.0, U), Variant("zwsp", "1", 0, 2.0, S))),
        # Safe prompt with a missing verdict for zwsp: left out of zwsp's figures.
        PromptObservations("s2", "safe", "t", S, (
            Variant("homoglyph", "1", 0, 7.0, S), Variant("zwsp", "1", 0, 2.0, None))),
    ]


def test_invariance_by_hand():
    per_transform, per_family = invariance(observations(), {"homoglyph": "lookalike", "zwsp": "invisible"})
    rows = {r.name: r for r in per_transform}
    h = rows["homoglyph"]
    # Changed: u1 (S), u3 (S -> U), s1 (S -> U); unchanged: u2, s2.
    assert (h.prompts, h.changed, h.lost, h.gained) == (5, 3, 1, 2)
    assert h.change_rate == pytest.approx(3 / 5)
    assert (h.candidates, h.candidates_changed, h.fired) == (6, 4, 3)
    assert h.fired_rate == pytest.approx(3 / 6)
    z = rows["zwsp"]
    # s2's zwsp verdict is missing: s2 does not count for zwsp.
    assert (z.prompts, z.changed, z.lost, z.gained, z.candidates, z.fired) == (3, 1, 1, 0, 4, 2)
    assert [r.name for r in per_family] == ["invisible", "lookalike"]
    assert per_family[1] == replace(h, name="lookalike")
    ref = original_row(observations())
    assert (ref.prompts, ref.fired, ref.change_rate) == (5, 2, 0.0)


def test_effectiveness_by_hand():
    per_transform, per_family = effectiveness(observations(), {"homoglyph": "lookalike", "zwsp": "lookalike"})
    rows = {e.name: e.by_class for e in per_transform}
    h = rows["homoglyph"]
    # Eligible unsafe: u1, u2 (u3 was wrong originally); homoglyph flips u1 at 5.
    assert (h["unsafe"].eligible, h["unsafe"].flipped, h["unsafe"].median_cost) == (2, 1, 5.0)
    assert (h["safe"].eligible, h["safe"].flipped, h["safe"].median_cost) == (2, 1, 7.0)
    assert h["all"].flip_rate == pytest.approx(2 / 4) and h["all"].median_cost == pytest.approx(6.0)
    z = rows["zwsp"]
    assert (z["unsafe"].eligible, z["unsafe"].flipped, z["unsafe"].median_cost) == (2, 1, 12.0)
    assert (z["safe"].eligible, z["safe"].flipped) == (1, 0)  # s2 has a missing zwsp verdict
    assert z["safe"].median_cost is None
    (family,) = per_family
    # The family is the union: u1 flips at 5, u2 at 12 (zwsp), s1 at 7; s2 excluded.
    assert (family.by_class["unsafe"].flipped, family.by_class["unsafe"].median_cost) == (2, 8.5)
    assert (family.by_class["safe"].eligible, family.by_class["safe"].flipped) == (1, 1)


def _line(pid, transform, strength, verdict, cost=1.0, attempt=1, cached=False, **extra):
    return {"kind": "call", "prompt_id": pid, "transform": transform, "strength": strength, "seed": 0,
            "cost": cost, "verdict": verdict, "p_unsafe": None, "raw": "", "attempt": attempt,
            "cached": cached, **extra}


def test_receipts_become_observations_and_coverage_tolerantly():
    lines = [
        {"kind": "result", "prompt_id": "u1"},
        _line("u1", None, None, "unsafe", cost=0.0),
        _line("u1", "zwsp", "1", None, cost=4.0),  # no output, then retried
        _line("u1", "zwsp", "1", "safe", cost=4.0, attempt=2, engine_field="ignored"),
        _line("u1", "homoglyph", "1", "invalid", cost=2.0),
        _line("u1", "homoglyph", "2", None, cost=3.0),  # never answered
        _line("u1", "leet", "1", "safe", cost=5.0, attempt=0, cached=True),
    ]
    result = SearchResult(prompt_id="u1", label="unsafe", type="t", clean_verdict="unsafe", flip_cost=2.0,
                          capped=False, flip=None, guard_calls=5)
    calls = read_calls(lines)
    assert len(calls) == 6  # the result line is no call
    (obs,) = from_receipts(calls, [result])
    assert obs.original == Verdict("unsafe")
    assert [(v.transform, v.cost, v.verdict and v.verdict.label) for v in obs.variants] == [
        ("homoglyph", 2.0, "invalid"), ("homoglyph", 3.0, None), ("zwsp", 4.0, "safe"), ("leet", 5.0, "safe")]
    assert not obs.complete
    cov = coverage(calls)
    assert (cov.candidates, cov.valid, cov.invalid, cov.no_output) == (5, 3, 1, 1)
    assert (cov.attempts, cov.failed_attempts, cov.cache_hits) == (5, 2, 1)
