"""Combining marks after letters: one diacritic, a combining underline, or a zalgo stack.

Marks attach to the letter before them, so the word keeps its letters and reads the same
with accents; NFKC may compose a mark with its letter (a + U+0301 -> U+00E1) but never
drops it.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence

from margin.transforms.base import Insertion
from margin.transforms.draws import Draws, first_choices

# Accents a reader of Latin script knows: grave, acute, circumflex, tilde, diaeresis,
# ring above, caron, cedilla.
DIACRITICS = ("\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u030a", "\u030c", "\u0327")
UNDERLINE = "\u0332"
ZALGO_HEIGHT = 3  # marks stacked on one letter


@functools.cache
def combining_block() -> tuple[str, ...]:
    """Every nonspacing mark of the Combining Diacritical Marks block (U+0300..U+036F)."""
    marks = (chr(cp) for cp in range(0x300, 0x370))
    return tuple(m for m in marks if unicodedata.category(m) == "Mn" and m != "\u034f")


class MarkInsertion(Insertion):
    """Inserts marks right after a letter (inside or at the end of its word)."""

    visible = True
    nfkc_stable = True

    def eligible(self, text: str) -> list[int]:
        return [i + 1 for i, ch in enumerate(text) if ch.isalpha()]

    def in_word(self, text: str, position: int, start: int, end: int) -> bool:
        return start < position <= end


class Diacritic(MarkInsertion):
    name = "diacritic"
    family = "diacritic"
    assumption = "An accent on a letter is read past; the word is still recognised."

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return rng.choice(DIACRITICS)

    def replacements(self, text: str, positions: Sequence[int], seed: int) -> list[str]:
        return first_choices(seed, positions, [DIACRITICS] * len(positions))


class CombiningUnderline(MarkInsertion):
    name = "combining-underline"
    family = "diacritic"
    assumption = "A combining low line underlines the letter without changing it."

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return UNDERLINE


class Zalgo(MarkInsertion):
    name = "zalgo"
    family = "zalgo"
    assumption = "Stacked marks clutter a letter, but the letters underneath still spell the word."

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return "".join(rng.choice(combining_block()) for _ in range(ZALGO_HEIGHT))


ORDER = 60  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (Diacritic(), CombiningUnderline(), Zalgo())
