"""The registry of transforms by name, gathered from the modules of this package.

A module that defines transforms lists them beside their code, in a module-level
`TRANSFORMS` tuple, and says with `ORDER` (an int) where its transforms stand in the list.
The registry shows every edit before every wrapper; within a kind, modules by `ORDER`, and a
module's transforms in its own order: the order `margin transforms list` and
docs/transforms.md show. Adding a transform to a module therefore touches only that module;
tests/transforms/test_registry.py fails if a transform class is left out of its module's list.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from types import ModuleType

from margin.transforms.base import Transform
from margin.util.modules import package_modules
from margin.util.suggest import did_you_mean


def transform_modules() -> list[ModuleType]:
    """Every module of `margin.transforms`, imported, in name order."""
    return package_modules(__package__ or "margin.transforms")


def gather(modules: Iterable[ModuleType]) -> dict[str, Transform]:
    """The transforms the modules list in `TRANSFORMS`, by name, in registry order."""
    placed: list[tuple[bool, int, int, Transform]] = []
    for module in modules:
        listed = getattr(module, "TRANSFORMS", None)
        if listed is None:
            continue
        order = getattr(module, "ORDER", None)
        if not isinstance(order, int):
            raise RuntimeError(f"{module.__name__} lists TRANSFORMS but has no int ORDER")
        placed += [(t.kind != "edit", order, index, t) for index, t in enumerate(listed)]
    table: dict[str, Transform] = {}
    for *_, t in sorted(placed, key=lambda item: item[:3]):
        if t.name in table:
            raise RuntimeError(f"two transforms are named {t.name!r}")
        table[t.name] = t
    return table


@functools.cache
def registry() -> dict[str, Transform]:
    return gather(transform_modules())


def get_transform(name: str) -> Transform:
    table = registry()
    if name in table:
        return table[name]
    raise KeyError(f"unknown transform {name!r}{did_you_mean(name, table)}")


def families() -> dict[str, str]:
    """Each transform's family, by transform name (what reports and exports group flips by)."""
    return {name: t.info.family for name, t in registry().items()}
