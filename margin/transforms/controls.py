"""Deletion controls: a stray letter followed by BACKSPACE (U+0008) inside a word.

A terminal that honours the control erases the letter again; a tokenizer or a blocklist
sees both code points."""

from __future__ import annotations

import string

from margin.transforms.base import Insertion
from margin.transforms.draws import Draws

BACKSPACE = "\b"


class DeletionControl(Insertion):
    name = "deletion-control"
    family = "control"
    visible = True
    nfkc_stable = True
    assumption = "Where backspace is honoured the stray letter is erased; elsewhere it reads as a typo."

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return rng.choice(string.ascii_lowercase) + BACKSPACE


ORDER = 50  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (DeletionControl(),)
