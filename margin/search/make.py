"""The strategy table: each `--search` strategy and what a run needs to know about it, so no
code outside this table asks a strategy's name or class."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from margin.cost import CostModel
from margin.errors import InputError
from margin.reports.protocols import SEARCH_TRAITS, ProtocolId, SearchTraits
from margin.runrecord import DEFAULT_MAX_CALLS, DEFAULT_SEED
from margin.search.adaptive import AdaptiveSearch
from margin.search.bon import BestOfNSearch
from margin.search.candidates import Candidates
from margin.search.strategies import CheapestSearch, ExhaustiveSearch, PromptSearch
from margin.types import Candidate, Flip, Prompt


@dataclass(frozen=True)
class GuidedOptions:
    """What a guard-guided search (adaptive, bon) takes beyond the shared arguments; the
    suite's strategies take none. A strategy refuses a field it does not take (see
    `check_options`)."""

    cost_model: CostModel
    seed: int = DEFAULT_SEED
    max_calls: int = DEFAULT_MAX_CALLS
    incumbent: Flip | None = None  # the standard suite's flip for this prompt (--incumbents)
    one_edit: str | None = None  # None: the search's own default (--one-edit)

    def given(self) -> list[str]:
        """The run options these set beyond the ones every guided search takes."""
        return [name for name, value in (("incumbents", self.incumbent), ("one_edit", self.one_edit))
                if value is not None]


@dataclass(frozen=True)
class Strategy:
    name: str
    build: Callable[..., PromptSearch]
    #: its candidates are the suite's ladder (False: it makes its own edits as it goes)
    from_suite: bool
    #: the run options it takes beyond the shared ones (--max-calls, --incumbents, --one-edit);
    #: a strategy that takes any is built with `GuidedOptions`
    options: tuple[str, ...] = ()

    @property
    def traits(self) -> SearchTraits:
        """Its protocol and whether it observes every candidate, as reports read them."""
        return SEARCH_TRAITS[self.name]

    @property
    def observes_all(self) -> bool:
        """It asks about every candidate, which per-transform analyses need."""
        return self.traits.observes_all

    @property
    def protocol(self) -> ProtocolId:
        """The measurement protocol its margins belong to (`margin.reports.protocols`)."""
        return self.traits.protocol


STRATEGY_TABLE = {
    s.name: s
    for s in (
        Strategy("cheapest", CheapestSearch, from_suite=True),
        Strategy("exhaustive", ExhaustiveSearch, from_suite=True),
        Strategy("adaptive", AdaptiveSearch, from_suite=False, options=("max_calls", "incumbents", "one_edit")),
        Strategy("bon", BestOfNSearch, from_suite=False, options=("max_calls",)),
    )
}
STRATEGIES = tuple(STRATEGY_TABLE)
if set(STRATEGIES) != set(SEARCH_TRAITS):  # one list of strategies: reports must know each one's traits
    raise RuntimeError(f"strategies {sorted(STRATEGIES)} and SEARCH_TRAITS {sorted(SEARCH_TRAITS)} differ")


def strategy(name: str) -> Strategy:
    try:
        return STRATEGY_TABLE[name]
    except KeyError:
        raise ValueError(f"unknown search strategy {name!r}; expected one of {STRATEGIES}") from None


def check_options(name: str, given: Iterable[str]) -> None:
    """InputError naming the first of the run options `given` (max_calls, incumbents,
    one_edit) that search `name` does not take: the one check of the CLI, API and library."""
    for option in given:
        if option not in strategy(name).options:
            takers = " or ".join(s.name for s in STRATEGY_TABLE.values() if option in s.options)
            raise InputError(f"only --search {takers} takes --{option.replace('_', '-')}", field="--search")


def make_search(name: str, prompt: Prompt, original: Candidate, candidates: Sequence[Candidate] | Candidates,
                budget: float, options: GuidedOptions | None = None) -> PromptSearch:
    """A search of `prompt`; a guided strategy needs `options`, a suite strategy refuses them."""
    chosen = strategy(name)
    if not chosen.options:
        if options is not None:
            raise InputError(f"search {name!r} takes no options", field="--search")
        return chosen.build(prompt, original, candidates, budget)
    if options is None:
        raise InputError(f"search {name!r} needs its options (a cost model at least)", field="--search")
    check_options(name, options.given())
    extra = {key: value for key, value in (("incumbent", options.incumbent), ("one_edit", options.one_edit))
             if value is not None}
    return chosen.build(prompt, original, candidates, budget, cost_model=options.cost_model, seed=options.seed,
                        max_calls=options.max_calls, **extra)
