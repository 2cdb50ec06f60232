"""The backends a guard or a study's model can run on, in one table: what each takes in
`backend_options` (name, type, default, whether it can change an output), how it is built,
whether it is remote, and what it needs installed.

Callers ask the table (`backend_of(name).remote`); no module outside `margin.backends`
compares backend names. A new backend is a row here. Each row builds its backend with a
lazy import, so `import margin` never imports torch, transformers or vllm.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from margin.backends.gguf import is_gguf
from margin.engine.limits import LIMIT_OPTIONS, EndpointLimits
from margin.errors import InputError


@dataclass(frozen=True)
class Option:
    """One `backend_options` key."""

    name: str
    type: str  # what it holds, as a guard file or study config writes it
    default: Any
    #: where or how fast it runs, never what it outputs: kept out of identities and cache keys
    runtime: bool = False
    #: only a guard's scoring uses it (a study's model generates text, it reads no logprobs)
    guard_only: bool = False


@dataclass(frozen=True)
class ChatSetup:
    """What a chat backend is built from, resolved by its caller (a guard's preset, a study's
    model spec)."""

    model: str  # the checkpoint (REPO or a folder), or the name a server serves
    revision: str | None = None
    #: `model` is a LoRA adapter on this base: loaded on top of it in process (a server
    #: serving the adapter names it itself)
    lora_base: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    top_logprobs: int = 0
    auto_class: str = "causal"  # transformers: the Auto class that loads it
    options: Mapping[str, Any] = field(default_factory=dict)  # its backend_options
    #: remote backends: extra fields sent with every request (a guard's request_options)
    request_options: Mapping[str, Any] = field(default_factory=dict)

    def weights(self) -> tuple[str, str | None, str | None]:
        """What an in-process backend loads: checkpoint, revision, LoRA adapter."""
        if self.lora_base:
            return self.lora_base, None, self.model
        return self.model, self.revision, None


@dataclass(frozen=True)
class Backend:
    name: str
    description: str
    #: behind an HTTP endpoint: needs a base_url, may take api_key_env and request_options,
    #: streams from the caller's process (no CPU or GPU reserved for it), served names are
    #: not pinned to a revision, and its endpoint limits (`margin.engine.limits`) apply
    remote: bool
    options: tuple[Option, ...]
    #: modules it imports when built, and the install line that brings them
    packages: tuple[str, ...]
    install: str
    build: Callable[[ChatSetup], Any]
    #: takes a GGUF file as the model (`margin.backends.gguf`: its packages, its identity)
    loads_gguf: bool = False

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def option_names(self, *, guard: bool) -> tuple[str, ...]:
        """The `backend_options` keys a guard (guard=True) or a study's model may give."""
        return tuple(sorted(o.name for o in self.options if guard or not o.guard_only))

    def check_options(self, given: Mapping[str, Any], *, guard: bool) -> None:
        """Raise UnknownOption for the first key this backend does not take."""
        allowed = self.option_names(guard=guard)
        unknown = sorted(set(given) - set(allowed))
        if unknown:
            raise UnknownOption(unknown[0], f"unknown backend option {unknown[0]!r} for {self.name}; "
                                            f"allowed: {', '.join(allowed)}")

    def value(self, given: Mapping[str, Any], name: str) -> Any:
        """An option's given value, else its default."""
        option = self.option(name)
        assert option is not None, f"{self.name} has no option {name}"
        return given.get(name, option.default)


class UnknownOption(ValueError):
    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class UnknownBackend(ValueError):
    pass


def _transformers(setup: ChatSetup) -> Any:
    from margin.backends.transformers_lm import TransformersLM

    model, revision, adapter = setup.weights()
    backend = BACKENDS["transformers"]
    return TransformersLM(model, revision, adapter=adapter, auto_class=setup.auto_class,
                          device=setup.options.get("device"), dtype=setup.options.get("dtype"),
                          top_logprobs=setup.top_logprobs,
                          prefix_cache=bool(backend.value(setup.options, "prefix_cache")))


