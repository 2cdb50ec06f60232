"""Generative guards behind any OpenAI-compatible server (vLLM, SGLang, hosted endpoints).

Chat requests go to /chat/completions (the server applies the checkpoint's chat template;
template kwargs travel as `chat_template_kwargs`), raw prompts to /completions. Greedy,
with top logprobs. The server's own reasoning field (gpt-oss) is kept apart from the text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from margin.guards.backends.http import AsyncEndpoint, run_sync
from margin.guards.generation import Generation, GuardRequest, Step
from margin.guards.secrets import redact

#: Requests in flight when a library user calls `generate` outside the engine.
SYNC_CONCURRENCY = 8


class MalformedResponse(ValueError):
    """A response without the fields every completion has: no output, retried."""


class OpenAIChatBackend:
    """Chat or raw completions on an OpenAI-compatible server, one request per call."""

    remote = True  # the engine streams `agenerate` calls

    def __init__(self, endpoint: AsyncEndpoint, model: str, *, top_logprobs: int = 20) -> None:
        self.endpoint = endpoint
        self.model = model
        self.top_logprobs = top_logprobs

    async def agenerate(self, request: GuardRequest) -> Generation:
        """One attempt; raises TransportError when the server gave no usable completion (an
        HTTP error, a dropped connection, a body that is not a completion)."""
        return await self.endpoint.attempt(lambda client: self._one(client, request))

    def generate(self, requests: Sequence[GuardRequest]) -> list[Generation | Exception]:
        """For use outside the engine: every request once, a few at a time."""

        async def all_of() -> list[Generation | Exception]:
            gate = asyncio.Semaphore(SYNC_CONCURRENCY)

            async def one(request: GuardRequest) -> Generation:
                async with gate:
                    return await self.agenerate(request)

            results = await asyncio.gather(*(one(r) for r in requests), return_exceptions=True)
            return [r if isinstance(r, Generation | Exception) else RuntimeError(str(r)) for r in results]

        return run_sync(all_of, self.endpoint)

    async def _one(self, client: Any, request: GuardRequest) -> Generation:
        if request.prompt is not None:
            # The server tokenizer adds BOS itself: drop the literal one (no double BOS).
            prompt = request.prompt.removeprefix("<s>")
            kwargs: dict[str, Any] = {"logprobs": self.top_logprobs} if self.top_logprobs else {}
            response = await client.completions.create(model=self.model, prompt=prompt, temperature=0,
                                                       max_tokens=request.max_new_tokens, **kwargs)
            return completion_generation(response)
        extra_body: dict[str, Any] = {}
        if request.chat_template_kwargs:
            extra_body["chat_template_kwargs"] = request.chat_template_kwargs
        if not request.add_generation_prompt:
            extra_body["add_generation_prompt"] = False
        if request.keep_special_tokens:
            extra_body["skip_special_tokens"] = False
        kwargs = {"logprobs": True, "top_logprobs": self.top_logprobs} if self.top_logprobs else {}
        response = await client.chat.completions.create(
            model=self.model, messages=list(request.messages or ()), temperature=0,
            max_tokens=request.max_new_tokens, extra_body=extra_body or None, **request.extra, **kwargs)
        return chat_generation(response)

    async def aclose(self) -> None:
        await self.endpoint.aclose()

    def close(self) -> None:
        self.endpoint.close()


def chat_generation(response: Any) -> Generation:
    choices = getattr(response, "choices", None)
    if not choices:
        raise MalformedResponse("response has no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if message is None:
        raise MalformedResponse("choice has no message")
    text = message.content if isinstance(message.content, str) else ""
    extra = getattr(message, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    steps: list[Step] = []
    logprobs = getattr(choice, "logprobs", None)
    for item in (getattr(logprobs, "content", None) or []):
        top = tuple((t.token, float(t.logprob)) for t in (item.top_logprobs or []))
        if all(token != item.token for token, _ in top):
            top = (*top, (item.token, float(item.logprob)))
        steps.append(Step(item.token, top))
    return Generation(text=redact(text), steps=tuple(steps),
                      reasoning=redact(reasoning) if isinstance(reasoning, str) else None,
                      truncated=choice.finish_reason == "length")


def completion_generation(response: Any) -> Generation:
    choices = getattr(response, "choices", None)
    if not choices or not isinstance(getattr(choices[0], "text", None), str):
        raise MalformedResponse("response has no completion text")
    choice = choices[0]
    steps: list[Step] = []
    logprobs = getattr(choice, "logprobs", None)
    tokens = getattr(logprobs, "tokens", None) or []
    tops = getattr(logprobs, "top_logprobs", None) or [None] * len(tokens)
    chosen = getattr(logprobs, "token_logprobs", None) or [None] * len(tokens)
    for token, top, own in zip(tokens, tops, chosen, strict=False):
        pairs = tuple((str(k), float(v)) for k, v in (top or {}).items())
        if own is not None and all(t != token for t, _ in pairs):
            pairs = (*pairs, (token, float(own)))
        steps.append(Step(token, pairs))
    return Generation(text=redact(choice.text), steps=tuple(steps), truncated=choice.finish_reason == "length")
