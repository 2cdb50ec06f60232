"""Stacks of single edits: the strongest measured edit of each word, words best first.

A one-edit variant that moves the guard toward a flip without flipping it is half a flip:
the strongest such edits of two or three different words, made together, often flip where
no one edit does. That is how character-level attacks such as DeepWordBug and TextBugger
break a prompt (rank the words, then edit them one after another until the verdict turns);
adaptive search asks the same stacks from the moves it has already measured, so a stack
costs a call each and no ranking calls (`PlannedSearch._stack`). Pure: it never asks the guard.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from margin.search.edits import Op, conflicts
from margin.transforms.words import word_spans

#: the most words a stack takes (the stacks asked are its prefixes of two words or more)
STACK_WORDS = 6


def word_of(spans: Sequence[tuple[int, int]], position: int) -> int:
    """The word an edit at `position` belongs to: the one containing it (an insertion at a
    word's end belongs to that word), else the next word, else the last."""
    for index, (_, end) in enumerate(spans):
        if position <= end:
            return index
    return len(spans) - 1


def ranked_per_word(gains: Mapping[Op, float], text: str) -> list[list[Op]]:
    """Each word's single edits by gain (how far each moved the guard toward a flip, per unit
    of cost as `PlannedSearch._stack` gives it; gains above 0 only), strongest first, and the
    words in the order of their strongest edit; ties go to the edit earlier in the text."""
    spans = word_spans(text) or [(0, len(text))]
    by_word: dict[int, list[tuple[float, Op]]] = {}
    for op, gain in gains.items():
        if gain > 0:  # not a move away from a flip, none, or no score (NaN)
            by_word.setdefault(word_of(spans, op.start), []).append((-gain, op))
    ranked = [sorted(edits) for edits in by_word.values()]
    return [[op for _, op in edits] for edits in sorted(ranked, key=lambda edits: edits[0])]


def strongest_per_word(gains: Mapping[Op, float], text: str) -> list[Op]:
    """Each word's strongest single edit (`ranked_per_word`), strongest first."""
    return [edits[0] for edits in ranked_per_word(gains, text)]


def additions(stack: Sequence[Op], ranked: Sequence[Sequence[Op]], text: str, per_word: int = 2,
              width: int = 8) -> list[Op]:
    """The edits to try on top of `stack`, strongest first: of the words `ranked_per_word`
    ranked, the top `per_word` edits of each the stack leaves untouched, at most `width`,
    none touching the stack's code points."""
    spans = word_spans(text) or [(0, len(text))]
    taken = {word_of(spans, op.start) for op in stack}
    out: list[Op] = []
    for edits in ranked:
        if word_of(spans, edits[0].start) in taken:
            continue
        out.extend(op for op in edits[:per_word] if not conflicts([*stack, op], text))
    return out[:width]


def stacks(gains: Mapping[Op, float], text: str, words: int = STACK_WORDS) -> list[list[Op]]:
    """The stacks to ask, fewest edits first: the strongest edits of the top 2, 3, ...,
    `words` words (an edit that would touch another's code points is passed over)."""
    chosen: list[Op] = []
    for op in strongest_per_word(gains, text):
        if len(chosen) == words:
            break
        if not conflicts([*chosen, op], text):
            chosen.append(op)
    return [chosen[:k] for k in range(2, len(chosen) + 1)]
