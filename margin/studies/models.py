"""Chat models a study calls: the protected models and the judges' models.

A `ModelSpec` is a small picklable value (Ray ships it to actors, which build the model
there). Three backends, the guards' own: any OpenAI-compatible server (`openai`: vLLM,
SGLang, hosted endpoints; the engine streams its requests), `vllm` offline on a GPU and
local `transformers`. Generation is greedy with a token limit; a response that hits the
limit is kept and marked truncated.

`model_identity` is what decides a model's outputs; the response cache keys on it. Runtime
settings (replicas, CPUs, GPUs, batch size, concurrency, timeouts) never enter it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from margin.backends.gguf import file_sha256
from margin.backends.registry import (
    Backend,
    ChatSetup,
    backend_of,
    check_gguf,
    identity_options,
    local_gguf,
    remote_names,
)
from margin.backends.secrets import check_env_name, public_url
from margin.errors import InputError
from margin.util.hashing import canonical_json, sha256_text

Messages = list[dict[str, str]]


class ModelSpec(BaseModel):
    """How to reach a chat model and how it generates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str = "openai"  # a name in `margin.backends.registry`
    model: str = Field(min_length=1)  # the served name (openai) or the checkpoint (REPO or REPO@COMMIT)
    revision: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    system_prompt: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)  # None: the study's generation.max_tokens
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    request_options: dict[str, Any] = Field(default_factory=dict)  # openai only: extra request fields
    backend_options: dict[str, Any] = Field(default_factory=dict)

    replicas: int = Field(default=1, ge=1)
    num_cpus: float | None = Field(default=None, ge=0)  # None: 0 for openai (I/O only), else 1
    num_gpus: float = Field(default=0.0, ge=0)
    max_batch_size: int = Field(default=32, ge=1)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return check_env_name(value)

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        backend_of(value)  # UnknownBackend is a ValueError: pydantic names the field
        return value

    @model_validator(mode="after")
    def _fits_backend(self) -> ModelSpec:
        backend = self.runs_on
        if backend.remote and not self.base_url:
            raise ValueError(f"the {self.backend} backend needs base_url (the server's /v1 URL)")
        if not backend.remote:
            for name in ("base_url", "api_key_env"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} needs backend: {remote_names()}")
            if self.request_options:
                raise ValueError(f"request_options needs backend: {remote_names()}")
        backend.check_options(self.backend_options, guard=False)
        if local_gguf(self.model, self.backend):
            try:
                check_gguf(self.model, self.revision, backend)
            except InputError as exc:
                raise ValueError(exc.message) from None
        return self

    @property
    def runs_on(self) -> Backend:
        return backend_of(self.backend)

    @property
    def remote(self) -> bool:
        """Behind an endpoint: streamed from the study's process, no CPU or GPU reserved."""
        return self.runs_on.remote

    @property
    def cpus(self) -> float:
        return self.num_cpus if self.num_cpus is not None else (0.0 if self.remote else 1.0)

    def checkpoint(self) -> tuple[str, str | None]:
        if self.revision is None and "@" in self.model and not self.remote:  # a served name is not pinned
            name, revision = self.model.rsplit("@", 1)
            return name, revision
        return self.model, self.revision


def model_identity(spec: ModelSpec, max_tokens: int) -> dict[str, Any]:
    """Everything that decides this model's outputs (greedy decoding is implied)."""
    model, revision = spec.checkpoint()
    return {
        "backend": spec.backend,
        "model": model,
        "revision": revision,
        "base_url": None if spec.base_url is None else public_url(spec.base_url),
        "system_prompt": spec.system_prompt,
        "max_tokens": max_tokens,
        "chat_template_kwargs": spec.chat_template_kwargs,
        "request_options": spec.request_options,
        "backend_options": identity_options(spec.backend_options),
        "decoding": "greedy",
        # A GGUF file's content: another file under the same path is another model.
        **({"gguf_sha256": file_sha256(model)} if local_gguf(model, spec.backend) else {}),
    }


def identity_key(identity: dict[str, Any]) -> str:
    return sha256_text(canonical_json(identity))


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One completed response."""

    text: str
    truncated: bool = False


class ChatModel:
    """A model that answers chat conversations, greedily, up to `max_tokens`.

    For the engine it is a batch caller (`call`: transformers, vLLM offline) or, behind an
    OpenAI-compatible server, a stream caller (`acall`: one conversation per request)."""

    request_size = 1

    def __init__(self, spec: ModelSpec, max_tokens: int) -> None:
        self.spec = spec
        self.max_tokens = max_tokens
        self.max_batch_size = spec.max_batch_size
        self.remote = spec.remote
        model, revision = spec.checkpoint()
        # Plain generation: no logprobs asked for.
        self.backend = spec.runs_on.build(ChatSetup(model, revision, base_url=spec.base_url,
                                                    api_key_env=spec.api_key_env, options=spec.backend_options))

    def generate(self, conversations: Sequence[Messages]) -> list[ModelReply | Exception]:
        """One ModelReply per conversation, or the error that kept it from having one."""
        out: list[ModelReply | Exception] = []
        for generation in self.backend.generate([self._request(m) for m in conversations]):
            if isinstance(generation, Exception):
                out.append(generation)
            else:
                out.append(ModelReply(generation.text, generation.truncated))
        return out

    call = generate

    async def acall(self, conversations: list[Messages]) -> list[ModelReply]:
        """One attempt per conversation; raises TransportError without a usable answer."""
        out = []
        for messages in conversations:
            generation = await self.backend.agenerate(self._request(messages))
            out.append(ModelReply(generation.text, generation.truncated))
        return out

    def _request(self, messages: Messages) -> Any:
        from margin.backends.generation import GuardRequest

        return GuardRequest(messages=tuple(self._with_system(messages)), max_new_tokens=self.max_tokens,
                            chat_template_kwargs=dict(self.spec.chat_template_kwargs),
                            extra=dict(self.spec.request_options))

    def _with_system(self, messages: Messages) -> Messages:
        if self.spec.system_prompt and not any(m.get("role") == "system" for m in messages):
            return [{"role": "system", "content": self.spec.system_prompt}, *messages]
        return list(messages)

    def close(self) -> None:
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

    async def aclose(self) -> None:
        await self.backend.aclose()

