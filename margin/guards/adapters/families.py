"""The table of adapter families, gathered from the modules of this package.

A module that defines adapters lists them beside their code, in a module-level `ADAPTERS`
tuple; each class names its `family`. Presets, spec checks (the preset kind's, through
`margin.guards.spec.adapter_for`) and the parser property tests read `FAMILIES`, so adding a
family touches only its module (which lists its presets too, in `PRESETS`), its test and its
docs row; tests/guards/test_adapter_families.py fails if an adapter class is left out of its
module's list.

Three interfaces share the table: generative adapters (`Adapter`: requests in, generations
out), moderation APIs (`Moderation`: one vendor result in) and sequence classifiers (logits in).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType

from margin.guards.adapters.base import Adapter
from margin.guards.adapters.moderation import Moderation
from margin.guards.adapters.sequence_classifier import SequenceClassifier
from margin.util.modules import package_modules

#: The interfaces a family class can have; a class of none of them is refused.
INTERFACES: tuple[type, ...] = (Adapter, Moderation, SequenceClassifier)
Family = type[Adapter] | type[Moderation] | type[SequenceClassifier]


def adapter_modules() -> list[ModuleType]:
    """Every module of `margin.guards.adapters`, imported, in name order."""
    return package_modules(__package__ or "margin.guards.adapters")


def gather(modules: Iterable[ModuleType]) -> dict[str, Family]:
    """The classes the modules list in `ADAPTERS`, by family, in module then listed order."""
    table: dict[str, Family] = {}
    for module in modules:
        for cls in getattr(module, "ADAPTERS", ()):
            if not issubclass(cls, INTERFACES):
                raise RuntimeError(f"{module.__name__} lists {cls.__name__}, which is not an adapter")
            if cls.family in table:
                raise RuntimeError(f"two adapters are family {cls.family!r}")
            table[cls.family] = cls
    return table


FAMILIES: dict[str, Family] = gather(adapter_modules())
