"""margin: how much must a prompt change before a guardrail gets it wrong?

The face for Python (docs/api.md): `margin.run`, `margin.study`, `margin.load_run`,
`margin.load_snapshots`, `margin.receipts_schema`, `margin.export`, and the data model. `import margin` stays light: it never imports
torch, transformers, vllm or Ray, and imports the names below only when first used, so the
`margin` command sets Ctrl-C up before anything slow loads.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from margin.api import (
        EXPORT_FORMATS,
        LoadedRun,
        export,
        load_run,
        load_snapshots,
        receipts_schema,
        run,
        study,
    )
    from margin.types import (
        Candidate,
        Exchange,
        Flip,
        GuardCall,
        GuardInfo,
        MarginReport,
        Prompt,
        SearchResult,
        TransformInfo,
        Turn,
        Verdict,
    )

__all__ = [
    "EXPORT_FORMATS",
    "LoadedRun",
    "export",
    "load_run",
    "load_snapshots",
    "receipts_schema",
    "run",
    "study",
    "Candidate",
    "Exchange",
    "Flip",
    "GuardCall",
    "GuardInfo",
    "MarginReport",
    "Prompt",
    "SearchResult",
    "TransformInfo",
    "Turn",
    "Verdict",
]
_API = frozenset(__all__[:8])  # the rest from margin.types


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'margin' has no attribute {name!r}")
    value = getattr(import_module("margin.api" if name in _API else "margin.types"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
