"""The Best-of-N power-law fit of benchmarks/bon.py recovers a known curve."""

from __future__ import annotations

import math

import pytest

from benchmarks.bon import asr_curve, fit_power_law, forecast


def test_the_fit_recovers_a_and_b_and_forecasts_the_curve():
    curve = [math.exp(-2.0 * n ** -0.5) for n in range(1, 101)]
    a, b = fit_power_law(curve[:10])
    assert (a, b) == (pytest.approx(2.0), pytest.approx(0.5))
    assert forecast(a, b, 100) == pytest.approx(curve[-1])


def test_the_curve_counts_prompts_flipped_within_n_samples():
    assert asr_curve([1, 3, None, 2], 4) == [0.25, 0.5, 0.75, 0.75]
    assert fit_power_law([0.0, 1.0]) is None  # nothing strictly between 0 and 1


def test_the_sweep_simulation_counts_variants_up_to_the_round_with_a_flip():
    from benchmarks.single_edit import simulate
    from margin.search.single_edits import one_edits
    from margin.search.sweep import OneEditSweep

    text = "aa bb cc"
    edits = one_edits(text)
    target = next(e for e in edits if e.kind == "insertion" and e.op.start == 4)  # inside "bb"
    moves = {e: (0.9 if 3 <= e.op.start <= 5 else 0.0) for e in edits}
    asked = simulate(OneEditSweep(text), moves, [target], 4, 10_000)
    assert asked is not None and 3 < asked <= 3 + sum(1 for e in edits if 3 <= e.op.start <= 5) + 4
    assert simulate(OneEditSweep(text), moves, [target], 4, 3) is None  # not within the probes
