"""The modules of a package, imported: how a registry gathers what its modules list beside their code."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def package_modules(package_name: str) -> list[ModuleType]:
    """Every module (not sub-package) of `package_name`, imported, in name order."""
    package = importlib.import_module(package_name)
    return [importlib.import_module(f"{package.__name__}.{info.name}")
            for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name)
            if not info.ispkg]
