"""A run's record (`run.json`): what decides its results, typed and frozen.

Built once when a run is prepared, written once, read back by `read_run_record` alone, and
compared by `RunRecord.differences`: resume, merge, score, incumbents and publish all ask it
which fields differ instead of comparing dicts of their own. The JSON it writes is the one
run.json always held (same keys, same order), so folders written before it read back as
they are and rewrite to the same bytes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from margin.cost import CostNorm
from margin.datasets import XSTEST_URL
from margin.errors import InputError
from margin.types import TARGETS, GuardInfo, Target

#: What decides a run when nothing says otherwise, written once: `margin run`, `margin ablate`,
#: `margin score`, `RunConfig`, a study's `seed` and the adaptive searches take their defaults
#: from here (how calls are made is `margin.engine.settings`).
DEFAULT_DATASET = "sample"
DEFAULT_SUITE = "standard"
DEFAULT_BUDGET = 100.0
DEFAULT_SEARCH = "cheapest"
DEFAULT_SEED = 0
DEFAULT_COST_NORM: CostNorm = "corpus"
DEFAULT_MAX_CALLS = 100  # guard calls per prompt of a guard-guided search (adaptive, bon)

#: The fields that decide a run's results, each with the flag that sets it (a refused resume names it).
DECIDING: dict[str, str] = {
    "dataset": "--dataset", "suite": "--suite", "guard": "--guard", "budget": "--budget",
    "cost_norm": "--cost-norm", "corpus_mean_length": "--dataset", "search": "--search",
    "seed": "--seed", "limit": "--limit", "limit_sample": "--limit", "shard": "--shard",
    "protocol": "--search", "max_calls": "--max-calls", "incumbents": "--incumbents",
    "one_edit": "--one-edit", "one_edit_set": "--one-edit", "target": "--target", "policies": "--policies",
}


def flags_of(names: Iterable[str]) -> str:
    """The flags that set these fields, as a refusal names them: `--budget, --seed`."""
    return ", ".join(sorted({DECIDING[name] for name in names}))


#: What verdicts depend on when several runs' receipts are scored together (`margin score`):
#: `guard.verdicts` is the guard's identity less its descriptive fields.
SAME_VERDICTS = ("dataset.sha256", "suite.sha256", "budget", "cost_norm", "seed", "limit", "limit_sample",
                 "guard.verdicts", "target", "policies")
#: What an incumbent run must share with the adaptive run it seeds (its costs are in the same units).
SAME_UNITS = ("dataset.sha256", "guard.id", "cost_norm", "corpus_mean_length")
SUITES_FOLDER = "margin/transforms/suites/"
#: How `--limit` chose its prompts (`margin.runs.preparing.subset`): a seeded stratified sample, or the
#: first N (runs made before the sample).
LimitMethod = Literal["stratified", "first"]


@dataclass(frozen=True)
class Named:
    """A dataset's or a suite's identity: its name, where it was read from, its bytes' SHA-256."""

    name: str
    source: str
    sha256: str


@dataclass(frozen=True)
class LimitSample:
    """How `--limit` chose its prompts: the method and the prompts per label."""

    method: str
    by_label: tuple[tuple[str, int], ...]

    def counts(self) -> dict[str, int]:
        return dict(self.by_label)

    def to_json(self) -> dict[str, Any]:
        """As run.json, study.json and pairings.json record it."""
        return {"method": self.method, "by_label": self.counts()}


@dataclass(frozen=True)
class EditSet:
    """What `--one-edit all` certifies its costs minimal among: the typo-sized kinds of edit
    at every position, and these edit transforms' single edits at every position each can edit."""

    typos: tuple[str, ...]
    transforms: tuple[str, ...]


