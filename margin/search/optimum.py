"""Exact flip costs for lexicon guards: the known answers adaptive search is checked against.

Unsafe prompts. A lexicon guard blocks a text while any trigger occurrence survives. An
occurrence survives every edit that leaves its `region` alone (the code points a single
Levenshtein operation must touch to break it), so the fewest edits that unblock the text
is at least the fewest points that stab every region: interval stabbing, solved exactly by
the greedy choice of right endpoints. A witness (one homoglyph, else one zero-width space,
inside each stabbed occurrence) that the guard passes shows the bound is reached.

Safe prompts. For the word-prefix `keyword` guard, the fewest edits that make a safe text
blocked is the fewest that place one lexicon stem at a word start (or a `word$` entry as a
whole word): `approx.min_ops`, exact by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from margin.cost import CostModel
from margin.guards.base import Guard
from margin.search.approx import word_placements
from margin.search.edits import Op, apply_ops
from margin.transforms.registry import get_transform
from margin.types import Verdict

Region = tuple[int, int]  # half-open [start, end) of code points


def stab(regions: Sequence[Region]) -> list[int]:
    """The fewest points hitting every region [s, e) (e > s): greedy by right endpoint."""
    points: list[int] = []
    for start, end in sorted(regions, key=lambda r: (r[1], r[0])):
        if end <= start:
            raise ValueError(f"empty region [{start}, {end})")
        if points and start <= points[-1] < end:
            continue  # points ascend, so only the last can hit a region ending later
        points.append(end - 1)
    return points


@dataclass(frozen=True, slots=True)
class Optimum:
    """The fewest edits that flip a prompt: `edits` is exact when `exact` (a witness with
    that many edits flips the guard), else a lower bound. `cost` is the witness's cost."""

    edits: int
    exact: bool
    cost: float | None
    witness: str | None


def keyword_regions(guard: Guard, text: str) -> list[Region]:
    """Regions of the `keyword` guard's triggers. A trigger (a stem at a word start, or a
    whole `word$`) survives unless an edit changes its characters, the character before it
    (which keeps the word start), or for `word$` the one after it; an insertion breaks it
    only at or inside those bounds, where it also touches one of those characters."""
    return [(max(start - 1, 0), end + (1 if entry.endswith("$") else 0))
            for start, end, entry in guard.triggers(text)]  # type: ignore[attr-defined]


def substring_regions(guard: Guard, text: str) -> list[Region]:
    """Regions of a substring guard's occurrences: the occurrence itself (an insertion
    breaks it only strictly inside, which touches its code points on both sides)."""
    return [(start, end) for start, end, _ in guard.triggers(text)]  # type: ignore[attr-defined]


def unsafe_optimum(guard: Guard, text: str, cost_model: CostModel,
                   regions: Callable[[Guard, str], list[Region]] = keyword_regions) -> Optimum:
    """Fewest edits that make `guard` pass `text`, for a guard with `triggers(text)`."""
    triggers = [(s, e) for s, e, _ in guard.triggers(text)]  # type: ignore[attr-defined]
    if not triggers:
        return Optimum(0, True, 0.0, text)
    bound = len(stab(regions(guard, text)))
    ops = _witness_ops(text, triggers)
    if ops is None or len(ops) != bound:
        return Optimum(bound, False, None, None)
    witness = apply_ops(text, ops, 0)
    verdict = guard.classify([witness])[0]
    if not isinstance(verdict, Verdict) or verdict.label != "safe":
        return Optimum(bound, False, None, None)
    return Optimum(bound, True, cost_model.cost(text, witness), witness)


def _witness_ops(text: str, triggers: Sequence[Region]) -> list[Op] | None:
    """One edit stabbing each group of occurrences the greedy choice stabs together."""
    homoglyph = set(get_transform("homoglyph").eligible(text))  # type: ignore[attr-defined]
    zwsp = set(get_transform("zero-width-space").eligible(text))  # type: ignore[attr-defined]
    ops: list[Op] = []
    remaining = sorted(triggers, key=lambda r: (r[1], r[0]))
    while remaining:
        point = remaining[0][1] - 1
        group = [r for r in remaining if r[0] <= point < r[1]]
        lo, hi = max(r[0] for r in group), min(r[1] for r in group)  # every p in [lo, hi) stabs the group
        choice = next((Op.edit("homoglyph", p) for p in range(hi - 1, lo - 1, -1) if p in homoglyph), None)
        if choice is None:
            choice = next((Op.edit("zero-width-space", p) for p in range(hi - 1, lo, -1) if p in zwsp), None)
        if choice is None:
            return None
        ops.append(choice)
        remaining = [r for r in remaining if r not in group]
    return ops


def safe_optimum(guard: Guard, text: str, cost_model: CostModel) -> Optimum:
    """Fewest edits that make the `keyword` guard block `text`: place one of its `stems` at
    a word start, or one of its `word$` entries as a whole word."""
    if guard.triggers(text):  # type: ignore[attr-defined]
        return Optimum(0, True, 0.0, text)
    stems: Sequence[str] = guard.stems  # type: ignore[attr-defined]
    found = (word_placements(text, [s for s in stems if not s.endswith("$")], ("prefix",))
             + word_placements(text, [s[:-1] for s in stems if s.endswith("$")], ("whole",)))
    if not found:
        return Optimum(0, False, None, None)
    least = min(p.ops for p in found)
    for placement in sorted(found, key=lambda p: (p.ops, p.start, p.word)):
        if placement.ops > least:
            break
        witness = placement.apply(text)
        verdict = guard.classify([witness])[0]
        if isinstance(verdict, Verdict) and verdict.label == "unsafe":
            return Optimum(least, True, cost_model.cost(text, witness), witness)
    return Optimum(least, False, None, None)
