"""Candidate building: every suite transform and strength applied to one prompt, costed.

Pure: no guard is involved. Texts equal to the original are dropped, duplicates keep their
first occurrence, candidates over budget are dropped, and the rest are sorted by cost, then
suite order.

A `Ladder` builds them only as far as a search reads them. Every strength of the suite gets
a lower bound on its cost before anything is built: a candidate that changes the text costs
at least one code point, and k edits of an additive transform cost exactly the sum of k
edits of at least one code point each (`margin.transforms.base`), so at least k. The ladder
builds strengths in the order of their bounds and hands out a candidate only once every
strength that could cost as little is built; so its candidates, in order, are exactly the
sorted list above, and a `cheapest` search that flips at one edit never builds the edits
that cost more. Each transform's work on the prompt (`Edits`: where edits go, their orders,
what each writes) is made once and shared by its strengths.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rapidfuzz.distance import Levenshtein

from margin.cost import CostModel
from margin.transforms.base import EditTransform, Transform
from margin.transforms.placement import Edits
from margin.transforms.registry import get_transform
from margin.transforms.suites import EACH_WORD, Suite
from margin.transforms.words import word_spans
from margin.types import Candidate, Prompt

_candidate = tuple.__new__  # Candidate(...) without the named tuple's Python-level __new__


def expand_strengths(strengths: tuple[str, ...], text: str) -> list[str]:
    out: list[str] = []
    for strength in strengths:
        if strength == EACH_WORD:
            out.extend(f"@{i}" for i in range(len(word_spans(text))))
        else:
            out.append(strength)
    return out


class Candidates(Protocol):
    """A prompt's candidates in cost then suite order, as far as they are built."""

    @property
    def built(self) -> list[Candidate]: ...

    @property
    def complete(self) -> bool: ...  # every candidate is built

    def reach(self, n: int) -> bool:
        """Build until there are at least `n` candidates; False when there are fewer."""
        ...

    def all(self) -> list[Candidate]: ...


class Fixed:
    """Candidates given as a list (already sorted)."""

    complete = True

    def __init__(self, candidates: Sequence[Candidate]) -> None:
        self.built = list(candidates)

    def reach(self, n: int) -> bool:
        return n <= len(self.built)

    def all(self) -> list[Candidate]:
        return self.built


@dataclass(slots=True)
class _Group:
    """Strengths of one transform that share a lower bound on their cost (`split`: the
    transform's strengths not yet told apart, under the bound every strength has)."""

    bound: float
    transform: Transform
    strengths: list[str]
    places: list[int]  # each strength's place in the suite
    split: bool = True
    edits: Edits | None = None  # an edit transform's work on the prompt, shared by its groups


class Ladder:
    def __init__(self, prompt: Prompt, suite: Suite, cost_model: CostModel, budget: float, seed: int) -> None:
        self.prompt = prompt
        self.seed = seed
        self.budget = budget
        self.denominator = cost_model.denominator(prompt.text)
        text = prompt.text
        # Groups to build, by (bound, first suite place). Each transform starts as one group
        # under the bound any change has (one code point), split by its own floors only when
        # reached, so a search that stops early never lays out the transforms it did not reach.
        self._groups: list[tuple[float, int, int, _Group]] = []
        words = [f"@{i}" for i in range(len(word_spans(text)))]
        place = 0
        for entry in suite.entries:
            strengths = [w for s in entry.strengths for w in (words if s == EACH_WORD else (s,))]
            places = list(range(place, place + len(strengths)))
            self._push(_Group(self._bound(1), get_transform(entry.transform), strengths, places, split=False))
            place += len(strengths)
        self._heap: list[tuple[float, int, str, str, str]] = []  # built, not yet handed out
        self._seen = {text}
        self.built: list[Candidate] = []
        self.made = 0  # texts made so far (candidates, duplicates and the over-budget ones)
        self.complete = False  # every candidate is built

    def _bound(self, code_points: int) -> float:
        return code_points * 100.0 / self.denominator  # CostModel.cost's arithmetic, so bounds compare exactly

    def _push(self, group: _Group) -> None:
        heapq.heappush(self._groups, (group.bound, group.places[0], id(group), group))

    def reach(self, n: int) -> bool:
        built, heap, groups = self.built, self._heap, self._groups
        while len(built) < n:
            # Build every group that could hold a candidate that comes before the first built
            # one: cheaper, or as cheap and earlier in the suite (a group's places never
            # interleave with another's of the same bound).
            while groups:
                bound, first, _, group = groups[0]
                if bound > self.budget:
                    break
                if heap and (bound > heap[0][0] or (bound == heap[0][0] and first > heap[0][1])):
                    break
                heapq.heappop(groups)
                if group.split:
                    self._build(group)
                else:
                    self._split(group)
            if not heap:
                self.complete = True
                return False
            cost, _, text, name, strength = heapq.heappop(heap)
            if text in self._seen:
                continue  # a duplicate: the same text, so the same cost, came earlier in the suite
            self._seen.add(text)
            built.append(_candidate(Candidate, (self.prompt.id, name, strength, self.seed, text, cost)))
        return True

    def _split(self, whole: _Group) -> None:
        """One group per floor the transform gives its strengths (all at least `whole.bound`)."""
        transform, text = whole.transform, self.prompt.text
        # Held here, not only in the transform's cache of recent texts: this prompt's groups
        # may be built long after, between other prompts'.
        edits = transform.edits(text, self.seed) if isinstance(transform, EditTransform) else None
        by_floor: dict[int, _Group] = {}
        floors = transform.floors(text, whole.strengths, self.seed)
        for strength, place, floor in zip(whole.strengths, whole.places, floors, strict=True):
            group = by_floor.get(floor)
            if group is None:
                group = by_floor[floor] = _Group(self._bound(floor), transform, [], [], edits=edits)
            group.strengths.append(strength)
            group.places.append(place)
        for group in by_floor.values():
            self._push(group)

    def all(self) -> list[Candidate]:
        self.reach(math.inf)  # type: ignore[arg-type]
        return self.built

    def _build(self, group: _Group) -> None:
        original = self.prompt.text
        if group.edits is not None:
            texts = group.edits.texts(group.strengths)
        else:
            texts = group.transform.apply_many(original, group.strengths, self.seed)
        self.made += len(texts)
        for text, strength, place in zip(texts, group.strengths, group.places, strict=True):
            distance = Levenshtein.distance(original, text)
            if not distance:
                continue  # the original itself
            cost = distance * 100.0 / self.denominator
            if cost > self.budget:
                continue
            if cost < group.bound:  # the bound is what lets the ladder skip: never let it be wrong
                raise RuntimeError(f"{group.transform.name} {strength} costs {cost} on prompt {self.prompt.id!r}, "
                                   f"below the floor its transform gave ({group.bound})")
            heapq.heappush(self._heap, (cost, place, text, group.transform.name, strength))


def build_candidates(
    prompt: Prompt, suite: Suite, cost_model: CostModel, budget: float, seed: int
) -> list[Candidate]:
    """Every candidate of `prompt`, sorted."""
    return Ladder(prompt, suite, cost_model, budget, seed).all()


def original_candidate(prompt: Prompt, seed: int) -> Candidate:
    return Candidate(prompt.id, None, None, seed, prompt.text, 0.0)
