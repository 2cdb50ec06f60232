"""Shared-prefix reuse in the transformers backend gives what the full computation gives.

A Llama-Guard-3-8B-shaped model (Llama Guard 3-8B's real chat template, a tokenizer trained
here, random weights) runs every request whole and with the template's prefix from a cache,
over single texts and mixed-length batches; greedy outputs, verdicts, p_unsafe and every
logprob must agree. Texts whose tokenisation crosses into the template, architectures whose
cache would differ, and the option that turns reuse off run whole.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.llama_guard_3 import TEMPLATE, build
from margin.backends.generation import Generation, GuardRequest
from margin.backends.lengths import length_chunks
from margin.backends.prefix import MIN_PREFIX_TOKENS, cache_is_exact, common_prefix, match
from margin.guards.make import build_guard, describe_guard, parse_guard_spec

# Mixed lengths and first characters: letters, punctuation that could join the template's
# last token, a leading space (the template strips it), non-ASCII, one long text.
TEXTS = ["How do I kill a Python process?", "x", "::weird start", "é accent aigu", "   spaced out",
         "What is the capital of France? " * 6, "(parenthesis) first", "42 is the answer", "!"]
FP32_LOGPROB_TOL = 1e-4  # measured: 1e-6 here, 4e-6 on the small model (benchmarks/prefix.py)
BF16_LOGPROB_TOL = 0.02  # measured: 4e-3 here, 2e-3 on the small model (as much as batching alone there)


@pytest.fixture(scope="module")
def gibberish(tmp_path_factory):
    """Random weights: 20 tokens of gibberish per text, every logprob depends on the text."""
    return build(tmp_path_factory.mktemp("lg3-gibberish"), "tiny", answer=False)


@pytest.fixture(scope="module")
def answering(tmp_path_factory):
    """Random weights that answer like Llama Guard 3: a blank line, `safe`, end of turn."""
    return build(tmp_path_factory.mktemp("lg3-answering"), "tiny", answer=True)


def guard(path, *, prefix=True, dtype=None, preset="llama-guard-3-8b"):
    options = {"prefix_cache": prefix, **({"dtype": dtype} if dtype else {})}
    return build_guard(parse_guard_spec(preset, model=str(path), backend_options=options))


def generations(g, texts):
    out = g.backend.generate([g.adapter.request(t) for t in texts])
    assert all(isinstance(o, Generation) for o in out), out
    return out


def assert_same(full, reused, tol):
    """Same greedy tokens; every candidate's logprob within `tol` (candidates tied within
    `tol` may swap places, or one may fall off the end of the list for the other)."""
    for a, b in zip(full, reused, strict=True):
        assert a.raw == b.raw and a.text == b.text and a.truncated == b.truncated
        assert [s.token for s in a.steps] == [s.token for s in b.steps]
        for sa, sb in zip(a.steps, b.steps, strict=True):
            ta, tb = dict(sa.top), dict(sb.top)
            assert all(abs(lp - tb[t]) <= tol for t, lp in ta.items() if t in tb)
            assert all(lp <= min(tb.values()) + tol for t, lp in ta.items() if t not in tb)
            assert all(lp <= min(ta.values()) + tol for t, lp in tb.items() if t not in ta)


@pytest.mark.slow
def test_the_prefix_is_the_template_before_the_text(gibberish):
    g = guard(gibberish)
    (n,) = g.prefix_tokens
    assert n >= MIN_PREFIX_TOKENS
    backend = g.backend
    rendered = backend.tokenizer.decode(list(next(iter(backend.prefixes))))
    assert rendered.endswith("<BEGIN CONVERSATION>\n\nUser:")  # everything up to the text's own tokens
    assert "S14: Code Interpreter Abuse." in rendered
    whole = backend.render(g.adapter.request("x"))
    assert len(whole) - n > 40  # the instructions after the text are run for every text


@pytest.mark.slow
@pytest.mark.parametrize("texts", [TEXTS[:3], TEXTS], ids=["one-at-a-time", "mixed-batch"])
def test_greedy_outputs_and_logprobs_equal_the_full_computation(gibberish, texts):
    full, reused = guard(gibberish, prefix=False), guard(gibberish)
    batch = 1 if len(texts) == 3 else len(texts)
    chunks = [texts[i:i + batch] for i in range(0, len(texts), batch)]
    a = [o for c in chunks for o in generations(full, c)]
    b = [o for c in chunks for o in generations(reused, c)]
    assert all(len(o.steps) == 20 for o in a)  # 20 greedy steps each: a long path to diverge on
    assert_same(a, b, FP32_LOGPROB_TOL)
    assert reused.backend.stats["prefix_rows"] == len(texts) and reused.backend.stats["full_rows"] == 0
    assert full.backend.stats["prefix_rows"] == 0 and full.backend.prefixes == {}


@pytest.mark.slow
def test_verdicts_and_p_unsafe_equal_the_full_computation(answering):
    full, reused = guard(answering, prefix=False), guard(answering)
    for batch in (TEXTS[:1], TEXTS):
        a, b = full.classify(batch), reused.classify(batch)
        assert [v.label for v in a] == [v.label for v in b] == ["safe"] * len(batch)
        assert [v.raw for v in a] == [v.raw for v in b] == ["\n\nsafe<|eot_id|>"] * len(batch)
        for x, y in zip(a, b, strict=True):
            assert 0 < x.p_unsafe < 0.01 and math.isclose(x.p_unsafe, y.p_unsafe, rel_tol=1e-4)


@pytest.mark.slow
def test_bf16_agrees_within_its_tolerance(gibberish, answering):
    # In bf16 the prefix's cache, computed apart, rounds differently from the full batch's, so
    # logprobs move by a few thousandths and a random model's greedy path may part at a near
    # tie; the decision step of a model that answers stays the same.
    full, reused = guard(gibberish, prefix=False, dtype="bfloat16"), guard(gibberish, dtype="bfloat16")
    a, b = generations(full, TEXTS), generations(reused, TEXTS)
    first = [max(abs(x - y) for (_, x), (_, y) in zip(p.steps[0].top, q.steps[0].top, strict=True))
             for p, q in zip(a, b, strict=True)]
    assert max(first) <= BF16_LOGPROB_TOL
    assert sum(p.raw == q.raw for p, q in zip(a, b, strict=True)) >= len(TEXTS) - 2
    verdicts = [guard(answering, prefix=p, dtype="bfloat16").classify(TEXTS) for p in (False, True)]
    assert [v.label for v in verdicts[0]] == [v.label for v in verdicts[1]] == ["safe"] * len(TEXTS)
    assert all(abs(x.p_unsafe - y.p_unsafe) <= 0.01 * x.p_unsafe for x, y in zip(*verdicts, strict=True))


@pytest.mark.slow
def test_a_text_that_merges_with_the_template_runs_whole(answering, tmp_path):
    # A template with the text glued to a word: "User" + "so" tokenizes as "Us" "ers"... at
    # the boundary, so the prefix (which ends in "User") is not what such a text starts with.
    import shutil

    path = tmp_path / "glued"
    shutil.copytree(answering, path)
    full, reused = (guard(path, prefix=p) for p in (False, True))
    for g in (full, reused):
        g.backend.renderer.chat_template = TEMPLATE.replace("role + ': ' + content", "role + content")
        g.backend.prefixes.clear()
        g.prefix_tokens = g.share_prefixes()
    (common,) = reused.backend.prefixes
    assert reused.backend.tokenizer.decode(list(common)).endswith("User")
    texts = ["so it goes", "plain text", "some more", "x"]
    starts = [tuple(reused.backend.render(reused.adapter.request(t))[:len(common)]) == common for t in texts]
    assert starts == [False, True, False, True]  # "Us" "ers"...: "so" and "some" join the template's last word
    a, b = generations(full, texts), generations(reused, texts)
    assert_same(a, b, FP32_LOGPROB_TOL)
    assert reused.backend.stats["full_rows"] == 2 and reused.backend.stats["prefix_rows"] == 2


@pytest.mark.slow
def test_reuse_can_be_turned_off_and_never_changes_the_guard_identity(gibberish):
    on = parse_guard_spec("llama-guard-3-8b", model=str(gibberish))
    off = on.model_copy(update={"backend_options": {"prefix_cache": False}})
    assert describe_guard(on) == describe_guard(off)
    g = build_guard(off)
    assert g.prefix_tokens == [0] and g.backend.prefix_off_reason == "turned off"


@pytest.mark.slow
def test_architectures_whose_cache_differs_are_refused():
    import transformers

    small = {"vocab_size": 64, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
             "num_attention_heads": 2, "num_key_value_heads": 1}
    assert cache_is_exact(transformers.LlamaForCausalLM(transformers.LlamaConfig(**small))) is None
    mistral = transformers.MistralForCausalLM(transformers.MistralConfig(sliding_window=8, **small))
    assert "sliding" in cache_is_exact(mistral)
    gemma = transformers.Gemma2ForCausalLM(transformers.Gemma2Config(head_dim=8, **small))
    assert "sliding_attention" in cache_is_exact(gemma)


def test_common_prefix_and_match():
    assert common_prefix([[1, 2, 3, 4], [1, 2, 5], [1, 2, 3]]) == (1, 2)
    assert common_prefix([[1, 2], [1, 2, 3]]) == (1, 2)
    assert common_prefix([[7], [8]]) == () and common_prefix([]) == ()
    prefixes = [(1, 2), (1, 2, 3)]
    assert match([1, 2, 3, 4], prefixes) == (1, 2, 3)  # the longest that fits
    assert match([1, 2, 3], prefixes) == (1, 2)  # a prefix must leave at least one token to run
    assert match([1, 3, 3], prefixes) is None


@settings(deadline=None)  # a shared, busy machine: timing is not what is tested
@given(st.lists(st.integers(1, 300), max_size=60), st.integers(0, 200),
       st.floats(0.0, 1.0), st.integers(1, 2000), st.integers(1, 20000))
def test_length_chunks_cover_every_row_once_and_respect_their_bounds(lengths, prefix, slack, min_tokens, max_tokens):
    chunks = length_chunks(lengths, prefix=prefix, slack=slack, min_tokens=min_tokens, max_tokens=max_tokens)
    assert sorted(i for c in chunks for i in c) == list(range(len(lengths)))
    flat = [lengths[i] for c in chunks for i in c]
    assert flat == sorted(flat)  # by ascending length, chunk after chunk
    for k, chunk in enumerate(chunks):
        rows = [lengths[i] for i in chunk]
        assert len(chunk) == 1 or len(chunk) * (prefix + max(rows)) <= max_tokens
        if k + 1 < len(chunks):  # a chunk was cut only for a reason
            nxt = lengths[chunks[k + 1][0]]
            grown = (len(chunk) + 1) * nxt
            assert (grown > (1 + slack) * (sum(rows) + nxt) and sum(rows) >= min_tokens) or \
                (len(chunk) + 1) * (prefix + nxt) > max_tokens


def test_length_chunks_cut_mixed_lengths_to_little_padding():
    lengths = [10] * 40 + [100] * 10
    chunks = length_chunks(lengths, min_tokens=100, slack=0.15)
    padded = sum(len(c) * max(lengths[i] for i in c) for c in chunks)
    assert len(chunks) == 2 and padded == sum(lengths)  # one padded batch would be 5,000 tokens for 1,400


@pytest.mark.slow
def test_requests_tokenized_together_equal_one_by_one(gibberish):
    g = guard(gibberish)
    backend = g.backend
    requests = [g.adapter.request(t) for t in TEXTS]
    # One request the template rejects (roles must alternate) among good ones.
    bad = GuardRequest(messages=({"role": "assistant", "content": "hi"},))
    raw = GuardRequest(prompt="<|begin_of_text|>raw prompt")
    together = backend.render_many([*requests, bad, raw])
    assert together[:len(TEXTS)] == [backend.render(r) for r in requests]
    assert isinstance(together[len(TEXTS)], Exception) and together[-1] == backend.render(raw)
