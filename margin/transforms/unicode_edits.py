"""Unicode edits: the text reads the same to a person, but its code points change."""

from __future__ import annotations

import functools
import json
import random
import unicodedata
from importlib import resources

from margin.transforms.base import EditTransform, word_spans


@functools.cache
def _confusables() -> dict[str, list[str]]:
    """TR39 confusables from confusable-homoglyphs' data: char -> single-code-point lookalikes."""
    raw = json.loads(resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8"))
    table: dict[str, list[str]] = {}
    for char, entries in raw.items():
        if len(char) != 1:
            continue
        table[char] = sorted({e["c"] for e in entries if len(e["c"]) == 1 and e["c"] != char})
    return table


@functools.cache
def nfkc_stable_homoglyphs(char: str) -> tuple[str, ...]:
    """Lookalikes of `char` that NFKC leaves in place (Cyrillic, Greek, ...), not math/full-width."""
    options = []
    for option in _confusables().get(char, []):
        if unicodedata.normalize("NFKC", option) != option:
            continue  # NFKC would rewrite it (math letters, full-width, compatibility forms)
        if not unicodedata.category(option).startswith("L"):
            continue  # keep letters for letters: punctuation lookalikes change tokenisation differently
        options.append(option)
    return tuple(options)


class Homoglyph(EditTransform):
    name = "homoglyph"
    family = "homoglyph"
    visible = False
    nfkc_stable = True
    assumption = "A TR39 confusable letter renders like the original, so the request reads the same."

    def eligible(self, text: str) -> list[int]:
        return [i for i, ch in enumerate(text) if ch.isalpha() and nfkc_stable_homoglyphs(ch)]

    def edit(self, text: str, position: int, rng: random.Random) -> str:
        return text[:position] + rng.choice(nfkc_stable_homoglyphs(text[position])) + text[position + 1 :]


ZWSP = "\u200b"


class InWordInsertion(EditTransform):
    """Inserts a fixed character between two characters of the same word."""

    char: str

    def eligible(self, text: str) -> list[int]:
        return [p for start, end in word_spans(text) for p in range(start + 1, end)]

    def span(self, position: int) -> tuple[int, int]:
        return position, position  # an insertion touches no original code point

    def in_word(self, position: int, start: int, end: int) -> bool:
        return start < position < end

    def edit(self, text: str, position: int, rng: random.Random) -> str:
        return text[:position] + self.char + text[position:]


class ZeroWidthSpace(InWordInsertion):
    name = "zero-width-space"
    family = "zero-width"
    char = ZWSP
    visible = False
    nfkc_stable = True
    assumption = "A zero-width space is invisible, so the rendered request is unchanged."


class FullWidth(EditTransform):
    name = "fullwidth"
    family = "fullwidth"
    visible = True
    nfkc_stable = False
    assumption = "Full-width forms are the same letters at another width; the request reads the same."

    def eligible(self, text: str) -> list[int]:
        return [i for i, ch in enumerate(text) if 0x21 <= ord(ch) <= 0x7E]

    def edit(self, text: str, position: int, rng: random.Random) -> str:
        return text[:position] + chr(ord(text[position]) + 0xFEE0) + text[position + 1 :]
