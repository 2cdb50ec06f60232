"""Upside-down words: a word's letters turned 180 degrees and its order reversed, so it
reads correctly when the text is turned over.

Turned letters come from the Unicode names in `unicodedata` ("LATIN SMALL LETTER TURNED
A" is U+0250); letters that are 180-degree rotations of one another (b/q, d/p, n/u) or of
themselves (o, s, x, z) map to those. Letters with neither (c, j) keep their shape.
"""

from __future__ import annotations

import functools
import string
import unicodedata

from margin.transforms.base import EditTransform
from margin.transforms.draws import Draws
from margin.transforms.words import WORD, word_spans

ROTATIONS = {"b": "q", "q": "b", "d": "p", "p": "d", "n": "u", "u": "n"}


@functools.cache
def turned() -> dict[str, str]:
    table: dict[str, str] = {}
    for letter in string.ascii_letters:
        names = [f"LATIN {'SMALL' if letter.islower() else 'CAPITAL'} LETTER TURNED {letter.upper()}",
                 f"LATIN SMALL LETTER TURNED {letter.upper()}", f"TURNED SMALL {letter.upper()}"]
        for name in names:
            try:
                table[letter] = unicodedata.lookup(name)
                break
            except KeyError:
                continue
        else:
            table[letter] = ROTATIONS.get(letter.lower(), letter.lower())
    return table


def flip(word: str) -> str:
    table = turned()
    return "".join(table.get(ch, ch) for ch in reversed(word))


class UpsideDown(EditTransform):
    """One edit turns one whole word upside down."""

    name = "upside-down"
    family = "upside-down"
    visible = True
    nfkc_stable = True
    additive = False  # reversing a word is not
    assumption = "Turned letters in reverse order read as the word once the text is turned over."

    def eligible(self, text: str) -> list[int]:
        return [start for start, end in word_spans(text) if flip(text[start:end]) != text[start:end]]

    def span(self, text: str, position: int) -> tuple[int, int]:
        match = WORD.match(text, position)
        assert match is not None, "positions are word starts"
        return position, match.end()

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        start, end = self.span(text, position)
        return flip(text[start:end])


ORDER = 80  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (UpsideDown(),)
