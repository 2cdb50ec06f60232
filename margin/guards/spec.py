"""Guard specs: what `--guard` (plus overrides) names, as a small picklable value.

A spec is cheap to pass around (the Ray engine ships it to actors, which build the guard
there). `describe_guard` gives a guard's identity without loading any model;
`build_guard` constructs it, and `build_guard(s).info == describe_guard(s)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from margin.errors import InputError
from margin.guards.base import Guard
from margin.suggest import did_you_mean
from margin.types import GuardInfo


class GuardSpec(BaseModel):
    """A guard to evaluate and how to run it.

    Identity fields (name .. options) decide verdicts. Runtime fields (num_cpus .. replicas)
    only decide where and how fast it runs: they never enter a guard's identity or cache key.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    backend: str | None = None
    model: str | None = None
    revision: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    threshold: float | None = None
    options: dict[str, Any] = Field(default_factory=dict)

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    replicas: int = 1
    max_batch_size: int | None = None


@dataclass(frozen=True, slots=True)
class GuardEntry:
    name: str
    family: str
    description: str
    backends: tuple[str, ...]
    labels: str


BUILTIN: dict[str, GuardEntry] = {
    "keyword": GuardEntry(
        "keyword", "keyword", "lexicon blocklist (pure Python, no download)", ("python",),
        "unsafe when a word starts with a blocklisted stem",
    ),
}


def parse_guard_spec(text: str, **overrides: Any) -> GuardSpec:
    """Parse `--guard TEXT` with CLI overrides (None values are ignored)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if text == "keyword" or text.startswith("python:"):
        if text.startswith("python:"):
            path, sep, class_name = text[len("python:"):].rpartition(":")
            if not sep or not path or not class_name:
                raise InputError("expected python:PATH.py:ClassName", field="--guard")
        return GuardSpec(name=text, **given)
    raise InputError(
        f"unknown guard {text!r}{did_you_mean(text, BUILTIN)} (see `margin guards list`)", field="--guard"
    )


def build_guard(spec: GuardSpec) -> Guard:
    if spec.name == "keyword":
        from margin.guards.keyword import KeywordGuard

        return KeywordGuard()
    if spec.name.startswith("python:"):
        from margin.guards.python_class import PythonClassGuard

        path, _, class_name = spec.name[len("python:"):].rpartition(":")
        return PythonClassGuard(path, class_name)
    raise InputError(f"unknown guard {spec.name!r}", field="--guard")


def describe_guard(spec: GuardSpec) -> GuardInfo:
    """The guard's identity; cheap for every built-in guard (no model is loaded)."""
    return build_guard(spec).info


def load_guard(text: str, **overrides: Any) -> Guard:
    return build_guard(parse_guard_spec(text, **overrides))
