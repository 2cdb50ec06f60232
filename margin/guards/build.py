"""Construct a preset's guard: its adapter over the chosen backend (the heavy part)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from margin.guards.base import Guard
from margin.guards.spec import GuardSpec, adapter_for
from margin.types import GuardInfo

if TYPE_CHECKING:
    from margin.guards.presets import Preset


def endpoint(spec: GuardSpec, preset: Preset, options: dict[str, Any]) -> Any:
    """The server's client; how hard it is pushed (concurrency, timeouts, attempts) is the
    engine's business (`margin.engine.limits`)."""
    from margin.backends.http import AsyncEndpoint

    return AsyncEndpoint(spec.base_url or preset.base_url or "", spec.api_key_env or preset.api_key_env)


def build_preset(spec: GuardSpec, preset: Preset, info: GuardInfo) -> Guard:
    adapter = adapter_for(spec, preset)
    options = dict(spec.backend_options)
    backend = info.backend
    top = int(options.get("top_logprobs", 20))
    revision = None if info.revision == "main" else info.revision
    model = info.checkpoint
    if preset.family in ("openai-moderation", "mistral-moderation"):
        from margin.guards.moderation_api import ModerationGuard

        return ModerationGuard(adapter, endpoint(spec, preset, options), model, info,
                               max_batch_size=spec.max_batch_size or 32)
    if preset.family == "sequence-classifier":
        from margin.guards.classifier import ClassifierGuard

        return ClassifierGuard(adapter, info, model, revision, device=options.get("device"),
                               max_batch_size=spec.max_batch_size or 32)
    from margin.guards.generative import GenerativeGuard

    # A LoRA preset loads its base model and the adapter on top; a server names it itself.
    lora = model if preset.lora_base and model == preset.checkpoint else None
    base = preset.lora_base if lora else model
    if backend == "openai":
        from margin.backends.openai_http import OpenAIChatBackend

        chat: Any = OpenAIChatBackend(endpoint(spec, preset, options), model, top_logprobs=top)
    elif backend == "vllm":
        from margin.backends.vllm_offline import VLLMBackend

        chat = VLLMBackend(base or model, None if lora else revision, adapter=lora, top_logprobs=top,
                           engine=options.get("engine"))
    else:
        from margin.backends.transformers_lm import TransformersLM

        chat = TransformersLM(base or model, None if lora else revision, adapter=lora,
                              auto_class=preset.auto_class, device=options.get("device"),
                              dtype=options.get("dtype"), top_logprobs=top,
                              prefix_cache=bool(options.get("prefix_cache", True)))
    return GenerativeGuard(adapter, chat, info, max_batch_size=spec.max_batch_size or 16)
