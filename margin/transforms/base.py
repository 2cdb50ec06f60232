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

import bisect
import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from margin.cost import edit_distance
from margin.transforms.draws import Draws, first_choices, seeded_order
from margin.transforms.salience import salient_order
from margin.transforms.words import word_spans
from margin.types import TransformInfo, TransformKind

SALIENT = "salient:"
Encoder = Callable[[str], str]


def position_draws(seed: int, position: int) -> Draws:
    """The draws for an edit at `position`: the same whatever the strength."""
    return Draws(seed, position)


@dataclass(frozen=True, slots=True)
class Strength:
    """A parsed strength: exactly one of count, percent, word is set (or variant for wrappers)."""

    count: int | None = None
    percent: float | None = None
    word: int | None = None
    salient: bool = False

    @classmethod
    def parse(cls, strength: str) -> Strength:
        return _parse_strength(strength)

    @classmethod
    def _parse(cls, strength: str) -> Strength:
        s = strength.strip()
        if s.startswith(SALIENT):
            inner = cls._parse(s[len(SALIENT):])
            if inner.word is None and not inner.salient:
                return replace(inner, salient=True)
        elif s.startswith("@") and s[1:].isdigit():
            return cls(word=int(s[1:]))
        elif s.endswith("%"):
            try:
                pct = float(s[:-1])
            except ValueError:
                pct = -1.0
            if 0 < pct <= 100:
                return cls(percent=pct)
        elif s.isdigit() and int(s) > 0:
            return cls(count=int(s))
        raise ValueError(f"unknown strength {strength!r}: use k, p% (0<p<=100), salient:k, salient:p% or @i")


@functools.lru_cache(maxsize=1024)
def _parse_strength(strength: str) -> Strength:
    return Strength._parse(strength)


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
        return _edits(self, text, seed)

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


