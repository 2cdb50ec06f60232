"""`salient` order: where a guard-blind suite puts its edits first.

Words are ranked by a fixed, guard-free heuristic: content words before function words
(`data/function_words.txt`), then longer before shorter, then rarer before commoner
(wordfreq's English Zipf frequency, a frozen data release), then text order. Edits then
go round the ranked words: one position in each word in rank order, then a second
position in each, and so on; which position inside a word comes first is seeded.
Positions outside every word come last, in seeded order.

The order depends on the text and the seed only, so the suite is the same for every guard.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable, Sequence
from importlib import resources

from margin.transforms.draws import seeded_order, shuffled
from margin.transforms.words import word_spans


@functools.cache
def function_words() -> frozenset[str]:
    text = resources.files("margin").joinpath("transforms", "data", "function_words.txt").read_text("utf-8")
    return frozenset(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")
    )


@functools.lru_cache(maxsize=65536)
def zipf(word: str) -> float:
    """English Zipf frequency (0 for unknown words); higher is commoner."""
    from wordfreq import zipf_frequency  # imported on first use: it loads its word lists

    try:
        return float(zipf_frequency(word, "en"))
    except Exception:  # wordfreq's tokenizer on odd Unicode: treat the word as unknown
        return 0.0


def salience_key(word: str, index: int) -> tuple[bool, int, float, int]:
    folded = word.casefold()
    return (folded in function_words(), -len(word), zipf(folded), index)


@functools.lru_cache(maxsize=1024)
def _ranked(text: str) -> tuple[int, ...]:
    spans = word_spans(text)
    keys = [salience_key(text[start:end], i) for i, (start, end) in enumerate(spans)]
    return tuple(key[-1] for key in sorted(keys))


def ranked_words(text: str) -> list[int]:
    """Indices of `word_spans(text)`, most salient first."""
    return list(_ranked(text))


def salient_order(
    text: str, positions: Sequence[int], span: Callable[[int], tuple[int, int]], seed: int
) -> list[int]:
    """`positions` in salient order (see the module doc)."""
    spans = word_spans(text)
    by_word: dict[int, list[int]] = {}
    outside: list[int] = []
    word_of = _word_index(spans)
    for p in positions:
        lo, hi = span(p)
        index = word_of(lo, hi)
        if index is None:
            outside.append(p)
        else:
            by_word.setdefault(index, []).append(p)
    queues = []
    for index in ranked_words(text):
        if index in by_word:
            queues.append(shuffled(by_word[index], seed, "salient", index))
    order: list[int] = []
    for round_ in range(max((len(q) for q in queues), default=0)):
        order.extend(q[round_] for q in queues if round_ < len(q))
    return order + seeded_order(outside, seed)


def _word_index(spans: list[tuple[int, int]]) -> Callable[[int, int], int | None]:
    """A lookup from an edit span to the index of the word that holds it (or None)."""
    starts = [start for start, _ in spans]

    def lookup(lo: int, hi: int) -> int | None:
        i = bisect.bisect_right(starts, lo) - 1
        if i >= 0 and spans[i][0] <= lo and hi <= spans[i][1]:
            return i
        return None

    return lookup
