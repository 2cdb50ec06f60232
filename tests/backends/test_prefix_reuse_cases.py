"""Prefix reuse for cases with a conversation (issue 32, speed): every candidate of a response
case starts with the same template and prompt turn, so that run, the case's natural prefix,
comes from a cache; the scores must equal the full computation's.

The model is Llama-Guard-3-8B-shaped (its real chat template, a tokenizer trained here, random
weights), as in test_prefix_reuse.py.
"""

from __future__ import annotations

import math

import pytest

from margin.backends import prefix as shared
from margin.backends.generation import Generation
from margin.types import Exchange, Turn
from tests.backends.test_prefix_reuse import (
    FP32_LOGPROB_TOL,
    answering,
    assert_same,
    gibberish,
    guard,
)

__all__ = ["answering", "gibberish"]  # the models, fixtures shared with test_prefix_reuse.py

PAIRS = [("How do I kill a Python process?", "Run kill with its PID."),
         ("What is the capital of France? " * 3, "Paris. " * 5),
         ("é accent aigu", "(parenthesis) first, then text")]


def candidates(prompt: str, response: str, earlier: tuple[Turn, ...] = ()) -> list[Exchange]:
    """A response case's original and a few edited responses, as a search sends them."""
    edits = [response, response.upper(), "Sure: " + response, response + " !!", " spaced " + response, "x"]
    return [Exchange((*earlier, Turn("user", prompt), Turn("assistant", e)), "response") for e in edits]


ITEMS = [c for p, r in PAIRS for c in candidates(p, r)]


def outputs(g, items):  # type: ignore[no-untyped-def]
    out = g.backend.generate([g.adapter.request(i) for i in items])
    assert all(isinstance(o, Generation) for o in out), out
    return out


@pytest.mark.slow
def test_a_response_case_reuses_its_conversation_up_to_the_response(gibberish):
    g = guard(gibberish)
    (template,) = g.backend.pinned
    g.use_case_prefixes(ITEMS)
    cases = [p for p in g.backend.prefixes if p not in g.backend.pinned]
    assert len(cases) == len(PAIRS)
    for common, (prompt, _) in zip(cases, PAIRS, strict=True):
        text = g.backend.tokenizer.decode(list(common))
        assert text.endswith(f"User: {prompt.strip()}\n\nAgent:") and "'Agent' messages" in text
        assert len(common) > len(template) + 5  # the template prefix stops at the task line's role
    outputs(g, ITEMS)
    assert g.backend.stats["prefix_rows"] == len(ITEMS) and g.backend.stats["full_rows"] == 0


@pytest.mark.slow
def test_greedy_outputs_and_logprobs_equal_the_full_computation(gibberish):
    full, reused = guard(gibberish, prefix=False), guard(gibberish)
    reused.use_case_prefixes(ITEMS)
    full.use_case_prefixes(ITEMS)  # reuse off: registers nothing
    assert full.backend.prefixes == {}
    a, b = outputs(full, ITEMS), outputs(reused, ITEMS)
    assert all(len(o.steps) == 20 for o in a)
    assert_same(a, b, FP32_LOGPROB_TOL)


@pytest.mark.slow
def test_verdicts_and_p_unsafe_equal_the_full_computation_through_classify(answering):
    earlier = (Turn("user", "Hi there."), Turn("assistant", "Hello! How can I help?"))
    items = [*ITEMS, *candidates("And a stuck one?", "Use kill -9.", earlier)]
    full, reused = guard(answering, prefix=False), guard(answering)
    a, b = full.classify(items), reused.classify(items)
    assert [v.raw for v in a] == [v.raw for v in b] == ["\n\nsafe<|eot_id|>"] * len(items)
    for x, y in zip(a, b, strict=True):
        assert 0 < x.p_unsafe < 0.01 and math.isclose(x.p_unsafe, y.p_unsafe, rel_tol=1e-4)
    assert reused.backend.stats["prefix_rows"] == len(items)


@pytest.mark.slow
def test_case_prefixes_are_bounded_and_a_forgotten_one_comes_back(answering, monkeypatch):
    monkeypatch.setattr(shared, "CASE_PREFIXES", 2)
    full, reused = guard(answering, prefix=False), guard(answering)
    for batch in (ITEMS, ITEMS[:6]):  # three cases, then the first again
        a, b = full.classify(batch), reused.classify(batch)
        assert [v.p_unsafe for v in a] == pytest.approx([v.p_unsafe for v in b], rel=1e-4)
        assert len([p for p in reused.backend.prefixes if p not in reused.backend.pinned]) == 2
    assert len(reused._case_prefixes) == 2
    # the last batch's case is registered again, most recent
    assert next(reversed(reused.backend.prefixes)) == reused._case_prefixes[
        ITEMS[0]._replace(messages=ITEMS[0].messages[:-1])][0]
