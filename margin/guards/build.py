"""Construct a preset's guard: its adapter over the chosen backend (the heavy part)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from margin.backends.registry import ChatSetup, backend_of
from margin.guards.adapters.moderation import Moderation
from margin.guards.adapters.sequence_classifier import SequenceClassifier
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
    revision = None if info.revision == "main" else info.revision
    model = info.checkpoint
    if isinstance(adapter, Moderation):
        from margin.guards.moderation_api import ModerationGuard

        return ModerationGuard(adapter, endpoint(spec, preset, options), model, info,
                               max_batch_size=spec.max_batch_size or 32)
    if isinstance(adapter, SequenceClassifier):
        from margin.guards.classifier import ClassifierGuard

        return ClassifierGuard(adapter, info, model, revision, device=options.get("device"),
                               max_batch_size=spec.max_batch_size or 32)
    from margin.guards.generative import GenerativeGuard

    # A LoRA preset loads its base model and the adapter on top; a server names it itself.
    lora_base = preset.lora_base if preset.lora_base and model == preset.checkpoint else None
    chosen = backend_of(backend)
    chat = chosen.build(ChatSetup(
        model, revision, lora_base=lora_base, base_url=spec.base_url or preset.base_url,
        api_key_env=spec.api_key_env or preset.api_key_env, auto_class=preset.auto_class,
        top_logprobs=int(chosen.value(options, "top_logprobs")), options=options,
        request_options=spec.request_options))
    return GenerativeGuard(adapter, chat, info, max_batch_size=spec.max_batch_size or 16)
