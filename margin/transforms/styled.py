"""Styled letters: the same letter drawn from another Unicode alphabet.

Full-width forms, mathematical bold / italic / script, superscripts, small capitals,
circled and negative-squared letters. Each table is read from the Unicode character
names in Python's `unicodedata` (e.g. "MATHEMATICAL BOLD SMALL A"), never typed in;
letters an alphabet lacks (there is no mathematical italic h) are not eligible.
Which of them NFKC folds back to plain letters is measured by the tests.
"""

from __future__ import annotations

import functools
import string
import unicodedata
from collections.abc import Sequence

from margin.transforms.base import Substitution


@functools.cache
def alphabet(patterns: tuple[str, ...], lower_only: bool = False) -> dict[str, str]:
    """ASCII letter -> the first character named by one of `patterns`.

    A pattern holds {case} (SMALL or CAPITAL) and {L} (the capital letter)."""
    table: dict[str, str] = {}
    for letter in string.ascii_lowercase if lower_only else string.ascii_letters:
        case = "SMALL" if letter.islower() else "CAPITAL"
        for pattern in patterns:
            try:
                table[letter] = unicodedata.lookup(pattern.format(case=case, L=letter.upper()))
                break
            except KeyError:
                continue
    return table


class StyledLetters(Substitution):
    """Substitutes an ASCII letter with its twin in one styled alphabet."""

    patterns: tuple[str, ...]
    lower_only = False
    family = "styled"
    visible = True

    def options(self, char: str) -> Sequence[str]:
        styled = alphabet(self.patterns, self.lower_only).get(char)
        return (styled,) if styled else ()


class FullWidth(Substitution):
    name = "fullwidth"
    family = "fullwidth"
    visible = True
    nfkc_stable = False
    assumption = "Full-width forms are the same letters at another width; the request reads the same."

    def options(self, char: str) -> Sequence[str]:
        # The Halfwidth and Fullwidth Forms block mirrors printable ASCII at U+FF01..U+FF5E.
        return (chr(ord(char) + 0xFEE0),) if 0x21 <= ord(char) <= 0x7E else ()


class MathBold(StyledLetters):
    name = "math-bold"
    patterns = ("MATHEMATICAL BOLD {case} {L}",)
    nfkc_stable = False
    assumption = "Bold mathematical letters read as the same letters in bold."


class MathItalic(StyledLetters):
    name = "math-italic"
    patterns = ("MATHEMATICAL ITALIC {case} {L}",)
    nfkc_stable = False
    assumption = "Italic mathematical letters read as the same letters in italics."


class MathScript(StyledLetters):
    name = "math-script"
    patterns = ("MATHEMATICAL SCRIPT {case} {L}", "SCRIPT {case} {L}")
    nfkc_stable = False
    assumption = "Script letters read as the same letters in a handwriting style."


class Superscript(StyledLetters):
    name = "superscript"
    patterns = ("MODIFIER LETTER {case} {L}", "SUPERSCRIPT LATIN {case} LETTER {L}")
    nfkc_stable = False
    assumption = "A raised small letter is still read as that letter."


class SmallCaps(StyledLetters):
    name = "small-caps"
    patterns = ("LATIN LETTER SMALL CAPITAL {L}",)
    lower_only = True
    nfkc_stable = True
    assumption = "Small capitals are the same letters set as capitals of lower-case height."


class Circled(StyledLetters):
    name = "circled"
    patterns = ("CIRCLED LATIN {case} LETTER {L}",)
    nfkc_stable = False
    assumption = "A letter in a circle is still read as that letter."


class Enclosed(StyledLetters):
    name = "enclosed"
    family = "enclosed"
    patterns = ("NEGATIVE SQUARED LATIN CAPITAL LETTER {L}",)
    nfkc_stable = True
    assumption = "A white capital in a black square (an emoji-like letter) is read as that letter."


ORDER = 70  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (
    FullWidth(),
    MathBold(),
    MathItalic(),
    MathScript(),
    Superscript(),
    SmallCaps(),
    Circled(),
    Enclosed(),
)
