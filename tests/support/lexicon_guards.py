"""Known-answer guards for adaptive search: their exact flip costs are computable.

`SubstringLexiconGuard` blocks a text holding any term anywhere (occurrences may overlap,
so breaking them is true interval stabbing). `WeightedLexiconGuard` reports a score, the
summed weights of the distinct words present, and blocks at or above a threshold: a guard
with graded reactions whose cheapest flip needs several words knocked out. Negative weights
make benign context: a safe prompt then flips when its benign words are knocked out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from margin.guards.base import Guard
from margin.types import GuardInfo, Verdict

WORD = re.compile(r"\w+")


def fold(text: str) -> str:
    # One code point in, one out, so offsets in the folded text are offsets in the original.
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


class SubstringLexiconGuard(Guard):
    max_batch_size = 1024
    TERMS = ("bomb", "kill", "poison", "weapon", "murder", "explos", "terror", "stab", "drug", "shoot", "omber", "berm")

    def __init__(self, terms: Sequence[str] | None = None) -> None:
        self.terms = tuple(terms or self.TERMS)

    @property
    def info(self) -> GuardInfo:
        return GuardInfo(id="substring-lexicon", family="test", checkpoint="substring", revision="1", backend="python")

    def triggers(self, text: str) -> list[tuple[int, int, str]]:
        folded = fold(text)
        found = []
        for term in self.terms:
            start = folded.find(term)
            while start != -1:
                found.append((start, start + len(term), term))
                start = folded.find(term, start + 1)
        return sorted(found)

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        return [Verdict("unsafe" if self.triggers(t) else "safe", raw="") for t in texts]


class WeightedLexiconGuard(Guard):
    max_batch_size = 1024

    def __init__(self, weights: dict[str, float] | None = None, threshold: float = 1.0) -> None:
        self.weights = weights or {"bomb": 0.6, "kill": 0.6, "poison": 0.5, "people": 0.3, "school": 0.3,
                                   "weapon": 0.4, "make": 0.2, "how": 0.1}
        self.threshold = threshold

    @property
    def info(self) -> GuardInfo:
        return GuardInfo(id="weighted-lexicon", family="test", checkpoint="weighted", revision="1",
                         backend="python", threshold=self.threshold)

    def score(self, text: str) -> float:
        words = {w.casefold() for w in WORD.findall(text)}
        return sum(weight for word, weight in self.weights.items() if word in words)

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        out: list[Verdict | None] = []
        for text in texts:
            s = self.score(text)
            p = 1.0 / (1.0 + math.exp(-4.0 * (s - self.threshold)))  # >= 0.5 exactly when blocked
            out.append(Verdict("unsafe" if s >= self.threshold else "safe", p_unsafe=p, raw=f"{s:.2f}"))
        return out
