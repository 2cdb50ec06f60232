"""Generative guards behind any OpenAI-compatible server (vLLM, SGLang, hosted endpoints).

Chat requests go to /chat/completions (the server applies the checkpoint's chat template;
template kwargs travel as `chat_template_kwargs`), raw prompts to /completions. Greedy,
with top logprobs. The server's own reasoning field (gpt-oss) is kept apart from the text.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from margin.backends.generation import Generation, GuardRequest, Step
from margin.backends.http import AsyncEndpoint, run_sync
from margin.backends.secrets import redact

#: Requests in flight when a library user calls `generate` outside the engine.
SYNC_CONCURRENCY = 8


class MalformedResponse(ValueError):
    """A response without the fields every completion has: no output, retried."""


class OpenAIChatBackend:
    """Chat or raw completions on an OpenAI-compatible server, one request per call."""

    remote = True  # the engine streams `agenerate` calls

    def __init__(self, endpoint: AsyncEndpoint, model: str, *, top_logprobs: int = 20,
                 extra_body: Mapping[str, Any] | None = None) -> None:
        self.endpoint = endpoint
        self.model = model
        self.top_logprobs = top_logprobs
        #: fields sent with every request, over margin's own (a guard's request_options)
        self.extra_body = dict(extra_body or {})

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
        # Plain JSON through the client's `post`: the typed `create` methods spend more CPU
        # building and validating each request than a fast server spends answering it.
        if request.prompt is not None:
            # The server tokenizer adds BOS itself: drop the literal one (no double BOS).
            body: dict[str, Any] = {"model": self.model, "prompt": request.prompt.removeprefix("<s>"),
                                    "temperature": 0, "max_tokens": request.max_new_tokens}
            if self.top_logprobs:
                body["logprobs"] = self.top_logprobs
            body.update(self.extra_body)
            return completion_generation(await client.post("/completions", body=body, cast_to=object))
        body = {"model": self.model, "messages": list(request.messages or ()), "temperature": 0,
                "max_tokens": request.max_new_tokens, **request.extra}
        if self.top_logprobs:
            body.update(logprobs=True, top_logprobs=self.top_logprobs)
        if request.chat_template_kwargs:
            body["chat_template_kwargs"] = request.chat_template_kwargs
        if not request.add_generation_prompt:
            body["add_generation_prompt"] = False
        if request.keep_special_tokens:
            body["skip_special_tokens"] = False
        body.update(self.extra_body)
        return chat_generation(await client.post("/chat/completions", body=body, cast_to=object))

    async def aclose(self) -> None:
        await self.endpoint.aclose()

    def close(self) -> None:
        self.endpoint.close()


def _first_choice(response: Any) -> dict[str, Any]:
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponse(f"response has no choices: {str(response)[:200]}")
    return choices[0]


def _logprob(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedResponse(f"a logprob that is not a number: {value!r}")
    return float(value)


def chat_generation(response: Any) -> Generation:
    """A chat completion's JSON as a Generation; MalformedResponse when it is not one."""
    choice = _first_choice(response)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("choice has no message")
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return Generation(text=redact(text), steps=chat_steps(choice.get("logprobs")),
                      reasoning=redact(reasoning) if isinstance(reasoning, str) else None,
                      truncated=choice.get("finish_reason") == "length")


def completion_generation(response: Any) -> Generation:
    """A (raw) completion's JSON as a Generation; MalformedResponse when it is not one."""
    choice = _first_choice(response)
    if not isinstance(choice.get("text"), str):
        raise MalformedResponse("response has no completion text")
    found = choice.get("logprobs")
    logprobs: dict[str, Any] = found if isinstance(found, dict) else {}
    # llama.cpp's server answers /completions in the chat shape (`logprobs.content[...]`).
    steps = chat_steps(logprobs) if "content" in logprobs else legacy_steps(logprobs)
    return Generation(text=redact(choice["text"]), steps=steps, truncated=choice.get("finish_reason") == "length")


def chat_steps(logprobs: Any) -> tuple[Step, ...]:
    """Steps from the chat shape: `content: [{token, logprob, top_logprobs: [{token, logprob}]}]`."""
    items = logprobs.get("content") if isinstance(logprobs, dict) else None
    steps: list[Step] = []
    for item in items or []:
        token = str(item["token"])
        top = tuple((str(t["token"]), _logprob(t["logprob"])) for t in (item.get("top_logprobs") or []))
        if all(candidate != token for candidate, _ in top):
            top = (*top, (token, _logprob(item["logprob"])))
        steps.append(Step(token, top))
    return tuple(steps)


def legacy_steps(logprobs: dict[str, Any]) -> tuple[Step, ...]:
    """Steps from OpenAI's legacy completion shape: `tokens`, `token_logprobs`, `top_logprobs`."""
    steps: list[Step] = []
    tokens = logprobs.get("tokens") or []
    tops = logprobs.get("top_logprobs") or [None] * len(tokens)
    chosen = logprobs.get("token_logprobs") or [None] * len(tokens)
    for token, top, own in zip(tokens, tops, chosen, strict=False):
        pairs = tuple((str(k), _logprob(v)) for k, v in (top or {}).items())
        if own is not None and all(t != token for t, _ in pairs):
            pairs = (*pairs, (str(token), _logprob(own)))
        steps.append(Step(str(token), pairs))
    return tuple(steps)
