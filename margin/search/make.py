"""The strategy table: each `--search` strategy and what a run needs to know about it, so no
code outside this table asks a strategy's name or class."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from margin.reports.protocols import observes_all, protocol_for
from margin.search.adaptive import AdaptiveSearch
from margin.search.bon import BestOfNSearch
from margin.search.candidates import Candidates
from margin.search.strategies import CheapestSearch, ExhaustiveSearch, PromptSearch
from margin.types import Candidate, Prompt


@dataclass(frozen=True)
class Strategy:
    name: str
    build: Callable[..., PromptSearch]
    #: its candidates are the suite's ladder (False: it makes its own edits as it goes)
    from_suite: bool
    #: the run options it takes beyond the shared ones (--max-calls, --incumbents, --one-edit)
    options: tuple[str, ...] = ()

    @property
    def observes_all(self) -> bool:
        """It asks about every candidate, which per-transform analyses need (a recorded run
        says so by its search's name: `margin.reports.protocols.observes_all`)."""
        return observes_all(self.name)

    @property
    def protocol(self) -> str:
        """The measurement protocol its margins belong to (`margin.reports.protocols`)."""
        return protocol_for(self.name)


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


def strategy(name: str) -> Strategy:
    try:
        return STRATEGY_TABLE[name]
    except KeyError:
        raise ValueError(f"unknown search strategy {name!r}; expected one of {STRATEGIES}") from None


def make_search(name: str, prompt: Prompt, original: Candidate, candidates: Sequence[Candidate] | Candidates,
                budget: float, **options: Any) -> PromptSearch:
    """`options` are the strategy's own constructor's (the adaptive search's cost_model, seed,
    max_calls, incumbent, one_edit); a strategy that takes none refuses them."""
    chosen = strategy(name)
    if options and not chosen.options:
        raise ValueError(f"search {name!r} takes no options (given {', '.join(sorted(options))})")
    return chosen.build(prompt, original, candidates, budget, **options)
