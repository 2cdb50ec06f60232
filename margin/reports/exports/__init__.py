"""A run in the formats other tools read: inspect_ai eval logs, garak report JSONL,
JailbreakBench-style artifacts, SARIF 2.1.0 and JUnit XML (one module per format)."""

from __future__ import annotations

import importlib
from types import ModuleType

#: Every export format, by the name `--format` takes, and the module that renders it (its
#: `render(bundle) -> str` and `holds(text) -> str`, what the file holds, read back from it),
#: imported when used. The CLI, the library (`margin.export`) and the docs read this table; a
#: module in this package left out of it fails tests/reports/test_exporters.py.
EXPORTERS: dict[str, str] = {
    "inspect": "margin.reports.exports.inspect_log",
    "garak": "margin.reports.exports.garak",
    "jbb": "margin.reports.exports.jbb",
    "sarif": "margin.reports.exports.sarif",
    "junit": "margin.reports.exports.junit",
}


def exporter(fmt: str) -> ModuleType:
    return importlib.import_module(EXPORTERS[fmt])
