"""Turn a `--guard` spec into a Guard."""

from __future__ import annotations

from dataclasses import dataclass

from margin.errors import InputError
from margin.guards.base import Guard
from margin.suggest import did_you_mean


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


def load_guard(spec: str) -> Guard:
    if spec == "keyword":
        from margin.guards.keyword import KeywordGuard

        return KeywordGuard()
    if spec.startswith("python:"):
        path, sep, class_name = spec[len("python:"):].rpartition(":")
        if not sep or not path or not class_name:
            raise InputError("expected python:PATH.py:ClassName", field="--guard")
        from margin.guards.python_class import PythonClassGuard

        return PythonClassGuard(path, class_name)
    raise InputError(
        f"unknown guard {spec!r}{did_you_mean(spec, BUILTIN)} (see `margin guards list`)", field="--guard"
    )
