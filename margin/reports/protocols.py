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

from collections.abc import Iterable, Mapping
from typing import Any

from margin.errors import InputError

STANDARD_PROTOCOL = "margin-flip-cost/1"
ADAPTIVE_PROTOCOL = "margin-adaptive-flip-cost/1"
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


def protocol_for(search: str) -> str:
    return ADAPTIVE_PROTOCOL if search in ADAPTIVE_SEARCHES else STANDARD_PROTOCOL


def observes_all(search: str) -> bool:
    """Whether a run by `search` holds a verdict for every candidate of its suite."""
    return search in FULL_OBSERVATION_SEARCHES


def protocol_of(document: Mapping[str, Any]) -> str:
    """The protocol of a snapshot (`meta.protocol`) or a run manifest (`protocol`, or the
    protocol its `search` implies)."""
    meta = document.get("meta")
    if isinstance(meta, Mapping) and "protocol" in meta:
        return str(meta["protocol"])
    if "protocol" in document:
        return str(document["protocol"])
    if "search" in document:
        return protocol_for(str(document["search"]))
    raise InputError("no protocol: neither a snapshot nor a run manifest", field="protocol")


def require_one_protocol(documents: Iterable[Mapping[str, Any]], names: Iterable[str] | None = None) -> str:
    """The one protocol all documents share; InputError naming the odd one out otherwise."""
    labels = list(names) if names is not None else None
    first: str | None = None
    for index, document in enumerate(documents):
        protocol = protocol_of(document)
        if first is None:
            first = protocol
        elif protocol != first:
            where = labels[index] if labels else f"document {index + 1}"
            raise InputError(
                f"cannot put {protocol} results with {first} results: adaptive margins are upper "
                "bounds and are never merged or ranked with standard-suite margins", path=where)
    if first is None:
        raise InputError("nothing to compare", field="protocol")
    return first

