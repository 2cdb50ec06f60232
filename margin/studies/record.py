"""A study's record (`study.json`): what decides its results, typed and frozen.

Built once from a study's plan and written once when the study begins; read back by
`read_study_record` alone, and compared by `StudyRecord.differences` when a `--resume`
checks that the config still describes the same study. The JSON it writes is the one
study.json always held (same keys, same order), so folders written before it resume.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.runrecord import LimitSample, Named
from margin.util.hashing import canonical_json


@dataclass(frozen=True)
class TransformationEntry:
    """One transformation of the study: its name in the config, the transform and its strength."""

    name: str
    transform: str
    strength: str


@dataclass(frozen=True)
class StudyRecord:
    """What decides a study. Guards, models and judges are their identities as each writes it
    (`GuardPlan.record`, a model's metadata and identity, a judge's identity): compared whole."""

    protocol: str
    name: str
    dataset: Named
    prompts: tuple[str, ...]
    transformations: tuple[TransformationEntry, ...]
    seed: int
    guards: tuple[Mapping[str, Any], ...]
    models: tuple[Mapping[str, Any], ...]
    judges: tuple[Mapping[str, Any], ...]
    thresholds: Mapping[str, float]
    limit_sample: LimitSample | None = None  # None: every selected prompt, or a study begun before the sample

    def to_json(self) -> dict[str, Any]:
        """study.json's object, keys in the order study.json has always had them."""
        out: dict[str, Any] = {
            "protocol": self.protocol,
            "name": self.name,
            "dataset": {"name": self.dataset.name, "source": self.dataset.source, "sha256": self.dataset.sha256},
            "prompts": list(self.prompts),
            "transformations": [{"name": t.name, "transform": t.transform, "strength": t.strength}
                                for t in self.transformations],
            "seed": self.seed,
            "guards": [dict(g) for g in self.guards],
            "models": [dict(m) for m in self.models],
            "judges": [dict(j) for j in self.judges],
            "thresholds": dict(self.thresholds),
        }
        if self.limit_sample is not None:
            out["limit_sample"] = self.limit_sample.to_json()
        return out

    def differences(self, other: StudyRecord) -> list[str]:
        """The study.json keys on which `other` differs from this record, sorted."""
        mine, theirs = self.to_json(), other.to_json()
        return sorted(k for k in set(mine) | set(theirs) if canonical_json(mine.get(k)) != canonical_json(theirs.get(k)))


#: study.json's keys and the JSON type each must have (a malformed file is one error naming the key).
_TYPES: dict[str, type | tuple[type, ...]] = {
    "protocol": str, "name": str, "dataset": dict, "prompts": list, "transformations": list, "seed": int,
    "guards": list, "models": list, "judges": list, "thresholds": dict,
}


def record_from_json(data: Any, path: Path) -> StudyRecord:
    """The record a study.json object holds; InputError naming the file and key otherwise."""
    if not isinstance(data, dict):
        raise InputError("study.json is empty or not a JSON object", path=path)
    for key, kind in _TYPES.items():
        if key not in data:
            raise InputError("missing; not a study record", path=path, field=key)
        if not isinstance(data[key], kind) or (kind is int and isinstance(data[key], bool)):
            raise InputError(f"expected {_name(kind)}, not {type(data[key]).__name__}", path=path, field=key)
    try:
        dataset = Named(**{k: str(data["dataset"][k]) for k in ("name", "source", "sha256")})
        transformations = tuple(TransformationEntry(**{k: str(t[k]) for k in ("name", "transform", "strength")})
                                for t in data["transformations"])
        sample = data.get("limit_sample")
        limit_sample = None if sample is None else LimitSample(
            method=str(sample["method"]), by_label=tuple((str(k), int(v)) for k, v in sample["by_label"].items()))
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise InputError(f"malformed study record ({exc})", path=path) from None
    known = {f.name for f in fields(StudyRecord)}
    extra = sorted(set(data) - known)
    if extra:
        raise InputError(f"unknown key {extra[0]!r}", path=path, field=extra[0])
    return StudyRecord(protocol=data["protocol"], name=data["name"], dataset=dataset,
                       prompts=tuple(str(p) for p in data["prompts"]), transformations=transformations,
                       seed=data["seed"], guards=tuple(data["guards"]), models=tuple(data["models"]),
                       judges=tuple(data["judges"]), thresholds=data["thresholds"], limit_sample=limit_sample)


def read_study_record(path: Path) -> StudyRecord:
    """The record in a study folder's study.json (`path`)."""
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=path) from None
    try:
        data = json.loads(text) if text.strip() else None
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON (line {exc.lineno}: {exc.msg})", path=path) from None
    return record_from_json(data, path)


def _name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", dict: "an object", list: "a list"}
    return names.get(kind, str(kind)) if isinstance(kind, type) else " or ".join(names[k] for k in kind)
