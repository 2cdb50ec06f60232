"""`keyword`: a lexicon blocklist, the kind many deployments run in front of a model.

A text is unsafe when one of its words starts with a blocklisted stem (or, for an entry
written `word$`, is that word). Words are maximal
runs of Unicode word characters, compared after casefolding and nothing else: like most
deployed blocklists, it does not normalise Unicode, so it is the baseline that shows what
simple character edits do.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from importlib import resources

from margin.guards.base import Guard
from margin.guards.shapes import TEXT
from margin.types import GuardInfo, Verdict
from margin.util.hashing import sha256_text

WORD = re.compile(r"\w+")


@functools.cache
def default_lexicon() -> tuple[str, ...]:
    text = resources.files("margin").joinpath("guards", "lexicons", "keyword.txt").read_text("utf-8")
    return parse_lexicon(text)


def parse_lexicon(text: str) -> tuple[str, ...]:
    stems = {line.split("#", 1)[0].strip().casefold() for line in text.splitlines()}
    return tuple(sorted(s for s in stems if s))


class KeywordGuard(Guard):
    max_batch_size = 4096
    shapes = TEXT  # a lexicon reads the target text, whichever turn it is

    def __init__(self, stems: Sequence[str] | None = None) -> None:
        self.stems = tuple(sorted({s.casefold() for s in (stems or default_lexicon())}))
        if not self.stems:
            raise ValueError("a keyword guard needs at least one stem")
        # A word that no stem prefixes and no exact entry equals needs no closer look.
        self._prefixes = tuple(s for s in self.stems if not s.endswith("$"))
        self._exact = frozenset(s[:-1] for s in self.stems if s.endswith("$"))
        self._info = GuardInfo(
            id="keyword",
            family="keyword",
            checkpoint="margin-keyword-lexicon",
            revision=sha256_text("\n".join(self.stems))[:16],
            backend="python",
            template="",
            template_sha256="",
            threshold=None,
            caveats=("lexicon blocklist baseline: no model, no Unicode normalisation",),
        )

    @property
    def info(self) -> GuardInfo:
        return self._info

    def _matches(self, word: str, entry: str) -> bool:
        return word == entry[:-1] if entry.endswith("$") else word.startswith(entry)

    def triggers(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, entry) for every blocked word: [start, end) is the span an edit must
        touch to unblock it (the shortest matching stem, or the whole word for `word$`)."""
        found = []
        for word in WORD.finditer(text):
            folded = word.group().casefold()
            if not (folded.startswith(self._prefixes) or folded in self._exact):
                continue
            hits = [e for e in self.stems if self._matches(folded, e)]
            if hits:
                entry = min(hits, key=lambda e: len(e.rstrip("$")))
                found.append((word.start(), word.start() + len(entry.rstrip("$")), entry))
        return found

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        verdicts: list[Verdict | None] = []
        for text in texts:
            hits = self.triggers(text)
            if hits:
                verdicts.append(Verdict("unsafe", raw="matched: " + ",".join(sorted({h[2] for h in hits}))))
            else:
                verdicts.append(Verdict("safe", raw="no match"))
        return verdicts
