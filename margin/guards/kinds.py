"""The guard kinds `--guard` can name, in one table: how each is recognised, built and
described. `parse_guard_spec`, `build_guard`, `describe_guard`, guard files and study
configs all read it, so a new kind is one row here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.build import build_preset
from margin.guards.presets import PRESETS
from margin.guards.spec import GuardSpec, preset_info
from margin.types import GuardInfo

PYTHON = "python:"


@dataclass(frozen=True)
class GuardKind:
    name: str
    #: whether a `--guard` name is of this kind
    matches: Callable[[str], bool]
    build: Callable[[GuardSpec], Guard]
    #: the guard's identity without loading a model (None: building it is cheap, read `.info`)
    describe: Callable[[GuardSpec], GuardInfo] | None = None
    #: raises InputError when the name's form is wrong (checked when `--guard` is parsed)
    check: Callable[[str], object] = lambda _: None


def _keyword(spec: GuardSpec) -> Guard:
    from margin.guards.keyword import KeywordGuard

    return KeywordGuard()


def python_target(name: str) -> tuple[str, str]:
    """PATH and ClassName of `python:PATH.py:ClassName`."""
    path, sep, class_name = name[len(PYTHON):].rpartition(":")
    if not sep or not path or not class_name:
        raise InputError("expected python:PATH.py:ClassName", field="--guard")
    return path, class_name


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


KINDS = (
    GuardKind("keyword", lambda name: name == "keyword", _keyword),
    GuardKind("python", lambda name: name.startswith(PYTHON), _python, check=python_target),
    GuardKind("minilm", lambda name: name == "minilm", _minilm, _describe_minilm),
    GuardKind("preset", lambda name: name in PRESETS,
              lambda spec: build_preset(spec, PRESETS[spec.name], preset_info(spec)), preset_info),
)


def kind_of(name: str) -> GuardKind | None:
    return next((kind for kind in KINDS if kind.matches(name)), None)