@dataclass(frozen=True)
class RunRecord:
    dataset: Named
    suite: Named
    guard: GuardInfo
    budget: float
    cost_norm: str
    corpus_mean_length: float | None
    search: str
    seed: int
    limit: int | None = None
    limit_sample: LimitSample | None = None  # None: every prompt, or the first N (runs before the sample)
    shard: tuple[int, int] | None = None
    protocol: str | None = None  # None only in runs made before run.json named it
    max_calls: int | None = None  # an adaptive run's guard calls per prompt (None: not adaptive)
    incumbents: str | None = None  # the standard run an adaptive run was seeded with
    one_edit: str | None = None  # an adaptive run's --one-edit, when not the default (older runs have none)
    one_edit_set: EditSet | None = None  # what --one-edit all certifies (None: not that mode, or a run before it was said)
    scored_from: tuple[str, ...] | None = None  # `margin score`'s inputs, for a rescored folder
    target: str | None = None  # a response run's target; None: prompts (every run before cases had targets)
    policies: Named | None = None  # the `--policies` file the cases' policy ids named

    def __post_init__(self) -> None:
        # The guard as run.json keeps it (params and caveats as text), so a record compares
        # and reports the same whether it was just built or read back.
        guard = dataclasses.replace(self.guard, params=tuple((str(k), str(v)) for k, v in self.guard.params),
                                    caveats=tuple(str(c) for c in self.guard.caveats))
        object.__setattr__(self, "guard", guard)
        if self.shard is not None:
            object.__setattr__(self, "shard", (self.shard[0], self.shard[1]))  # a list given by a library user

    def value(self, name: str) -> Any:
        """A field by its run.json name (`dataset.sha256`), or `guard.verdicts`."""
        if name == "guard.verdicts":
            return dataclasses.replace(self.guard, template="", caveats=(), scope="")  # descriptive only
        value: Any = self
        for part in name.split("."):
            value = getattr(value, part)
        return value

    def differences(self, other: RunRecord, names: Iterable[str] = DECIDING) -> list[str]:
        """The named fields on which `other` differs from this record, in the order named."""
        return [name for name in names if self.value(name) != other.value(name)]

    def describe(self, other: RunRecord, names: Iterable[str], mine: str, theirs: str) -> str:
        """Each differing field with both values: `budget: run.json has 100.0, this command gives 50.0`."""
        return "; ".join(f"{name}: {mine} {_short(self.value(name))}, {theirs} {_short(other.value(name))}"
                         for name in names)

    @property
    def limit_method(self) -> LimitMethod:
        """How the run chose its prompts: a run with a limit and no sample recorded took the first N."""
        return "first" if self.limit and self.limit_sample is None else "stratified"

    @property
    def dataset_spec(self) -> str:
        """The `--dataset` that loads this run's dataset again (a built-in by name, else its source)."""
        if self.dataset.source == XSTEST_URL:
            return "xstest"
        if self.dataset.name == "sample" and self.dataset.source == "margin/data/sample.csv":
            return "sample"
        return self.dataset.source

    @property
    def suite_spec(self) -> str:
        """The `--suite` that loads this run's suite again (a built-in by name, else its source)."""
        source = self.suite.source
        if source.startswith(SUITES_FOLDER) and source.endswith(".yaml"):
            return source[len(SUITES_FOLDER):-len(".yaml")]
        return source

    def to_json(self) -> dict[str, Any]:
        """run.json's object, keys in the order run.json has always had them."""
        out: dict[str, Any] = {
            "dataset": dataclasses.asdict(self.dataset),
            "suite": dataclasses.asdict(self.suite),
            "guard": info_record(self.guard),
            "budget": self.budget,
            "cost_norm": self.cost_norm,
            "corpus_mean_length": self.corpus_mean_length,
            "search": self.search,
            "seed": self.seed,
            "limit": self.limit,
        }
        if self.limit_sample is not None:
            out["limit_sample"] = self.limit_sample.to_json()
        out["shard"] = list(self.shard) if self.shard else None
        if self.protocol is not None:
            out["protocol"] = self.protocol
        if self.max_calls is not None:
            out["max_calls"] = self.max_calls
            out["incumbents"] = self.incumbents
        if self.one_edit is not None:
            out["one_edit"] = self.one_edit
        if self.one_edit_set is not None:
            out["one_edit_set"] = {"typos": list(self.one_edit_set.typos),
                                   "transforms": list(self.one_edit_set.transforms)}
        if self.scored_from is not None:
            out["scored_from"] = list(self.scored_from)
        if self.target is not None:
            out["target"] = self.target
        if self.policies is not None:
            out["policies"] = dataclasses.asdict(self.policies)
        return out

    @property
    def target_name(self) -> Target:
        """The turn this run judged: `prompt` unless the record says otherwise."""
        return "response" if self.target == "response" else "prompt"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def info_record(info: GuardInfo) -> dict[str, Any]:
    """A guard's identity as run.json keeps it (params as [key, value] pairs, in order)."""
    record = dataclasses.asdict(info)
    record["params"] = [list(pair) for pair in info.params]
    record["caveats"] = list(info.caveats)
    if not info.scope:
        del record["scope"]  # a guard with no declared scope keeps the record it always had
    return record


def info_from_record(record: Mapping[str, Any]) -> GuardInfo:
    """The inverse of `info_record`; also reads params written as an object."""
    params = record.get("params") or []
    pairs = params.items() if isinstance(params, Mapping) else params
    known = {f.name for f in dataclasses.fields(GuardInfo)}
    required = {"family": "", "checkpoint": "", "revision": "", "backend": ""}
    return GuardInfo(**{**required, **{k: v for k, v in record.items() if k in known},
                        "params": tuple((str(k), str(v)) for k, v in pairs),
                        "caveats": tuple(str(c) for c in record.get("caveats", ()))})


