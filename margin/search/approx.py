"""Fewest edits that make a word appear in a text: approximate matching at word boundaries.

For a pattern word v, `word_placements` finds the cheapest ways (in code-point Levenshtein
operations) to rewrite a span of the text so that v starts a word there (`prefix` shape: a
word boundary, then v) or stands alone (`whole` shape: boundary, v, boundary). It is Sellers'
approximate string matching, free at both ends of the text, with a boundary class that
matches any non-word character or either end of the text. Matching is case-insensitive.

The same routine serves two masters: adaptive search turns harmless words into probe words,
and the exact-optimum solver measures how far a safe prompt is from a lexicon's trigger.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

Shape = Literal["prefix", "whole"]
WORD_CHAR = re.compile(r"\w")
BOUNDARY = -1  # pattern code for "a non-word character or an end of the text"
PAD = -2  # pattern code past a shorter pattern's end
INF = 1 << 20
CHUNK = 64  # patterns per distance table, so long texts stay small in memory


@dataclass(frozen=True, slots=True)
class Placement:
    """Replace text[start:end] with `replacement` (costing `ops` edits) to place `word`."""

    word: str
    shape: Shape
    ops: int
    start: int
    end: int
    replacement: str

    def apply(self, text: str) -> str:
        return text[: self.start] + self.replacement + text[self.end :]


def fold(ch: str) -> str:
    folded = ch.casefold()
    return folded if len(folded) == 1 else ch


def pattern_codes(word: str, shape: Shape) -> list[int]:
    codes = [BOUNDARY, *(ord(fold(c)) for c in word)]
    return [*codes, BOUNDARY] if shape == "whole" else codes


def word_placements(
    text: str, words: Sequence[str], shapes: Sequence[Shape] = ("prefix", "whole"),
    max_ops: int | None = None, per_pattern: int = 2,
) -> list[Placement]:
    """The cheapest placements of every word in every shape, with 1 <= ops <= max_ops
    (default: the word's length + 1). A pattern the text already holds gives none. Each
    pattern keeps at most `per_pattern` placements of its least ops, over disjoint spans,
    leftmost first; the list is ordered by (ops, word index, shape, start)."""
    patterns = [(w, s, pattern_codes(w, s)) for w in words for s in shapes if w]
    out: list[Placement] = []
    for first in range(0, len(patterns), CHUNK):
        out.extend(_placements(text, patterns[first : first + CHUNK], max_ops, per_pattern))
    order = {w: i for i, w in enumerate(words)}
    out.sort(key=lambda p: (p.ops, order[p.word], p.shape, p.start, p.end, p.replacement))
    return out


def _placements(text: str, patterns: Sequence[tuple[str, Shape, list[int]]], max_ops: int | None,
                per_pattern: int) -> list[Placement]:
    table, codes = _distance_table(text, [p for _, _, p in patterns])
    out: list[Placement] = []
    for index, (word, shape, pattern) in enumerate(patterns):
        last = table[len(pattern), index]
        best = int(last.min())
        limit = len(word) + 1 if max_ops is None else max_ops
        if best == 0 or best > limit:
            continue
        taken: set[int] = set()
        kept = 0
        for j in range(len(last)):
            if int(last[j]) != best:
                continue
            placement = _backtrack(text, codes, table[:, index], pattern, j, word, shape)
            cells = set(range(placement.start, max(placement.end, placement.start + 1)))
            if cells & taken:
                continue
            taken |= cells
            out.append(placement)
            kept += 1
            if kept >= per_pattern:
                break
    return out


def min_ops(text: str, words: Sequence[str], shape: Shape) -> list[int]:
    """For each word, the fewest edits that place it (0 when it is already there)."""
    out: list[int] = []
    for first in range(0, len(words), CHUNK):
        patterns = [pattern_codes(w, shape) for w in words[first : first + CHUNK]]
        table, _ = _distance_table(text, patterns)
        out.extend(int(table[len(p), i].min()) for i, p in enumerate(patterns))
    return out


def _text_codes(text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Folded code points of the text between two sentinels, its non-word mask, sentinel mask."""
    chars = ["\0", *text, "\0"]
    codes = np.array([ord(fold(c)) for c in chars], dtype=np.int64)
    nonword = np.array([not WORD_CHAR.match(c) for c in chars], dtype=bool)
    nonword[0] = nonword[-1] = True
    sentinel = np.zeros(len(chars), dtype=bool)
    sentinel[0] = sentinel[-1] = True
    return codes, nonword, sentinel


def _distance_table(text: str, patterns: Sequence[Sequence[int]]) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """D[i, v, j]: fewest edits aligning pattern v's first i codes with a text span ending
    before padded position j (free start). Shape (max_len + 1, patterns, len(text) + 3)."""
    codes, nonword, sentinel = text_codes = _text_codes(text)
    width = len(codes) + 1
    rows = max(len(p) for p in patterns)
    pat = np.full((len(patterns), rows), PAD, dtype=np.int64)
    for v, p in enumerate(patterns):
        pat[v, : len(p)] = p
    table = np.zeros((rows + 1, len(patterns), width), dtype=np.int64)
    for i in range(1, rows + 1):
        prev = table[i - 1]
        pc = pat[:, i - 1][:, None]
        is_boundary = pc == BOUNDARY
        match = (pc == codes[None, :]) | (is_boundary & nonword[None, :])
        sub = np.where(match, 0, 1)
        sub = np.where(sentinel[None, :] & ~is_boundary, INF, sub)
        tmp = np.empty_like(prev)
        # Nothing is inserted outside the sentinels: column 0 is before the text's start and
        # the last column is entered only by matching the end sentinel with a final boundary.
        tmp[:, 0] = INF
        tmp[:, 1:] = np.minimum(prev[:, :-1] + sub, prev[:, 1:] + 1)
        tmp[:, -1] = prev[:, -2] + sub[:, -1]
        row = tmp.copy()
        # Horizontal moves (skip a text character) never cross a sentinel: columns 1..n+1
        # form one run where row[j] = min over k <= j of tmp[k] + (j - k).
        lo, hi = 1, width - 1
        steps = np.arange(hi - lo)
        row[:, lo:hi] = np.minimum.accumulate(tmp[:, lo:hi] - steps, axis=1) + steps
        table[i] = np.minimum(row, INF)
    return table, text_codes


def _backtrack(text: str, text_codes: tuple[np.ndarray, ...], table: np.ndarray, pattern: Sequence[int],
               end: int, word: str, shape: Shape) -> Placement:
    codes, nonword, sentinel = text_codes
    i, j = len(pattern), end
    pieces: list[str] = []  # output, right to left
    while i > 0:
        here = int(table[i, j])
        pc = pattern[i - 1]
        if j >= 1:
            k = j - 1  # padded text position consumed by a diagonal or horizontal move
            is_match = (pc == BOUNDARY and bool(nonword[k])) or pc == int(codes[k])
            sub = 0 if is_match else (INF if sentinel[k] else 1)
            if here == int(table[i - 1, j - 1]) + sub:
                if not sentinel[k]:
                    original = text[k - 1]
                    pieces.append(original if is_match else (" " if pc == BOUNDARY else chr(pc)))
                i, j = i - 1, j - 1
                continue
        if here == int(table[i - 1, j]) + 1:
            pieces.append(" " if pc == BOUNDARY else chr(pc))
            i -= 1
            continue
        # A skipped text character: deleted from the span.
        assert j >= 2 and not sentinel[j - 1] and here == int(table[i, j - 1]) + 1
        j -= 1
    ops = int(table[len(pattern), end])
    start = max(j, 1) - 1
    stop = min(end, len(text) + 1) - 1
    return Placement(word, shape, ops, start, max(start, stop), "".join(reversed(pieces)))
