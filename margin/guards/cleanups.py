"""Text clean-ups a deployment may run in front of a guard: pure functions of the text.

- `strip_format`: drops format characters (category Cf: zero-width characters, bidi
  controls, tags, soft hyphen, word joiner, invisible operators) and variation selectors;
- `nfkc`: Unicode NFKC (folds full-width, mathematical, superscript and circled letters);
- `strip_marks`: NFD, then drops every combining mark (category M: accents, zalgo stacks,
  combining underlines, enclosing marks, and variation selectors, which are marks too), NFC;
- `skeleton`: the Unicode TR39 confusable skeleton (NFD, each character to its prototype,
  NFD), recomposed (NFC) so the guard reads ordinary composed text. Two confusable texts
  get the same skeleton, so a homoglyph swap disappears; ASCII changes too where TR39 says
  so (`m` -> `rn`, `I`, `1` and `|` -> `l`, `0` -> `O`), which is what the defence costs.
  Two additions make it a function a guard can sit behind: the data also pairs some
  precomposed letters (`ȧ` with `å`), which an NFD-first pass never meets, so each pass maps
  characters before decomposing too; and passes repeat until nothing changes (one pass
  leaves a few prototypes mappable again), so it is idempotent.

Each is idempotent, never raises, and leaves text without the characters it targets alone
(`skeleton` excepted, for the ASCII above).
"""

from __future__ import annotations

import unicodedata

from margin.util.confusables import prototypes

#: A single skeleton pass leaves a handful of the data's prototypes mappable again (a
#: prototype whose NFD holds a source); three passes reach the fixed point for every entry.
MAX_SKELETON_PASSES = 8


def is_format(ch: str) -> bool:
    cp = ord(ch)
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF:  # variation selectors (Mn)
        return True
    return unicodedata.category(ch) == "Cf"


def strip_format(text: str) -> str:
    return "".join(ch for ch in text if not is_format(ch))


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def strip_marks(text: str) -> str:
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(ch for ch in decomposed if not unicodedata.category(ch).startswith("M")))


def _skeleton_pass(composed: str, table: dict[str, str]) -> str:
    """Map each character as given (the data's precomposed letters), then each of its NFD."""
    mapped = unicodedata.normalize("NFD", "".join(table.get(ch, ch) for ch in composed))
    return unicodedata.normalize("NFC", "".join(table.get(ch, ch) for ch in mapped))


def skeleton(text: str) -> str:
    table = prototypes()
    current = _skeleton_pass(text, table)  # the text as given: some sources are not NFC (U+1F7D)
    for _ in range(MAX_SKELETON_PASSES):
        mapped = _skeleton_pass(current, table)
        if mapped == current:
            break
        current = mapped
    return current
