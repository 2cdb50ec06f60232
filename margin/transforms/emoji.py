"""Emoji inside words (the Emoji Attack): a token split by a picture a reader skips over."""

from __future__ import annotations

from margin.transforms.base import Insertion
from margin.transforms.draws import Draws

# Friendly, common emoji, each one code point (no joiners or selectors).
EMOJI = ("\U0001f60a", "\U0001f642", "\U0001f44d", "\u2728", "\U0001f525")


class EmojiInWord(Insertion):
    name = "emoji-in-word"
    family = "emoji"
    visible = True
    nfkc_stable = True
    assumption = "Readers skip an emoji inside a word and still read the word."

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return rng.choice(EMOJI)


ORDER = 90  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (EmojiInWord(),)
