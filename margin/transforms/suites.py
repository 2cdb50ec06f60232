"""Suites: YAML files naming transforms and strengths; the measuring instrument of a run."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from margin.errors import InputError
from margin.transforms.base import Transform
from margin.transforms.placement import SALIENT
from margin.transforms.registry import get_transform, registry
from margin.util.hashing import sha256_bytes
from margin.util.suggest import did_you_mean
from margin.util.yamlfile import parse_yaml

EACH_WORD = "@*"  # expands, per prompt, to one candidate per word: @0, @1, ...


@dataclass(frozen=True, slots=True)
class SuiteEntry:
    transform: str
    strengths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Suite:
    name: str
    source: str
    sha256: str
    entries: tuple[SuiteEntry, ...]


def known_strengths(transform: Transform) -> list[str]:
    """The strengths to suggest for a misspelt one."""
    if transform.kind != "edit":
        return list(transform.strengths)
    return [EACH_WORD, *transform.strengths, *(SALIENT + s for s in transform.strengths)]


def builtin_suites() -> list[str]:
    folder = resources.files("margin").joinpath("transforms", "suites")
    return sorted(e.name[: -len(".yaml")] for e in folder.iterdir() if e.name.endswith(".yaml"))


def load_suite(spec: str) -> Suite:
    """A built-in suite name (`standard`, `quick`) or a path to a suite YAML file."""
    if spec in builtin_suites():
        data = resources.files("margin").joinpath("transforms", "suites", f"{spec}.yaml").read_bytes()
        return parse_suite(data, f"margin/transforms/suites/{spec}.yaml")
    path = Path(spec)
    if not path.is_file():
        raise InputError(
            f"no such suite (built-in: {', '.join(builtin_suites())}){did_you_mean(spec, builtin_suites())}",
            path=spec,
        )
    return parse_suite(path.read_bytes(), str(path))


def parse_suite(data: bytes, source: str) -> Suite:
    spec, _ = parse_yaml(data, source)
    if not isinstance(spec, dict) or "name" not in spec or not isinstance(spec.get("transforms"), list):
        raise InputError("a suite needs `name` and a list `transforms`", path=source)
    entries = []
    for index, item in enumerate(spec["transforms"]):
        where = f"transforms[{index}]"
        if not isinstance(item, dict) or "transform" not in item:
            raise InputError("each entry needs `transform` (and optional `strengths`)", path=source, field=where)
        name = str(item["transform"])
        if name not in registry():
            raise InputError(
                f"unknown transform {name!r}{did_you_mean(name, registry())}", path=source, field=where
            )
        transform = get_transform(name)
        listed = item.get("strengths", list(transform.strengths))
        if not isinstance(listed, list) or not listed:
            raise InputError("`strengths` must be a non-empty list", path=source, field=f"{where}.strengths")
        strengths = tuple(str(s) for s in listed)
        for strength in strengths:
            if strength == EACH_WORD and transform.kind == "edit":
                continue
            try:
                transform.check_strength(strength)
            except ValueError as exc:
                raise InputError(
                    f"{exc}{did_you_mean(strength, known_strengths(transform))}",
                    path=source,
                    field=f"{where}.strengths",
                ) from None
        entries.append(SuiteEntry(name, strengths))
    return Suite(name=str(spec["name"]), source=source, sha256=sha256_bytes(data), entries=tuple(entries))
