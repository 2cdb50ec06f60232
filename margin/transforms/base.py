"""The Transform interface and the machinery every edit transform shares.

A transform is a pure, deterministic `apply(text, strength, seed) -> text`.

Strengths are strings, so that one grammar covers every kind of transform:

- ``"k"`` (``"1"``, ``"2"``, ``"8"``): k edits, positions in a seeded-random order;
- ``"p%"`` (``"10%"``, ``"100%"``): ceil(p/100 * n) edits, n = the usable positions;
- ``"salient:k"``, ``"salient:p%"``: the same counts, positions in `salient` order (one
  edit per word, content words first, longest and rarest first; see `salience.py`);
- ``"@i"``: one edit inside word i (0-based), so a suite can hold one candidate per word;
- a wrapper's strengths are the names of its variants.

For a given (text, seed) each order is fixed and strength k takes its first k positions,
so the edits at strength k+1 contain those at k. The replacement made at a position
depends on (seed, position) only, never on the strength.

Cost never falls as strength rises. For an *additive* transform this holds by
construction: its edits only insert characters, only delete them, or substitute
characters absent from the original text, and then the Levenshtein distance of k edits
is exactly the sum of their own distances (each inserted or fresh character needs its
own operation in any alignment, and k such operations suffice). Swaps and reversals are
not additive (two swaps take ``abab`` to ``baba``, distance 2, not 4), so for those the order skips any
position whose edit would lower the distance reached so far.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence

from margin.transforms.draws import Draws, first_choices
from margin.transforms.placement import (
    Edits,
    edits_of,
    position_draws,
)
from margin.transforms.words import word_spans
from margin.types import TransformInfo, TransformKind

Encoder = Callable[[str], str]


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

    def apply_many(self, text: str, strengths: Sequence[str], seed: int) -> list[str]:
        """`[apply(text, s, seed) for s in strengths]`; a transform may share work between them."""
        return [self.apply(text, strength, seed) for strength in strengths]

    def floors(self, text: str, strengths: Sequence[str], seed: int) -> list[int]:
        """For each strength, a lower bound on the edit distance from `text` of its output
        when that differs from `text`, known without making it (a candidate builder makes
        the cheap ones first). Any change costs at least one code point."""
        return [1] * len(strengths)

    def check_strength(self, strength: str) -> None:
        """Raise ValueError if `strength` is not one this transform understands."""
        self.apply("margin", strength, 0)


# Default ladder for edit transforms: from one edit upward, then shares of eligible positions.
EDIT_STRENGTHS = ("1", "2", "3", "5", "8", "10%", "25%", "50%", "100%")


class EditTransform(Transform):
    """Edits at chosen positions of the text.

    A subclass says which positions are eligible, which code points an edit at a position
    replaces (its span) and with what. Chosen spans never overlap, and a replacement reads
    only the original text, so edits can be applied in any order.
    """

    kind: TransformKind = "edit"
    strengths = EDIT_STRENGTHS
    #: True when edits only insert, only delete, or substitute characters absent from the
    #: original text: then the cost of k edits is the sum of theirs (see the module doc).
    additive: bool = True

    @abstractmethod
    def eligible(self, text: str) -> list[int]:
        """Sorted positions (code-point offsets) where one edit can be made."""

    @abstractmethod
    def replacement(self, text: str, position: int, rng: Draws) -> str:
        """What replaces `text[span]` for an edit at `position` (text is the original)."""

    def replacements(self, text: str, positions: Sequence[int], seed: int) -> list[str]:
        """`replacement` at each of `positions` with its draws (a subclass may make them in
        one pass)."""
        return [self.replacement(text, p, position_draws(seed, p)) for p in positions]

    def span(self, text: str, position: int) -> tuple[int, int]:
        """The code points [position, hi) an edit at `position` replaces: every span starts
        at its position; (p, p) is an insertion."""
        return position, position + 1

    def spans(self, text: str, positions: Sequence[int]) -> list[tuple[int, int]]:
        """`span` at each of `positions`."""
        if type(self).span is EditTransform.span:  # one code point each, without a call apiece
            return [(p, p + 1) for p in positions]
        return [self.span(text, p) for p in positions]

    def in_word(self, text: str, position: int, start: int, end: int) -> bool:
        """Whether an edit at `position` lands inside the word text[start:end]."""
        lo, hi = self.span(text, position)
        if lo == hi:  # an insertion lands inside a word when it splits it
            return start < lo < end
        return start <= lo and hi <= end

    def edits(self, text: str, seed: int) -> Edits:
        """This transform's work on `text` with `seed`, shared by all its strengths (kept
        for recent texts; a candidate builder holds its prompt's while it needs them)."""
        return edits_of(self, text, seed)

    def chosen(self, text: str, strength: str, seed: int) -> list[int]:
        """The positions edited at `strength`, in the order they were chosen."""
        return self.edits(text, seed).chosen(strength)

    def order(self, text: str, seed: int, salient: bool) -> tuple[list[int], int]:
        """Every position strengths take a prefix of, and how many positions are usable
        (eligible and not overlapping an earlier one: the n of a ``p%`` strength)."""
        order, usable = self.edits(text, seed).order(salient)
        return list(order), usable

    def render(self, text: str, positions: Iterable[int], seed: int) -> str:
        """The text with an edit at each of `positions` (non-overlapping)."""
        return self.edits(text, seed).render(positions)

    def apply(self, text: str, strength: str, seed: int) -> str:
        edits = self.edits(text, seed)
        return edits.render(edits.chosen(strength))

    def apply_many(self, text: str, strengths: Sequence[str], seed: int) -> list[str]:
        return self.edits(text, seed).texts(strengths)

    def floors(self, text: str, strengths: Sequence[str], seed: int) -> list[int]:
        """k edits of an additive transform cost exactly the sum of k edits' costs, each at
        least one code point (the module doc): at least k."""
        if not self.additive:
            return super().floors(text, strengths, seed)
        edits = self.edits(text, seed)
        return [1 if s.startswith("@") else max(1, edits.count(s)) for s in strengths]  # "@i": one edit


