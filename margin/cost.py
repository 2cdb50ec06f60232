"""Cost of a transformation: code-point Levenshtein distance per 100 original characters.

The distance counts insertions, deletions and substitutions of Unicode code points (one
astral character is one). Text is compared exactly as given: never trimmed or normalised.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from rapidfuzz.distance import Levenshtein

CostNorm = Literal["corpus", "prompt"]
COST_NORMS: tuple[CostNorm, ...] = ("corpus", "prompt")


def edit_distance(original: str, transformed: str) -> int:
    return Levenshtein.distance(original, transformed)


def mean_length(texts: Iterable[str]) -> float:
    lengths = [len(t) for t in texts]
    if not lengths:
        raise ValueError("mean_length of an empty corpus")
    return sum(lengths) / len(lengths)


OUTLIER_RATIO = 10.0  # a prompt this many times the median length is an outlier for the corpus unit


def cost_unit_warning(prompts: Iterable[tuple[str, str]]) -> str | None:
    """For the `corpus` norm: a warning naming the longest prompt (id, text) when it is an outlier
    (over OUTLIER_RATIO x the median length), since it alone can scale every prompt's cost; else None."""
    items = list(prompts)
    if not items:
        return None
    median = statistics.median(len(text) for _, text in items)
    longest_id, longest = max(items, key=lambda item: len(item[1]))
    if median <= 0 or len(longest) <= OUTLIER_RATIO * median:
        return None
    return (f"cost unit: the corpus mean length {mean_length(t for _, t in items):,.1f} over {len(items):,} prompts; "
            f"prompt {longest_id} ({len(longest):,} characters) is over {OUTLIER_RATIO:g}x the median "
            f"({median:,.1f}) and scales every cost (--cost-norm prompt divides by each prompt's own length)")


@dataclass(frozen=True, slots=True)
class CostModel:
    """`corpus`: divide by the mean code-point length of the corpus's original prompts.
    `prompt`: divide by the length of the prompt being transformed."""

    norm: CostNorm
    corpus_mean_length: float

    @classmethod
    def for_corpus(cls, texts: Iterable[str], norm: CostNorm = "corpus") -> CostModel:
        if norm not in COST_NORMS:
            raise ValueError(f"unknown cost norm {norm!r}; expected one of {COST_NORMS}")
        return cls(norm=norm, corpus_mean_length=mean_length(texts))

    def denominator(self, original: str) -> float:
        return float(len(original)) if self.norm == "prompt" else self.corpus_mean_length

    def cost(self, original: str, transformed: str) -> float:
        return edit_distance(original, transformed) * 100.0 / self.denominator(original)


def prompt_cost(original: str, transformed: str) -> float:
    """Cost of one transformation against its own text (the `prompt` norm)."""
    if not original:
        raise ValueError("cost is undefined for an empty original text")
    return edit_distance(original, transformed) * 100.0 / len(original)
