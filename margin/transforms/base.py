"""The Transform interface and the machinery every edit transform shares.

A transform is a pure, deterministic `apply(text, strength, seed) -> text`.

Strengths are strings, so that one grammar covers every kind of transform:

- ``"k"`` (``"1"``, ``"2"``, ``"8"``): k edits;
- ``"p%"`` (``"10%"``, ``"100%"``): ceil(p/100 * n) edits, n = the eligible positions;
- ``"@i"``: one edit inside word i (0-based), so a suite can hold one candidate per word;
- a wrapper's strengths are the names of its variants.

Edit positions come in one seeded order per (text, seed); strength k takes its first k, so
for a given seed the edits at strength k+1 contain those at k. The replacement chosen at a
position depends on (seed, position) only, never on the strength.
"""

from __future__ import annotations

import math
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from margin.types import TransformInfo, TransformKind

WORD = re.compile(r"\w+")


def word_spans(text: str) -> list[tuple[int, int]]:
    """Words are maximal runs of Unicode word characters, as (start, end) code-point offsets."""
    return [m.span() for m in WORD.finditer(text)]


def position_rng(seed: int, position: int) -> random.Random:
    # String seeds are hashed with SHA-512 by `random`, so this is stable across runs and hosts.
    return random.Random(f"margin:{seed}:{position}")


@dataclass(frozen=True, slots=True)
class Strength:
    """A parsed strength: exactly one of count, percent, word is set (or variant for wrappers)."""

    count: int | None = None
    percent: float | None = None
    word: int | None = None

    @classmethod
    def parse(cls, strength: str) -> Strength:
        s = strength.strip()
        if s.startswith("@") and s[1:].isdigit():
            return cls(word=int(s[1:]))
        if s.endswith("%"):
            try:
                pct = float(s[:-1])
            except ValueError:
                pct = -1.0
            if 0 < pct <= 100:
                return cls(percent=pct)
        elif s.isdigit() and int(s) > 0:
            return cls(count=int(s))
        raise ValueError(f"unknown strength {strength!r}: use k, p% (0<p<=100) or @i")


class Transform(ABC):
    """A named family member with strengths and a pure `apply`."""

    name: str
    family: str
    kind: TransformKind
    strengths: tuple[str, ...]
    visible: bool
    nfkc_stable: bool | None
    assumption: str

    @property
    def info(self) -> TransformInfo:
        return TransformInfo(
            name=self.name,
            family=self.family,
            kind=self.kind,
            strengths=self.strengths,
            visible=self.visible,
            nfkc_stable=self.nfkc_stable,
            assumption=self.assumption,
        )

    @abstractmethod
    def apply(self, text: str, strength: str, seed: int) -> str:
        """Return the transformed text; raise ValueError for a strength this transform lacks."""

    def check_strength(self, strength: str) -> None:
        """Raise ValueError if `strength` is not one this transform understands."""
        self.apply("margin", strength, 0)


# Default ladder for edit transforms: from one edit upward, then shares of eligible positions.
EDIT_STRENGTHS = ("1", "2", "3", "5", "8", "10%", "25%", "50%", "100%")


class EditTransform(Transform):
    """An edit at chosen positions of the text.

    Subclasses say which positions are eligible, which chosen positions conflict, and
    how to edit one position. Edits are applied right to left so offsets stay valid.
    """

    kind: TransformKind = "edit"
    strengths = EDIT_STRENGTHS

    @abstractmethod
    def eligible(self, text: str) -> list[int]:
        """Sorted positions (code-point offsets) where one edit can be made."""

    @abstractmethod
    def edit(self, text: str, position: int, rng: random.Random) -> str:
        """Apply one edit at `position` of `text` (text to the left of it is unchanged)."""

    def span(self, position: int) -> tuple[int, int]:
        """The code points an edit at `position` touches; chosen edits never overlap."""
        return position, position + 1

    def in_word(self, position: int, start: int, end: int) -> bool:
        lo, hi = self.span(position)
        return start <= lo and hi <= end

    def chosen(self, text: str, strength: str, seed: int) -> list[int]:
        parsed = Strength.parse(strength)
        candidates = self.eligible(text)
        if parsed.word is not None:
            spans = word_spans(text)
            if parsed.word >= len(spans):
                return []
            start, end = spans[parsed.word]
            inside = [p for p in candidates if self.in_word(p, start, end)]
            return [random.Random(f"margin:{seed}:word").choice(inside)] if inside else []
        order = _non_overlapping(self, _seeded_order(candidates, seed))
        if parsed.count is not None:
            return order[: parsed.count]
        assert parsed.percent is not None
        return order[: math.ceil(parsed.percent * len(order) / 100)]

    def apply(self, text: str, strength: str, seed: int) -> str:
        for position in sorted(self.chosen(text, strength, seed), reverse=True):
            text = self.edit(text, position, position_rng(seed, position))
        return text


def _seeded_order(positions: Sequence[int], seed: int) -> list[int]:
    order = list(positions)
    random.Random(f"margin:{seed}:order").shuffle(order)
    return order


def _non_overlapping(transform: EditTransform, order: list[int]) -> list[int]:
    """Keep positions in order, skipping any whose span overlaps one already kept.

    Whether a position is kept depends only on those before it, so prefixes stay nested.
    """
    taken: set[int] = set()
    kept: list[int] = []
    for p in order:
        lo, hi = transform.span(p)
        touched = set(range(lo, max(hi, lo + 1)))
        if touched & taken:
            continue
        taken |= touched
        kept.append(p)
    return kept


class WrapperTransform(Transform):
    """Puts the prompt inside fixed text; its strengths are named variants."""

    kind: TransformKind = "wrapper"
    visible = True
    nfkc_stable = True

    def __init__(self, name: str, family: str, variants: dict[str, str], assumption: str) -> None:
        if not variants:
            raise ValueError(f"wrapper {name!r} has no variants")
        for key, template in variants.items():
            if template.count("{prompt}") != 1:
                raise ValueError(f"wrapper {name!r} variant {key!r} must hold {{prompt}} once")
        self.name = name
        self.family = family
        self.variants = dict(variants)
        self.strengths = tuple(variants)
        self.assumption = assumption

    def apply(self, text: str, strength: str, seed: int) -> str:
        try:
            template = self.variants[strength]
        except KeyError:
            raise ValueError(
                f"wrapper {self.name!r} has no variant {strength!r}; it has {', '.join(self.strengths)}"
            ) from None
        before, after = template.split("{prompt}")
        return before + text + after