class Edits:
    """One edit transform's work on one text with one seed: where edits can go, the orders
    strengths take prefixes of, and what each edit writes (a replacement reads only the
    original, so it is the same at every strength). Built on demand, once."""

    __slots__ = ("transform", "text", "seed", "positions", "spans", "wide", "made", "_orders", "_per_word", "_span_of",
                 "_ladders")

    def __init__(self, transform: EditTransform, text: str, seed: int) -> None:
        self.transform = transform
        self.text = text
        self.seed = seed
        self.positions = tuple(transform.eligible(text))
        self.spans = tuple(transform.spans(text, self.positions))
        self.wide = any(hi - lo > 1 for lo, hi in self.spans)  # some edit replaces more than one code point
        self.made: dict[int, str] = {}  # replacements by position
        self._orders: dict[bool, tuple[tuple[int, ...], int]] = {}
        self._per_word: tuple[tuple[int, ...], ...] | None = None
        self._span_of: dict[int, tuple[int, int]] | None = None
        # Per order: the text's cells with its first `done` edits made, so a later call for
        # more edits (a candidate builder asks for one strength at a time) goes on from there.
        self._ladders: dict[bool, tuple[list[str], int]] = {}

    def order(self, salient: bool) -> tuple[tuple[int, ...], int]:
        found = self._orders.get(salient)
        if found is None:
            ordered = _placed_order(self.text, self.seed, salient, self.positions, self.spans)
            kept = ordered if self.transform.additive else self._never_cheaper(ordered)
            found = self._orders[salient] = (kept, len(ordered))
        return found

    def per_word(self) -> tuple[tuple[int, ...], ...]:
        """For each word of the text, the eligible positions whose edit lands inside it."""
        if self._per_word is None:
            words = word_spans(self.text)
            starts = [start for start, _ in words]
            per_word: list[list[int]] = [[] for _ in words]
            for p, (lo, _) in zip(self.positions, self.spans, strict=True):
                # Only the word starting last at or before the edit can hold it.
                i = bisect.bisect_right(starts, lo) - 1
                if i >= 0 and self.transform.in_word(self.text, p, *words[i]):
                    per_word[i].append(p)
            self._per_word = tuple(tuple(ps) for ps in per_word)
        return self._per_word

    def chosen(self, strength: str) -> list[int]:
        parsed = Strength.parse(strength)
        if parsed.word is not None:
            per_word = self.per_word()
            inside = per_word[parsed.word] if parsed.word < len(per_word) else ()
            return [inside[_word_pick(self.seed, len(inside))]] if inside else []
        order, usable = self.order(parsed.salient)
        if parsed.count is not None:
            return list(order[: parsed.count])
        assert parsed.percent is not None
        return list(order[: math.ceil(parsed.percent * usable / 100)])

    def count(self, strength: str) -> int:
        """How many edits `strength` makes, `len(chosen(strength))`, without ordering the
        positions where no span is wider than a code point (then every position is usable)."""
        parsed = Strength.parse(strength)
        if parsed.word is not None or not self.transform.additive or self.wide:
            return len(self.chosen(strength))
        usable = len(self.positions)
        if parsed.count is not None:
            return min(parsed.count, usable)
        assert parsed.percent is not None
        return min(math.ceil(parsed.percent * usable / 100), usable)

    def span_of(self) -> dict[int, tuple[int, int]]:
        if self._span_of is None:
            self._span_of = dict(zip(self.positions, self.spans, strict=True))
        return self._span_of

    def replacement(self, position: int) -> str:
        made = self.made.get(position)
        if made is None:
            self.make([position])
            made = self.made[position]
        return made

    def make(self, positions: Iterable[int]) -> None:
        """Make the replacements at `positions` not made yet, in one call to the transform."""
        missing = [p for p in positions if p not in self.made]
        if missing:
            self.made.update(zip(missing, self.transform.replacements(self.text, missing, self.seed), strict=True))

    def render(self, positions: Iterable[int]) -> str:
        text = self.text
        pieces: list[str] = []
        last = 0
        for position in sorted(positions):  # spans start at their position, never overlap
            lo, hi = self.transform.span(text, position)
            pieces.append(text[last:lo])
            pieces.append(self.replacement(position))
            last = hi
        pieces.append(text[last:])
        return "".join(pieces)

    def texts(self, strengths: Sequence[str]) -> list[str]:
        """`[render(chosen(s)) for s in strengths]`, each edit made once: count and share
        strengths take nested prefixes of one order, so one pass along it, editing a list of
        the text's code points, yields every text of the ladder as one join (and the next
        call goes on where this one stopped)."""
        text, made, span_of = self.text, self.made, self.span_of()
        out = [text] * len(strengths)  # a strength with no edit to make leaves the text
        singles: list[tuple[int, int]] = []  # (position, index in strengths)
        ladders: dict[bool, list[tuple[int, int]]] = {}  # salient -> (edits, index in strengths)
        for i, strength in enumerate(strengths):
            parsed = Strength.parse(strength)
            if parsed.word is not None:
                for p in self.chosen(strength):
                    singles.append((p, i))
                continue
            order, usable = self.order(parsed.salient)
            edits = parsed.count if parsed.count is not None else math.ceil(parsed.percent * usable / 100)  # type: ignore[operator]
            ladders.setdefault(parsed.salient, []).append((min(edits, len(order)), i))
        needed = [p for p, _ in singles]
        for salient, steps in ladders.items():
            steps.sort()
            cells, done = self._ladders.get(salient, (None, 0))
            if cells is None or steps[0][0] < done:
                self._ladders[salient] = cells, done = [*text, ""], 0  # the last cell takes an insertion at the end
            needed.extend(self.order(salient)[0][done:steps[-1][0]])
        if needed:
            self.make(needed)
        for p, i in singles:  # one edit: splice it in
            lo, hi = span_of[p]
            out[i] = text[:lo] + made[p] + text[hi:]
        for salient, steps in ladders.items():
            order = self.order(salient)[0]
            cells, done = self._ladders[salient]
            for count, i in steps:
                for p in order[done:count]:
                    self._edit(cells, p, span_of[p])
                done = max(done, count)
                out[i] = "".join(cells)
            self._ladders[salient] = (cells, done)
        return out

    def _edit(self, cells: list[str], position: int, span: tuple[int, int]) -> None:
        """Make the edit at `position` in `cells` (the text's code points and one cell after
        them). Spans never overlap, so each edit owns the cells it writes."""
        lo, hi = span
        if lo == hi:
            cells[lo] = self.made[position] + cells[lo]
        else:
            cells[lo] = self.made[position]
            for cell in range(lo + 1, hi):
                cells[cell] = ""

    def _never_cheaper(self, order: tuple[int, ...]) -> tuple[int, ...]:
        """`order` less every position whose edit would lower the distance to the original
        reached by the positions kept before it (so every prefix costs no less than the
        one before)."""
        self.make(order)
        cells = [*self.text, ""]
        kept: list[int] = []
        reached = 0
        span_of = self.span_of()
        for p in order:
            lo, hi = span_of[p]
            before = cells[lo:max(hi, lo + 1)]
            self._edit(cells, p, (lo, hi))
            distance = edit_distance(self.text, "".join(cells))
            if distance >= reached:
                kept.append(p)
                reached = distance
            else:
                cells[lo:max(hi, lo + 1)] = before  # undo it
        return tuple(kept)


# An Edits is a pure function of its arguments; the cache spares a prompt's many strengths
# of one transform (and callers of `apply` one strength at a time) from recomputing it.
@functools.lru_cache(maxsize=4096)
def _edits(transform: EditTransform, text: str, seed: int) -> Edits:
    return Edits(transform, text, seed)


@functools.lru_cache(maxsize=4096)
def _placed_order(text: str, seed: int, salient: bool, positions: tuple[int, ...],
                  spans: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """`positions` in seeded or salient order, less any whose span overlaps one kept before
    it (so prefixes stay nested). It depends on where edits go, not on what they write, so
    transforms with the same positions and spans (the zero-width insertions, the styled
    alphabets) share it."""
    span_of = dict(zip(positions, spans, strict=True))
    if salient:
        ordered = salient_order(text, positions, span_of.__getitem__, seed)
    else:
        ordered = seeded_order(positions, seed)
    if all(hi - lo <= 1 for lo, hi in spans):
        return tuple(ordered)  # one code point or none each, at distinct positions: no overlap
    taken: set[int] = set()
    kept: list[int] = []
    for p in ordered:
        lo, hi = span_of[p]
        touched = range(lo, max(hi, lo + 1))
        if any(i in taken for i in touched):
            continue
        taken.update(touched)
        kept.append(p)
    return tuple(kept)


@functools.lru_cache(maxsize=4096)
def _word_pick(seed: int, n: int) -> int:
    """Which of a word's n eligible positions an ``@i`` strength edits."""
    return Draws(seed, "word").randrange(n)


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

