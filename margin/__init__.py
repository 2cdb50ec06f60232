"""margin: how much must a prompt change before a guardrail gets it wrong?

`import margin` stays light: it never imports torch, transformers or vllm.
"""

from margin.types import (
    Candidate,
    Flip,
    GuardCall,
    GuardInfo,
    MarginReport,
    Prompt,
    SearchResult,
    TransformInfo,
    Verdict,
)

__all__ = [
    "Candidate",
    "Flip",
    "GuardCall",
    "GuardInfo",
    "MarginReport",
    "Prompt",
    "SearchResult",
    "TransformInfo",
    "Verdict",
]
