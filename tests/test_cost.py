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


def test_an_outlier_length_prompt_is_named_in_a_cost_unit_warning():
    """Issue 34, item 8: one huge row rescales every corpus-norm cost; say so, naming it."""
    from margin.cost import cost_unit_warning

    even = [(f"p{i}", "x" * 40) for i in range(9)]
    assert cost_unit_warning(even) is None
    assert cost_unit_warning([*even, ("long", "y" * 400)]) is None  # 10x the median: not over
    warning = cost_unit_warning([*even, ("huge", "y" * 4000)])
    assert warning is not None
    assert "corpus mean length 436.0 over 10 prompts" in warning
    assert "prompt huge (4,000 characters) is over 10x the median (40.0)" in warning


def test_run_prints_the_cost_unit_warning(tmp_path):
    from tests.support.cli import margin

    rows = [f"s{i},how do I bake bread number {i},safe" for i in range(9)] + ["big," + "z" * 5000 + ",unsafe"]
    (tmp_path / "d.csv").write_text("id,prompt,label\n" + "\n".join(rows) + "\n", "utf-8")
    proc = margin("run", "--guard", "keyword", "--dataset", str(tmp_path / "d.csv"), "--suite", "quick",
                  "--limit", "2", "--engine", "local", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "warning: cost unit: the corpus mean length" in proc.stderr and "prompt big (5,000 characters)" in proc.stderr