_NUMBER = (int, float)
_KINDS = {str: "a string", int: "an integer", _NUMBER: "a number", dict: "an object", list: "a list"}


def _field(data: Mapping[str, Any], key: str, kind: Any, path: Path, *, optional: bool = False,
           at: str = "") -> Any:
    """`data[key]` if it is of `kind` (None where `optional` allows it); else one InputError
    naming the file and the field."""
    name = at + key
    if key not in data or (optional and data[key] is None):
        if optional:
            return None
        raise InputError("missing field", path=path, field=name)
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(f"expected {_KINDS[kind]}, not {type(value).__name__}", path=path, field=name)
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"expected a finite number, not {value}", path=path, field=name)
    return value


def _named(data: Mapping[str, Any], key: str, path: Path) -> Named:
    block = _field(data, key, dict, path)
    return Named(*(_field(block, part, str, path, at=f"{key}.") for part in ("name", "source", "sha256")))


def _guard(data: Mapping[str, Any], path: Path) -> GuardInfo:
    block = _field(data, "guard", dict, path)
    _field(block, "id", str, path, at="guard.")
    for key in ("family", "checkpoint", "revision", "backend", "template", "template_sha256", "scope"):
        _field(block, key, str, path, optional=True, at="guard.")
    _field(block, "threshold", _NUMBER, path, optional=True, at="guard.")
    _field(block, "caveats", list, path, optional=True, at="guard.")
    params = block.get("params") or []
    if not isinstance(params, dict) and (not isinstance(params, list) or any(
            not isinstance(pair, list) or len(pair) != 2 for pair in params)):
        raise InputError("expected [key, value] pairs or an object", path=path, field="guard.params")
    return info_from_record(block)


def _limit_sample(data: Mapping[str, Any], path: Path) -> LimitSample | None:
    block = _field(data, "limit_sample", dict, path, optional=True)
    if block is None:
        return None
    by_label = _field(block, "by_label", dict, path, at="limit_sample.")
    for label in by_label:
        _field(by_label, label, int, path, at="limit_sample.by_label.")
    return LimitSample(_field(block, "method", str, path, at="limit_sample."), tuple(by_label.items()))


def _shard(data: Mapping[str, Any], path: Path) -> tuple[int, int] | None:
    shard = _field(data, "shard", list, path, optional=True)
    if shard is None:
        return None
    if len(shard) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) for n in shard):
        raise InputError("expected [j, n], two integers", path=path, field="shard")
    return shard[0], shard[1]


def _edit_set(data: Mapping[str, Any], path: Path) -> EditSet | None:
    block = _field(data, "one_edit_set", dict, path, optional=True)
    if block is None:
        return None
    parts = []
    for key in ("typos", "transforms"):
        names = _field(block, key, list, path, at="one_edit_set.")
        if not all(isinstance(name, str) for name in names):
            raise InputError("expected a list of names", path=path, field=f"one_edit_set.{key}")
        parts.append(tuple(names))
    return EditSet(*parts)


def record_from_json(data: Any, path: Path) -> RunRecord:
    """The record a run.json object holds; a missing or mistyped field is one InputError naming it."""
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=path)
    scored_from = _field(data, "scored_from", list, path, optional=True)
    return RunRecord(
        dataset=_named(data, "dataset", path),
        suite=_named(data, "suite", path),
        guard=_guard(data, path),
        budget=_field(data, "budget", _NUMBER, path),
        cost_norm=_field(data, "cost_norm", str, path),
        corpus_mean_length=_field(data, "corpus_mean_length", _NUMBER, path, optional=True),
        search=_field(data, "search", str, path),
        seed=_field(data, "seed", int, path),
        limit=_field(data, "limit", int, path, optional=True),
        limit_sample=_limit_sample(data, path),
        shard=_shard(data, path),
        protocol=_field(data, "protocol", str, path, optional=True),
        max_calls=_field(data, "max_calls", int, path, optional=True),
        incumbents=_field(data, "incumbents", str, path, optional=True),
        one_edit=_field(data, "one_edit", str, path, optional=True),
        one_edit_set=_edit_set(data, path),
        scored_from=tuple(str(p) for p in scored_from) if scored_from is not None else None,
        target=_target(data, path),
        policies=_named(data, "policies", path) if data.get("policies") is not None else None,
    )


def _target(data: Mapping[str, Any], path: Path) -> str | None:
    target = _field(data, "target", str, path, optional=True)
    if target is not None and target not in TARGETS:
        raise InputError(f"unknown target {target!r}; expected prompt or response", path=path, field="target")
    return None if target == "prompt" else target
