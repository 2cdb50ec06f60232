"""Preparing a run: every input validated and the guard described, loading no model and
writing nothing. A prompt's candidates are built when its search starts and dropped when it
ends (a `Ladder`), so a run's memory does not grow with its dataset."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property

from margin.cost import COST_NORMS, CostModel
from margin.datasets import Dataset, load_dataset
from margin.engine.settings import ENGINE
from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.make import describe_guard, guard_shapes
from margin.guards.served_spec import served_spec
from margin.guards.shapes import TEXT, Shapes, check_cases
from margin.guards.spec import GuardSpec
from margin.guards.weights import check_loadable
from margin.runrecord import DEFAULT_MAX_CALLS, EditSet, LimitSample, Named, RunRecord
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.shards import select_shard
from margin.runs.preparing.subset import METHODS, limit_prompts, limit_record
from margin.search.adaptive import ONE_EDIT_MODES
from margin.search.candidates import Ladder, original_candidate
from margin.search.incumbents import load_incumbents
from margin.search.make import (
    STRATEGIES,
    GuidedOptions,
    Strategy,
    check_options,
    make_search,
    strategy,
)
from margin.search.single_edits import KINDS, edit_transforms
from margin.search.strategies import PromptSearch
from margin.serving.guard_pool import is_remote
from margin.transforms.suites import Suite, load_suite
from margin.types import Candidate, Flip, GuardInfo, Prompt


@dataclass(frozen=True)
class PreparedRun:
    """A run decided: its inputs, validated, and the guard described. Complete as `prepare`
    returns it and never changed after (a driver's shard, a defence or a replay is a
    `dataclasses.replace` of it, with its own `record`)."""

    config: RunConfig
    dataset: Dataset
    suite: Suite
    cost_model: CostModel
    prompts: tuple[Prompt, ...]
    spec: GuardSpec | None = None  # None only for `margin score` replays, which run no guard
    info: GuardInfo | None = None
    guard: Guard | None = None  # an instance a library user passed in: used instead of the spec
    incumbents: dict[str, Flip] = field(default_factory=dict)
    limit_sample: LimitSample | None = None  # run.json's account of --limit's sample
    shapes: Shapes = TEXT  # the cases the guard takes and what it sees of them

    def candidates(self, prompt: Prompt) -> Ladder:
        """The prompt's candidates, built as far as they are read."""
        c = self.config
        return Ladder(prompt, self.suite, self.cost_model, c.budget, c.seed)

    def all_candidates(self, prompt: Prompt) -> list[Candidate]:
        """Every candidate of the prompt, built in full (for analyses, not for searching)."""
        return self.candidates(prompt).all()

    def search(self, prompt: Prompt) -> PromptSearch:
        c = self.config
        candidates: Ladder | list[Candidate] = self.candidates(prompt) if self.strategy.from_suite else []
        return make_search(c.search, prompt, original_candidate(prompt, c.seed), candidates, c.budget,
                           self.search_options(prompt))

    def searches(self) -> Iterator[PromptSearch]:
        """One search per prompt, each made when it is asked for (a driver starts a few at a time)."""
        return (self.search(p) for p in self.prompts)

    @property
    def strategy(self) -> Strategy:
        return strategy(self.config.search)

    def search_options(self, prompt: Prompt) -> GuidedOptions | None:
        if not self.strategy.options:
            return None
        return GuidedOptions(self.cost_model, seed=self.config.seed,
                             max_calls=self.config.max_calls or DEFAULT_MAX_CALLS,
                             incumbent=self.incumbents.get(prompt.id), one_edit=self.config.one_edit)

    @cached_property
    def record(self) -> RunRecord:
        """What decides the run's results, as run.json records it: built once, on first use
        (a driver's shard or a defence, made by `dataclasses.replace`, builds its own)."""
        assert self.info is not None, "a run record needs the guard's identity"
        c = self.config
        adaptive = bool(self.strategy.options)
        return RunRecord(
            dataset=Named(self.dataset.name, self.dataset.source, self.dataset.sha256),
            suite=Named(self.suite.name, self.suite.source, self.suite.sha256),
            guard=self.info, budget=c.budget, cost_norm=c.cost_norm,
            corpus_mean_length=self.cost_model.corpus_mean_length, search=c.search, seed=c.seed,
            limit=c.limit, limit_sample=self.limit_sample, shard=c.shard or None, protocol=self.strategy.protocol,
            target=None if self.dataset.target == "prompt" else self.dataset.target,  # prompt runs keep their record
            policies=(Named(p.name, p.source, p.sha256) if (p := self.dataset.policies) is not None else None),
            max_calls=(c.max_calls or DEFAULT_MAX_CALLS) if adaptive else None,
            incumbents=c.incumbents if adaptive else None,
            # runs made before --one-edit have no key, so the default is not recorded
            one_edit=c.one_edit if adaptive and c.one_edit not in (None, "guided") else None,
            one_edit_set=EditSet(KINDS, edit_transforms()) if adaptive and c.one_edit == "all" else None)


