"""Guard presets by name, gathered from the adapter modules: each lists its family's presets
beside its code, in a module-level `PRESETS` tuple (`margin.guards.adapters.preset.Preset`), so
a new family is its module, its parse test and its docs/guards.md row. `margin guards list`
shows them in the modules' name order, each module's in its own order.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType

from margin.guards.adapters.base import Adapter
from margin.guards.adapters.families import FAMILIES, adapter_modules
from margin.guards.adapters.preset import Preset
from margin.guards.shapes import Shapes

#: The generative families (a chat template and a served or local model), read from the one table.
GENERATIVE: dict[str, type[Adapter]] = {f: cls for f, cls in FAMILIES.items() if issubclass(cls, Adapter)}


def gather_presets(modules: Iterable[ModuleType]) -> list[Preset]:
    """The presets the modules list in `PRESETS`, each of a family its own module lists in
    `ADAPTERS` (a programming error, raised at import, otherwise); one name once."""
    found: list[Preset] = []
    for module in modules:
        own = {cls.family for cls in getattr(module, "ADAPTERS", ())}
        for preset in getattr(module, "PRESETS", ()):
            if preset.family not in own:
                raise RuntimeError(f"{module.__name__} lists preset {preset.name!r} of family {preset.family!r}, "
                                   "which its ADAPTERS do not define")
            if any(p.name == preset.name for p in found):
                raise RuntimeError(f"two presets are named {preset.name!r}")
            found.append(preset)
    return found


def preset_shapes(preset: Preset) -> Shapes:
    """The cases a preset's adapter renders."""
    family = FAMILIES[preset.family]
    return family.shapes_for(preset.variant) if issubclass(family, Adapter) else family.shapes


def preset_labels(preset: Preset) -> str:
    return FAMILIES[preset.family].labels


PRESET_LIST = gather_presets(adapter_modules())
PRESETS: dict[str, Preset] = {p.name: p for p in PRESET_LIST}


#: The `prompted` kind: any instruct model (`model:` names it; there is no default) told
#: `options.policy` and read by `options.labels` (words) or `options.pattern` (a regex). It is
#: built as a preset is, but it is not one: it has no checkpoint of its own.
PROMPTED = Preset("prompted", "prompted", "", "", "any instruct model told options.policy, read by "
                  "options.labels (words) or options.pattern (a regex)", backend="openai")


def preset_of(name: str) -> Preset:
    """The preset named `name`, or the `prompted` kind's."""
    return PROMPTED if name == PROMPTED.name else PRESETS[name]


def find_preset(name: str) -> Preset | None:
    """The preset (or the `prompted` kind's) a guard name builds on; None for keyword,
    minilm and python: guards."""
    return PROMPTED if name == PROMPTED.name else PRESETS.get(name)