def _vllm(setup: ChatSetup) -> Any:
    from margin.backends.vllm_offline import VLLMBackend

    model, revision, adapter = setup.weights()
    return VLLMBackend(model, revision, adapter=adapter, top_logprobs=setup.top_logprobs,
                       engine=setup.options.get("engine"))


def _openai(setup: ChatSetup) -> Any:
    from margin.backends.http import AsyncEndpoint
    from margin.backends.openai_http import OpenAIChatBackend

    return OpenAIChatBackend(AsyncEndpoint(setup.base_url or "", setup.api_key_env), setup.model,
                             top_logprobs=setup.top_logprobs, extra_body=setup.request_options)


_TOP = Option("top_logprobs", "int", 20, guard_only=True)
# The endpoint limits, with EndpointLimits' own types and defaults (a study's models get
# their own timeout default: `margin.studies.model_pools`).
_LIMITS = tuple(Option(f.name, str(f.type), f.default, runtime=True)
                for f in fields(EndpointLimits) if f.name in LIMIT_OPTIONS)
HF_INSTALL = "pip install 'margin[hf]' (torch's CPU build first: see README)"

BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("transformers", "local, in process (the hf extra)", False, (
        Option("device", "str", None, runtime=True),
        Option("dtype", "str", None),
        _TOP,
        Option("prefix_cache", "bool", True, runtime=True, guard_only=True),
    ), ("torch", "transformers"), HF_INSTALL, _transformers, loads_gguf=True),
    Backend("vllm", "vLLM offline, in process (the vllm extra, GPU)", False, (
        _TOP,
        Option("engine", "mapping", None, runtime=True),  # keyword arguments of vllm.LLM
    ), ("vllm",), "pip install 'margin[vllm]'", _vllm),
    Backend("openai", "any OpenAI-compatible server (vLLM, SGLang, hosted endpoints)", True, (
        _TOP, *_LIMITS,
    ), (), "", _openai),  # the openai client is a core dependency
)}


#: Options that never change an output, on whichever backend takes them.
RUNTIME_OPTIONS = frozenset(o.name for b in BACKENDS.values() for o in b.options if o.runtime)


def identity_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The given `backend_options` that can change an output (the runtime ones left out)."""
    return {k: v for k, v in given.items() if k not in RUNTIME_OPTIONS}


def backend_of(name: str) -> Backend:
    """The backend named `name`; UnknownBackend (one line naming the choices) for any other."""
    backend = BACKENDS.get(name)
    if backend is None:
        raise UnknownBackend(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")
    return backend


def remote_names() -> str:
    """The remote backends' names, as an error message offers them (`openai`)."""
    return " or ".join(b.name for b in BACKENDS.values() if b.remote)


def local_gguf(model: Any, backend: str | None) -> bool:
    """Whether `model` is a GGUF file for a local backend to load (a server's served name may
    end in .gguf too: llama-server serves the file's name)."""
    try:
        return is_gguf(model) and not backend_of(backend or "").remote
    except UnknownBackend:
        return False


def check_gguf(model: str, revision: str | None, backend: Backend) -> None:
    """A GGUF model: a file that is there, on a backend that loads one, with no revision (its
    content pins it). InputError (one line naming the flag) otherwise."""
    if not backend.loads_gguf:
        loaders = " or ".join(b.name for b in BACKENDS.values() if b.loads_gguf)
        raise InputError(f"the {backend.name} backend does not load a GGUF file; use --backend {loaders}, "
                         f"or serve the file (llama-server -m FILE) and use --backend {remote_names()}",
                         field="--backend")
    if not Path(model).is_file():
        raise InputError(f"no such GGUF file: {model}", field="--model")
    if revision is not None:
        raise InputError("a GGUF file takes no revision: its SHA-256 pins it", field="revision")
