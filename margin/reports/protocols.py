"""Measurement protocols: which margins may be compared, merged or ranked together.

A standard-suite margin comes from a fixed, guard-blind suite: every guard faces the same
test, so margins rank. An adaptive margin comes from a search steered by the guard's own
answers: each flip cost is an upper bound on that prompt's true flip cost, tighter for some
guards than others, so it is never merged or ranked with standard-suite margins. Runs say
which they are in `run.json` (`protocol`, `search`) and snapshots in `meta.protocol`,
`meta.provenance.search` and each record's `evaluation` (`snapshot.build_snapshot` writes
them from the search); the snapshot model refuses a protocol it does not know and a record
whose search belongs to another (`snapshot_schema.check_snapshot`), and `margin publish`
refuses adaptive runs.
"""

from __future__ import annotations

from typing import Final, Literal

STANDARD_PROTOCOL: Final = "margin-flip-cost/1"
ADAPTIVE_PROTOCOL: Final = "margin-adaptive-flip-cost/1"
#: The protocols of a leaderboard snapshot (`meta.protocol`): its version, which a reader checks.
RankedProtocol = Literal["margin-flip-cost/1", "margin-adaptive-flip-cost/1"]
ADAPTIVE_SEARCHES = frozenset({"adaptive", "bon"})  # bon: Best-of-N samples, stopped at a flip
#: searches that ask about every candidate of the suite, as per-transform analyses need
FULL_OBSERVATION_SEARCHES = frozenset({"exhaustive"})
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


def protocol_for(search: str) -> RankedProtocol:
    return ADAPTIVE_PROTOCOL if search in ADAPTIVE_SEARCHES else STANDARD_PROTOCOL


def observes_all(search: str) -> bool:
    """Whether a run by `search` holds a verdict for every candidate of its suite."""
    return search in FULL_OBSERVATION_SEARCHES
