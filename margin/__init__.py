"""margin: how much must a prompt change before a guardrail gets it wrong?

The face for Python (docs/api.md): `margin.run`, `margin.study`, `margin.load_run`,
`margin.load_snapshots`, `margin.receipts_schema`, and the data model. `import margin` stays light: it never imports
torch, transformers, vllm or Ray.
"""

from margin.api import LoadedRun, load_run, load_snapshots, receipts_schema, run, study
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
    "LoadedRun",
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
