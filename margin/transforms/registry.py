"""The registry of transforms by name, in the order `margin transforms list` shows them."""

from __future__ import annotations

import functools

from margin.transforms import (
    bidi,
    controls,
    emoji,
    homoglyphs,
    invisibles,
    marks,
    noise,
    smuggling,
    styled,
    upside_down,
)
from margin.transforms.base import Transform
from margin.transforms.wrappers import load_wrappers
from margin.util.suggest import did_you_mean


@functools.cache
def registry() -> dict[str, Transform]:
    transforms: list[Transform] = [
        homoglyphs.Homoglyph(),
        invisibles.ZeroWidthSpace(),
        invisibles.ZeroWidthNonJoiner(),
        invisibles.ZeroWidthJoiner(),
        invisibles.WordJoiner(),
        invisibles.SoftHyphen(),
        invisibles.InvisibleSeparator(),
        smuggling.TagSmuggling(),
        smuggling.VariationSelectorSmuggling(),
        bidi.BidiReorder(),
        controls.DeletionControl(),
        marks.Diacritic(),
        marks.CombiningUnderline(),
        marks.Zalgo(),
        styled.FullWidth(),
        styled.MathBold(),
        styled.MathItalic(),
        styled.MathScript(),
        styled.Superscript(),
        styled.SmallCaps(),
        styled.Circled(),
        styled.Enclosed(),
        upside_down.UpsideDown(),
        emoji.EmojiInWord(),
        noise.NeighbourSwap(),
        noise.CharDeletion(),
        noise.CharInsertion(),
        noise.CharSubstitution(),
        noise.QwertyTypo(),
        noise.CaseFlip(),
        noise.SpaceInWord(),
        noise.SeparatorInWord(),
        noise.TokenBreakPrefix(),
        noise.Leetspeak(),
        bidi.bidi_wrap(),
        *load_wrappers(),
    ]
    table: dict[str, Transform] = {}
    for t in transforms:
        if t.name in table:
            raise RuntimeError(f"two transforms are named {t.name!r}")
        table[t.name] = t
    return table


def get_transform(name: str) -> Transform:
    table = registry()
    if name in table:
        return table[name]
    raise KeyError(f"unknown transform {name!r}{did_you_mean(name, table)}")


def families() -> dict[str, str]:
    """Each transform's family, by transform name (what reports and exports group flips by)."""
    return {name: t.info.family for name, t in registry().items()}
