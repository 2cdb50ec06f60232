"""Character noise: visible misspellings a reader corrects without effort.

Substitutions draw replacements absent from the original text and insertions and
deletions are plain, so every transform here but the neighbour swap is additive (see
`base.py`).
"""

from __future__ import annotations

import functools
import string
from collections.abc import Sequence

from margin.transforms.base import EditTransform, Insertion, Substitution
from margin.transforms.draws import Draws
from margin.transforms.words import word_spans

LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7", "b": "8", "g": "9"}
SEPARATORS = ("-", ".", "_", "*")
KEYBOARD_ROWS = (("qwertyuiop", 0.0), ("asdfghjkl", 0.25), ("zxcvbnm", 0.75))  # keys, row offset


@functools.cache
def qwerty_neighbours() -> dict[str, str]:
    """Letters whose keys touch on a QWERTY keyboard, from the rows and their stagger."""
    places = {key: (row, offset + col) for row, (keys, offset) in enumerate(KEYBOARD_ROWS)
              for col, key in enumerate(keys)}
    return {
        key: "".join(other for other, (r2, x2) in places.items()
                     if other != key and abs(r2 - r) <= 1 and abs(x2 - x) < (1.01 if r2 == r else 1.0))
        for key, (r, x) in places.items()
    }


def same_case(options: str, like: str) -> tuple[str, ...]:
    return tuple(o.upper() if like.isupper() else o for o in options)


class NeighbourSwap(EditTransform):
    """Swaps two adjacent, different characters inside one word (a typo)."""

    name = "neighbour-swap"
    family = "swap"
    visible = True
    nfkc_stable = True
    additive = False  # swaps can undo one another's cost ("abab" -> "baba" costs 2)
    assumption = "Readers undo a swap of two adjacent letters inside a word."

    def eligible(self, text: str) -> list[int]:
        return [p for start, end in word_spans(text) for p in range(start, end - 1) if text[p] != text[p + 1]]

    def span(self, text: str, position: int) -> tuple[int, int]:
        return position, position + 2

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return text[position + 1] + text[position]


class CharDeletion(EditTransform):
    """Deletes an inner character of a word (never its first or last)."""

    name = "char-deletion"
    family = "deletion"
    visible = True
    nfkc_stable = True
    assumption = "A word missing one inner letter is still recognised from its outline."

    def eligible(self, text: str) -> list[int]:
        return [p for start, end in word_spans(text) for p in range(start + 1, end - 1)]

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return ""


class CharInsertion(Insertion):
    name = "char-insertion"
    family = "insertion"
    visible = True
    nfkc_stable = True
    assumption = "A word with one stray letter is still recognised."

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return rng.choice(string.ascii_lowercase)


class CharSubstitution(Substitution):
    name = "char-substitution"
    family = "substitution"
    visible = True
    nfkc_stable = True
    assumption = "A word with one wrong letter is still recognised from the rest."

    def options(self, char: str) -> Sequence[str]:
        if char not in string.ascii_letters:
            return ()
        return same_case(string.ascii_lowercase.replace(char.lower(), ""), char)


class QwertyTypo(Substitution):
    name = "qwerty-typo"
    family = "typo"
    visible = True
    nfkc_stable = True
    assumption = "A letter replaced by a neighbouring key is a typo readers correct."

    def options(self, char: str) -> Sequence[str]:
        if char not in string.ascii_letters:
            return ()
        return same_case(qwerty_neighbours()[char.lower()], char)


class CaseFlip(Substitution):
    name = "case-flip"
    family = "case"
    visible = True
    nfkc_stable = True
    assumption = "Letter case does not change what a request asks."

    def options(self, char: str) -> Sequence[str]:
        flipped = char.swapcase()
        ok = len(flipped) == 1 and flipped != char and flipped.swapcase() == char
        return (flipped,) if ok else ()


class SpaceInWord(Insertion):
    name = "space-in-word"
    family = "separator"
    visible = True
    nfkc_stable = True
    assumption = "A word broken by one space is still read as the word."

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return " "


class SeparatorInWord(Insertion):
    name = "separator-in-word"
    family = "separator"
    visible = True
    nfkc_stable = True
    assumption = "A word broken by a hyphen, dot, underscore or asterisk is still read as the word."

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return rng.choice(SEPARATORS)


class TokenBreakPrefix(Insertion):
    """TokenBreak: one letter prepended to a word changes how a tokenizer splits it."""

    name = "tokenbreak-prefix"
    family = "tokenbreak"
    visible = True
    nfkc_stable = True
    assumption = "A reader (or an LLM) sees through one extra letter before a word ('finstructions')."

    def eligible(self, text: str) -> list[int]:
        return [start for start, end in word_spans(text) if text[start].isalpha()]

    def in_word(self, text: str, position: int, start: int, end: int) -> bool:
        return position == start

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return rng.choice(string.ascii_lowercase)


class Leetspeak(Substitution):
    name = "leetspeak"
    family = "leetspeak"
    visible = True
    nfkc_stable = True
    assumption = "Digits that look like letters (4 for a, 3 for e) are read as those letters."

    def options(self, char: str) -> Sequence[str]:
        leet = LEET.get(char.lower())
        return (leet,) if leet else ()


ORDER = 100  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (
    NeighbourSwap(),
    CharDeletion(),
    CharInsertion(),
    CharSubstitution(),
    QwertyTypo(),
    CaseFlip(),
    SpaceInWord(),
    SeparatorInWord(),
    TokenBreakPrefix(),
    Leetspeak(),
)
