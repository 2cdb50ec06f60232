"""The Guard interface: a batched classifier with an identity."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence

from margin.errors import UnanswerableInput
from margin.guards.shapes import PROMPT_ONLY, Shapes
from margin.types import GuardInfo, Verdict

#: A guard's own label where it only has a probability (a classifier, minilm): even odds.
EVEN_ODDS = 0.5

log = logging.getLogger(__name__)


def over_window(tokens: int, window: int) -> UnanswerableInput:
    """What a local classifier returns for a text longer than its window: no output, never a
    truncation, and no retry (the same text is as long the next time)."""
    log.warning("input is %d tokens, over the %d-token window (never truncated)", tokens, window)
    return UnanswerableInput(f"input is {tokens} tokens, over the {window}-token window (never truncated)")


def apply_threshold(verdict: Verdict, threshold: float | None) -> Verdict:
    """The one way a threshold decides a verdict, in every guard margin builds: with one,
    unsafe when p_unsafe >= threshold; without one (or without a p_unsafe, or for an invalid
    output) the guard's own label stands: a generative guard's parsed answer, a moderation
    API's flags, a classifier's even odds."""
    if verdict.label == "invalid" or verdict.p_unsafe is None or threshold is None:
        return verdict
    return verdict._replace(label="unsafe" if verdict.p_unsafe >= threshold else "safe")


class Guard(ABC):
    """Classify a batch of texts.

    `classify` returns one item per text: a Verdict for a completed output (`invalid` when
    the output has no classification), or None or the Exception that kept it when that text
    produced no output (timeout, HTTP 5xx, crash). Raising means the whole batch produced no
    output. Either way the engine retries, then records the call as missing: never as a
    verdict. A `margin.errors.UnanswerableInput` (a text over the model's window) is not
    retried: it is missing after one attempt, with its reason.
    """

    #: The most texts one `classify` call should receive.
    max_batch_size: int = 64
    #: A guard behind a remote endpoint: the engine streams `aclassify` calls of
    #: `texts_per_request` texts each, many in flight, instead of batching `classify`.
    remote: bool = False
    texts_per_request: int = 1
    #: Which cases it takes and what of them it sees (`margin.guards.shapes`): a guard written
    #: for prompts takes single prompts unless it says more. One that sees whole cases gets a
    #: `margin.types.Exchange` for each text.
    shapes: Shapes = PROMPT_ONLY
    #: the identity `info` returns, in every guard margin builds
    _info: GuardInfo

    @property
    @abstractmethod
    def info(self) -> GuardInfo: ...

    def identify(self, info: GuardInfo) -> None:
        """Take the identity a spec declares on top of the guard's own (its id, scope and
        caveats): `build_guard` calls it, so `build_guard(s).info == describe_guard(s)`."""
        self._info = info

    @abstractmethod
    def classify(self, texts: Sequence[str]) -> Sequence[Verdict | Exception | None]: ...

    async def aclassify(self, texts: Sequence[str]) -> list[Verdict]:
        """Remote guards: one attempt at one request. A verdict per text (`invalid` for an
        output with no classification); raises `margin.errors.TransportError` when the
        endpoint gave no usable answer."""
        raise NotImplementedError(f"{type(self).__name__} is not a remote guard")

    def close(self) -> None:  # noqa: B027 (optional hook, not abstract)
        """Release models or connections; the default holds none."""

    async def aclose(self) -> None:
        """Remote guards: release the running loop's connections."""
        self.close()
