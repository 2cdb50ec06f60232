"""Measurement protocols: which margins may be compared, merged or ranked together.

A standard-suite margin comes from a fixed, guard-blind suite: every guard faces the same
test, so margins rank. An adaptive margin comes from a search steered by the guard's own
answers: each flip cost is an upper bound on that prompt's true flip cost, tighter for some
guards than others, so it is never merged or ranked with standard-suite margins. Runs say
which they are in `run.json` (`protocol`, `search`) and snapshots in `meta.protocol`,
`meta.provenance.search` and each record's `evaluation` (`snapshot.build_snapshot` writes
them from the search); `require_one_protocol` is the check a publish or merge step runs
before it puts results side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

STANDARD_PROTOCOL: Final = "margin-flip-cost/1"
ADAPTIVE_PROTOCOL: Final = "margin-adaptive-flip-cost/1"
#: The protocols of a snapshot (`meta.protocol`): its version, which a reader checks.
ProtocolId = Literal["margin-flip-cost/1", "margin-adaptive-flip-cost/1"]


@dataclass(frozen=True)
class SearchTraits:
    """What a search strategy's results are, as reports read them from a run's `search` name."""

    protocol: ProtocolId  # the margins it makes may be compared only with the same protocol's
    observes_all: bool  # it asks about every candidate of the suite, as per-transform analyses need


#: Each `--search` strategy's traits, by the name run.json records. `margin.search.make`'s
#: strategy table takes each strategy's traits from here and refuses a strategy missing
#: from it; the data lives in reports because reports sit below search and read it.
SEARCH_TRAITS: dict[str, SearchTraits] = {
    "cheapest": SearchTraits(STANDARD_PROTOCOL, observes_all=False),
    "exhaustive": SearchTraits(STANDARD_PROTOCOL, observes_all=True),
    "adaptive": SearchTraits(ADAPTIVE_PROTOCOL, observes_all=False),
    "bon": SearchTraits(ADAPTIVE_PROTOCOL, observes_all=False),  # Best-of-N samples, stopped at a flip
}
#: a name no strategy here has (a run from elsewhere): a suite replayed cheapest first
UNKNOWN_SEARCH = SearchTraits(STANDARD_PROTOCOL, observes_all=False)
ADAPTIVE_CAVEAT = (
    "adaptive search: guard-guided edits; each flip cost is an upper bound on the prompt's true "
    "flip cost, so these margins are not comparable with standard-suite margins and are never "
    "ranked or merged with them"
)
ADAPTIVE_METHODOLOGY = (
    " ADAPTIVE: flip costs come from a search steered by this guard's answers (knock-out and "
    "put-in edits at the words the guard reacts to, then pruning), capped per prompt by a "
    "guard-call budget; each is an upper bound on the prompt's true flip cost."
)


def traits(search: str) -> SearchTraits:
    return SEARCH_TRAITS.get(search, UNKNOWN_SEARCH)


def protocol_for(search: str) -> ProtocolId:
    return traits(search).protocol


def observes_all(search: str) -> bool:
    """Whether a run by `search` holds a verdict for every candidate of its suite."""
    return traits(search).observes_all

