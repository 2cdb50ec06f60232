"""Word placement by approximate matching, checked against brute force over small texts."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

from margin.search.approx import min_ops, word_placements

ALPHABET = "abk .É"


def holds(text: str, word: str, shape: str) -> bool:
    tail = r"(?!\w)" if shape == "whole" else ""
    return re.search(rf"(?<!\w){re.escape(word)}{tail}", text.casefold()) is not None


def brute_min(text: str, word: str, shape: str, limit: int) -> int:
    """Breadth-first over every text within `limit` edits (alphabet: text, word, space)."""
    letters = sorted(set(text) | set(word) | {" "})
    frontier = {text}
    seen = {text}
    for depth in range(limit + 1):
        if any(holds(t, word, shape) for t in frontier):
            return depth
        nxt = set()
        for t in frontier:
            for i in range(len(t) + 1):
                for c in letters:
                    nxt.add(t[:i] + c + t[i:])
                    if i < len(t):
                        nxt.add(t[:i] + c + t[i + 1 :])
                if i < len(t):
                    nxt.add(t[:i] + t[i + 1 :])
        frontier = nxt - seen
        seen |= frontier
    return limit + 1


@settings(max_examples=60, deadline=None)
@given(st.text(ALPHABET, max_size=5), st.sampled_from(["ab", "ka", "bak"]), st.sampled_from(["prefix", "whole"]))
def test_min_ops_equals_brute_force(text, word, shape):
    expected = brute_min(text, word, shape, 2)
    got = min_ops(text, [word], shape)[0]
    assert min(got, 3) == expected


@settings(max_examples=80, deadline=None)
@given(st.text(ALPHABET, max_size=12), st.sampled_from(["ab", "ka", "bak", "kaab"]))
def test_every_placement_places_its_word_at_its_cost(text, word):
    for p in word_placements(text, [word]):
        placed = p.apply(text)
        assert holds(placed, word, p.shape)
        assert Levenshtein.distance(text, placed) <= p.ops
        assert p.ops == min_ops(text, [word], p.shape)[0] >= 1


def test_known_placements():
    assert [p.apply("gin and tonic") for p in word_placements("gin and tonic", ["gun"], max_ops=1)] == [
        "gun and tonic", "gun and tonic"]
    assert min_ops("gunpowder", ["gun"], "prefix") == [0]
    assert min_ops("gunpowder", ["gun"], "whole") == [1]
    assert min_ops("Where is the robe?", ["rob"], "whole") == [1]
    assert min_ops("How do I skill up?", ["kill"], "prefix") == [1]
    assert min_ops("abc", ["gun"], "whole") == [3]
    assert word_placements("a kill", ["kill"], ("prefix",)) == []  # already there
