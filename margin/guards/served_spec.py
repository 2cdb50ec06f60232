"""A guard behind a server, with what that server says it serves (`margin.backends.served`).

`served_spec` asks the server once, at start, before the guard is described: the facts go
into the spec (so Ray's actors build the same guard without asking again), the guard's id
and the verdict cache's key. Guards that call no server (keyword, minilm, python:,
in-process checkpoints) and moderation APIs are returned as they are.
"""

from __future__ import annotations

from margin.backends.registry import backend_of
from margin.backends.served import read_server
from margin.guards.presets import GENERATIVE, preset_of
from margin.guards.spec import GuardSpec, kind_name


def asks_server(spec: GuardSpec) -> bool:
    """Whether the guard is a generative model behind an OpenAI-compatible server."""
    if kind_name(spec.name) not in ("preset", "prompted"):
        return False
    preset = preset_of(spec.name)
    return preset.family in GENERATIVE and backend_of(spec.backend or preset.backend).remote


def served_spec(spec: GuardSpec) -> GuardSpec:
    """`spec` with its server's facts (read now), or `spec` where no server is asked."""
    if spec.served or not asks_server(spec):
        return spec
    preset = preset_of(spec.name)
    facts = read_server(spec.base_url or preset.base_url or "", spec.api_key_env or preset.api_key_env,
                        spec.model or preset.checkpoint)
    return spec.model_copy(update={"served": facts})
