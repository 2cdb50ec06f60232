"""Small guards and builders for tests: each is a real Guard, with known answers."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

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


class SlowGuard(HashGuard):
    """A HashGuard whose every call takes `delay_s`, so a run lasts long enough to disturb."""

    max_batch_size = 16

    def __init__(self, delay_s: float = 0.01, **kwargs: float | str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.delay_s = delay_s

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        time.sleep(self.delay_s)
        return super().classify(texts)


class FaultScheduleGuard(HashGuard):
    """A HashGuard that raises on 20% of its calls and hangs on 5%, on a fixed schedule.

    The call counter lives in a file, so the schedule carries on when Ray restarts the
    actor (a restart rebuilds the guard from scratch)."""

    def __init__(self, counter: Path, hang_s: float = 3600.0, **kwargs: float | str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.counter = counter
        self.hang_s = hang_s

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        number = int(self.counter.read_text() or 0) if self.counter.exists() else 0
        self.counter.write_text(str(number + 1))
        if number % 20 == 8:
            time.sleep(self.hang_s)  # a hang: only the engine's timeout gets past it
        if number % 5 == 2:
            raise ConnectionError("simulated guard failure")
        return super().classify(texts)
