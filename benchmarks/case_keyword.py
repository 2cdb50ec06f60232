"""The keyword guard taking whole cases (`takes_cases = True`): the keyword guard's verdict on
each case's target text, but sent whole cases, keyed by them and batched as a model guard that
renders conversations (Llama Guard, WildGuard) is. `benchmarks.responses` uses it to see how
many cases a guard call holds.

    margin run --guard python:benchmarks/case_keyword.py:CaseKeyword --target response ...
"""

from __future__ import annotations

from collections.abc import Sequence

from margin.guards.keyword import KeywordGuard
from margin.types import Exchange, Verdict


class CaseKeyword:
    takes_cases = True
    max_batch_size = 4096

    def __init__(self) -> None:
        self.inner = KeywordGuard()

    def classify(self, cases: Sequence[Exchange]) -> list[Verdict | None]:
        return self.inner.classify([c.text for c in cases])
