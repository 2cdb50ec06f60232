"""Smuggling: a character moved into an invisible encoding that some models still read.

- Tag smuggling writes an ASCII character as its Unicode tag twin (U+E0000 + code point),
  the "ASCII smuggling" channel; tag characters render as nothing.
- Variation-selector smuggling writes each UTF-8 byte of a character as one of the 256
  variation selectors (U+FE00..FE0F for bytes 0-15, U+E0100..E01EF for 16-255), the
  "emoji smuggling" channel; variation selectors render as nothing.

Both delete the visible character: what a reader sees loses it, a guard may not decode it,
and a model whose tokenizer keeps the bytes can.
"""

from __future__ import annotations

from margin.transforms.base import Substitution

TAG_BASE = 0xE0000


def tag_char(char: str) -> str:
    return chr(TAG_BASE + ord(char))


def variation_selector(byte: int) -> str:
    return chr(0xFE00 + byte) if byte < 16 else chr(0xE0100 + byte - 16)


def variation_selectors(char: str) -> str:
    return "".join(variation_selector(b) for b in char.encode("utf-8"))


class TagSmuggling(Substitution):
    name = "tag-smuggling"
    family = "tags"
    visible = True
    nfkc_stable = True
    assumption = "A model that reads Unicode tags sees the same ASCII letters; the guard may see nothing."

    def options(self, char: str) -> tuple[str, ...]:
        return (tag_char(char),) if 0x20 <= ord(char) <= 0x7E else ()


class VariationSelectorSmuggling(Substitution):
    name = "variation-selector-smuggling"
    family = "variation-selector"
    visible = True
    nfkc_stable = True
    assumption = "A model that decodes variation-selector bytes sees the same character; a reader sees none."

    def options(self, char: str) -> tuple[str, ...]:
        return () if char.isspace() else (variation_selectors(char),)


ORDER = 30  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (TagSmuggling(), VariationSelectorSmuggling())
