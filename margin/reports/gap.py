"""The suite gap: per prompt, the standard suite's flip cost next to adaptive search's.

The standard suite is guard-blind and fixed; adaptive search is steered by the guard and
gives an upper bound on the true flip cost. Where adaptive finds a cheaper flip, the gap
(standard minus adaptive) is how much the fixed suite overstates that prompt's robustness.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from margin.types import SearchResult


@dataclass(frozen=True, slots=True)
class GapRow:
    """One prompt in both runs. Costs are None where that run lost the prompt (missing);
    `gap` is None unless both are scored."""

    prompt_id: str
    label: str
    type: str
    standard_cost: float | None
    adaptive_cost: float | None
    gap: float | None


def suite_gap(standard: Iterable[SearchResult], adaptive: Iterable[SearchResult]) -> list[GapRow]:
    """Join two runs' results by prompt id, in the standard run's order; prompts in only one
    run are left out. ValueError if a prompt's label differs between the runs."""
    theirs = {r.prompt_id: r for r in adaptive}
    rows = []
    for s in standard:
        a = theirs.get(s.prompt_id)
        if a is None:
            continue
        if a.label != s.label:
            raise ValueError(f"prompt {s.prompt_id!r} is {s.label} in one run and {a.label} in the other")
        sc = s.flip_cost if s.status == "scored" else None
        ac = a.flip_cost if a.status == "scored" else None
        gap = sc - ac if sc is not None and ac is not None else None
        rows.append(GapRow(s.prompt_id, s.label, s.type, sc, ac, gap))
    return rows
