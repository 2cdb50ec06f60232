"""Moderation-API guards (OpenAI, Mistral) over the shared HTTP endpoint machinery.

Texts go in lists of `max_batch_size` per request. A request without a usable answer raises
TransportError (the engine retries it); a response without a result per text, or a result without the expected
fields, is `invalid` for the affected texts only when the rest of the response is sound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from margin.backends.http import AsyncEndpoint, run_sync
from margin.backends.secrets import redact
from margin.errors import TransportError
from margin.guards.adapters.moderation import Moderation
from margin.guards.base import Guard, apply_threshold
from margin.types import GuardInfo, Verdict


class ModerationGuard(Guard):
    remote = True

    def __init__(self, adapter: Moderation, endpoint: AsyncEndpoint, model: str, info: GuardInfo, *,
                 max_batch_size: int = 32) -> None:
        self.adapter = adapter
        self.shapes = adapter.shapes  # the target text alone
        self.endpoint = endpoint
        self.model = model
        self._info = info
        self.max_batch_size = max_batch_size
        self.texts_per_request = max_batch_size  # the APIs take a list of inputs per request

    @property
    def info(self) -> GuardInfo:
        return self._info

    async def _post(self, client: Any, texts: list[str]) -> list[Any]:
        response = await client.post(self.adapter.path, body=self.adapter.body(self.model, texts), cast_to=object)
        results = self.adapter.results(response)
        if results is None or len(results) != len(texts):
            # A body without one result per input is not an answer: retried as no output.
            raise TransportError(redact(f"expected {len(texts)} results, got {str(response)[:200]}"))
        return results

    async def aclassify(self, texts: Sequence[str]) -> list[Verdict]:
        results = await self.endpoint.attempt(lambda client: self._post(client, list(texts)))
        verdicts = [apply_threshold(self.adapter.parse(r), self._info.threshold) for r in results]
        return [v._replace(raw=redact(v.raw)) for v in verdicts]

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        """For use outside the engine: one attempt per request of `max_batch_size` texts."""
        size = self.max_batch_size

        async def all_of() -> list[Verdict | None]:
            out: list[Verdict | None] = []
            for start in range(0, len(texts), size):
                chunk = list(texts[start:start + size])
                try:
                    out += await self.aclassify(chunk)
                except TransportError:
                    out += [None] * len(chunk)
            return out

        return run_sync(all_of, self.endpoint)

    def close(self) -> None:
        self.endpoint.close()

    async def aclose(self) -> None:
        await self.endpoint.aclose()