def prepare(config: RunConfig, guard: Guard | None = None) -> PreparedRun:
    """Validate every input and describe the guard, loading no model and writing nothing.

    A library user may pass a Guard instance instead of naming one: it is used as it is
    (on Ray it is shipped to the actors), and `config.guard` only names it."""
    if guard is not None and not isinstance(config.guard, GuardSpec):
        spec = GuardSpec(name=config.guard)  # runtime defaults; the identity is guard.info
    else:
        spec = config.guard_spec()
    if spec.replicas < 1:
        raise InputError("must be at least 1", field="--replicas")
    check_call_timeout(config, guard.remote if guard is not None else is_remote(spec))
    inputs = prepare_inputs(config)
    if guard is None:
        spec = served_spec(spec)  # a guard behind a server: what it serves is part of its identity
    info = guard.info if guard is not None else describe_guard(spec)
    shapes = guard.shapes if guard is not None else guard_shapes(spec)
    # Every case the guard cannot take is refused now, before any call (the whole file, so a
    # shard or a --limit sample is refused alike).
    check_cases(info.id, shapes, inputs.dataset.prompts, inputs.dataset.source, inputs.dataset.lines)
    if guard is None and loads_here(config):
        check_loadable(spec, info)  # a model this machine cannot load fails now, not in an actor
    prepared = replace(inputs, spec=spec, info=info, guard=guard, shapes=shapes)
    if config.incumbents:  # read against the run's record, which needs the guard's identity
        prepared = replace(prepared, incumbents=load_incumbents(config.incumbents, prepared.record))
    return prepared


def loads_here(config: RunConfig) -> bool:
    """Whether the guard's model loads on this machine: in this process, or on a Ray that
    margin starts here (a cluster named by --ray-address or $RAY_ADDRESS may hold models
    this machine does not)."""
    return config.calls.engine == "local" or not (config.calls.ray_address or os.environ.get("RAY_ADDRESS"))


def check_call_timeout(config: RunConfig, remote: bool) -> None:
    """`--call-timeout` bounds an endpoint's request, or a Ray actor's batch (the actor is
    restarted past it); a batch running in this process cannot be stopped, so refuse it
    there rather than ignore it."""
    if config.calls.timeout_cannot_apply(in_process=not remote):
        raise InputError("a guard in this process (--engine local) cannot be stopped mid-batch; "
                         "use --engine ray, or leave --call-timeout out", field="--call-timeout")


def prepare_inputs(config: RunConfig) -> PreparedRun:
    """Validate the inputs; no guard is involved (`margin score` replays through this, and
    `prepare` adds the guard to what it returns)."""
    if not (math.isfinite(config.budget) and config.budget > 0):  # NaN compares false both ways
        raise InputError(f"must be a finite number above 0, not {config.budget:g}", field="--budget")
    if config.search not in STRATEGIES:
        raise InputError(f"unknown search {config.search!r}; expected one of {', '.join(STRATEGIES)}",
                         field="--search")
    if config.cost_norm not in COST_NORMS:
        raise InputError(f"unknown cost norm {config.cost_norm!r}; expected corpus or prompt",
                         field="--cost-norm")
    if config.limit is not None and config.limit < 1:
        raise InputError("must be at least 1", field="--limit")
    if config.limit_method not in METHODS:
        raise InputError(f"unknown limit method {config.limit_method!r}; expected {' or '.join(METHODS)}",
                         field="limit_method")
    ENGINE.check_choice(config.calls.engine, "--engine")
    if config.drivers < 1:
        raise InputError("must be at least 1", field="--drivers")
    if config.drivers > 1 and config.calls.engine != "ray":
        raise InputError("several drivers run as Ray actors: use --engine ray (the default)", field="--drivers")
    if config.drivers > 1 and config.shard is not None:
        raise InputError("give --drivers or --shard, not both (drivers split the prompts themselves)", field="--drivers")
    if config.driver_cpus < 0:
        raise InputError("must not be negative", field="--driver-cpus")
    if not 0 <= config.max_missing <= 1:
        raise InputError("must be a share between 0 and 1 (or a percentage such as 1%)", field="--max-missing")
    check_options(config.search, [option for option, given in (
        ("max_calls", config.max_calls is not None), ("incumbents", bool(config.incumbents)),
        ("one_edit", config.one_edit is not None)) if given])
    if config.max_calls is not None and config.max_calls < 2:
        raise InputError("must be at least 2 (the original and one edit)", field="--max-calls")
    if config.one_edit is not None and config.one_edit not in ONE_EDIT_MODES:
        raise InputError(f"unknown mode {config.one_edit!r}; expected {', '.join(ONE_EDIT_MODES[:-1])} or "
                         f"{ONE_EDIT_MODES[-1]}",
                         field="--one-edit")
    dataset = load_dataset(config.dataset, config.target, config.policies)
    suite = load_suite(config.suite)
    # The corpus norm uses every prompt of the dataset, so --limit and shards keep the same units.
    cost_model = CostModel.for_corpus(dataset.texts, config.cost_norm)
    limited = limit_prompts(dataset.prompts, config.limit, config.seed, config.limit_method)
    sample = limit_record(limited, config.limit, config.limit_method) if len(limited) < len(dataset.prompts) else None
    return PreparedRun(config, dataset, suite, cost_model, select_shard(limited, config.shard), limit_sample=sample)
