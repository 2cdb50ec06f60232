"""The guard kinds a guard name can be (given to `--guard` or in a guard file), in one table:
how each is built and described. `margin.guards.make` (`build_guard`, `describe_guard`)
reads it; which kind a name is, and what each accepts, is `margin.guards.spec`'s, so a new
kind is a row here, a name in `spec.kind_name`, and, if building it loads a model, an entry
in `make.MODEL_KINDS`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from margin.guards.base import Guard
from margin.guards.build import build_preset
from margin.guards.presets import preset_of
from margin.guards.shapes import Shapes
from margin.guards.spec import BUILTIN, GuardSpec, kind_name, preset_info, python_target
from margin.types import GuardInfo


@dataclass(frozen=True)
class GuardKind:
    #: as `margin.guards.spec.kind_name` names it
    name: str
    build: Callable[[GuardSpec], Guard]
    #: the guard's identity without loading a model (None: building it is cheap, read `.info`)
    describe: Callable[[GuardSpec], GuardInfo] | None = None
    #: the cases it takes without building it (None: build it and read `.shapes`)
    shapes: Callable[[GuardSpec], Shapes] | None = None


def _keyword(spec: GuardSpec) -> Guard:
    from margin.guards.keyword import KeywordGuard

    return KeywordGuard()


def _python(spec: GuardSpec) -> Guard:
    from margin.guards.python_class import PythonClassGuard

    return PythonClassGuard(*python_target(spec.name), weights=spec.weights, revision=spec.revision,
                            threshold=spec.threshold)


def _minilm(spec: GuardSpec) -> Guard:
    from margin.guards.minilm import MiniLMGuard

    return MiniLMGuard(threshold=spec.threshold)


def _describe_minilm(spec: GuardSpec) -> GuardInfo:
    from margin.guards.minilm import describe

    return describe(spec.threshold)


def _listed(spec: GuardSpec) -> Shapes:
    """A built-in guard's shapes, as `margin guards list` shows them."""
    return BUILTIN[spec.name].shapes


KINDS = {kind.name: kind for kind in (
    GuardKind("keyword", _keyword, shapes=_listed),
    GuardKind("python", _python),
    GuardKind("minilm", _minilm, _describe_minilm, _listed),
    GuardKind("preset", lambda spec: build_preset(spec, preset_of(spec.name), preset_info(spec)), preset_info,
              _listed),
    GuardKind("prompted", lambda spec: build_preset(spec, preset_of(spec.name), preset_info(spec)), preset_info,
              _listed),
)}


def kind_of(name: str) -> GuardKind | None:
    kind = kind_name(name)
    return None if kind is None else KINDS[kind]
