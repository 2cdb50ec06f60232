"""Which engine pool serves a study's model (a protected model or a judge's model).

Behind an OpenAI-compatible server the model streams (`StreamPool`: many requests in flight,
no batch barrier, so one long generation holds only its own slot). A model in process
(transformers, vLLM offline) runs as dynamic batches on Ray actors (`ActorPool`), which
start when the model first has work and free their CPUs and GPUs once it is done, so a
cluster too small to hold every model at once runs them in turn; or, with `--engine
local`, in this process (`LocalPool`).
"""

from __future__ import annotations

from dataclasses import dataclass

from margin.backends.secrets import public_url
from margin.engine.actors import ActorPool
from margin.engine.limits import EndpointLimits
from margin.engine.local import LocalPool
from margin.engine.pool import OnCall, Pool, _ignore
from margin.engine.settings import CALL_TIMEOUT
from margin.engine.stream import StreamPool
from margin.serving.calls import CallSettings
from margin.studies.models import ChatModel, ModelSpec

#: Generations are long: a model's request may take this long before it counts as hung.
MODEL_TIMEOUT_S: float = CALL_TIMEOUT.case("model")


@dataclass(frozen=True)
class ModelFactory:
    """Picklable: each actor builds its model from it."""

    spec: ModelSpec
    max_tokens: int

    def build(self) -> ChatModel:
        return ChatModel(self.spec, self.max_tokens)


def model_limits(spec: ModelSpec, settings: CallSettings) -> EndpointLimits:
    """Its endpoint's limits (openai), or the time limit and attempts of its batches."""
    options = dict(spec.backend_options) if spec.remote else {}
    return settings.limits(options, EndpointLimits(timeout_s=MODEL_TIMEOUT_S))


def model_pool(name: str, spec: ModelSpec, max_tokens: int, settings: CallSettings, *,
               on_call: OnCall = _ignore) -> Pool:
    limits = model_limits(spec, settings)
    if spec.remote:
        return StreamPool(name, ChatModel(spec, max_tokens), limits, on_call=on_call, url=public_url(spec.base_url) if spec.base_url else None)
    factory = ModelFactory(spec, max_tokens)
    if settings.engine == "local":
        return LocalPool(name, factory.build, max_batch_size=spec.max_batch_size, on_call=on_call)
    return ActorPool(name, factory, replicas=spec.replicas, num_cpus=spec.cpus, num_gpus=spec.num_gpus,
                     max_batch_size=spec.max_batch_size, max_wait_s=settings.max_wait_s,
                     call_timeout_s=limits.timeout_s, release_when_done=True, on_call=on_call)
