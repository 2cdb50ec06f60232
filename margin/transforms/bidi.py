"""Bidirectional controls: logical order and display order made to differ.

- `bidi-reorder` (edit): two neighbouring letters of a word are stored swapped inside a
  right-to-left override (RLO y x PDF), so the word still displays as written.
- `bidi-wrap` (wrapper): the whole prompt inside one bidi pair. `lro` (LRO ... PDF) and
  `fsi` (FSI ... PDI) leave a left-to-right prompt looking the same; `rlo-reversed` stores
  the prompt reversed inside RLO ... PDF, which displays it in its original order.
"""

from __future__ import annotations

from margin.transforms.base import EditTransform, WrapperTransform
from margin.transforms.draws import Draws
from margin.transforms.encodings import reverse
from margin.transforms.words import word_spans

LRO, RLO, PDF = "\u202d", "\u202e", "\u202c"
FSI, PDI = "\u2068", "\u2069"


class BidiReorder(EditTransform):
    name = "bidi-reorder"
    family = "bidi"
    visible = False
    nfkc_stable = True
    additive = False  # the swap inside the override is not
    assumption = "Inside a right-to-left override the swapped letters display in their original order."

    def eligible(self, text: str) -> list[int]:
        return [p for start, end in word_spans(text) for p in range(start, end - 1) if text[p] != text[p + 1]]

    def span(self, text: str, position: int) -> tuple[int, int]:
        return position, position + 2

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return RLO + text[position + 1] + text[position] + PDF


def bidi_wrap() -> WrapperTransform:
    return WrapperTransform(
        name="bidi-wrap",
        family="bidi",
        variants={"lro": LRO + "{prompt}" + PDF, "fsi": FSI + "{prompt}" + PDI,
                  "rlo-reversed": RLO + "{prompt}" + PDF},
        encode={"rlo-reversed": reverse},
        assumption="A left-to-right prompt displays the same inside these controls, reversed or not.",
        visible=False,
    )


ORDER = 40  # where this module's transforms stand in the registry (see registry.py)
TRANSFORMS = (BidiReorder(), bidi_wrap())
