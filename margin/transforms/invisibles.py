"""Invisible characters inserted inside words: zero-width family, soft hyphen, invisible
separator. Each is a format character (category Cf): it renders as nothing, but it splits
the word for a tokenizer or a blocklist."""

from __future__ import annotations

from collections.abc import Sequence

from margin.transforms.base import Insertion
from margin.transforms.draws import Draws


class InvisibleInsertion(Insertion):
    """Inserts one fixed invisible character between two characters of a word."""

    char: str
    visible = False
    nfkc_stable = True

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return self.char

    def replacements(self, text: str, positions: Sequence[int], seed: int) -> list[str]:
        return [self.char] * len(positions)


class ZeroWidthSpace(InvisibleInsertion):
    name = "zero-width-space"
    family = "zero-width"
    char = "\u200b"
    assumption = "A zero-width space is invisible, so the rendered request is unchanged."


class ZeroWidthNonJoiner(InvisibleInsertion):
    name = "zero-width-non-joiner"
    family = "zero-width"
    char = "\u200c"
    assumption = "A zero-width non-joiner only stops ligatures, which Latin text rarely has; it renders as nothing."


class ZeroWidthJoiner(InvisibleInsertion):
    name = "zero-width-joiner"
    family = "zero-width"
    char = "\u200d"
    assumption = "A zero-width joiner between letters renders as nothing outside emoji sequences."


class WordJoiner(InvisibleInsertion):
    name = "word-joiner"
    family = "zero-width"
    char = "\u2060"
    assumption = "A word joiner forbids a line break and renders as nothing."


class SoftHyphen(InvisibleInsertion):
    name = "soft-hyphen"
    family = "invisible"
    char = "\u00ad"
    assumption = "A soft hyphen shows only where a line breaks, so mid-line the word looks unchanged."


class InvisibleSeparator(InvisibleInsertion):
    name = "invisible-separator"
    family = "invisible"
    char = "\u2063"
    assumption = "The invisible separator (a mathematical comma) renders as nothing."


ORDER = 20  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (
    ZeroWidthSpace(),
    ZeroWidthNonJoiner(),
    ZeroWidthJoiner(),
    WordJoiner(),
    SoftHyphen(),
    InvisibleSeparator(),
)
