"""The Guard interface: a batched classifier with an identity."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from margin.types import GuardInfo, Verdict


class Guard(ABC):
    """Classify a batch of texts.

    `classify` returns one item per text: a Verdict for a completed output (`invalid` when
    the output has no classification), or None when that text produced no output (timeout,
    HTTP 5xx, crash). Raising means the whole batch produced no output. Either way the
    engine retries, then records the call as missing: never as a verdict.
    """

    #: The most texts one `classify` call should receive.
    max_batch_size: int = 64

    @property
    @abstractmethod
    def info(self) -> GuardInfo: ...

    @abstractmethod
    def classify(self, texts: Sequence[str]) -> list[Verdict | None]: ...

    def close(self) -> None:  # noqa: B027 (optional hook, not abstract)
        """Release models or connections; the default holds none."""
