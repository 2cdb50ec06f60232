"""Unicode TR39 confusables, as the confusable-homoglyphs package ships them.

One reading of one data file serves both sides: the homoglyph transform picks lookalikes
from it, and the `skeleton` defence maps every character back to its prototype.

The package stores confusables.txt (lines `source ; prototype`) as a symmetric relation:
each source lists its prototype, each prototype lists its sources, in file order, with
right-to-left characters wrapped in U+200E marks for display. Sources are single code
points and prototypes never map further, so a key with several entries, or of several
code points, is a prototype; a key with one entry is a source unless its partner has only
it too, and then the first of the two in file order is the source (its line came first).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from importlib.metadata import version

from margin.util.hashing import sha256_text

PACKAGE = "confusable_homoglyphs"
DISPLAY_MARK = "\u200e"  # left-to-right mark the package puts around right-to-left text


@functools.cache
def _raw_text() -> str:
    return resources.files(PACKAGE).joinpath("confusables.json").read_text("utf-8")


@functools.cache
def _raw() -> dict[str, tuple[str, ...]]:
    return {key: tuple(e["c"] for e in entries) for key, entries in json.loads(_raw_text()).items()}


@functools.cache
def relation() -> dict[str, tuple[str, ...]]:
    """Every key of the data, display marks removed, with its partners in file order."""
    return {key.replace(DISPLAY_MARK, ""): tuple(p.replace(DISPLAY_MARK, "") for p in partners)
            for key, partners in _raw().items()}


@functools.cache
def lookalikes() -> dict[str, tuple[str, ...]]:
    """char -> its single-code-point confusables (sources or prototype), sorted.

    Right-to-left lookalikes (those the package wraps in display marks) are left out: inside
    a left-to-right word they would reorder the text around them."""
    return {char: tuple(sorted({p for p in partners if len(p) == 1 and p != char}))
            for char, partners in _raw().items() if len(char) == 1}


@functools.cache
def prototypes() -> dict[str, str]:
    """source code point -> prototype (one or more code points): TR39's skeleton mapping."""
    table = relation()
    order = {key: index for index, key in enumerate(table)}
    mapping: dict[str, str] = {}
    for key, partners in table.items():
        if len(key) != 1 or len(partners) != 1:
            continue
        partner = partners[0]
        if len(partner) > 1 or len(table[partner]) > 1 or order[key] < order[partner]:
            mapping[key] = partner
    return mapping


@functools.cache
def data_version() -> str:
    """What the mapping comes from, for a defence's identity: package version and data digest."""
    return f"{PACKAGE.replace('_', '-')} {version(PACKAGE.replace('_', '-'))} sha256 {sha256_text(_raw_text())[:12]}"