@functools.lru_cache(maxsize=4096)
def _characters(text: str) -> frozenset[str]:
    return frozenset(text)


def is_fresh(option: str, present: frozenset[str] | set[str]) -> bool:
    """Whether no character of `option` occurs in the original: substituting a fresh
    option keeps a transform additive."""
    return present.isdisjoint(option)


def fresh(options: Iterable[str], text: str) -> list[str]:
    present = _characters(text)
    return [o for o in options if present.isdisjoint(o)]


@functools.lru_cache(maxsize=4096)
def _fresh_options(transform: Substitution, char: str, text: str) -> list[str]:
    return fresh(transform.options(char), text)


class Substitution(EditTransform):
    """Replaces one code point with a lookalike or variant absent from the original text."""

    @abstractmethod
    def options(self, char: str) -> Sequence[str]:
        """Replacements for `char` (empty when it has none)."""

    def eligible(self, text: str) -> list[int]:
        present = set(text)
        usable = {ch for ch in present if any(is_fresh(o, present) for o in self.options(ch))}
        return [i for i, ch in enumerate(text) if ch in usable]

    def replacement(self, text: str, position: int, rng: Draws) -> str:
        return rng.choice(_fresh_options(self, text[position], text))

    def replacements(self, text: str, positions: Sequence[int], seed: int) -> list[str]:
        options: dict[str, list[str]] = {}  # by character: a text repeats its letters
        for p in positions:
            if text[p] not in options:
                options[text[p]] = fresh(self.options(text[p]), text)
        return first_choices(seed, positions, [options[text[p]] for p in positions])


class Insertion(EditTransform):
    """Inserts a short string between two characters of the same word."""

    def eligible(self, text: str) -> list[int]:
        return [p for start, end in word_spans(text) for p in range(start + 1, end)]

    def span(self, text: str, position: int) -> tuple[int, int]:
        return position, position  # an insertion replaces no original code point

    def spans(self, text: str, positions: Sequence[int]) -> list[tuple[int, int]]:
        if type(self).span is Insertion.span:
            return [(p, p) for p in positions]
        return super().spans(text, positions)


class WrapperTransform(Transform):
    """Puts the prompt (perhaps encoded) inside fixed text; its strengths are named variants.

    `variants` maps a variant name to a template holding ``{prompt}`` once; `encode` maps a
    variant name to a pure function applied to the prompt before it is put in the template.
    """

    kind: TransformKind = "wrapper"

    def __init__(
        self,
        name: str,
        family: str,
        variants: dict[str, str],
        assumption: str,
        *,
        encode: dict[str, Encoder] | None = None,
        visible: bool = True,
        nfkc_stable: bool | None = True,
    ) -> None:
        if not variants:
            raise ValueError(f"wrapper {name!r} has no variants")
        for key, template in variants.items():
            if template.count("{prompt}") != 1:
                raise ValueError(f"wrapper {name!r} variant {key!r} must hold {{prompt}} once")
        self.name = name
        self.family = family
        self.variants = dict(variants)
        self.encode = dict(encode or {})
        self.strengths = tuple(variants)
        self.assumption = assumption
        self.visible = visible
        self.nfkc_stable = nfkc_stable

    def apply(self, text: str, strength: str, seed: int) -> str:
        try:
            template = self.variants[strength]
        except KeyError:
            raise ValueError(
                f"wrapper {self.name!r} has no variant {strength!r}; it has {', '.join(self.strengths)}"
            ) from None
        encoder = self.encode.get(strength)
        before, after = template.split("{prompt}")
        return before + (encoder(text) if encoder else text) + after

    def floors(self, text: str, strengths: Sequence[str], seed: int) -> list[int]:
        """A variant that puts the prompt in as it is adds exactly its template's text."""
        return [max(1, len(self.variants[s]) - len("{prompt}")) if s not in self.encode else 1 for s in strengths]

