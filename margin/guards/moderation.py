"""Moderation-API guards (OpenAI, Mistral) over the shared HTTP endpoint machinery.

Texts go in batches of `max_batch_size` per request. An HTTP failure after retries is no
output (None); a response without a result per text, or a result without the expected
fields, is `invalid` for the affected texts only when the rest of the response is sound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from margin.guards.adapters.moderation import Moderation
from margin.guards.backends.http import AsyncEndpoint, CallFailed
from margin.guards.base import Guard
from margin.guards.secrets import redact
from margin.types import GuardInfo, Verdict


class ModerationGuard(Guard):
    def __init__(self, adapter: Moderation, endpoint: AsyncEndpoint, model: str, info: GuardInfo, *,
                 max_batch_size: int = 32) -> None:
        self.adapter = adapter
        self.endpoint = endpoint
        self.model = model
        self._info = info
        self.max_batch_size = max_batch_size

    @property
    def info(self) -> GuardInfo:
        return self._info

    async def _post(self, texts: list[str]) -> list[Any]:
        response = await self.endpoint.client.post(self.adapter.path, body=self.adapter.body(self.model, texts),
                                                   cast_to=object)
        results = self.adapter.results(response)
        if results is None or len(results) != len(texts):
            # A body without one result per input is not an answer: retried as no output.
            raise CallFailed(redact(f"expected {len(texts)} results, got {str(response)[:200]}"))
        return results

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        results = self.endpoint.run(self.endpoint.call(lambda: self._post(list(texts))))
        verdicts = [self.adapter.parse(r, self._info.threshold) for r in results]
        return [replace(v, raw=redact(v.raw)) for v in verdicts]

    def close(self) -> None:
        self.endpoint.close()
