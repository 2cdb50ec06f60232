"""What decides a run (dataset, suite, budget, search, seed, the guard and its overrides)
and how its calls are made; `margin run`'s flags map onto it one to one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from margin.cost import CostNorm
from margin.engine import settings
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
from margin.serving.calls import CallSettings, Engine
from margin.types import Target


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
    batch_size: int = settings.BATCH_SIZE.default
    # Call limits; None: the guard file's `backend_options`, else `margin.engine.settings`'s defaults.
    max_attempts: int | None = None
    call_timeout_s: float | None = None
    max_concurrency: int | None = None
    requests_per_second: float | None = None
    hedge_after_s: float | str | None = None
    max_outage_s: float | None = None  # an endpoint answering nothing this long stops the run
    retry_wait_s: float = settings.RETRY_WAIT.default
    engine: Engine = settings.ENGINE.default
    ray_address: str | None = None
    shard: tuple[int, int] | None = None
    # Drivers searching at once (Ray actors against the same guard; `margin.runs.executing.drivers`),
    # and the CPUs each reserves. They change how fast, never what: results are the same.
    drivers: int = settings.DRIVERS.default
    driver_cpus: float = settings.DRIVER_CPUS.default
    cache: bool = True
    cache_path: Path | None = None  # default: verdicts.sqlite in margin's cache folder
    max_missing: float = settings.MAX_MISSING.default  # share of prompts that may end missing before the run fails
    max_wait_s: float = settings.MAX_WAIT.default
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

    def call_settings(self) -> CallSettings:
        return CallSettings(
            engine=self.engine, ray_address=self.ray_address, batch_size=self.batch_size, max_wait_s=self.max_wait_s,
            retry_wait_s=self.retry_wait_s, max_attempts=self.max_attempts, call_timeout_s=self.call_timeout_s,
            max_concurrency=self.max_concurrency, requests_per_second=self.requests_per_second,
            hedge_after_s=self.hedge_after_s, max_outage_s=self.max_outage_s)

    def guard_spec(self) -> GuardSpec:
        overrides = {"backend": self.backend, "model": self.model, "base_url": self.base_url,
                     "api_key_env": self.api_key_env, "threshold": self.threshold,
                     "normalize": self.normalize}
        if isinstance(self.guard, GuardSpec):
            return with_overrides(self.guard, **overrides)
        return parse_guard_spec(self.guard, **overrides)
