"""Homoglyphs: letters swapped for TR39 confusables that render alike.

The table is Unicode's confusables.txt as shipped by the confusable-homoglyphs package
(`margin.util.confusables`, which the `skeleton` defence maps back with); margin keeps only
single-code-point letters that NFKC leaves alone (Cyrillic, Greek, Armenian ...
lookalikes), since mathematical and full-width variants are styled letters, covered in
`styled.py`.
"""

from __future__ import annotations

import functools
import unicodedata

from margin.transforms.base import Substitution
from margin.util.confusables import lookalikes


@functools.cache
def nfkc_stable_homoglyphs(char: str) -> tuple[str, ...]:
    """Lookalikes of `char` that NFKC leaves in place (Cyrillic, Greek, ...), not math/full-width."""
    options = []
    for option in lookalikes().get(char, ()):
        if unicodedata.normalize("NFKC", option) != option:
            continue  # NFKC would rewrite it (math letters, full-width, compatibility forms)
        if not unicodedata.category(option).startswith("L"):
            continue  # keep letters for letters: punctuation lookalikes change tokenisation differently
        options.append(option)
    return tuple(options)


class Homoglyph(Substitution):
    name = "homoglyph"
    family = "homoglyph"
    visible = False
    nfkc_stable = True
    assumption = "A TR39 confusable letter renders like the original, so the request reads the same."

    def options(self, char: str) -> tuple[str, ...]:
        return nfkc_stable_homoglyphs(char) if char.isalpha() else ()


ORDER = 10  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (Homoglyph(),)
