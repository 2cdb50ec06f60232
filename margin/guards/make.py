"""Guards from what `--guard` names: parse a spec, describe a guard, build it.

`describe_guard` gives a guard's identity without loading any model; `build_guard`
constructs it, and `build_guard(s).info == describe_guard(s)`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.checks import check, spec_from
from margin.guards.guard_file import load_guard_file
from margin.guards.kinds import kind_of
from margin.guards.shapes import Shapes
from margin.guards.spec import GuardSpec, beside, declared, is_guard_file, pinned, validated_spec
from margin.types import GuardInfo


def parse_guard(text: str, fields: dict[str, Any], folder: Path | None = None) -> GuardSpec:
    """The one guard-spec parser. `text` is what `--guard` or a study config's `guard:` names: a
    preset, keyword, minilm, `python:FILE.py:Class`, or a guard file (`*.yaml`, whose keys
    `fields` override). Relative paths are taken from `folder` (a study config's; None: the
    working directory's). Errors name the CLI flag, or the guard file's line and key."""
    fields = pinned(fields)  # REPO@REV given here overrides a guard file's revision
    if is_guard_file(text):
        return load_guard_file(Path(beside(folder, text)), fields)
    return spec_from(text, fields, folder)


def parse_guard_spec(text: str, **overrides: Any) -> GuardSpec:
    """Parse `--guard TEXT` with CLI overrides (None values are ignored)."""
    return parse_guard(text, {k: v for k, v in overrides.items() if v is not None})


def with_overrides(spec: GuardSpec, **overrides: Any) -> GuardSpec:
    """`spec` with the API's overrides (None values are ignored), validated and checked as the
    same fields given on the command line are: a spec is never patched past its checks."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return spec
    return check(validated_spec(**{**spec.model_dump(exclude_defaults=True), **pinned(given)}))


def build_guard(spec: GuardSpec) -> Guard:
    kind = kind_of(spec.name)
    if kind is None:
        raise InputError(f"unknown guard {spec.name!r}", field="--guard")
    try:
        guard = kind.build(spec)
    except (OSError, ImportError, ValueError) as exc:
        if not kind.loads_model:
            raise
        raise _load_error(spec, exc) from exc
    guard.identify(declared(guard.info, spec))
    if spec.max_batch_size is not None:
        guard.max_batch_size = spec.max_batch_size
    if spec.normalize is not None:
        from margin.guards.normalize import NormalizingGuard

        guard = NormalizingGuard(guard, spec.normalize)
    return guard


def _load_error(spec: GuardSpec, exc: BaseException) -> InputError:
    from margin.guards.weights import load_error

    info = describe_guard(spec.model_copy(update={"normalize": None}))
    revision = None if info.revision == "main" or spec.name == "minilm" else info.revision
    return load_error(info.checkpoint, revision, exc)


def describe_guard(spec: GuardSpec) -> GuardInfo:
    """The guard's identity; cheap for every built-in guard (no model is loaded)."""
    if spec.normalize is not None:
        from margin.guards.normalize import normalized_info

        return normalized_info(describe_guard(spec.model_copy(update={"normalize": None})), spec.normalize)
    kind = kind_of(spec.name)
    if kind is not None and kind.describe is not None:
        return declared(kind.describe(spec), spec)
    return build_guard(spec).info


def guard_shapes(spec: GuardSpec) -> Shapes:
    """The cases a guard takes (`margin.guards.shapes`), for every built-in guard without
    loading a model; a `python:` guard is built to read its class's opt-in (describing it
    builds it too)."""
    kind = kind_of(spec.name)
    if kind is None:
        raise InputError(f"unknown guard {spec.name!r}", field="--guard")
    return build_guard(spec).shapes if kind.shapes is None else kind.shapes(spec)


def load_guard(text: str, **overrides: Any) -> Guard:
    return build_guard(parse_guard_spec(text, **overrides))
