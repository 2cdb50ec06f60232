"""A stand-in for a guard faster than any driver (a small classifier on a GPU): it answers
from a hash of the text, a few microseconds a text. One text in 300 is unsafe, so a safe
prompt's search runs through most of its candidates, as with a robust guard.

    margin run --guard python:benchmarks/instant_guard.py:InstantGuard ...
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

from margin.guards.base import Guard
from margin.types import GuardInfo, Verdict

SAFE = Verdict("safe", raw="safe")
UNSAFE = Verdict("unsafe", raw="unsafe")


class InstantGuard(Guard):
    max_batch_size = 4096

    @property
    def info(self) -> GuardInfo:
        return GuardInfo(id="instant", family="benchmark", checkpoint="crc32", revision="1", backend="python")

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        return [UNSAFE if zlib.crc32(t.encode("utf-8", "surrogatepass")) % 300 == 0 else SAFE for t in texts]
