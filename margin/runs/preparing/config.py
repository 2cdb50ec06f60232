"""What decides a run (dataset, suite, budget, search, seed, the guard and its overrides)
and how its calls are made (`calls`, one `CallSettings`); `margin run`'s flags map onto it
one to one, through `RunConfig.of`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from margin.cost import CostNorm
from margin.engine import settings
from margin.errors import InputError
from margin.guards.make import parse_guard_spec, with_overrides
from margin.guards.spec import GuardSpec
from margin.runrecord import (
    DEFAULT_BUDGET,
    DEFAULT_COST_NORM,
    DEFAULT_DATASET,
    DEFAULT_SEARCH,
    DEFAULT_SEED,
    DEFAULT_SUITE,
)
from margin.runs.preparing.subset import LimitMethod
from margin.serving.calls import CallSettings
from margin.types import Target

#: The keywords `RunConfig.of` gathers into `calls`.
CALL_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(CallSettings))


@dataclass(frozen=True)
class RunConfig:
    guard: str | GuardSpec
    dataset: str = DEFAULT_DATASET
    suite: str = DEFAULT_SUITE
    budget: float = DEFAULT_BUDGET
    search: str = DEFAULT_SEARCH
    seed: int = DEFAULT_SEED
    limit: int | None = None  # a stratified sample of this many prompts (margin.runs.preparing.subset)
    limit_method: LimitMethod = "stratified"  # "first": how runs made before the sample chose
    cost_norm: CostNorm = DEFAULT_COST_NORM
    target: Target = "prompt"  # which turn of each case is judged and transformed (docs/datasets.md)
    policies: str | None = None  # a YAML file of policy texts whose ids the cases' `policy` cells name
    # How its calls are made (engine, batch size, attempts, limits): `margin.serving.calls`.
    calls: CallSettings = CallSettings()
    shard: tuple[int, int] | None = None
    # Drivers searching at once (Ray actors against the same guard; `margin.runs.executing.drivers`),
    # and the CPUs each reserves. They change how fast, never what: results are the same.
    drivers: int = settings.DRIVERS.default
    driver_cpus: float = settings.DRIVER_CPUS.default
    cache: bool = True
    cache_path: Path | None = None  # default: verdicts.sqlite in margin's cache folder
    max_missing: float = settings.MAX_MISSING.default  # share of prompts that may end missing before the run fails
    # --search adaptive only: guard calls per prompt, a standard run whose flips seed it, and
    # how one-edit variants are asked ("guided" by default; "all" certifies every cost).
    max_calls: int | None = None
    incumbents: str | None = None
    one_edit: str | None = None
    # --guard overrides (None: the preset's default)
    backend: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    threshold: float | None = None
    normalize: str | None = None  # a defence before the guard (margin.guards.normalize), e.g. nfkc+skeleton

    @classmethod
    def option_names(cls) -> list[str]:
        """The keywords `of` takes beside the guard: the fields, with `calls` given flat."""
        return [f.name for f in fields(cls) if f.name not in ("guard", "calls")] + list(CALL_FIELDS)

    @classmethod
    def of(cls, guard: str | GuardSpec, **options: Any) -> RunConfig:
        """A run's config from flat keywords, as `margin.run` and `margin run`'s flags give
        them: `CallSettings`' fields (engine, batch_size, the call limits, ...) beside the
        others, gathered into `calls`. An unknown keyword is refused here, by name, with the
        closest known one."""
        from margin.util.suggest import did_you_mean

        known = cls.option_names()
        for option in options:
            if option not in known:
                raise InputError(f"margin.run takes no option {option!r}{did_you_mean(option, known)}", field=option)
        calls = {name: options.pop(name) for name in CALL_FIELDS if name in options}
        return cls(guard, **options) if not calls else cls(guard, calls=CallSettings(**calls), **options)

    def guard_spec(self) -> GuardSpec:
        overrides = {"backend": self.backend, "model": self.model, "base_url": self.base_url,
                     "api_key_env": self.api_key_env, "threshold": self.threshold,
                     "normalize": self.normalize}
        if isinstance(self.guard, GuardSpec):
            return with_overrides(self.guard, **overrides)
        return parse_guard_spec(self.guard, **overrides)
