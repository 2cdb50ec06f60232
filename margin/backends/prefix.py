"""Shared template prefixes: which tokens every rendered request of a guard starts with.

A guard wraps each text in the same template, and for most families the long part (Llama
Guard's categories, a policy) comes before the text. The prefix is found by rendering the
template around a few probe texts that differ from their first character and taking the
longest common run of token ids. A request then shares the prefix only when its own full
tokenisation starts with exactly those ids: the suffix is never tokenised on its own, so a
tokenizer merge across the boundary (a text starting with a character that joins the
template's last token) cannot change what the model sees; such a request simply runs whole.

A case with turns before its target (a response after its prompt, a conversation) has a longer
natural prefix: the template and every turn up to the target's text, which all of its
candidates share. It is found the same way, with the probes in the target turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Probe texts that differ from their first character on: a letter, a capital and a digit, a
# punctuation mark, a non-ASCII letter and a space (which templates that strip drop).
PROBES = ("a", "Z 9", "0?", "(x)", "é", " b")
# A shorter shared prefix is not worth a cache: the copy per batch costs about what it saves.
MIN_PREFIX_TOKENS = 16
# Cases' own prefixes (their conversations up to the target turn) kept at once, with their
# caches: enough for the searches a run has in flight; an 8B model's cache of a 400-token
# prefix is about 50 MB.
CASE_PREFIXES = 64


def common_prefix(sequences: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The longest run of ids every sequence starts with."""
    if not sequences:
        return ()
    first = sequences[0]
    n = min(len(s) for s in sequences)
    for i in range(n):
        token = first[i]
        if any(s[i] != token for s in sequences[1:]):
            return tuple(first[:i])
    return tuple(first[:n])


def match(ids: Sequence[int], prefixes: Sequence[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The longest of `prefixes` that `ids` starts with and goes on after; None if none does."""
    best: tuple[int, ...] | None = None
    for prefix in prefixes:
        n = len(prefix)
        if len(ids) > n and (best is None or n > len(best)) and tuple(ids[:n]) == prefix:
            best = prefix
    return best


def cache_is_exact(model: Any) -> str | None:
    """Why a cached prefix would not reproduce `model`'s full computation, or None when it does.

    A prefix's keys and values equal the full computation's only when every layer attends to
    every earlier token through a plain key/value cache. Sliding-window, chunked, linear or
    recurrent layers keep a different state, and encoder-decoder models have no causal prefix.
    """
    config = model.config
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    if getattr(config, "is_encoder_decoder", False):
        return "an encoder-decoder model"
    supports = getattr(model, "_supports_default_dynamic_cache", None)
    if supports is not None and not supports():
        return "the model keeps no key/value cache of its own"
    types = getattr(text, "layer_types", None)
    if types and any(t != "full_attention" for t in types):
        return f"layers of types {sorted({t for t in types if t != 'full_attention'})}"
    if not types and getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True):
        return "sliding-window attention"
    if getattr(text, "attention_chunk_size", None):
        return "chunked attention"
    return None
