"""Character noise: visible misspellings a reader corrects without effort."""

from __future__ import annotations

import random

from margin.transforms.base import EditTransform, word_spans

LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7", "b": "8", "g": "9"}


class Leetspeak(EditTransform):
    name = "leetspeak"
    family = "leetspeak"
    visible = True
    nfkc_stable = True
    assumption = "Digits that look like letters (4 for a, 3 for e) are read as those letters."

    def eligible(self, text: str) -> list[int]:
        return [i for i, ch in enumerate(text) if ch.lower() in LEET]

    def edit(self, text: str, position: int, rng: random.Random) -> str:
        return text[:position] + LEET[text[position].lower()] + text[position + 1 :]


class NeighbourSwap(EditTransform):
    """Swaps two adjacent, different characters inside one word (a typo)."""

    name = "neighbour-swap"
    family = "swap"
    visible = True
    nfkc_stable = True
    assumption = "Readers undo a swap of two adjacent letters inside a word."

    def eligible(self, text: str) -> list[int]:
        return [
            p
            for start, end in word_spans(text)
            for p in range(start, end - 1)
            if text[p] != text[p + 1]
        ]

    def span(self, position: int) -> tuple[int, int]:
        return position, position + 2

    def edit(self, text: str, position: int, rng: random.Random) -> str:
        return text[:position] + text[position + 1] + text[position] + text[position + 2 :]
