"""Make invisible and format characters visible, for terminals and reports.

`make_visible` is the one way margin shows text from input (ids, slice values, caveats,
prompts) to a person: on the terminal (the CLI's consoles and error lines), on the site's
pages and in XML exports. A C0 or C1 control (ESC sequences included), a bidi override or
isolate, a zero-width or private-use character becomes `<U+XXXX>`, so it can neither drive
the terminal (retitle it, clear the screen), nor reorder a line, nor make XML ill-formed.
Data files (receipts, results, snapshots, JSON output) keep the exact text."""

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


def make_visible(text: str, *, one_line: bool = False) -> str:
    """`a\\u200bb` -> `a<U+200B>b`: format, control, private-use and unassigned code points
    (every code point XML 1.0 forbids among them). `one_line`: newlines and tabs too, for a
    line that must stay one (an error line)."""
    return "".join(f"<U+{ord(ch):04X}>" if is_invisible(ch) or (one_line and ch in VISIBLE_CONTROLS) else ch
                   for ch in text)
