from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from margin.cost import CostModel, edit_distance, prompt_cost
from tests.support.levenshtein import levenshtein


def test_hand_computed_corpus_cost():
    model = CostModel.for_corpus(["abcd", "abcdefgh"])  # mean length 6
    assert model.corpus_mean_length == 6
    assert model.cost("abcd", "abXd") == pytest.approx(100 / 6)
    assert model.cost("abcd", "Xabcd") == pytest.approx(100 / 6)
    assert model.cost("abcd", "abcd") == 0


def test_prompt_norm_divides_by_own_length():
    model = CostModel.for_corpus(["abcd", "abcdefgh"], norm="prompt")
    assert model.cost("abcd", "abXd") == pytest.approx(25.0)
    assert prompt_cost("abcdefgh", "abcdefg") == pytest.approx(12.5)


def test_astral_character_is_one_edit():
    assert edit_distance("abc", "a\U000E0041bc") == 1
    assert edit_distance("abc", "a\U0001F600bc") == 1


def test_wrapper_text_counts_in_full():
    assert edit_distance("hi", "Say: hi") == 5


def test_text_is_never_normalised():
    # é precomposed vs e + combining acute: two edits, not zero.
    assert edit_distance("\u00e9", "e\u0301") == 2
    assert edit_distance("a b", "a b ") == 1


def test_unknown_norm_refused():
    with pytest.raises(ValueError):
        CostModel.for_corpus(["a"], norm="tokens")  # type: ignore[arg-type]


@given(st.text(min_size=1), st.text())
def test_cost_is_non_negative_and_zero_only_for_equal(original, transformed):
    cost = prompt_cost(original, transformed)
    assert cost == pytest.approx(100 * levenshtein(original, transformed) / len(original))
    assert (cost == 0) == (original == transformed)
