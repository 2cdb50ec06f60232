"""The guard kinds a guard name can be (given to `--guard` or in a guard file), in one table:
what each accepts (the settings it takes, its own checks, where its relative paths are taken
from), how it is built and how it is described. `margin.guards.checks` reads a kind's row to
accept a spec, `margin.guards.make` (`build_guard`, `describe_guard`, `guard_shapes`) to build
and describe it; which kind a name is, is `margin.guards.spec.kind_name`'s. So a new kind is a
row here and its name in `kind_name`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.backends.registry import (
    UnknownBackend,
    UnknownOption,
    backend_of,
    check_gguf,
    local_gguf,
    remote_names,
)
from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.build import build_preset
from margin.guards.declared_weights import PACKAGE, weights_path
from margin.guards.presets import preset_of
from margin.guards.shapes import Shapes
from margin.guards.spec import (
    BUILTIN,
    PYTHON,
    GuardSpec,
    adapter_for,
    beside,
    kind_name,
    preset_info,
    python_target,
)
from margin.types import GuardInfo

#: The settings a kind may take or refuse, in the order a refusal is found; every guard takes
#: the rest (id, normalize, scope, caveats and the runtime fields).
SETTINGS = ("backend", "model", "base_url", "api_key_env", "threshold", "revision", "weights",
            "options", "backend_options", "request_options")
#: The settings a backend reads: a kind that takes no backend says so when it refuses them.
BACKEND_SETTINGS = ("options", "backend_options", "request_options")

Fields = dict[str, Any]


@dataclass(frozen=True)
class GuardKind:
    #: as `margin.guards.spec.kind_name` names it
    name: str
    #: which of SETTINGS it takes; one it does not take, given, is refused
    accepts: frozenset[str]
    build: Callable[[GuardSpec], Guard]
    #: the guard's identity without loading a model (None: building it is cheap, read `.info`)
    describe: Callable[[GuardSpec], GuardInfo] | None = None
    #: the cases it takes without building it (None: build it and read `.shapes`)
    shapes: Callable[[GuardSpec], Shapes] | None = None
    #: its own checks, once no refused setting is given (InputError naming the flag)
    check: Callable[[GuardSpec], None] | None = None
    #: its name and fields with relative paths taken from a file's folder (None: as given)
    place: Callable[[str, Fields, Path | None], tuple[str, Fields]] | None = None
    #: why it refuses a setting, where "the KIND guard takes no FLAG" would mislead ({name}: the guard's)
    refusals: Mapping[str, str] = field(default_factory=dict)
    #: building it loads a model: what goes wrong there is a setup error (one line, exit 2)
    loads_model: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.accepts) - set(SETTINGS))
        if unknown:
            raise ValueError(f"guard kind {self.name!r} accepts {unknown}, which are not among {SETTINGS}")


def _keyword(spec: GuardSpec) -> Guard:
    from margin.guards.keyword import KeywordGuard

    return KeywordGuard()


def _python(spec: GuardSpec) -> Guard:
    from margin.guards.python_class import PythonClassGuard

    return PythonClassGuard(*python_target(spec.name), weights=spec.weights, revision=spec.revision,
                            threshold=spec.threshold)


def _place_python(name: str, fields: Fields, folder: Path | None) -> tuple[str, Fields]:
    """The class's file and its weights beside the guard file (the name's form here; the file
    is read when the guard is built)."""
    file, class_name = python_target(name)
    weights = fields.get("weights")
    if isinstance(weights, str) and not weights.startswith(PACKAGE):
        fields = {**fields, "weights": beside(folder, weights)}
    return f"{PYTHON}{beside(folder, file)}:{class_name}", fields


def _check_python(spec: GuardSpec) -> None:
    if spec.weights is not None:
        weights_path(spec.weights)  # there now, not when the guard is built


def _minilm(spec: GuardSpec) -> Guard:
    from margin.guards.minilm import MiniLMGuard

    return MiniLMGuard(threshold=spec.threshold)


def _describe_minilm(spec: GuardSpec) -> GuardInfo:
    from margin.guards.minilm import describe

    return describe(spec.threshold)


def _listed(spec: GuardSpec) -> Shapes:
    """A built-in guard's shapes, as `margin guards list` shows them."""
    return BUILTIN[spec.name].shapes


def _preset(spec: GuardSpec) -> Guard:
    return build_preset(spec, preset_of(spec.name), preset_info(spec))


def _place_preset(name: str, fields: Fields, folder: Path | None) -> tuple[str, Fields]:
    """A local GGUF model file beside the guard file."""
    if local_gguf(fields.get("model"), fields.get("backend") or preset_of(name).backend):
        fields = {**fields, "model": beside(folder, fields["model"])}
    return name, fields


def _check_preset(spec: GuardSpec) -> None:
    """A model to load or ask, on a backend the preset runs on, with the settings that backend
    takes and options its family knows."""
    name = spec.name
    preset = preset_of(name)
    if not (spec.model or preset.checkpoint):
        raise InputError(f"{name} needs the model: the served name (backend openai) or a checkpoint",
                         field="--model")
    backend = spec.backend or preset.backend
    try:
        runs_on = backend_of(backend)
    except UnknownBackend as exc:
        raise InputError(str(exc), field="--backend") from None
    if backend not in preset.backends:
        raise InputError(f"{name} runs on {', '.join(preset.backends)}, not {backend}", field="--backend")
    if local_gguf(spec.model, backend):
        check_gguf(str(spec.model), spec.revision, runs_on)
    if runs_on.remote and not (spec.base_url or preset.base_url):
        raise InputError(f"the {backend} backend needs the server's URL for {name}", field="--base-url")
    if not runs_on.remote:
        for setting, flag in (("base_url", "--base-url"), ("api_key_env", "--api-key-env")):
            if getattr(spec, setting) is not None:
                raise InputError(f"{flag} needs --backend {remote_names()}", field=flag)
        if spec.request_options:
            raise InputError(f"request_options needs --backend {remote_names()}", field="request_options")
    try:
        runs_on.check_options(spec.backend_options, guard=True)
    except UnknownOption as exc:
        raise InputError(str(exc), field=f"backend_options.{exc.name}") from None
    adapter_for(spec, preset)  # validates family options


def _preset_kind(name: str) -> GuardKind:
    """A kind that builds on a preset (`preset`, or `prompted`'s own): everything but weights."""
    return GuardKind(name, frozenset(SETTINGS) - {"weights"}, _preset, preset_info, _listed, _check_preset,
                     _place_preset, refusals={"weights": "{name} loads its checkpoint (--model, revision); "
                                                         "weights are for python: guards"},
                     loads_model=True)


KINDS = {kind.name: kind for kind in (
    GuardKind("keyword", frozenset(), _keyword, shapes=_listed),
    GuardKind("python", frozenset({"threshold", "revision", "weights"}), _python, check=_check_python,
              place=_place_python),
    GuardKind("minilm", frozenset({"threshold"}), _minilm, _describe_minilm, _listed, loads_model=True),
    _preset_kind("preset"),
    _preset_kind("prompted"),
)}


def kind_of(name: str) -> GuardKind | None:
    kind = kind_name(name)
    return None if kind is None else KINDS[kind]
