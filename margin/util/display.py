"""Make invisible and format characters visible, for terminals and reports."""

from __future__ import annotations

import unicodedata

VISIBLE_CONTROLS = {"\n", "\t"}


def is_invisible(ch: str) -> bool:
    cp = ord(ch)
    if ch in VISIBLE_CONTROLS:
        return False
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF:  # variation selectors (category Mn)
        return True
    return unicodedata.category(ch) in ("Cf", "Cc", "Co", "Cs", "Cn", "Zl", "Zp")


def make_visible(text: str) -> str:
    """`a\\u200bb` -> `a<U+200B>b`: format, control, private-use and unassigned code points."""
    return "".join(f"<U+{ord(ch):04X}>" if is_invisible(ch) else ch for ch in text)
