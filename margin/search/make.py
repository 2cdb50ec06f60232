"""A prompt's search, by the name `--search` gives it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from margin.search.adaptive import AdaptiveSearch
from margin.search.candidates import Candidates
from margin.search.strategies import CheapestSearch, ExhaustiveSearch, PromptSearch
from margin.types import Candidate, Prompt

STRATEGIES = ("cheapest", "exhaustive", "adaptive")


def make_search(strategy: str, prompt: Prompt, original: Candidate, candidates: Sequence[Candidate] | Candidates,
                budget: float, **options: Any) -> PromptSearch:
    """`options` are the adaptive search's (cost_model, seed, max_calls, incumbent)."""
    if strategy == "adaptive":
        return AdaptiveSearch(prompt, original, candidates, budget, **options)
    if options:
        raise ValueError(f"search {strategy!r} takes no options (given {', '.join(sorted(options))})")
    if strategy == "cheapest":
        return CheapestSearch(prompt, original, candidates, budget)
    if strategy == "exhaustive":
        return ExhaustiveSearch(prompt, original, candidates, budget)
    raise ValueError(f"unknown search strategy {strategy!r}; expected one of {STRATEGIES}")
