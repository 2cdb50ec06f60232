"""The built-in suites: what they hold and how many candidates they make per prompt."""

from __future__ import annotations

import pytest

from margin.cost import CostModel
from margin.datasets import load_dataset
from margin.errors import InputError
from margin.search.candidates import build_candidates
from margin.transforms.registry import get_transform, registry
from margin.transforms.suites import EACH_WORD, load_suite, parse_suite
from margin.transforms.words import word_spans


def test_standard_has_one_candidate_per_word_for_every_edit_family():
    suite = load_suite("standard")
    per_word = {get_transform(e.transform).family for e in suite.entries if EACH_WORD in e.strengths}
    edit_families = {t.family for t in registry().values() if t.kind == "edit"}
    assert per_word == edit_families
    named = {e.transform for e in suite.entries}
    assert named == set(registry())  # every transform is in the standard suite


def test_one_edit_candidates_reach_every_word():
    prompt = load_dataset("sample").prompts[0]
    model = CostModel.for_corpus([prompt.text])
    texts = {c.text for c in build_candidates(prompt, load_suite("standard"), model, 100.0, 0)}
    for entry in load_suite("standard").entries:
        if EACH_WORD not in entry.strengths:
            continue
        t = get_transform(entry.transform)
        for i in range(len(word_spans(prompt.text))):
            out = t.apply(prompt.text, f"@{i}", 0)
            assert out == prompt.text or out in texts  # in the suite (or the same text, deduplicated)


@pytest.mark.parametrize(("yaml_text", "hint", "field"), [
    ("transforms:\n  - transform: homoglyf\n", "did you mean homoglyph", "transforms[0]"),
    ("transforms:\n  - transform: zero-width-space\n    strengths: [salient:3x]\n", "salient:3", "transforms[0].strengths"),
    ("transforms:\n  - transform: leetspeak\n    strengths: ['@x']\n", "@*", "transforms[0].strengths"),
    ("transforms:\n  - transform: bidi-wrap\n    strengths: [lr0]\n", "lro", "transforms[0].strengths"),
    ("transforms:\n  - transform: bidi-wrap\n    strengths: ['@*']\n", "lro", "transforms[0].strengths"),
    ("transforms:\n  - transform: leetspeak\n    strengths: '25%'\n", "non-empty list", "transforms[0].strengths"),
])
def test_suite_refuses_unknown_names_with_closest(yaml_text, hint, field):
    with pytest.raises(InputError) as info:
        parse_suite(("name: x\n" + yaml_text).encode(), "x.yaml")
    assert hint in str(info.value) and info.value.field == field and info.value.path == "x.yaml"
