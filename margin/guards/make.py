"""Guards from what `--guard` names: parse a spec, describe a guard, build it.

`describe_guard` gives a guard's identity without loading any model; `build_guard`
constructs it, and `build_guard(s).info == describe_guard(s)`.
"""

from __future__ import annotations

from typing import Any

from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.build import build_preset
from margin.guards.guard_file import load_guard_file
from margin.guards.presets import PRESETS
from margin.guards.spec import BUILTIN, GuardSpec, check, preset_info, validated_spec
from margin.types import GuardInfo
from margin.util.suggest import did_you_mean


def parse_guard_spec(text: str, **overrides: Any) -> GuardSpec:
    """Parse `--guard TEXT` with CLI overrides (None values are ignored)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if "model" in given and "@" in given["model"]:  # REPO@REVISION pins a commit
        given["model"], given["revision"] = given["model"].rsplit("@", 1)
    if text.endswith((".yaml", ".yml")):
        return check(load_guard_file(text, given))
    if text in ("keyword", "minilm") or text.startswith("python:"):
        if text.startswith("python:"):
            path, sep, class_name = text[len("python:"):].rpartition(":")
            if not sep or not path or not class_name:
                raise InputError("expected python:PATH.py:ClassName", field="--guard")
        return check(validated_spec(name=text, **given))
    if text in PRESETS:
        return check(validated_spec(name=text, **given))
    raise InputError(
        f"unknown guard {text!r}{did_you_mean(text, BUILTIN)} (see `margin guards list`)", field="--guard"
    )


def build_guard(spec: GuardSpec) -> Guard:
    guard: Guard
    if spec.name == "keyword":
        from margin.guards.keyword import KeywordGuard

        guard = KeywordGuard()
    elif spec.name.startswith("python:"):
        from margin.guards.python_class import PythonClassGuard

        path, _, class_name = spec.name[len("python:"):].rpartition(":")
        guard = PythonClassGuard(path, class_name)
    elif spec.name == "minilm":
        from margin.guards.minilm import MiniLMGuard

        guard = MiniLMGuard(threshold=spec.threshold)
    elif spec.name in PRESETS:
        guard = build_preset(spec, PRESETS[spec.name], preset_info(spec))
    else:
        raise InputError(f"unknown guard {spec.name!r}", field="--guard")
    if spec.max_batch_size is not None:
        guard.max_batch_size = spec.max_batch_size
    if spec.normalize is not None:
        from margin.guards.normalize import NormalizingGuard

        guard = NormalizingGuard(guard, spec.normalize)
    return guard


def describe_guard(spec: GuardSpec) -> GuardInfo:
    """The guard's identity; cheap for every built-in guard (no model is loaded)."""
    if spec.normalize is not None:
        from margin.guards.normalize import normalized_info

        return normalized_info(describe_guard(spec.model_copy(update={"normalize": None})), spec.normalize)
    if spec.name == "minilm":
        from margin.guards.minilm import describe

        return describe(spec.threshold)
    if spec.name in PRESETS:
        return preset_info(spec)
    return build_guard(spec).info


def load_guard(text: str, **overrides: Any) -> Guard:
    return build_guard(parse_guard_spec(text, **overrides))
