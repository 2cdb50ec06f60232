"""A run in the formats other tools read: inspect_ai eval logs, garak report JSONL,
JailbreakBench-style artifacts, SARIF 2.1.0 and JUnit XML (one module per format, in `formats/`)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

#: Every export format, by the name `--format` takes, and the module that renders it: each module
#: in `formats/`, found without importing it (so the CLI starts as light), imported when used. The
#: CLI, the library (`margin.export`) and the docs read this table.
EXPORTERS: dict[str, str] = {module.name: f"{__name__}.formats.{module.name}"
                             for module in sorted(pkgutil.iter_modules([str(Path(__file__).parent / "formats")]),
                                                  key=lambda module: module.name)}


def exporter(fmt: str) -> ModuleType:
    return importlib.import_module(EXPORTERS[fmt])
