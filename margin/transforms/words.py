"""Words, as every transform and search step sees them."""

from __future__ import annotations

import re

WORD = re.compile(r"\w+")


def word_spans(text: str) -> list[tuple[int, int]]:
    """Words are maximal runs of Unicode word characters, as (start, end) code-point offsets."""
    return [m.span() for m in WORD.finditer(text)]
