"""A normalising guard: texts are normalised, then the wrapped guard classifies them.

`--normalize` runs a guard behind the pre-processing a deployment might add, so a user sees
which robustness comes only from that pre-processing:

- `nfkc`: Unicode NFKC (folds full-width, mathematical, superscript and circled letters);
- `strip-format`: drops format characters (category Cf: zero-width characters, bidi
  controls, tags, soft hyphen, word joiner, invisible operators) and variation selectors;
- `nfkc+strip-format`: both, stripping first so NFKC can compose what the stripped
  characters kept apart.

The wrapped guard's identity gains the normalisation (`+nfkc` on its id, `normalize` in its
params), so caches and snapshots never mix normalised and raw verdicts.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Sequence

from margin.guards.base import Guard
from margin.types import GuardInfo, Verdict

NORMALIZATIONS = ("nfkc", "strip-format", "nfkc+strip-format")


def is_format(ch: str) -> bool:
    cp = ord(ch)
    if 0xFE00 <= cp <= 0xFE0F or 0xE0100 <= cp <= 0xE01EF:  # variation selectors (Mn)
        return True
    return unicodedata.category(ch) == "Cf"


def strip_format(text: str) -> str:
    return "".join(ch for ch in text if not is_format(ch))


def normalize(text: str, how: str) -> str:
    if how not in NORMALIZATIONS:
        raise ValueError(f"unknown normalisation {how!r}; expected one of {', '.join(NORMALIZATIONS)}")
    if "strip-format" in how:
        text = strip_format(text)
    if how.startswith("nfkc"):
        text = unicodedata.normalize("NFKC", text)
    return text


def normalized_info(base: GuardInfo, how: str) -> GuardInfo:
    """The identity of guard `base` behind normalisation `how`."""
    return dataclasses.replace(
        base,
        id=f"{base.id}+{how}",
        params=(*base.params, ("normalize", how)),
        caveats=(*base.caveats, f"texts normalised ({how}) before the guard sees them"),
    )


class NormalizingGuard(Guard):
    def __init__(self, inner: Guard, how: str) -> None:
        normalize("", how)  # refuse an unknown normalisation now, not at the first call
        self.inner = inner
        self.how = how
        self.max_batch_size = inner.max_batch_size
        self.remote = inner.remote
        self.texts_per_request = inner.texts_per_request
        self._info = normalized_info(inner.info, how)

    @property
    def info(self) -> GuardInfo:
        return self._info

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        normalised = [normalize(t, self.how) for t in texts]
        unique = list(dict.fromkeys(normalised))  # texts that normalise alike are asked once
        verdicts = dict(zip(unique, self.inner.classify(unique), strict=True))
        return [verdicts[n] for n in normalised]

    async def aclassify(self, texts: Sequence[str]) -> list[Verdict]:
        normalised = [normalize(t, self.how) for t in texts]
        unique = list(dict.fromkeys(normalised))
        verdicts = dict(zip(unique, await self.inner.aclassify(unique), strict=True))
        return [verdicts[n] for n in normalised]

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()
