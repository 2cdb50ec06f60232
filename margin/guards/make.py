"""Guards from what `--guard` names: parse a spec, describe a guard, build it.

`describe_guard` gives a guard's identity without loading any model; `build_guard`
constructs it, and `build_guard(s).info == describe_guard(s)`.
"""

from __future__ import annotations

from typing import Any

from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.guard_file import load_guard_file
from margin.guards.kinds import kind_of
from margin.guards.spec import GuardSpec, declared, spec_from
from margin.types import GuardInfo


def parse_guard_spec(text: str, **overrides: Any) -> GuardSpec:
    """Parse `--guard TEXT` with CLI overrides (None values are ignored)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if "model" in given and "@" in given["model"]:  # REPO@REVISION pins a commit
        given["model"], given["revision"] = given["model"].rsplit("@", 1)
    if text.endswith((".yaml", ".yml")):
        return load_guard_file(text, given)
    return spec_from(text, given)


def build_guard(spec: GuardSpec) -> Guard:
    kind = kind_of(spec.name)
    if kind is None:
        raise InputError(f"unknown guard {spec.name!r}", field="--guard")
    try:
        guard = kind.build(spec)
    except (OSError, ImportError, ValueError) as exc:
        if kind.name not in MODEL_KINDS:
            raise
        raise _load_error(spec, exc) from exc
    guard.identify(declared(guard.info, spec))
    if spec.max_batch_size is not None:
        guard.max_batch_size = spec.max_batch_size
    if spec.normalize is not None:
        from margin.guards.normalize import NormalizingGuard

        guard = NormalizingGuard(guard, spec.normalize)
    return guard


#: Kinds whose build loads a model: what goes wrong there is a setup error (one line, exit 2).
MODEL_KINDS = ("preset", "minilm")


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


def load_guard(text: str, **overrides: Any) -> Guard:
    return build_guard(parse_guard_spec(text, **overrides))
