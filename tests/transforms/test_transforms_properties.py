"""Properties every transform must have, over arbitrary Unicode (astral planes and
combining marks included): deterministic, never raises, never makes a lone surrogate,
cost >= 0 and never falling as strength rises, additive transforms exactly additive."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from margin.cost import edit_distance
from margin.transforms.base import EditTransform
from margin.transforms.registry import get_transform, registry
from tests.support.levenshtein import levenshtein

EDIT_NAMES = sorted(n for n, t in registry().items() if t.kind == "edit")
WRAPPER_NAMES = sorted(n for n, t in registry().items() if t.kind == "wrapper")

# Any code point but surrogates, plus a mix that hits the interesting cases often: Latin
# words, combining marks, astral letters, format characters and the edits' own outputs.
MIX = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789  .,?'\n\u0301\u0332\u200b\u202e\U0001d41a\U0001f60a\u0430\uff41\U000e0061\U000e0151\u00e9"
texts = st.one_of(
    st.text(st.characters(exclude_categories=("Cs",)), max_size=40),
    st.text(st.sampled_from(MIX), max_size=60),
)
seeds = st.integers(-(2**40), 2**40)
COUNTS = ("1", "2", "3", "5", "8")
PERCENTS = ("10%", "25%", "50%", "100%")
EMPTYISH = ("", " ", "   ", "\n\t ", "\u3000", "\u200b")
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def has_lone_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def strengths_of(name: str) -> list[str]:
    t = get_transform(name)
    if t.kind == "wrapper":
        return list(t.strengths)
    ladder = [*COUNTS, *PERCENTS]
    return [*ladder, *(f"salient:{s}" for s in ladder), "@0", "@1", "@7"]


@pytest.mark.parametrize("name", sorted(registry()))
@pytest.mark.parametrize("text", EMPTYISH)
def test_empty_and_whitespace_text(name, text):
    for strength in strengths_of(name):
        out = get_transform(name).apply(text, strength, 0)
        assert isinstance(out, str) and not has_lone_surrogate(out)


@pytest.mark.parametrize("name", sorted(registry()))
@SETTINGS
@given(text=texts, seed=seeds)
def test_deterministic_no_surrogates_cost_nonnegative(name, text, seed):
    t = get_transform(name)
    for strength in strengths_of(name):
        out = t.apply(text, strength, seed)
        assert out == t.apply(text, strength, seed)
        assert not has_lone_surrogate(out)
        assert edit_distance(text, out) == levenshtein(text, out)  # code points, as the reference counts


@pytest.mark.parametrize("name", EDIT_NAMES)
@SETTINGS
@given(text=texts, seed=seeds)
@example(text="abababab", seed=0)  # swaps: the third undoes the cost of two (4 -> 2)
def test_nested_and_cost_never_falls(name, text, seed):
    t = get_transform(name)
    assert isinstance(t, EditTransform)
    for prefix in ("", "salient:"):
        ladder = [prefix + s for s in (*COUNTS, *PERCENTS)]
        chosen = sorted((t.chosen(text, s, seed) for s in ladder), key=len)
        for smaller, larger in zip(chosen, chosen[1:], strict=False):
            assert larger[: len(smaller)] == smaller  # strength k+1 holds k's edits
        costs = [edit_distance(text, t.render(text, positions, seed)) for positions in chosen]
        assert costs == sorted(costs)
        assert all(t.apply(text, s, seed) == t.render(text, t.chosen(text, s, seed), seed) for s in ladder)


@pytest.mark.parametrize("name", [n for n in EDIT_NAMES if get_transform(n).additive])
@SETTINGS
@given(text=texts, seed=seeds)
@example(text="aAaA bBbB abab baba", seed=0)  # would fail if substitutions reused the text's characters
@example(text="4a4a 5s5s \u0430a\u0430a", seed=1)
def test_additive_edits_cost_exactly_their_sum(name, text, seed):
    t = get_transform(name)
    assert isinstance(t, EditTransform)
    positions = t.chosen(text, "100%", seed)
    alone = [edit_distance(text, t.render(text, [p], seed)) for p in positions]
    assert all(cost > 0 for cost in alone)
    assert edit_distance(text, t.render(text, positions, seed)) == sum(alone)


@pytest.mark.parametrize("name", EDIT_NAMES)
@SETTINGS
@given(text=texts, seed=seeds, word=st.integers(0, 12))
def test_one_edit_per_word_lands_in_that_word(name, text, seed, word):
    t = get_transform(name)
    assert isinstance(t, EditTransform)
    chosen = t.chosen(text, f"@{word}", seed)
    assert len(chosen) <= 1
    if chosen:
        from margin.transforms.words import word_spans

        start, end = word_spans(text)[word]
        assert t.in_word(text, chosen[0], start, end)
        assert t.apply(text, f"@{word}", seed) != text


@pytest.mark.parametrize("name", sorted(registry()))
@SETTINGS
@given(text=texts, seed=seeds, order=st.randoms(use_true_random=False))
@example(text="abababab ba", seed=0, order=None)  # swaps skip positions; spans of two code points
def test_apply_many_is_apply_for_each_strength(name, text, seed, order):
    """Candidates are built with `apply_many` (one pass per ladder, going on from the last
    call's): it must give exactly what `apply` gives for each strength, in any order and
    split over calls in any way, repeats included."""
    strengths = strengths_of(name) * 2
    cut = len(strengths) // 3
    if order is not None:
        order.shuffle(strengths)
        cut = order.randrange(len(strengths) + 1)
    t = get_transform(name)
    many = t.apply_many(text, strengths[:cut], seed) + t.apply_many(text, strengths[cut:], seed)
    assert many == [t.apply(text, s, seed) for s in strengths]
