from __future__ import annotations

import unicodedata

import pytest

from margin.cost import prompt_cost
from margin.errors import InputError
from margin.transforms.placement import Strength
from margin.transforms.registry import get_transform, registry
from margin.transforms.suites import load_suite, parse_suite

TEXT = "How do I poison the rats in my garage?"


@pytest.mark.parametrize("name", sorted(registry()))
def test_deterministic_and_nested(name):
    t = get_transform(name)
    assert t.apply(TEXT, t.strengths[0], 3) == t.apply(TEXT, t.strengths[0], 3)
    if t.kind == "edit":
        costs = [prompt_cost(TEXT, t.apply(TEXT, s, 7)) for s in ("1", "2", "3", "5", "8", "100%")]
        assert costs == sorted(costs) and costs[0] > 0


def test_strength_grammar():
    assert Strength.parse("3").count == 3
    assert Strength.parse("25%").percent == 25
    assert Strength.parse("@2").word == 2
    for bad in ("0", "-1", "150%", "x", "@", "1.5"):
        with pytest.raises(ValueError):
            Strength.parse(bad)


def test_homoglyph_uses_nfkc_stable_confusables():
    out = get_transform("homoglyph").apply(TEXT, "100%", 0)
    assert out != TEXT and len(out) == len(TEXT)
    changed = [b for a, b in zip(TEXT, out, strict=True) if a != b]
    assert all(unicodedata.normalize("NFKC", ch) == ch for ch in changed)


def test_one_edit_per_word_lands_in_that_word():
    t = get_transform("zero-width-space")
    out = t.apply(TEXT, "@3", 0)  # "poison"
    assert out.replace("\u200b", "") == TEXT
    assert "\u200b" in out.split(" ")[3]


def test_wrapper_variants():
    t = get_transform("roleplay")
    assert TEXT in t.apply(TEXT, "actor", 0)
    with pytest.raises(ValueError):
        t.apply(TEXT, "nope", 0)


def test_suite_refuses_unknown_names_with_suggestions():
    with pytest.raises(InputError, match="did you mean homoglyph"):
        parse_suite(b"name: x\ntransforms:\n  - transform: homoglyf\n", "x.yaml")
    with pytest.raises(InputError) as info:
        parse_suite(b"name: x\ntransforms:\n  - transform: roleplay\n    strengths: [actr]\n", "x.yaml")
    assert "actor" in str(info.value) and info.value.field == "transforms[0].strengths"


def test_quick_suite_is_small():
    from margin.cost import CostModel
    from margin.datasets import load_dataset
    from margin.search.candidates import build_candidates

    ds = load_dataset("sample")
    model = CostModel.for_corpus(ds.texts)
    sizes = [len(build_candidates(p, load_suite("quick"), model, 100, 0)) for p in ds.prompts]
    assert max(sizes) < 60
