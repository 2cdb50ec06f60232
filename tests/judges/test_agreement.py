"""Cohen's kappa and its bootstrap interval, on cases worked by hand."""

from __future__ import annotations

import pytest

from margin.judges import agreement as ag


def test_kappa_of_a_hand_worked_case():
    # p_o = 3/4; p_e = (2/4)(1/4) + (2/4)(3/4) = 1/2; kappa = (3/4 - 1/2) / (1 - 1/2) = 1/2
    assert ag.cohen_kappa(["a", "a", "b", "b"], ["a", "b", "b", "b"]) == pytest.approx(0.5)


def test_kappa_of_the_textbook_example():
    # 50 cases: both yes 20, A yes B no 5, A no B yes 10, both no 15. p_o = 0.7, p_e = 0.5, kappa 0.4.
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert ag.cohen_kappa(a, b) == pytest.approx(0.4)
    assert ag.accuracy(a, b) == pytest.approx(0.7)


def test_a_class_only_one_rater_uses_counts_against_agreement():
    # truth never says `invalid`: p_o = 2/4, p_e = (2/4)(1/4) + (2/4)(1/4) = 1/4, kappa = 1/3
    kappa = ag.cohen_kappa(["c", "c", "r", "r"], ["c", "invalid", "r", "invalid"])
    assert kappa == pytest.approx(1 / 3)


def test_kappa_is_undefined_where_chance_agreement_is_certain_and_negative_below_chance():
    assert ag.cohen_kappa(["a", "a"], ["a", "a"]) is None
    assert ag.cohen_kappa([], []) is None
    assert ag.cohen_kappa(["a", "b"], ["b", "a"]) == pytest.approx(-1.0)


def test_the_interval_is_a_seeded_percentile_bootstrap_over_cases():
    truth = ["c"] * 30 + ["r"] * 30
    judged = ["c"] * 25 + ["r"] * 5 + ["r"] * 27 + ["c"] * 3
    first = ag.agreement(truth, judged, replicates=400)
    again = ag.agreement(truth, judged, replicates=400)
    assert first == again  # fixed seed: the same interval every time
    kappa = first["kappa"]
    assert kappa.estimate == pytest.approx(ag.cohen_kappa(truth, judged))
    assert kappa.low < kappa.estimate < kappa.high
    assert kappa.low > 0.5 and kappa.high < 0.95
    assert first["accuracy"].estimate == pytest.approx(52 / 60)
    other_seed = ag.agreement(truth, judged, replicates=400, seed=1)
    assert other_seed["kappa"] != kappa  # the seed is what fixes it
    perfect = ag.agreement(truth, truth, replicates=50)
    assert (perfect["kappa"].low, perfect["kappa"].high) == (1.0, 1.0)


def test_the_confusion_matrix_counts_every_case():
    assert ag.confusion(["c", "c", "r"], ["c", "invalid", "r"]) == {"c": {"c": 1, "invalid": 1}, "r": {"r": 1}}
