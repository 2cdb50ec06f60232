"""Small guards and builders for tests: each is a real Guard, with known answers."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from margin.guards.base import Guard
from margin.types import GuardInfo, Verdict


class HashGuard(Guard):
    """A deterministic pseudo-random guard: the verdict is a function of the text's hash.

    `unsafe_share` of all texts are unsafe, `invalid_share` invalid; every distinct text
    gets an independent answer, so search strategies see many different flip positions.
    """

    def __init__(self, unsafe_share: float = 0.5, invalid_share: float = 0.0, salt: str = "") -> None:
        self.unsafe_share = unsafe_share
        self.invalid_share = invalid_share
        self.salt = salt
        self.seen: list[str] = []

    @property
    def info(self) -> GuardInfo:
        return GuardInfo(id=f"hash{self.salt}", family="test", checkpoint="hash", revision="1", backend="python")

    def score(self, text: str) -> float:
        digest = hashlib.sha256((self.salt + text).encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        self.seen.extend(texts)
        out: list[Verdict | None] = []
        for text in texts:
            s = self.score(text)
            if s < self.invalid_share:
                out.append(Verdict("invalid", raw="???"))
            else:
                label = "unsafe" if s < self.invalid_share + self.unsafe_share else "safe"
                out.append(Verdict(label, p_unsafe=s, raw=label))
        return out


class FlakyGuard(Guard):
    """Wraps a guard; fails whole calls or single items on a fixed schedule of call numbers."""

    def __init__(self, inner: Guard, fail_every: int = 3, drop_text: str | None = None) -> None:
        self.inner = inner
        self.fail_every = fail_every
        self.drop_text = drop_text
        self.calls = 0

    @property
    def info(self) -> GuardInfo:
        return self.inner.info

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        self.calls += 1
        if self.fail_every and self.calls % self.fail_every == 0:
            raise TimeoutError("simulated timeout")
        out = self.inner.classify(texts)
        return [None if t == self.drop_text else v for t, v in zip(texts, out, strict=True)]


class ProbabilityGuard(Guard):
    """A guard with p_unsafe: a few alarm words raise it, a text hash adds noise; unsafe at
    p >= 0.5, so a threshold sweep at 0.5 must reproduce its own verdicts."""

    WORDS = ("kill", "shoot", "poison", "steal", "bomb", "attack", "hurt", "coke", "strangle", "execute")
    threshold = 0.5

    def __init__(self) -> None:
        self.seen: list[str] = []

    @property
    def info(self) -> GuardInfo:
        return GuardInfo(id="prob", family="test", checkpoint="prob", revision="1", backend="python",
                         threshold=self.threshold)

    def p(self, text: str) -> float:
        noise = int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:4], "big") / 2**32
        hits = sum(word in text.casefold() for word in self.WORDS)
        return round(min(1.0, 0.35 * hits + 0.3 * noise), 6)

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        self.seen.extend(texts)
        return [Verdict("unsafe" if (p := self.p(t)) >= self.threshold else "safe", p_unsafe=p, raw=str(p))
                for t in texts]
