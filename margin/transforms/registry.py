"""The registry of transforms by name."""

from __future__ import annotations

import functools

from margin.suggest import did_you_mean
from margin.transforms.base import Transform
from margin.transforms.noise import Leetspeak, NeighbourSwap
from margin.transforms.unicode_edits import FullWidth, Homoglyph, ZeroWidthSpace
from margin.transforms.wrappers import load_wrappers


@functools.cache
def registry() -> dict[str, Transform]:
    transforms: list[Transform] = [
        Homoglyph(),
        ZeroWidthSpace(),
        FullWidth(),
        Leetspeak(),
        NeighbourSwap(),
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
